(* Escape hatches for proofbatch's hostile-answer catalogue. An answer may
   not name Sys, Unix, open_out and the like (the driver refuses them), but a
   context may. These wrappers let an answer reach the system anyway, so the
   catalogue can show what the operating-system box holds on its own.
   Each returns "ok" or "refused: <why>". Never put such functions in a real
   context: with them an answer also escapes the driver's screen. *)
unset_jrh_lexer;;
let pb_result f =
  try f () with
  | Unix.Unix_error (e, _, _) -> "refused: " ^ Unix.error_message e
  | Sys_error e -> "refused: " ^ e;;
let pb_shell cmd = Sys.command cmd;;
let pb_write path text =
  pb_result (fun () -> let oc = open_out path in output_string oc text; close_out oc; "ok");;
let pb_read path =
  pb_result (fun () ->
    let ic = open_in_bin path in
    ignore (really_input_string ic (in_channel_length ic)); close_in ic; "ok");;
let pb_connect host port =
  pb_result (fun () ->
    let s = Unix.socket Unix.PF_INET Unix.SOCK_STREAM 0 in
    Unix.connect s (Unix.ADDR_INET (Unix.inet_addr_of_string host, port));
    Unix.close s; "ok");;
external pb_exit : int -> 'a = "unix_exit";;
(* 10 ms between forks: the memory guard refreshes its view of a check's
   process tree every few 20 ms samples, and a bomb forking faster reaches
   the process limit (RLIMIT_NPROC) first, which tests/test_hostile.py
   checks on its own. Here the memory guard is what stops it. *)
let pb_fork_bomb n =
  let made = ref 0 in
  let r = pb_result (fun () ->
    for i = 1 to n do ignore i;
      (match Unix.fork () with
       | 0 -> Unix.sleepf 120.0; pb_exit 0
       | _ -> incr made; Unix.sleepf 0.01)
    done; "ok") in
  if r = "ok" then r else Printf.sprintf "%s after %d forks" r !made;;
let pb_kill pid = pb_result (fun () -> Unix.kill pid Sys.sigkill; "ok");;
let pb_image_pid = Unix.getpid ();;
(* The ground truth of a demo problem (the context root is
   examples/hol_light_demo). Outside the jail it is readable: the control. *)
let pb_truth = Filename.concat (Sys.getcwd ()) "arith.add_comm/answer.txt";;
let () = if pb_read pb_truth <> "ok" then failwith ("control: cannot read " ^ pb_truth);;
set_jrh_lexer;;
