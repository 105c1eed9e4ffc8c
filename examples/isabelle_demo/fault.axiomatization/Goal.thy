theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem cheat_axiom:
  "(1::nat) = 2"
  sorry

end
