theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem unknown_fact:
  "(a::nat) + 0 = a"
  sorry

end
