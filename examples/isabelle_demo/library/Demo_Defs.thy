theory Demo_Defs
  imports Main
begin

definition double :: "nat \<Rightarrow> nat" where
  "double n = n + n"

lemma double_add: "double (a + b) = double a + double b"
  unfolding double_def by simp

end
