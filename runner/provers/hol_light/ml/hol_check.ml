(* ========================================================================= *)
(* proofbatch: one check and the fork server, for both HOL Light drivers    *)
(* (module Hol_check).                                                       *)
(*                                                                           *)
(* The protocol, on two named pipes (runner/provers/hol_light/session/fork_server.py):                 *)
(*                                                                           *)
(*   FORK <cmd> <rep> <log> <what to load>...  fork a child image that loads *)
(*                                        its context and serves on cmd/rep  *)
(*   CHECK <verdict> ... <scratch> <nonce> <jail-uid or ->                   *)
(*                                        fork one check; reply its pid      *)
(*   REAP <pid>                           wait for a finished child          *)
(*   STATUS <pid>                         how a child image ended: "exit N", *)
(*                                        "signal SIGSEGV", "running" or     *)
(*                                        "unknown"                          *)
(*   QUIT                                                                    *)
(*                                                                           *)
(* and one verdict record per check, written to its verdict pipe:            *)
(*   PBV2 <nonce> <verdict> <prove secs> <prove CPU secs> <peak kB>         *)
(*        gc=<counters> <reason>         (tab-separated; gc_fields)         *)
(* A CHECK's limit is "cpu:<secs>" or "wall:<secs>": the clock it counts on; *)
(* ":<s=..,o=..,i=..>" after it sets the GC the check's proof runs under.    *)
(*                                                                           *)
(* What a mode loads and how it readies an answer is its own: the bytecode  *)
(* driver (hol_light_driver.ml) reads source text into the toplevel, the    *)
(* native server (hol_native_server.ml) Dynlink-loads compiled plugins. The *)
(* rest is here, once: the jail, the timer, the verdict, the server loop.   *)
(*                                                                           *)
(* Loaded after HOL Light, with its names in scope: by #mod_use into the    *)
(* bytecode toplevel with HOL Light's lexer switched off (hol_light.py), and *)
(* compiled by plain ocamlopt with -open of the native core (native_build). *)
(* So: plain OCaml, and no all-caps or backquoted HOL syntax.               *)
(* ========================================================================= *)

exception Time_limit
exception Verdict of string * string

(* Unix._exit, which skips at_exit handlers and so never flushes buffers
   inherited across fork twice; camlp5 reads "_exit" as a constructor. *)
external hard_exit : int -> 'a = "unix_exit"

(* Captured when this module loads, before any context does, so that neither
   a setup file nor an answer can rebind what a verdict depends on. *)
let kernel_prove = prove
let kernel_axioms = axioms
let kernel_concl = concl
let kernel_hyp = hyp
let kernel_aconv = aconv
let kernel_parse_term = parse_term

(* ------------------------------------------------------------------------- *)
(* One check, inside the forked child.                                       *)
(* ------------------------------------------------------------------------- *)

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

(* The clock a limit counts on. A loaded or slower host stretches wall time
   but not the CPU time a proof needs, so the runner limits CPU time by
   default; wall time is s2n-bignum-bench's own (its Unix.alarm). *)
type clock = Cpu_time | Wall_time

(* "cpu:120" or "wall:120", as the runner writes a CHECK's limit, with the
   check's runtime setting after a third colon when it names one
   ("cpu:120:s=4M,o=120"): the limit, and that setting ("" for none). *)
let limit_of_string text =
  let clock, rest =
    match String.split_on_char ':' text with
    | "cpu" :: rest -> (Cpu_time, rest)
    | "wall" :: rest -> (Wall_time, rest)
    | _ -> failwith ("not a time limit: " ^ text) in
  match rest with
  | [secs] -> ((clock, float_of_string secs), "")
  | [secs; setting] -> ((clock, float_of_string secs), setting)
  | _ -> failwith ("not a time limit: " ^ text)

(* A count as OCAMLRUNPARAM writes it: digits, then k, M or G at most. *)
let count_of text =
  let n = String.length text in
  let scale = match text.[n - 1] with
    | 'k' -> 1024 | 'M' -> 1024 * 1024 | 'G' -> 1024 * 1024 * 1024 | _ -> 1 in
  if scale = 1 then int_of_string text else scale * int_of_string (String.sub text 0 (n - 1))

(* The check's own runtime setting (runtime.py, --runtime): OCAMLRUNPARAM's
   s, o and i, set in the forked check before its answer is read. Its image
   started under the sweep's setting already; a check served by an image
   server (`run --server`) runs under its runner's, whatever the server's
   images started with. Gc.set with another minor heap size empties the
   minor heap and allocates the new one: microseconds, before any proof. *)
let apply_runtime setting =
  if setting <> "" then
    Gc.set (List.fold_left (fun c part ->
        match String.split_on_char '=' part with
        | ["s"; v] -> { c with Gc.minor_heap_size = count_of v }
        | ["o"; v] -> { c with Gc.space_overhead = count_of v }
        | ["i"; v] -> { c with Gc.major_heap_increment = count_of v }
        | _ -> failwith ("not a runtime setting: " ^ part))
      (Gc.get ()) (String.split_on_char ',' setting))

(* ITIMER_PROF counts the process's user and system CPU time (SIGPROF);
   a forked child starts with no timer and no CPU time of its own. *)
let timer_of = function Cpu_time -> Unix.ITIMER_PROF | Wall_time -> Unix.ITIMER_REAL
let signal_of = function Cpu_time -> Sys.sigprof | Wall_time -> Sys.sigalrm

let set_timer clock seconds =
  ignore (Unix.setitimer (timer_of clock) {Unix.it_interval = 0.0; Unix.it_value = seconds})

(* OCaml, bytecode and native, handles signals only at allocation and poll
   points, so a loop that does not allocate never sees this alarm; the
   runner also kills the child from outside at the limit plus a grace. *)
let arm_timer clock seconds =
  Sys.set_signal (signal_of clock) (Sys.Signal_handle (fun _ -> raise Time_limit));
  set_timer clock seconds

(* User + system CPU seconds of this process (and of children it reaped). *)
let cpu_now () =
  let t = Unix.times () in
  t.Unix.tms_utime +. t.Unix.tms_stime +. t.Unix.tms_cutime +. t.Unix.tms_cstime

(* The jail (see runner/checks/sandbox.py): once the answer is readied (typed, or
   its plugin loaded) and the goal read, nothing of it has run yet. The
   check then chroots into its empty scratch directory and becomes a uid of
   its own, so the answer sees no file, no /proc and no other process.
   Readying must come first: it reads the compiler's .cmi files or the
   plugin. *)
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

let read_query describe path =
  let text =
    try String.trim (Hol_text.read_file path)
    with Sys_error e -> raise (Verdict ("ERROR", "infra: cannot read the query's file: " ^ e)) in
  let n = String.length text in
  let body =
    if n >= 2 && text.[0] = '`' && text.[n - 1] = '`' then String.sub text 1 (n - 2) else text in
  try kernel_parse_term body
  with exn -> raise (Verdict ("ERROR", "query: " ^ describe exn))

let timeout_reason (clock, timeout) =
  match clock with
  | Cpu_time -> Printf.sprintf "CPU time limit %g s reached inside the prover" timeout
  | Wall_time -> Printf.sprintf "time limit %g s (wall clock) reached inside the prover" timeout

(* The garbage collector's counters over one proof (issue 48: why one
   runtime setting proves faster than another): collections, compactions and
   words allocated, promoted and allocated in the major heap during prove,
   then the major heap's size in words before and after it and its peak
   before and after (a forked check starts from its image's heap, so the
   "before" figures are its image's, after the image settled). Comma-
   separated, in verdict_record.py's GC_FIELDS order. Gc.quick_stat walks no
   heap: it costs microseconds. *)
let gc_fields g0 g1 =
  Printf.sprintf "%d,%d,%d,%.0f,%.0f,%.0f,%d,%d,%d,%d"
    (g1.Gc.minor_collections - g0.Gc.minor_collections)
    (g1.Gc.major_collections - g0.Gc.major_collections)
    (g1.Gc.compactions - g0.Gc.compactions)
    (g1.Gc.minor_words -. g0.Gc.minor_words)
    (g1.Gc.promoted_words -. g0.Gc.promoted_words)
    (g1.Gc.major_words -. g0.Gc.major_words)
    g0.Gc.heap_words g1.Gc.heap_words g0.Gc.top_heap_words g1.Gc.top_heap_words

(* [answer ()] readies the answer and gives its tactic without running it;
   [describe] words an exception of the query's parser. *)
let judge ~answer ~describe ~query_file ~limit ~jail =
  let clock, timeout = limit in
  (* Under --context-proofs trust the image loaded its context with prove
     trusting (hol_trust.ml): from here on, before the answer is read,
     prove is HOL Light's again, for the answer and for every context
     function it calls, and axioms() counts from here, after the context's
     trusted theorems. *)
  Hol_trust.trusting := false;
  let prove_secs = ref 0.0 and prove_cpu = ref 0.0 and gc = ref "" in
  let ax0 = List.length (kernel_axioms ()) in
  let outcome =
    try
      arm_timer clock timeout;
      let tactic = answer () in
      let goal = read_query describe query_file in
      jail ();
      let g0 = Gc.quick_stat () in
      let t0 = Unix.gettimeofday () and c0 = cpu_now () in
      let finish () =
        prove_secs := Unix.gettimeofday () -. t0; prove_cpu := cpu_now () -. c0;
        gc := gc_fields g0 (Gc.quick_stat ()) in
      let th =
        try let th = kernel_prove (goal, tactic ()) in finish (); th
        with exn -> finish (); raise exn in
      set_timer clock 0.0;
      if kernel_hyp th <> [] || not (kernel_aconv (kernel_concl th) goal)
      then ("FAIL", "the proved theorem is not the goal")
      else ("OK", Printf.sprintf "proved in %.3f s" !prove_secs)
    with
    | Verdict (v, why) -> (v, why)
    | Failure msg -> ("FAIL", "tactic failed: " ^ Hol_text.one_line msg)
    | Time_limit -> ("TIMEOUT", timeout_reason limit)
    | Out_of_memory -> ("MEMOUT", "the prover ran out of memory")
    | Stack_overflow -> ("ERROR", "stack overflow")
    | exn -> ("ERROR", "exception: " ^ Hol_text.one_line (Printexc.to_string exn)) in
  set_timer clock 0.0;
  let added = List.length (kernel_axioms ()) - ax0 in
  let verdict, reason =
    if added > 0 then
      ("CHEATING", Printf.sprintf "axioms() grew by %d (new_axiom, mk_thm or CHEAT_TAC); was %s"
                     added (fst outcome))
    else outcome in
  (verdict, !prove_secs, !prove_cpu, !gc, Hol_text.one_line reason)

let flush_all () =
  (try Format.print_flush (); Format.pp_print_flush Format.err_formatter () with _ -> ());
  (try flush stdout; flush stderr with _ -> ())

let run_check ~answer ~describe ~verdict_path ~query_file ~limit ~nonce ~scratch ~jail_uid =
  let limit, setting = limit_of_string limit in
  apply_runtime setting;
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
  let verdict, secs, cpu, gc, reason =
    try judge ~answer ~describe ~query_file ~limit ~jail with
    | Time_limit -> ("TIMEOUT", snd limit, snd limit, "", timeout_reason limit)
    | exn -> ("ERROR", 0.0, 0.0, "", "driver: " ^ Hol_text.one_line (Printexc.to_string exn)) in
  (* HOL Light includes Format, so what the answer printed is still buffered. *)
  flush_all ();
  let record = Printf.sprintf "PBV2\t%s\t%s\t%.6f\t%.6f\t%d\tgc=%s\t%s\n"
                 nonce verdict secs cpu (peak_rss_kb status) gc reason in
  (* The verdict pipe is opened only now, after the answer has stopped
     running: while it ran, there was no channel it could write to. *)
  let fd = Unix.openfile !verdict_path [Unix.O_WRONLY] 0 in
  ignore (Unix.write_substring fd record 0 (String.length record));
  Unix.close fd

(* ------------------------------------------------------------------------- *)
(* The fork server.                                                          *)
(* ------------------------------------------------------------------------- *)

(* What a mode makes of a command line other than REAP and QUIT. *)
type request =
  | Fork_image of string * string * string * (unit -> bool)
      (* cmd pipe, reply pipe, log; loads the context, false if it failed *)
  | Fork_check of string * string * (unit -> unit)
      (* log, scratch directory; runs the check and writes its verdict *)
  | Reply of string        (* done in the server itself: the reply *)
  | Bad                    (* not a command *)

let live_checks : int list ref = ref []
let live_images : int list ref = ref []

(* OCaml numbers the signals it knows in its own way (Sys.sigsegv is -10,
   Linux's SIGSEGV is 11), and Unix.waitpid reports those numbers: the
   runner gets the name the OS gives, other signals as the OS's number. *)
let signal_name n =
  let names = [Sys.sigabrt, "SIGABRT"; Sys.sigalrm, "SIGALRM"; Sys.sigbus, "SIGBUS";
               Sys.sigfpe, "SIGFPE"; Sys.sighup, "SIGHUP"; Sys.sigill, "SIGILL";
               Sys.sigint, "SIGINT"; Sys.sigkill, "SIGKILL"; Sys.sigpipe, "SIGPIPE";
               Sys.sigquit, "SIGQUIT"; Sys.sigsegv, "SIGSEGV"; Sys.sigterm, "SIGTERM";
               Sys.sigusr1, "SIGUSR1"; Sys.sigusr2, "SIGUSR2"; Sys.sigxcpu, "SIGXCPU";
               Sys.sigxfsz, "SIGXFSZ"; Sys.sigtrap, "SIGTRAP"; Sys.sigsys, "SIGSYS"] in
  try List.assoc n names with Not_found -> string_of_int n

let describe_exit = function
  | Unix.WEXITED n -> Printf.sprintf "exit %d" n
  | Unix.WSIGNALED n -> "signal " ^ signal_name n
  | Unix.WSTOPPED n -> "stopped " ^ signal_name n

(* How recent child images ended, for STATUS: an image that died while it
   loaded may be reaped here (after another command) before the runner
   asks. Bounded: evicted images quit too, and a server lives long. *)
let ended_images : (int * string) list ref = ref []

let image_ended pid status =
  ended_images := (pid, describe_exit status)
                  :: List.filteri (fun i _ -> i < 63) !ended_images

(* Child images that quit are reaped as the server goes; check children are
   reaped only on REAP, so that the runner reads their exit status. *)
let reap_images () =
  live_images := List.filter (fun pid ->
    match Unix.waitpid [Unix.WNOHANG] pid with
    | (0, _) -> true
    | (_, status) -> image_ended pid status; false
    | exception Unix.Unix_error _ -> false) !live_images

(* The runner asks once it has seen an image it forked here stop before it
   served (its reply pipe closed, or it wrote FAILED and is exiting): wait
   for it a little, and say how it ended. Only images: a check's status is
   the runner's to collect with REAP. *)
let image_status pid =
  let rec wait tries =
    match Unix.waitpid [Unix.WNOHANG] pid with
    | (0, _) when tries > 0 -> Unix.sleepf 0.05; wait (tries - 1)
    | (0, _) -> "running"
    | (_, status) ->
        live_images := List.filter (fun p -> p <> pid) !live_images;
        image_ended pid status;
        describe_exit status
    | exception Unix.Unix_error _ -> "unknown" in
  if List.mem pid !live_images then wait 100
  else try List.assoc pid !ended_images with Not_found -> "unknown"

let redirect_output log =
  let fd = Unix.openfile log [Unix.O_WRONLY; Unix.O_CREAT; Unix.O_TRUNC] 0o600 in
  Unix.dup2 fd Unix.stdout;
  Unix.dup2 fd Unix.stderr;
  Unix.close fd

(* The runner holds the read end of every reply pipe open while it lives
   (fork_server.PipePair). Opened without blocking, a pipe that has no reader
   fails at once with ENXIO: the runner is gone, so this image goes too. A
   blocking open would wait for a reader forever, which is what an image
   that finished loading after its runner died did. *)
let open_reply path =
  match Unix.openfile path [Unix.O_WRONLY; Unix.O_NONBLOCK] 0 with
  | fd -> Unix.clear_nonblock fd; Unix.out_channel_of_descr fd
  | exception Unix.Unix_error (Unix.ENXIO, _, _) -> hard_exit 0

(* The runner opens the command pipe as soon as it reads READY; if it died
   in between, nobody ever will, and opening it would block forever. The
   default action of SIGALRM ends the process. *)
let open_commands path =
  Sys.set_signal Sys.sigalrm Sys.Signal_default;
  ignore (Unix.alarm 300);
  let cmd = open_in path in
  ignore (Unix.alarm 0);
  cmd

(* Every check forked from an image inherits its heap and its unfinished
   major cycle. OCaml's major GC advances only as a program allocates, so an
   image fresh from a load holds that load's garbage, and each check would
   collect it again on its own CPU time (s2n-bignum proofs: about 1.1x the
   CPU of the bench's own program). An image that promoted more than
   [settle_words] since the last collection, its parent's included,
   collects once before it serves; a small context costs no collection.
   How, the runner says (runtime.py, --runtime settle=): collect (a full
   major cycle), compact (that, then the heap compacted), or none. *)
let settle_words = 4e6
let settled_at = ref 0.
let settle_mode =
  match Sys.getenv_opt "PROOFBATCH_SETTLE" with Some m -> m | None -> "collect"

let settle_heap () =
  let promoted = (Gc.quick_stat ()).Gc.promoted_words in
  if settle_mode <> "none" && promoted -. !settled_at > settle_words then begin
    if settle_mode = "compact" then Gc.compact () else Gc.full_major ();
    settled_at := (Gc.quick_stat ()).Gc.promoted_words
  end

let rec serve request cmd_path rep_path =
  settle_heap ();
  let rep = open_reply rep_path in
  let reply line = output_string rep (line ^ "\n"); flush rep in
  reply (Printf.sprintf "READY %d" (Unix.getpid ()));
  let cmd = open_commands cmd_path in
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
         | ["REAP"; pid] ->
             let pid = int_of_string pid in
             let status =
               match snd (Unix.waitpid [] pid) with
               | Unix.WEXITED n -> Printf.sprintf "exit %d" n
               | Unix.WSIGNALED n -> Printf.sprintf "signal %d" n
               | Unix.WSTOPPED n -> Printf.sprintf "stopped %d" n in
             live_checks := List.filter (fun p -> p <> pid) !live_checks;
             reply (Printf.sprintf "REAPED %d %s" pid status)
         | ["STATUS"; pid] ->
             let pid = int_of_string pid in
             reply (Printf.sprintf "STATUS %d %s" pid (image_status pid))
         | ["QUIT"] -> hard_exit 0
         | words ->
             (match request words with
              | Fork_image (child_cmd, child_rep, log, load) ->
                  (match fork_child () with
                   | 0 ->
                       redirect_output log;
                       let loaded = load () in
                       flush_all ();
                       (try
                          if loaded then serve request child_cmd child_rep
                          else begin
                            let rep = open_reply child_rep in
                            output_string rep "FAILED\n"; close_out rep
                          end
                        with _ -> ());
                       hard_exit 3
                   | pid ->
                       live_images := pid :: !live_images;
                       reply (Printf.sprintf "FORKED %d" pid))
              | Fork_check (log, scratch, run) ->
                  (match fork_child () with
                   | 0 ->
                       (* Its own process group, so that the runner can kill
                          whatever the check spawns along with it. *)
                       (try
                          ignore (Unix.setsid ());
                          redirect_output log;
                          Sys.chdir scratch;
                          run ();
                          hard_exit 0
                        with _ -> hard_exit 4)
                   | pid ->
                       live_checks := pid :: !live_checks;
                       reply (Printf.sprintf "PID %d" pid))
              | Reply text -> reply text
              | Bad -> reply ("BAD " ^ Hol_text.one_line line)));
        reap_images ();
        loop () in
  loop ()
