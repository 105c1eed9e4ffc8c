theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem drinker:
  "\<exists>x. P x \<longrightarrow> (\<forall>y. P y)"
  sorry

end
