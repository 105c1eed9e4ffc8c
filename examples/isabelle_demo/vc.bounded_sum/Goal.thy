theory Goal
  imports Main "Demo_Lib.Demo_Defs"
begin

(* The shape of an NTP4VC verification condition: fixes, named assumptions,
   several conclusions, and the placeholder proof. *)
theorem bounded_sum'vc:
  fixes a :: "int"
  fixes b :: "int"
  assumes fact0: "(0 :: int) \<le> a"
  assumes fact1: "a < b"
  shows "(0 :: int) \<le> b - a - (1 :: int)"
  and "a + (b - a) = b"
  sorry

end
