(* ========================================================================= *)
(* proofbatch: the backquote quotation expander for compiling HOL Light.     *)
(*                                                                           *)
(* Loaded into camlp5 after HOL Light's pa_j.cmo. Debian's pa_j.cmo has no   *)
(* expander for `...`: HOL Light's system.ml installs it at run time inside  *)
(* the toplevel ("Unbound quotation: tot" without this module). This is     *)
(* system.ml's quotexpander, unchanged, registered at preprocessing time.    *)
(* HOL Light's own pa_j registers "tot" itself since 2024, and camlp5's      *)
(* Quotation.add refuses a name twice ("cannot add the quotation twice"):    *)
(* the checkout's expander is the one its sources expect, so keep it.        *)
(* ========================================================================= *)

let quotexpander s =
  if s = "" then failwith "Empty quotation" else
  let c = String.sub s 0 1 in
  if c = ":" then
    "parse_type \"" ^ String.escaped (String.sub s 1 (String.length s - 1)) ^ "\""
  else if c = ";" then "parse_qproof \"" ^ String.escaped s ^ "\"" else
  let n = String.length s - 1 in
  if String.sub s n 1 = ":"
  then "\"" ^ String.escaped (String.sub s 0 n) ^ "\""
  else "parse_term \"" ^ String.escaped s ^ "\""

let () =
  match Quotation.find "tot" with
  | _ -> ()
  | exception Not_found ->
      Quotation.add "tot" (Quotation.ExStr (fun _ s -> quotexpander s))
