(* ========================================================================= *)
(* proofbatch's front end for native checks: a batch of answers in, one     *)
(* compilable syntax tree and one verdict per refused answer out.            *)
(*                                                                           *)
(*   hol-native-front BATCH.tsv OUT.ml REFUSED.tsv [-I DIR]... [-open M]...  *)
(*                                                                           *)
(* BATCH.tsv has lines "<entry>\t<answer file>". Each answer is read with    *)
(* HOL Light's own syntax (camlp5 with pa_j, linked in), and held to the     *)
(* bytecode driver's rules: no ";;", exactly one expression, no identifier  *)
(* that reaches the system, the compiler or the driver. It is then typed on *)
(* its own against the core and the context modules, so that one bad answer *)
(* gives that answer ERROR and never sinks the batch. OUT.ml is a marshalled *)
(* syntax tree registering a thunk per accepted answer: answer text is never *)
(* spliced into source code. REFUSED.tsv has "<entry>\tERROR\t<reason>".     *)
(* ========================================================================= *)

exception Refused of string

let one_line s =
  let s = String.map (fun c -> if c < ' ' then ' ' else c) s in
  let s = String.trim s in
  if String.length s > 300 then String.sub s 0 300 ^ "..." else s

let read_file path =
  let ic = open_in_bin path in
  let s = really_input_string ic (in_channel_length ic) in
  close_in ic; s

let contains text pat =
  let n = String.length text and m = String.length pat in
  let rec go i = i + m <= n && (String.sub text i m = pat || go (i + 1)) in
  go 0

(* The compiler's reports start with a location and an excerpt of text we
   built; the reason is what follows "Error:". *)
let error_text text =
  let key = "rror: " in
  let n = String.length text and m = String.length key in
  let rec find i =
    if i + m > n then text
    else if String.sub text i m = key then String.sub text (i + m) (n - i - m)
    else find (i + 1) in
  one_line (find 0)

let message_of_exn exn =
  let buf = Buffer.create 256 in
  let ppf = Format.formatter_of_buffer buf in
  (try Location.report_exception ppf exn
   with _ -> Format.pp_print_string ppf (Printexc.to_string exn));
  Format.pp_print_flush ppf ();
  error_text (Buffer.contents buf)

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

let parse_answer name text =
  if contains text ";;" then raise (Refused "syntax: ';;' is not allowed in an answer");
  Pcaml.input_file := name;
  let items, status =
    try !Pcaml.parse_implem (Stream.of_string text)
    with exn -> raise (Refused ("syntax: " ^ one_line (camlp5_message exn))) in
  (* camlp5 stops with None at a toplevel directive, Some at end of input. *)
  if status = None then
    raise (Refused "syntax: the answer must be exactly one OCaml expression");
  match Ast2pt.implem name (List.map fst items) with
  | [{Parsetree.pstr_desc = Parsetree.Pstr_eval (e, _); _}] -> e
  | _ -> raise (Refused "syntax: the answer must be exactly one OCaml expression")

(* ------------------------------------------------------------------------- *)
(* Screening: the bytecode driver's lists, plus proofbatch's native modules. *)
(* ------------------------------------------------------------------------- *)

let denied_stdlib_modules = [
  "Sys"; "Unix"; "UnixLabels"; "Obj"; "Marshal"; "Stdlib"; "Pervasives";
  "Std_exit"; "Printexc"; "Gc"; "Callback"; "Filename"; "Scanf"; "Arg";
  "Digest"; "In_channel"; "Out_channel"; "Thread"; "ThreadUnix"; "Mutex";
  "Condition"; "Event"; "Dynlink"; "Domain"; "Effect"; "Runtime_events";
  "Proofbatch_driver"; "Hol_native_slot"; "Hol_native_server"]

let denied_values = [
  "open_in"; "open_in_bin"; "open_in_gen"; "open_out"; "open_out_bin";
  "open_out_gen"; "output"; "output_string"; "output_bytes"; "output_char";
  "output_byte"; "output_binary_int"; "output_value"; "output_substring";
  "input"; "input_line"; "input_char"; "input_byte"; "input_binary_int";
  "input_value"; "really_input"; "really_input_string"; "seek_in";
  "seek_out"; "close_in"; "close_out"; "close_in_noerr"; "close_out_noerr";
  "set_binary_mode_in"; "set_binary_mode_out"; "in_channel_length";
  "out_channel_length"; "exit"; "at_exit"; "do_at_exit"; "read_line";
  "read_int"; "read_int_opt"; "read_float"; "read_float_opt";
  "loadt"; "loads"; "needs"; "use_file"; "load_on_path"; "load_through_path";
  "file_of_string"; "string_of_file"; "strings_of_file"; "hol_dir";
  "load_path"; "temp_path"]

let installed_modules subdir =
  let dir = Filename.concat Config.standard_library subdir in
  try
    Array.to_list (Sys.readdir dir)
    |> List.filter (fun f -> Filename.check_suffix f ".cmi")
    |> List.map (fun f -> String.capitalize_ascii (Filename.chop_suffix f ".cmi"))
  with Sys_error _ -> []

let denied_modules = lazy (
  let table = Hashtbl.create 1024 in
  List.iter (fun m -> Hashtbl.replace table m ())
    (denied_stdlib_modules @ installed_modules "compiler-libs"
     @ installed_modules "camlp5" @ installed_modules "threads");
  table)

let is_denied_module name =
  Hashtbl.mem (Lazy.force denied_modules) name
  || (String.length name >= 11 && String.sub name 0 11 = "Camlinternal")

let screen expr =
  let text = Pprintast.string_of_expression expr in
  let lexbuf = Lexing.from_string text in
  Lexer.init ();
  let deny what = raise (Refused ("forbidden: " ^ what ^ " (an answer may only build a tactic)")) in
  let rec scan () =
    match Lexer.token lexbuf with
    | Parser.EOF -> ()
    | Parser.UIDENT m when is_denied_module m -> deny ("module " ^ m)
    | Parser.LIDENT v when List.mem v denied_values -> deny v
    | Parser.EXTERNAL -> deny "external declarations"
    | _ -> scan () in
  try scan () with
  | Refused _ as r -> raise r
  | exn -> deny ("unscreenable text (" ^ message_of_exn exn ^ ")")

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
