theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem rev_rev_demo:
  "rev (rev xs) = xs"
  sorry

end
