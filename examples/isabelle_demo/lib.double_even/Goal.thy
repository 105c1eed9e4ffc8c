theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem double_even:
  "even (double n)"
  sorry

end
