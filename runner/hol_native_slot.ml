(* ========================================================================= *)
(* proofbatch: what compiled plugins and the native server share.           *)
(*                                                                           *)
(* Compiled with -open Hol_core (or Hol_lib for a checkout), so the names    *)
(* below are HOL Light's, captured before any context is loaded: a setup     *)
(* file can shadow prove or axioms in its own module, never these.           *)
(* ========================================================================= *)

type answer_tactic = tactic

let kernel_prove = prove
let kernel_axioms = axioms
let kernel_concl = concl
let kernel_hyp = hyp
let kernel_aconv = aconv
let kernel_parse_term = parse_term

(* A batch plugin registers one thunk per answer when it is loaded; nothing
   in an answer runs until the check calls its thunk. *)
let answers : (string, unit -> answer_tactic) Hashtbl.t = Hashtbl.create 64

let register key (thunk : unit -> answer_tactic) = Hashtbl.replace answers key thunk
