theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem append_length_demo:
  "length (xs @ ys) = length xs + length ys"
  sorry

end
