(* ========================================================================= *)
(* proofbatch: text helpers of the HOL Light drivers (module Hol_text).      *)
(*                                                                           *)
(* One copy for all three places that run them: the bytecode driver         *)
(* (hol_light_driver.ml; hol_light.py loads this file into HOL Light's       *)
(* toplevel with #mod_use, HOL Light's lexer switched off), the native       *)
(* server and the native answer front end (native_build.py compiles it with  *)
(* plain ocamlopt and ocamlc). So it is plain OCaml that camlp5 reads alike, *)
(* and it names only the standard library, qualified where HOL Light        *)
(* defines the same name: in the toplevel, HOL Light's names are in scope.   *)
(* ========================================================================= *)

(* A reason for a verdict record or a reply: one line, bounded. *)
let one_line s =
  let s = String.map (fun c -> if c < ' ' then ' ' else c) s in
  let s = String.trim s in
  if String.length s > 300 then String.sub s 0 300 ^ "..." else s

let read_file path =
  let ic = open_in_bin path in
  let n = in_channel_length ic in
  let s = really_input_string ic n in
  close_in ic; s

let contains text pat =
  let n = String.length text and m = String.length pat in
  let rec go i = i + m <= n && (String.sub text i m = pat || go (i + 1)) in
  go 0
