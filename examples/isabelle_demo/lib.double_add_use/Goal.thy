theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem double_twice:
  "double (a + a) = double a + double a"
  sorry

end
