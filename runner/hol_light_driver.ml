(* ========================================================================= *)
(* proofbatch's driver inside a HOL Light toplevel.                          *)
(*                                                                           *)
(* Loaded once, right after hol.ml, into the process that becomes the base   *)
(* image. [Proofbatch_driver.serve] then turns that process into a fork      *)
(* server driven by the Python runner over two named pipes:                  *)
(*                                                                           *)
(*   FORK <cmd> <rep> <log> <segment.ml>  fork a child image that loads the  *)
(*                                        segment and serves on <cmd>/<rep>  *)
(*   CHECK <verdict> <query> <answer> <timeout> <log> <scratch> <nonce>      *)
(*         [<jail-uid>]                   fork one check; reply its pid      *)
(*   REAP <pid>                           wait for a finished child          *)
(*   QUIT                                                                    *)
(*                                                                           *)
(* Nothing a check does reaches its image: it runs in a forked child.        *)
(* ========================================================================= *)

#load "unix.cma";;

(* HOL Light's camlp5 lexer reads all-caps identifiers as values and
   backquotes as term quotations, which breaks plain OCaml such as
   Unix.ITIMER_REAL. The driver is plain OCaml; HOL syntax is restored at
   the end so that contexts and answers are read as HOL Light reads them. *)
unset_jrh_lexer;;

module Proofbatch_driver = struct

  exception Time_limit

  (* Unix._exit, which skips at_exit handlers and so never flushes buffers
     inherited across fork twice; camlp5 reads "_exit" as a constructor. *)
  external hard_exit : int -> 'a = "unix_exit"
  exception Verdict of string * string

  (* Captured before any context loads, so that neither a setup file nor an
     answer can rebind what a verdict depends on. *)
  let kernel_prove = prove
  let kernel_axioms = axioms
  let kernel_concl = concl
  let kernel_hyp = hyp
  let kernel_aconv = aconv
  let kernel_parse_term = parse_term

  (* The typed answer is installed here by a phrase the driver builds; the
     answer itself can never name this module (see [screen]). *)
  let answer_slot : (unit -> tactic) ref =
    ref (fun () -> failwith "proofbatch: no answer installed")

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

  (* The compiler's reports start with a location and a source excerpt that
     refer to driver-built text; the reason is what follows "Error:". *)
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
        let printed = try read_file path with Sys_error _ -> "" in
        Sys.remove path;
        raise (Failure (if String.trim printed = "" then message_of_exn exn
                        else error_text printed))

  (* ----------------------------------------------------------------------- *)
  (* Screening the answer.                                                   *)
  (*                                                                         *)
  (* An answer is one OCaml expression of type tactic, but OCaml can run     *)
  (* shell commands, write files or poke at memory. An answer may name no    *)
  (* module or value that reaches the system, the compiler or this driver.   *)
  (* The parsed expression is printed back in standard syntax and lexed with *)
  (* OCaml's own lexer, so every identifier is seen exactly once and string  *)
  (* literals never count.                                                   *)
  (* ----------------------------------------------------------------------- *)

  let denied_stdlib_modules = [
    "Sys"; "Unix"; "UnixLabels"; "Obj"; "Marshal"; "Stdlib"; "Pervasives";
    "Std_exit"; "Printexc"; "Gc"; "Callback"; "Filename"; "Scanf"; "Arg";
    "Digest"; "In_channel"; "Out_channel"; "Thread"; "ThreadUnix"; "Mutex";
    "Condition"; "Event"; "Dynlink"; "Domain"; "Effect"; "Runtime_events";
    "Proofbatch_driver"]

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
    let deny what =
      raise (Verdict ("ERROR", "forbidden: " ^ what
                               ^ " (an answer may only build a tactic)")) in
    let rec scan () =
      match Lexer.token lexbuf with
      | Parser.EOF -> ()
      | Parser.UIDENT m when is_denied_module m -> deny ("module " ^ m)
      | Parser.LIDENT v when List.mem v denied_values -> deny v
      (* Array.unsafe_get, Bytes.unsafe_to_string and kin read and write out
         of bounds or break immutability: with them a value of any type,
         a theorem included, can be forged without Obj. *)
      | Parser.LIDENT v when contains v "unsafe" -> deny v
      | Parser.EXTERNAL -> deny "external declarations"
      | _ -> scan () in
    try scan () with
    | Verdict _ as v -> raise v
    | exn -> deny ("unscreenable text (" ^ message_of_exn exn ^ ")")

  (* ----------------------------------------------------------------------- *)
  (* Parsing and typing the answer.                                          *)
  (* ----------------------------------------------------------------------- *)

  (* As in s2n-bignum-bench: exactly one expression, no ";;", nothing else.
     Extra phrases would otherwise run as top-level code. *)
  let parse_answer text =
    if contains text ";;" then
      raise (Verdict ("ERROR", "syntax: ';;' is not allowed in an answer"));
    let lexbuf = Lexing.from_string (text ^ "\n;;") in
    let phrase =
      try capturing_errors (fun () -> !Toploop.parse_toplevel_phrase lexbuf)
      with Failure why -> raise (Verdict ("ERROR", "syntax: " ^ why)) in
    match phrase with
    | Parsetree.Ptop_def [{Parsetree.pstr_desc = Parsetree.Pstr_eval (e, _); _}] -> e
    | _ -> raise (Verdict ("ERROR",
                           "syntax: the answer must be exactly one OCaml expression"))

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
      with exn -> raise (Verdict ("ERROR", "type: " ^ message_of_exn exn)) in
    if not ok then raise (Verdict ("ERROR", "type: the answer could not be installed"))

  let read_query path =
    let text = String.trim (read_file path) in
    let n = String.length text in
    let body =
      if n >= 2 && text.[0] = '`' && text.[n - 1] = '`'
      then String.sub text 1 (n - 2) else text in
    try kernel_parse_term body
    with exn -> raise (Verdict ("ERROR", "query: " ^ message_of_exn exn))

  (* ----------------------------------------------------------------------- *)
  (* One check, inside the forked child.                                     *)
  (* ----------------------------------------------------------------------- *)

  (* Opened before the jail, which has no /proc; procfs files reread from
     the start give current values. *)
  let peak_rss_kb status =
    try
      let ic = match status with Some ic -> ic | None -> raise Not_found in
      seek_in ic 0;
      let rec find () =
        match input_line ic with
        | line when String.length line > 6 && String.sub line 0 6 = "VmHWM:" ->
            Scanf.sscanf line "VmHWM: %d kB" (fun kb -> kb)
        | _ -> find () in
      (try find () with End_of_file -> 0)
    with _ -> 0

  let set_timer seconds =
    ignore (Unix.setitimer Unix.ITIMER_REAL
              {Unix.it_interval = 0.0; Unix.it_value = seconds})

  (* OCaml handles signals only at allocation and poll points, so a loop that
     does not allocate never sees this alarm; the runner also kills the child
     from outside at the limit plus a grace period. *)
  let arm_timer seconds =
    Sys.set_signal Sys.sigalrm (Sys.Signal_handle (fun _ -> raise Time_limit));
    set_timer seconds

  (* The jail (see runner/sandbox.py): once the answer is parsed, screened
     and typed, and the goal read, nothing of it has run yet. The check then
     chroots into its empty scratch directory and becomes a uid of its own,
     so the answer sees no file, no /proc and no other process. Typing must
     come first: it reads the compiler's .cmi files. *)
  let enter_jail scratch uid =
    try
      Unix.chroot scratch;
      Sys.chdir "/";
      Unix.setgroups [||];
      Unix.setgid uid;
      Unix.setuid uid;
      if Unix.getuid () <> uid || Unix.geteuid () <> uid then failwith "uid not dropped"
    with exn ->
      raise (Verdict ("ERROR", "sandbox: could not enter the jail: "
                               ^ Printexc.to_string exn))

  let judge ~query_file ~answer_file ~timeout ~jail =
    let prove_secs = ref 0.0 in
    let ax0 = List.length (kernel_axioms ()) in
    let outcome =
      try
        arm_timer timeout;
        let expr = parse_answer (read_file answer_file) in
        screen expr;
        install_answer expr;
        let goal = read_query query_file in
        jail ();
        let t0 = Unix.gettimeofday () in
        let finish () = prove_secs := Unix.gettimeofday () -. t0 in
        let th =
          try let th = kernel_prove (goal, !answer_slot ()) in finish (); th
          with exn -> finish (); raise exn in
        set_timer 0.0;
        if kernel_hyp th <> [] || not (kernel_aconv (kernel_concl th) goal)
        then ("FAIL", "the proved theorem is not the goal")
        else ("OK", Printf.sprintf "proved in %.3f s" !prove_secs)
      with
      | Verdict (v, why) -> (v, why)
      | Failure msg -> ("FAIL", "tactic failed: " ^ one_line msg)
      | Time_limit ->
          ("TIMEOUT", Printf.sprintf "time limit %g s reached inside the prover" timeout)
      | Out_of_memory -> ("MEMOUT", "the prover ran out of memory")
      | Stack_overflow -> ("ERROR", "stack overflow")
      | exn -> ("ERROR", "exception: " ^ one_line (Printexc.to_string exn)) in
    set_timer 0.0;
    let added = List.length (kernel_axioms ()) - ax0 in
    let verdict, reason =
      if added > 0 then
        ("CHEATING", Printf.sprintf
           "axioms() grew by %d (new_axiom, mk_thm or CHEAT_TAC); was %s" added
           (fst outcome))
      else outcome in
    (verdict, !prove_secs, one_line reason)

  let run_check ~verdict_path ~query_file ~answer_file ~timeout ~nonce ~scratch ~jail_uid =
    let status = try Some (open_in "/proc/self/status") with _ -> None in
    (* Inside the jail the scratch directory is "/", and the verdict pipe the
       runner made there is "/verdict". *)
    let verdict_path = ref verdict_path in
    let jail () =
      match jail_uid with
      | None -> ()
      | Some uid ->
          enter_jail scratch uid;
          verdict_path := "/" ^ Filename.basename !verdict_path in
    let verdict, secs, reason =
      try judge ~query_file ~answer_file ~timeout ~jail with
      | Time_limit ->
          ("TIMEOUT", timeout, Printf.sprintf "time limit %g s reached inside the prover" timeout)
      | exn -> ("ERROR", 0.0, "driver: " ^ one_line (Printexc.to_string exn)) in
    (try Format.print_flush (); flush stdout; flush stderr with _ -> ());
    let record = Printf.sprintf "PBV1\t%s\t%s\t%.6f\t%d\t%s\n"
                   nonce verdict secs (peak_rss_kb status) reason in
    (* The verdict pipe is opened only now, after the answer has stopped
       running: while it ran, there was no channel it could write to. *)
    let fd = Unix.openfile !verdict_path [Unix.O_WRONLY] 0 in
    ignore (Unix.write_substring fd record 0 (String.length record));
    Unix.close fd

  (* ----------------------------------------------------------------------- *)
  (* The fork server.                                                        *)
  (* ----------------------------------------------------------------------- *)

  let live_checks : int list ref = ref []
  let live_images : int list ref = ref []

  (* Child images that quit are reaped as the server goes; check children are
     reaped only on REAP, so that the runner reads their exit status. *)
  let reap_images () =
    live_images := List.filter (fun pid ->
      try fst (Unix.waitpid [Unix.WNOHANG] pid) = 0
      with Unix.Unix_error _ -> false) !live_images

  let redirect_output log =
    let fd = Unix.openfile log [Unix.O_WRONLY; Unix.O_CREAT; Unix.O_TRUNC] 0o600 in
    Unix.dup2 fd Unix.stdout;
    Unix.dup2 fd Unix.stderr;
    Unix.close fd

  let flush_all () =
    (try Format.print_flush (); Format.pp_print_flush Format.err_formatter ()
     with _ -> ());
    flush stdout; flush stderr

  let rec serve cmd_path rep_path =
    let rep = open_out rep_path in
    let reply line = output_string rep (line ^ "\n"); flush rep in
    reply (Printf.sprintf "READY %d" (Unix.getpid ()));
    let cmd = open_in cmd_path in
    let close_channels () =
      Unix.close (Unix.descr_of_in_channel cmd);
      Unix.close (Unix.descr_of_out_channel rep) in
    let fork_child () =
      flush_all ();
      match Unix.fork () with
      | 0 -> live_checks := []; live_images := []; close_channels (); 0
      | pid -> pid in
    let rec loop () =
      match (try Some (input_line cmd) with End_of_file -> None) with
      | None ->
          (* The runner is gone: take the running checks down with us. *)
          List.iter (fun pid -> try Unix.kill (- pid) Sys.sigkill with _ -> ())
            !live_checks;
          hard_exit 0
      | Some line ->
          (match String.split_on_char '\t' line with
           | ["FORK"; child_cmd; child_rep; log; segment] ->
               (match fork_child () with
                | 0 ->
                    redirect_output log;
                    let loaded =
                      try Toploop.use_file Format.std_formatter segment
                      with exn ->
                        Format.eprintf "Exception: %s@." (Printexc.to_string exn);
                        false in
                    flush_all ();
                    (try
                       if loaded then serve child_cmd child_rep
                       else begin
                         let rep = open_out child_rep in
                         output_string rep "FAILED\n"; close_out rep
                       end
                     with _ -> ());
                    hard_exit 3
                | pid ->
                    live_images := pid :: !live_images;
                    reply (Printf.sprintf "FORKED %d" pid))
           | "CHECK" :: verdict :: query :: answer :: timeout :: log :: scratch :: nonce
             :: ([] | [_] as jail) ->
               let jail_uid = match jail with
                 | [uid] when uid <> "-" -> Some (int_of_string uid)
                 | _ -> None in
               (match fork_child () with
                | 0 ->
                    (* Its own process group, so that the runner can kill
                       whatever the check spawns along with it. *)
                    (try
                       ignore (Unix.setsid ());
                       redirect_output log;
                       Sys.chdir scratch;
                       run_check ~verdict_path:verdict ~query_file:query
                         ~answer_file:answer ~timeout:(float_of_string timeout) ~nonce
                         ~scratch ~jail_uid;
                       hard_exit 0
                     with _ -> hard_exit 4)
                | pid ->
                    live_checks := pid :: !live_checks;
                    reply (Printf.sprintf "PID %d" pid))
           | ["REAP"; pid] ->
               let pid = int_of_string pid in
               let status =
                 match snd (Unix.waitpid [] pid) with
                 | Unix.WEXITED n -> Printf.sprintf "exit %d" n
                 | Unix.WSIGNALED n -> Printf.sprintf "signal %d" n
                 | Unix.WSTOPPED n -> Printf.sprintf "stopped %d" n in
               live_checks := List.filter (fun p -> p <> pid) !live_checks;
               reply (Printf.sprintf "REAPED %d %s" pid status)
           | ["QUIT"] -> hard_exit 0
           | _ -> reply ("BAD " ^ one_line line));
          reap_images ();
          loop () in
    loop ()
end;;

set_jrh_lexer;;
