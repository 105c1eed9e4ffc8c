(* ========================================================================= *)
(* proofbatch's native HOL Light server.                                     *)
(*                                                                           *)
(* Linked with the natively compiled core, so HOL Light is loaded by the     *)
(* time main runs. It speaks the bytecode driver's protocol on two named    *)
(* pipes (see hol_light_driver.ml), with plugins instead of source text:    *)
(*                                                                           *)
(*   FORK <cmd> <rep> <log> <plugin.cmxs>...  fork a child image that       *)
(*                                        Dynlink-loads the plugins in order *)
(*   CHECK <verdict> <query> <plugin> <entry> <timeout> <log> <scratch>     *)
(*         <nonce> <jail-uid or ->        fork one check; reply its pid     *)
(*   LOAD <plugin.cmxs>                   load an answer batch into this    *)
(*                                        image, so checks need not; its    *)
(*                                        initializer only registers thunks *)
(*   REAP <pid>  |  QUIT                                                     *)
(*                                                                           *)
(* Usage: hol-native-server <cmd> <rep> [<plugin.cmxs> ...], the plugins    *)
(* being preloaded libraries. Plain OCaml: HOL Light's names are reached    *)
(* through Hol_native_slot only, so nothing here depends on pa_j.           *)
(* ========================================================================= *)

module S = Hol_native_slot

exception Time_limit
exception Verdict of string * string

let hard_exit (n : int) : 'a = Unix._exit n

let one_line s =
  let s = String.map (fun c -> if c < ' ' then ' ' else c) s in
  let s = String.trim s in
  if String.length s > 300 then String.sub s 0 300 ^ "..." else s

let read_file path =
  let ic = open_in_bin path in
  let n = in_channel_length ic in
  let s = really_input_string ic n in
  close_in ic; s

let flush_all () =
  (try Format.print_flush (); Format.pp_print_flush Format.err_formatter () with _ -> ());
  (try flush stdout; flush stderr with _ -> ())

let redirect_output log =
  let fd = Unix.openfile log [Unix.O_WRONLY; Unix.O_CREAT; Unix.O_TRUNC] 0o600 in
  Unix.dup2 fd Unix.stdout;
  Unix.dup2 fd Unix.stderr;
  Unix.close fd

let load_plugin path =
  try Dynlink.loadfile path with
  | Dynlink.Error (Dynlink.Library's_module_initializers_failed exn) ->
      failwith (one_line (Printexc.to_string exn))
  | Dynlink.Error e -> failwith ("cannot load " ^ path ^ ": " ^ Dynlink.error_message e)

(* ------------------------------------------------------------------------- *)
(* One check, inside the forked child: the bytecode driver's judge.         *)
(* ------------------------------------------------------------------------- *)

(* Opened before the jail, which has no /proc; reread from the start, a
   procfs file gives current values. *)
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

(* The jail, as in the bytecode driver (runner/sandbox.py): once the plugin
   is loaded and the goal read, nothing of the answer has run yet. The check
   then chroots into its empty scratch directory and becomes a uid of its
   own, so the answer sees no file, no /proc and no other process. *)
let enter_jail scratch uid =
  try
    Unix.chroot scratch;
    Sys.chdir "/";
    Unix.setgroups [||];
    Unix.setgid uid;
    Unix.setuid uid;
    if Unix.getuid () <> uid || Unix.geteuid () <> uid then failwith "uid not dropped"
  with exn ->
    raise (Verdict ("ERROR", "sandbox: could not enter the jail: " ^ Printexc.to_string exn))

let set_timer seconds =
  ignore (Unix.setitimer Unix.ITIMER_REAL {Unix.it_interval = 0.0; Unix.it_value = seconds})

(* Native code polls for signals only where it allocates, so a loop that does
   not allocate never sees this alarm: the runner kills the child from
   outside at the limit plus a grace period. *)
let arm_timer seconds =
  Sys.set_signal Sys.sigalrm (Sys.Signal_handle (fun _ -> raise Time_limit));
  set_timer seconds

let read_query path =
  let text = String.trim (read_file path) in
  let n = String.length text in
  let body =
    if n >= 2 && text.[0] = '`' && text.[n - 1] = '`' then String.sub text 1 (n - 2) else text in
  try S.kernel_parse_term body
  with exn -> raise (Verdict ("ERROR", "query: " ^ one_line (Printexc.to_string exn)))

let judge ~query_file ~plugin ~entry ~timeout ~jail =
  let prove_secs = ref 0.0 in
  let ax0 = List.length (S.kernel_axioms ()) in
  let outcome =
    try
      arm_timer timeout;
      if plugin <> "-" then load_plugin plugin;
      let thunk =
        try Hashtbl.find S.answers entry
        with Not_found -> raise (Verdict ("ERROR", "driver: no compiled answer " ^ entry)) in
      let goal = read_query query_file in
      jail ();
      let t0 = Unix.gettimeofday () in
      let finish () = prove_secs := Unix.gettimeofday () -. t0 in
      let th =
        try let th = S.kernel_prove (goal, thunk ()) in finish (); th
        with exn -> finish (); raise exn in
      set_timer 0.0;
      if S.kernel_hyp th <> [] || not (S.kernel_aconv (S.kernel_concl th) goal)
      then ("FAIL", "the proved theorem is not the goal")
      else ("OK", Printf.sprintf "proved in %.3f s" !prove_secs)
    with
    | Verdict (v, why) -> (v, why)
    | Failure msg -> ("FAIL", "tactic failed: " ^ one_line msg)
    | Time_limit -> ("TIMEOUT", Printf.sprintf "time limit %g s reached inside the prover" timeout)
    | Out_of_memory -> ("MEMOUT", "the prover ran out of memory")
    | Stack_overflow -> ("ERROR", "stack overflow")
    | exn -> ("ERROR", "exception: " ^ one_line (Printexc.to_string exn)) in
  set_timer 0.0;
  let added = List.length (S.kernel_axioms ()) - ax0 in
  let verdict, reason =
    if added > 0 then
      ("CHEATING", Printf.sprintf "axioms() grew by %d (new_axiom, mk_thm or CHEAT_TAC); was %s"
                     added (fst outcome))
    else outcome in
  (verdict, !prove_secs, one_line reason)

let run_check ~verdict_path ~query_file ~plugin ~entry ~timeout ~nonce ~scratch ~jail_uid =
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
    try judge ~query_file ~plugin ~entry ~timeout ~jail with
    | Time_limit ->
        ("TIMEOUT", timeout, Printf.sprintf "time limit %g s reached inside the prover" timeout)
    | exn -> ("ERROR", 0.0, "driver: " ^ one_line (Printexc.to_string exn)) in
  (* HOL Light includes Format, so what the answer printed is still buffered. *)
  flush_all ();
  let record = Printf.sprintf "PBV1\t%s\t%s\t%.6f\t%d\t%s\n" nonce verdict secs (peak_rss_kb status) reason in
  (* The verdict pipe is opened only now, after the answer has stopped
     running: while it ran, there was no channel it could write to. *)
  let fd = Unix.openfile !verdict_path [Unix.O_WRONLY] 0 in
  ignore (Unix.write_substring fd record 0 (String.length record));
  Unix.close fd

(* ------------------------------------------------------------------------- *)
(* The fork server.                                                          *)
(* ------------------------------------------------------------------------- *)

let live_checks : int list ref = ref []
let live_images : int list ref = ref []

let reap_images () =
  live_images := List.filter (fun pid ->
    try fst (Unix.waitpid [Unix.WNOHANG] pid) = 0 with Unix.Unix_error _ -> false) !live_images

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
        List.iter (fun pid -> try Unix.kill (- pid) Sys.sigkill with _ -> ()) !live_checks;
        hard_exit 0
    | Some line ->
        (match String.split_on_char '\t' line with
         | "FORK" :: child_cmd :: child_rep :: log :: plugins ->
             (match fork_child () with
              | 0 ->
                  redirect_output log;
                  let loaded =
                    try List.iter load_plugin plugins; true
                    with exn ->
                      let why = match exn with Failure m -> m | e -> Printexc.to_string e in
                      Printf.eprintf "Exception: %s\n" (one_line why);
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
         | ["CHECK"; verdict; query; plugin; entry; timeout; log; scratch; nonce; jail] ->
             let jail_uid = if jail = "-" then None else Some (int_of_string jail) in
             (match fork_child () with
              | 0 ->
                  (try
                     ignore (Unix.setsid ());
                     redirect_output log;
                     Sys.chdir scratch;
                     run_check ~verdict_path:verdict ~query_file:query ~plugin ~entry
                       ~timeout:(float_of_string timeout) ~nonce ~scratch ~jail_uid;
                     hard_exit 0
                   with _ -> hard_exit 4)
              | pid ->
                  live_checks := pid :: !live_checks;
                  reply (Printf.sprintf "PID %d" pid))
         | ["LOAD"; plugin] ->
             (try load_plugin plugin; reply "LOADED"
              with Failure why -> reply ("FAILED " ^ one_line why))
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

let () =
  match Array.to_list Sys.argv with
  | _ :: cmd :: rep :: preload ->
      (try List.iter load_plugin preload
       with Failure why -> prerr_endline ("Exception: preloading: " ^ why); exit 3);
      flush_all ();
      serve cmd rep
  | _ -> prerr_endline "usage: hol-native-server CMD REP [PLUGIN.cmxs ...]"; exit 2
