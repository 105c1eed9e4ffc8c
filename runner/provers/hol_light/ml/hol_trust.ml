(* ========================================================================= *)
(* proofbatch: contexts that load without replaying their proofs            *)
(* (module Hol_trust; --context-proofs trust, runner/checks/context_proofs.py).    *)
(*                                                                           *)
(* Under trust the image binds the toplevel's [prove] to [Switch.prove]     *)
(* before any context loads: bytecode by its boot script (backend.py), and  *)
(* again after every top-level open or include of every file the toplevel  *)
(* reads, since [open Hol_lib] brings HOL Light's own back                  *)
(* (Proofbatch_driver.install_rebinding); native by opening                 *)
(* [Hol_trust.Switch] in every context segment and library it compiles      *)
(* (native_compile.py). A context's                                         *)
(* phrases, the files it [needs] (which the bytecode toplevel reads with the *)
(* same bindings) and the functions it defines then call [Switch.prove],    *)
(* which returns [|- t] without running the tactic while [trusting] holds,  *)
(* and is HOL Light's [prove] otherwise. The check child clears [trusting]  *)
(* before its answer is read (Hol_check.judge), so an answer, and any       *)
(* context function it calls, proves for real; the judge counts axioms()    *)
(* from that point, so the axioms trusted theorems added never count.       *)
(*                                                                           *)
(* Only [Switch] is ever opened: an answer sees [prove] and nothing else of *)
(* this module, whose name the answer screen denies (hol_screen.ml). Plain  *)
(* OCaml, loaded like hol_check.ml: #mod_use with HOL Light's lexer off, or *)
(* compiled with -open of the native core.                                  *)
(* ========================================================================= *)

(* HOL Light's own prove (tactics.ml), captured before anything rebinds it. *)
let kernel_prove = prove

(* Set in the image while contexts load (hol_light.py's boot script, or the
   native server's --trust); cleared by every check before its answer. *)
let trusting = ref false

(* Counts the statements taken on trust in this process, for the tests and
   the benchmark (a context's image keeps them). *)
let trusted_count = ref 0

(* HOL Light's kernel makes a theorem without a proof only through
   new_axiom (mk_thm and CHEAT_TAC use it too); it refuses a term that is
   not a proposition, as prove's goal state does. *)
let trusted_prove (tm, tac) =
  if !trusting then begin
    incr trusted_count;
    new_axiom tm
  end else kernel_prove (tm, tac)

module Switch = struct
  let prove = trusted_prove
end
