(* ========================================================================= *)
(* proofbatch's driver inside a HOL Light toplevel.                          *)
(*                                                                           *)
(* Loaded once, right after hol.ml, into the process that becomes the base   *)
(* image. [Proofbatch_driver.serve] then turns that process into a fork      *)
(* server (Hol_check.serve) driven by the Python runner over two named       *)
(* pipes:                                                                    *)
(*                                                                           *)
(*   FORK <cmd> <rep> <log> <segment.ml>  fork a child image that loads the  *)
(*                                        segment and serves on <cmd>/<rep>  *)
(*   CHECK <verdict> <query> <answer> <limit> <log> <scratch> <nonce>        *)
(*         [<jail-uid>]                   fork one check; reply its pid      *)
(*   REAP <pid>                           wait for a finished child          *)
(*   QUIT                                                                    *)
(*                                                                           *)
(* Nothing a check does reaches its image: it runs in a forked child.        *)
(*                                                                           *)
(* The driver is this file and the modules it uses, which the native server *)
(* shares: hol_text.ml, hol_screen.ml and hol_check.ml. runner/provers/hol_light/backend.py *)
(* loads them in that order with #mod_use, after #load "unix.cma" and        *)
(* unset_jrh_lexer (HOL Light's lexer reads all-caps identifiers as values   *)
(* and backquotes as term quotations, which breaks plain OCaml such as       *)
(* Unix.ITIMER_REAL), then #use's this file and restores HOL Light's lexer   *)
(* with set_jrh_lexer, so that contexts and answers are read as HOL Light    *)
(* reads them. What is here is what only the toplevel does: read contexts   *)
(* and answers as source text.                                               *)
(* ========================================================================= *)

module Proofbatch_driver = struct

  exception Verdict = Hol_check.Verdict

  (* The typed answer is installed here by a phrase the driver builds; the
     answer itself can never name this module (see Hol_screen). *)
  let answer_slot : (unit -> tactic) ref =
    ref (fun () -> failwith "proofbatch: no answer installed")

  (* camlp5 prints its own parse errors, the location on stderr and the
     message on stdout, then raises Exit: capture both descriptors. *)
  let capturing_errors f =
    let path = Filename.temp_file "proofbatch-parse" ".txt" in
    let fd = Unix.openfile path [Unix.O_WRONLY; Unix.O_TRUNC] 0o600 in
    let flush_both () =
      Format.pp_print_flush Format.err_formatter (); Format.print_flush ();
      flush stderr; flush stdout in
    flush_both ();
    let saved_out = Unix.dup Unix.stdout and saved_err = Unix.dup Unix.stderr in
    Unix.dup2 fd Unix.stdout;
    Unix.dup2 fd Unix.stderr;
    Unix.close fd;
    let restore () =
      flush_both ();
      Unix.dup2 saved_out Unix.stdout; Unix.dup2 saved_err Unix.stderr;
      Unix.close saved_out; Unix.close saved_err in
    match f () with
    | v -> restore (); Sys.remove path; v
    | exception exn ->
        restore ();
        let printed = try Hol_text.read_file path with Sys_error _ -> "" in
        Sys.remove path;
        raise (Failure (if String.trim printed = "" then Hol_screen.message_of_exn exn
                        else Hol_screen.error_text printed))

  (* ----------------------------------------------------------------------- *)
  (* Parsing, screening and typing the answer.                               *)
  (* ----------------------------------------------------------------------- *)

  let parse_answer text =
    Hol_screen.refuse_phrases text;
    let source = text ^ "\n;;" in
    let lexbuf = Lexing.from_string source in
    let phrase =
      try capturing_errors (fun () -> !Toploop.parse_toplevel_phrase lexbuf)
      with Failure why -> raise (Hol_screen.Refused ("syntax: " ^ why)) in
    (* The toplevel reads one phrase, up to the first ";;" its own lexer
       sees; a phrase that ends before the one added here ended at a ";;"
       of the answer. *)
    if lexbuf.Lexing.lex_curr_pos <> String.length source then
      raise (Hol_screen.Refused Hol_screen.semicolons);
    match phrase with
    | Parsetree.Ptop_def items -> Hol_screen.the_expression items
    | _ -> raise (Hol_screen.Refused Hol_screen.not_one_expression)

  (* Builds [Proofbatch_driver.answer_slot := (fun () -> (e : tactic))] as a
     syntax tree, so the answer's text is never spliced into source code. *)
  let install_answer expr =
    let open Ast_helper in
    let lid l = Location.mknoloc l in
    let typed = Exp.constraint_ expr (Typ.constr (lid (Longident.Lident "tactic")) []) in
    let unit_pat = Pat.construct (lid (Longident.Lident "()")) None in
    let thunk = Exp.fun_ Asttypes.Nolabel None unit_pat typed in
    let slot = Exp.ident (lid (Longident.Ldot (Longident.Lident "Proofbatch_driver",
                                               "answer_slot"))) in
    let assign = Exp.apply (Exp.ident (lid (Longident.Lident ":=")))
                   [Asttypes.Nolabel, slot; Asttypes.Nolabel, thunk] in
    let phrase = Parsetree.Ptop_def [Str.eval assign] in
    let ok =
      try Toploop.execute_phrase false Format.err_formatter phrase
      with exn -> raise (Verdict ("ERROR", "type: " ^ Hol_screen.message_of_exn exn)) in
    if not ok then raise (Verdict ("ERROR", "type: the answer could not be installed"))

  (* Gives the answer's tactic, installed but not yet run. *)
  let answer answer_file () =
    try
      let expr = parse_answer (Hol_text.read_file answer_file) in
      Hol_screen.screen expr;
      install_answer expr;
      !answer_slot
    with Hol_screen.Refused why -> raise (Verdict ("ERROR", why))

  (* ----------------------------------------------------------------------- *)
  (* What stays bound whatever a context opens.                              *)
  (* ----------------------------------------------------------------------- *)

  (* Files [loads] skips (native_compile.py's DROPPED_LOADS), as HOL Light's own
     inline_load.ml, the bench's pipeline, omits them: s2n-bignum's
     arm/proofs/base.ml does [loads "update_database.ml"], which crashes the
     toplevel with a segmentation fault in an OCaml 4.13 build. *)
  let dropped_loads : string list ref = ref []

  let dropping_loads (loads : string -> unit) file =
    if List.mem file !dropped_loads then
      Format.printf "proofbatch: Warning: 'loads %S;;' is omitted, as HOL Light's \
                     inline_load.ml omits it@." file
    else loads file

  let rebind_directive = "proofbatch_rebind"

  let path names =
    match names with
    | [] -> invalid_arg "path"
    | first :: rest ->
        Location.mknoloc (List.fold_left (fun l s -> Longident.Ldot (l, s))
                            (Longident.Lident first) rest)

  let bind name expr =
    let open Ast_helper in
    Parsetree.Ptop_def [Str.value Asttypes.Nonrecursive
                          [Vb.mk (Pat.var (Location.mknoloc name)) expr]]

  (* [let prove = Hol_trust.Switch.prove] under trust (hol_trust.ml), and
     [let loads = Proofbatch_driver.dropping_loads loads], run by the
     directive #proofbatch_rebind: once by the boot script, and again after
     every top-level open or include of every file the toplevel reads
     (contexts, and the files they needs or loads). A module-built HOL Light
     (HOLLIGHT_USE_MODULE=1) keeps its functions in Hol_lib and its loader
     in Hol_loader, and a bench setup begins [open Hol_lib;; open Hol_loader;;],
     which would bind HOL Light's own prove and loads again. Rebinding [loads]
     wraps whatever [loads] the open brought; one that does not type (a
     module's own [loads] of another type) is left as it is. *)
  let install_rebinding ~trust ~dropped =
    dropped_loads := dropped;
    let ident names = Ast_helper.Exp.ident (path names) in
    let prove = bind "prove" (ident ["Hol_trust"; "Switch"; "prove"]) in
    let loads = bind "loads" (Ast_helper.Exp.apply (ident ["Proofbatch_driver"; "dropping_loads"])
                                [Asttypes.Nolabel, ident ["loads"]]) in
    let rebind () =
      if trust && not (Toploop.execute_phrase false Format.std_formatter prove) then
        failwith "proofbatch: prove could not be bound to Hol_trust.Switch.prove";
      (try ignore (Toploop.execute_phrase false Format.std_formatter loads) with _ -> ()) in
    Toploop.add_directive rebind_directive (Toploop.Directive_none rebind)
      {Toploop.section = "proofbatch"; doc = "bind prove and loads as the session needs"};
    let again = Parsetree.Ptop_dir {Parsetree.pdir_name = Location.mknoloc rebind_directive;
                                    pdir_arg = None; pdir_loc = Location.none} in
    let opens item = match item.Parsetree.pstr_desc with
      | Parsetree.Pstr_open _ | Parsetree.Pstr_include _ -> true
      | _ -> false in
    (* A phrase is cut after each open or include in it, so that
       [open M let x = prove ...] (one phrase) sees the rebinding too. *)
    let rec cut before = function
      | [] -> if before = [] then [] else [Parsetree.Ptop_def (List.rev before)]
      | item :: rest when opens item ->
          Parsetree.Ptop_def (List.rev (item :: before)) :: again :: cut [] rest
      | item :: rest -> cut (item :: before) rest in
    let parse = !Toploop.parse_use_file in
    Toploop.parse_use_file := fun lexbuf ->
      List.concat_map (function
          | Parsetree.Ptop_def items when List.exists opens items -> cut [] items
          | phrase -> [phrase])
        (parse lexbuf)

  (* ----------------------------------------------------------------------- *)
  (* The fork server.                                                        *)
  (* ----------------------------------------------------------------------- *)

  let load_segment segment () =
    try Toploop.use_file Format.std_formatter segment
    with exn ->
      Format.eprintf "Exception: %s@." (Printexc.to_string exn);
      false

  let request = function
    | ["FORK"; child_cmd; child_rep; log; segment] ->
        Hol_check.Fork_image (child_cmd, child_rep, log, load_segment segment)
    | "CHECK" :: verdict :: query :: answer_file :: timeout :: log :: scratch :: nonce
      :: ([] | [_] as jail) ->
        let jail_uid = match jail with
          | [uid] when uid <> "-" -> Some (int_of_string uid)
          | _ -> None in
        Hol_check.Fork_check (log, scratch, fun () ->
          Hol_check.run_check ~answer:(answer answer_file) ~describe:Hol_screen.message_of_exn
            ~verdict_path:verdict ~query_file:query ~limit:timeout ~nonce
            ~scratch ~jail_uid)
    | _ -> Hol_check.Bad

  let serve cmd_path rep_path = Hol_check.serve request cmd_path rep_path
end;;
