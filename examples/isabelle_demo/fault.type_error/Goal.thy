theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem type_error:
  "(a::nat) + 0 = a"
  sorry

end
