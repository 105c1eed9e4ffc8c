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
(* shares: hol_text.ml, hol_screen.ml and hol_check.ml. runner/provers/hol_light/session/backend.py *)
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

  (* Where camlp5's error text is captured: TMPDIR (the runner gives each
     session a folder of its own there), else where Python's tempfile would
     look next. None usable is a fault of the machine, never the answer's:
     an "infra:" ERROR, which the runner runs again or stops on. *)
  let capture_file () =
    let dirs = [Filename.get_temp_dir_name (); "/tmp"; "/var/tmp"; "/usr/tmp"] in
    let rec first why = function
      | [] -> raise (Verdict ("ERROR", "infra: cannot create a temporary file (tried " ^
                                       String.concat ", " dirs ^ "): " ^ why))
      | dir :: rest ->
          (try Filename.temp_file ~temp_dir:dir "proofbatch-parse" ".txt"
           with Sys_error e -> first e rest) in
    first "" dirs

  (* camlp5 prints its own parse errors, the location on stderr and the
     message on stdout, then raises Exit: capture both descriptors. *)
  let capturing_errors f =
    let path = capture_file () in
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
      let text =
        try Hol_text.read_file answer_file
        with Sys_error e -> raise (Verdict ("ERROR", "infra: cannot read the answer's file: " ^ e)) in
      let expr = parse_answer text in
      Hol_screen.screen expr;
      install_answer expr;
      !answer_slot
    with Hol_screen.Refused why -> raise (Verdict ("ERROR", why))

  (* ----------------------------------------------------------------------- *)
  (* What stays bound whatever a context opens.                              *)
  (* ----------------------------------------------------------------------- *)

  (* Files [loads] skips (load_graph.py's DROPPED_LOADS), as HOL Light's own
     inline_load.ml, the bench's pipeline, omits them: s2n-bignum's
     arm/proofs/base.ml does [loads "update_database.ml"], which crashes the
     toplevel with a segmentation fault in an OCaml 4.13 build. *)
  let dropped_loads : string list ref = ref []

  let dropping_loads (loads : string -> unit) file =
    if List.mem file !dropped_loads then
      Format.printf "proofbatch: Warning: 'loads %S;;' is omitted, as HOL Light's \
                     inline_load.ml omits it@." file
    else loads file

  (* ----------------------------------------------------------------------- *)
  (* The files a context loads.                                              *)
  (* ----------------------------------------------------------------------- *)

  (* HOL Light's use_file prints "Error in included file" and goes on, so a
     file that a context needs, loadt's or loads and that fails (a parse
     error, an unbound name, an exception) was swallowed: the context loaded
     without it, and the answer met the consequence ("Unbound value ..."),
     or proved its goal. Under the runner each of them is checked instead
     (the rebinding below): a file outside the context root and HOL Light's
     directory is refused, as is a file loading itself (through others or
     not); one that does not load raises, naming it and its first error, so
     the context fails to load (the check's ERROR "setup: ..."). Each message
     starts with [load_failed], which the runner reads in the image's log
     (runner/provers/hol_light/session/image_logs.py). *)
  let load_failed = "proofbatch: load failed: "

  (* The context root and HOL Light's directory, real paths; [] until the
     boot script confines loads: then loads are HOL Light's own. *)
  let load_roots : string list ref = ref []

  let real_path p = try Unix.realpath p with _ -> p

  let confine_loads roots = load_roots := List.map real_path roots

  (* The files being loaded, innermost first. *)
  let loading : string list ref = ref []

  let under root path =
    let n = String.length root in
    path = root || (String.length path > n && String.sub path 0 n = root
                    && (root = "/" || path.[n] = '/'))

  (* Where HOL Light's loaders find [name] (hol.ml's file_on_path): loads in
     HOL Light's directory, needs and loadt in the context root, then there;
     an absolute name as it is. None for a relative name found in neither:
     the loader itself then says so. *)
  let resolve kind name =
    let dirs = match !load_roots with
      | [root; hol] -> if kind = "loads" then [hol] else [root; hol]
      | dirs -> dirs in
    if not (Filename.is_relative name) then Some name
    else List.find_map (fun d -> let p = Filename.concat d name in
                         if Sys.file_exists p then Some p else None) dirs

  (* What the image printed to its log (its stdout, a file) since [start]:
     its last 4 MiB at most, where a load that stopped says so. *)
  let printed_since start =
    if start < 0 then "" else
    try
      let fd = Unix.openfile "/proc/self/fd/1" [Unix.O_RDONLY] 0 in
      Fun.protect ~finally:(fun () -> Unix.close fd) (fun () ->
        let size = (Unix.fstat fd).Unix.st_size in
        let from = Stdlib.max start (size - 4 * 1024 * 1024) in
        let n = size - from in
        if n <= 0 then "" else begin
          ignore (Unix.lseek fd from Unix.SEEK_SET);
          let buf = Bytes.create n in
          let rec fill k = if k < n then
              match Unix.read fd buf k (n - k) with 0 -> k | m -> fill (k + m) else k in
          Bytes.sub_string buf 0 (fill 0)
        end)
    with _ -> ""

  let starts_with s p = String.length s >= String.length p && String.sub s 0 (String.length p) = p

  (* Whether [pat] occurs in [text], which may be megabytes. *)
  let occurs text pat =
    let n = String.length text and m = String.length pat in
    let rec go i = match String.index_from_opt text i pat.[0] with
      | Some j when j + m <= n -> String.sub text j m = pat || go (j + 1)
      | _ -> false in
    m = 0 || (n > 0 && go 0)

  (* The first error a toplevel printed in [text], with the line of its
     location when one precedes it: "line 3, characters 8-11: Error: ...". *)
  let first_error text =
    let lines = List.map String.trim (String.split_on_char '\n' text) in
    let is_error l =
      (starts_with l "Error" || starts_with l "Parse error" || starts_with l "Exception:"
       || occurs l "Error: " || starts_with l "Cannot find file")
      && not (starts_with l "Error in included file") in
    let rec go where = function
      | [] -> None
      | l :: rest when starts_with l "File \"" ->
          let at = try let i = String.index l ',' in
                     String.trim (String.sub l (i + 1) (String.length l - i - 1))
                   with Not_found -> "" in
          go at rest
      | l :: rest when is_error l ->
          let follow = match rest with
            | next :: _ when l.[String.length l - 1] = ':' -> " " ^ next
            | _ -> "" in
          Some ((if where = "" then "" else where ^ " ") ^ l ^ follow)
      | _ :: rest -> go where rest in
    go "" lines

  (* The wrappers made, so that a rebinding after another open does not
     wrap one again. *)
  let wrappers : (string -> unit) list ref = ref []

  let checked_load kind (load : string -> unit) =
    if List.memq load !wrappers then load else
    let checked name =
      if kind = "loads" && List.mem name !dropped_loads then
        Format.printf "proofbatch: Warning: 'loads %S;;' is omitted, as HOL Light's \
                       inline_load.ml omits it@." name
      else if !load_roots = [] then load name
      else match resolve kind name with
        | None -> load name
        | Some path ->
            let real = real_path path in
            if not (List.exists (fun r -> under r real) !load_roots) then
              failwith (Printf.sprintf "%s%s %S is refused: %s is outside the context root \
                                        and HOL Light's directory (%s)" load_failed kind name
                          real (String.concat ", " !load_roots));
            if not (Sys.file_exists path) then
              failwith (Printf.sprintf "%s%s %S finds no file" load_failed kind name);
            if List.mem real !loading then
              failwith (Printf.sprintf "%s%s %S loads itself (%s)" load_failed kind name
                          (String.concat " <- " (real :: !loading)));
            Format.print_flush (); flush stdout; flush stderr;
            let start = try Unix.lseek Unix.stdout 0 Unix.SEEK_CUR with _ -> -1 in
            loading := real :: !loading;
            Fun.protect ~finally:(fun () -> loading := List.tl !loading) (fun () -> load name);
            Format.print_flush (); flush stdout; flush stderr;
            let printed = printed_since start in
            (* HOL Light's word for a file of this load, or of one it loaded,
               that stopped at an error. *)
            if occurs printed "Error in included file " then
              failwith (Printf.sprintf "%s%s %S (%s) did not load: %s" load_failed kind name real
                          (match first_error printed with
                           | Some e -> e | None -> "HOL Light said \"Error in included file\"")) in
    wrappers := checked :: !wrappers;
    checked

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
    (* [let needs = Proofbatch_driver.checked_load "needs" needs], and so for
       loadt and loads (which also skips the dropped loads). *)
    let checked kind =
      bind kind (Ast_helper.Exp.apply (ident ["Proofbatch_driver"; "checked_load"])
                   [Asttypes.Nolabel, Ast_helper.Exp.constant (Ast_helper.Const.string kind);
                    Asttypes.Nolabel, ident [kind]]) in
    let loaders = List.map checked ["loads"; "loadt"; "needs"] in
    let rebind () =
      if trust && not (Toploop.execute_phrase false Format.std_formatter prove) then
        failwith "proofbatch: prove could not be bound to Hol_trust.Switch.prove";
      List.iter (fun phrase ->
          try ignore (Toploop.execute_phrase false Format.std_formatter phrase) with _ -> ())
        loaders in
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
