theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem false_claim:
  "(n::nat) + 1 = n"
  sorry

end
