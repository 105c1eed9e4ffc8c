theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem syntax_error:
  "(a::nat) + 0 = a"
  sorry

end
