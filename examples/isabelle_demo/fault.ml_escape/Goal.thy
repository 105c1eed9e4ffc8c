theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem ml_escape:
  "True"
  sorry

end
