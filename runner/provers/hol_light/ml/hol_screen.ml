(* ========================================================================= *)
(* proofbatch: the answer screen of the HOL Light drivers (module Hol_screen)*)
(*                                                                           *)
(* An answer is one OCaml expression of type tactic, but OCaml can run       *)
(* shell commands, write files or poke at memory. An answer may name no      *)
(* module or value that reaches the system, the compiler or the drivers.     *)
(* The parsed expression is printed back in standard syntax and lexed with   *)
(* OCaml's own lexer, so every identifier is seen exactly once and string    *)
(* literals never count.                                                     *)
(*                                                                           *)
(* One copy for the bytecode driver (loaded with #mod_use into HOL Light's   *)
(* toplevel, which has compiler-libs) and the native answer front end        *)
(* (compiled with compiler-libs.common). Needs Hol_text.                     *)
(* ========================================================================= *)

(* The answer is refused before any of it runs; the reason says why. *)
exception Refused of string

(* As in s2n-bignum-bench: exactly one expression, no ";;", nothing else.
   Extra phrases would otherwise run as top-level code. *)
let semicolons = "syntax: ';;' is not allowed in an answer"
let not_one_expression = "syntax: the answer must be exactly one OCaml expression"

(* Only a ";;" that separates phrases: the bench's own ground truths have
   ";;" in comments (arm.bignum_mod_n25519.BIGNUM_MOD_N25519_SAFE). Each
   driver also asks HOL Light's own lexer (camlp5's, whose rules in comments
   differ from OCaml's), so a ";;" that one of the two sees is refused. *)
let refuse_phrases text =
  if Hol_text.phrase_separator text >= 0 then raise (Refused semicolons)

(* The one expression of a parsed answer. HOL Light's pa_j since 2024
   (pa_j_4.xx_7.xx.ml and later, the bench's pin 5e62421 among them) makes
   its toplevel read a phrase [e;;] as [let it = e;;], naming the value as
   OCaml's toplevel does; Debian's 2023 build gives [e;;] itself. Its binding
   is built at the location of the whole phrase, pattern included, while a
   [let it = e] written in the answer has its pattern at [it], after [let]:
   that is how the rewrite is told apart, on every build. A written
   [let it = e] is a definition, not one expression: the bench, which reads
   an answer inside [(fun () -> ...)], refuses it as a syntax error, and so
   is it refused here, even though only [e] would run. *)
let the_expression items =
  let open Parsetree in
  match items with
  | [{pstr_desc = Pstr_eval (e, _); _}] -> e
  | [{pstr_desc = Pstr_value (Asttypes.Nonrecursive,
                              [{pvb_pat = {ppat_desc = Ppat_var {Location.txt = "it"; _};
                                           ppat_loc = pattern_at; ppat_attributes = []; _};
                                pvb_expr = e; pvb_attributes = []; _}]);
      pstr_loc = phrase_at}] when pattern_at = phrase_at -> e
  | _ -> raise (Refused not_one_expression)

(* The compiler's reports start with a location and a source excerpt that
   refer to text a driver built; the reason is what follows "Error:". *)
let error_text text =
  let key = "rror: " in
  let n = String.length text and m = String.length key in
  let rec find i =
    if i + m > n then text
    else if String.sub text i m = key then String.sub text (i + m) (n - i - m)
    else find (i + 1) in
  Hol_text.one_line (find 0)

let message_of_exn exn =
  let buf = Buffer.create 256 in
  let ppf = Format.formatter_of_buffer buf in
  (try Location.report_exception ppf exn
   with _ -> Format.pp_print_string ppf (Printexc.to_string exn));
  Format.pp_print_flush ppf ();
  error_text (Buffer.contents buf)

let denied_stdlib_modules = [
  "Sys"; "Unix"; "UnixLabels"; "Obj"; "Marshal"; "Stdlib"; "Pervasives";
  "Std_exit"; "Printexc"; "Gc"; "Callback"; "Filename"; "Scanf"; "Arg";
  "Digest"; "In_channel"; "Out_channel"; "Thread"; "ThreadUnix"; "Mutex";
  "Condition"; "Event"; "Dynlink"; "Domain"; "Effect"; "Runtime_events"]

(* proofbatch's own modules, in either mode: they hold the kernel functions
   a verdict depends on, the answer slots, the server loop and the flag that
   trusts a context's proofs (Hol_trust). *)
let denied_driver_modules = [
  "Proofbatch_driver"; "Hol_text"; "Hol_screen"; "Hol_check"; "Hol_trust";
  "Hol_native_slot"; "Hol_native_server"]

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
  (* HOL Light's own ways to run or read files *)
  "loadt"; "loads"; "needs"; "use_file"; "load_on_path"; "load_through_path";
  "file_of_string"; "string_of_file"; "strings_of_file"; "hol_dir";
  "load_path"; "temp_path"]

(* Every module of the compiler, the toplevel and camlp5 is reachable from
   a toplevel; names are taken from the installed interfaces. *)
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
    (denied_stdlib_modules @ denied_driver_modules @ installed_modules "compiler-libs"
     @ installed_modules "camlp5" @ installed_modules "threads");
  table)

let is_denied_module name =
  Hashtbl.mem (Lazy.force denied_modules) name
  || (String.length name >= 11 && String.sub name 0 11 = "Camlinternal")

let screen expr =
  let text = Pprintast.string_of_expression expr in
  let lexbuf = Lexing.from_string text in
  Lexer.init ();
  let deny what =
    raise (Refused ("forbidden: " ^ what ^ " (an answer may only build a tactic)")) in
  let rec scan () =
    match Lexer.token lexbuf with
    | Parser.EOF -> ()
    | Parser.UIDENT m when is_denied_module m -> deny ("module " ^ m)
    | Parser.LIDENT v when List.mem v denied_values -> deny v
    (* Array.unsafe_get, Bytes.unsafe_to_string and kin read and write out
       of bounds or break immutability: with them a value of any type,
       a theorem included, can be forged without Obj. *)
    | Parser.LIDENT v when Hol_text.contains v "unsafe" -> deny v
    | Parser.EXTERNAL -> deny "external declarations"
    | _ -> scan () in
  try scan () with
  | Refused _ as r -> raise r
  | exn -> deny ("unscreenable text (" ^ message_of_exn exn ^ ")")
