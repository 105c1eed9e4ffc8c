(* ========================================================================= *)
(* proofbatch's front end for native checks: a batch of answers in, one     *)
(* compilable syntax tree and one verdict per refused answer out.            *)
(*                                                                           *)
(*   hol-native-front BATCH.tsv OUT.ml REFUSED.tsv [-I DIR]... [-open M]...  *)
(*                                                                           *)
(* BATCH.tsv has lines "<entry>\t<answer file>". Each answer is read with    *)
(* HOL Light's own syntax (camlp5 with pa_j, linked in), and held to the     *)
(* bytecode driver's rules (Hol_screen, one copy for both): no ";;" that   *)
(* separates phrases (one in a comment or a string is no separator), exactly *)
(* one expression, no identifier that reaches the system, the compiler or   *)
(* the drivers. It is then typed on its own against the core and the       *)
(* context modules, so that one bad answer gives that answer ERROR and     *)
(* never sinks the batch. OUT.ml is a marshalled                           *)
(* syntax tree registering a thunk per accepted answer: answer text is never *)
(* spliced into source code. REFUSED.tsv has "<entry>\tERROR\t<reason>".     *)
(* ========================================================================= *)

open Hol_text
open Hol_screen

(* ------------------------------------------------------------------------- *)
(* Parsing: HOL Light's syntax, exactly one expression.                     *)
(* ------------------------------------------------------------------------- *)

let rec camlp5_message = function
  | Ploc.Exc (loc, exn) ->
      Printf.sprintf "%s (line %d, characters %d-%d)" (camlp5_message exn)
        (Ploc.line_nb loc) (Ploc.first_pos loc - Ploc.bol_pos loc)
        (Ploc.last_pos loc - Ploc.bol_pos loc)
  | Stream.Error "" -> "parse error"
  | Stream.Error msg -> msg
  | Stream.Failure -> "parse error"
  | exn -> Printexc.to_string exn

(* The ";;" that HOL Light's own lexer (camlp5's, as pa_j set it up) sees:
   in comments its rules differ from OCaml's (a quote skips the character
   after it; a quoted extension opens no quoted string), and it is the one
   that reads the answer. *)
let refuse_lexed_phrases text =
  let lexer = Grammar.glexer Pcaml.gram in
  let tokens, _ = lexer.Plexing.tok_func (Stream.of_string text) in
  let rec scan () =
    match Stream.next tokens with
    | ("", ";;") -> raise (Refused semicolons)
    | ("EOI", _) -> ()
    | _ -> scan () in
  try scan () with
  | Refused _ as r -> raise r
  | Stream.Failure -> ()
  | exn -> raise (Refused ("syntax: " ^ one_line (camlp5_message exn)))

let parse_answer name text =
  refuse_phrases text;
  refuse_lexed_phrases text;
  Pcaml.input_file := name;
  let items, status =
    try !Pcaml.parse_implem (Stream.of_string text)
    with exn -> raise (Refused ("syntax: " ^ one_line (camlp5_message exn))) in
  (* camlp5 stops with None at a toplevel directive, Some at end of input. *)
  if status = None then raise (Refused not_one_expression);
  the_expression (Ast2pt.implem name (List.map fst items))

(* ------------------------------------------------------------------------- *)
(* Wrapping and typing.                                                      *)
(* ------------------------------------------------------------------------- *)

(* [let () = Hol_native_slot.register "<entry>" (fun () -> (e : answer_tactic))],
   built as a tree. *)
let registration entry expr =
  let open Ast_helper in
  let lid l = Location.mknoloc l in
  let slot name = Longident.Ldot (Longident.Lident "Hol_native_slot", name) in
  let typed = Exp.constraint_ expr (Typ.constr (lid (slot "answer_tactic")) []) in
  let unit_pat = Pat.construct (lid (Longident.Lident "()")) None in
  let thunk = Exp.fun_ Asttypes.Nolabel None unit_pat typed in
  let call = Exp.apply (Exp.ident (lid (slot "register")))
               [Asttypes.Nolabel, Exp.constant (Const.string entry); Asttypes.Nolabel, thunk] in
  Str.value Asttypes.Nonrecursive [Vb.mk unit_pat call]

let typecheck env item =
  try ignore (Typemod.type_structure env [item])
  with exn -> raise (Refused ("type: " ^ message_of_exn exn))

let () =
  let args = Array.to_list Sys.argv in
  let batch, out, refused, rest =
    match args with
    | _ :: batch :: out :: refused :: rest -> batch, out, refused, rest
    | _ -> prerr_endline "usage: hol-native-front BATCH.tsv OUT.ml REFUSED.tsv [-I DIR] [-open M]";
           exit 2 in
  let rec options = function
    | "-I" :: d :: r -> Clflags.include_dirs := d :: !Clflags.include_dirs; options r
    | "-open" :: m :: r -> Clflags.open_modules := m :: !Clflags.open_modules; options r
    | [] -> ()
    | x :: _ -> prerr_endline ("hol-native-front: unknown option " ^ x); exit 2 in
  options rest;
  Warnings.parse_options false "-a";
  (* pa_j starts with OCaml's lexer; HOL Light switches to its own (all-caps
     identifiers are values) in system.ml, and answers are read after that. *)
  ignore (!Pcaml.parse_implem (Stream.of_string "set_jrh_lexer;;"));
  Compmisc.init_path ();
  let env = Compmisc.initial_env () in
  let lines = String.split_on_char '\n' (read_file batch) |> List.filter (fun l -> l <> "") in
  let refused_oc = open_out refused in
  let accepted = List.filter_map (fun line ->
    match String.split_on_char '\t' line with
    | [entry; path] ->
        (try
           let expr = parse_answer entry (read_file path) in
           screen expr;
           let item = registration entry expr in
           typecheck env item;
           Some item
         with
         | Refused why ->
             Printf.fprintf refused_oc "%s\tERROR\t%s\n" entry (one_line why); None
         | exn ->
             Printf.fprintf refused_oc "%s\tERROR\tfront end: %s\n" entry
               (one_line (Printexc.to_string exn)); None)
    | _ -> prerr_endline ("hol-native-front: bad batch line: " ^ line); exit 2) lines in
  close_out refused_oc;
  Pparse.write_ast Pparse.Structure out accepted
