theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

theorem add_comm_demo:
  "(a::nat) + b = b + a"
  sorry

end
