theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem simp_loop:
  "Suc (n::nat) = n + 1"
  sorry

end
