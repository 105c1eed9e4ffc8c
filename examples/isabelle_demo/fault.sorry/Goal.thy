theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem cheat_sorry:
  "(n::nat) = n + 0"
  sorry

end
