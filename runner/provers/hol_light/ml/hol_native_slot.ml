(* ========================================================================= *)
(* proofbatch: where compiled answer plugins register their tactics.        *)
(*                                                                           *)
(* Compiled with -open Hol_core (or Hol_lib for a checkout), so [tactic] is  *)
(* HOL Light's, named here before any context is loaded: a context module   *)
(* that later shadows the type cannot change what an answer must be. The    *)
(* kernel functions a verdict depends on are captured in Hol_check.         *)
(* ========================================================================= *)

type answer_tactic = tactic

(* A batch plugin registers one thunk per answer when it is loaded; nothing
   in an answer runs until the check calls its thunk. *)
let answers : (string, unit -> answer_tactic) Hashtbl.t = Hashtbl.create 64

let register key (thunk : unit -> answer_tactic) = Hashtbl.replace answers key thunk
