theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem cheat_qd:
  "(n::nat) * 0 = 0"
  sorry

end
