(* ========================================================================= *)
(* proofbatch's native HOL Light server.                                     *)
(*                                                                           *)
(* Linked with the natively compiled core, so HOL Light is loaded by the     *)
(* time main runs. It is the bytecode driver's fork server (Hol_check), with *)
(* plugins instead of source text:                                          *)
(*                                                                           *)
(*   FORK <cmd> <rep> <log> <plugin.cmxs>...  fork a child image that       *)
(*                                        Dynlink-loads the plugins in order *)
(*   CHECK <verdict> <query> <plugin> <entry> <limit> <log> <scratch>       *)
(*         <nonce> <jail-uid or ->        fork one check; reply its pid     *)
(*   LOAD <plugin.cmxs>                   load an answer batch into this    *)
(*                                        image, so checks need not; its    *)
(*                                        initializer only registers thunks *)
(*   REAP <pid>  |  QUIT                                                     *)
(*                                                                           *)
(* Usage: hol-native-server [--trust] <cmd> <rep> [<plugin.cmxs> ...], the  *)
(* plugins being preloaded libraries; --trust: contexts (and preloaded      *)
(* libraries) load with prove trusting (hol_trust.ml). Plain OCaml: HOL Light's names are reached    *)
(* through Hol_check and Hol_native_slot only, so nothing here needs pa_j.  *)
(* ========================================================================= *)

let one_line = Hol_text.one_line

let load_plugin path =
  try Dynlink.loadfile path with
  | Dynlink.Error (Dynlink.Library's_module_initializers_failed exn) ->
      failwith (one_line (Printexc.to_string exn))
  | Dynlink.Error e -> failwith ("cannot load " ^ path ^ ": " ^ Dynlink.error_message e)

let load_image plugins () =
  try List.iter load_plugin plugins; true
  with exn ->
    let why = match exn with Failure m -> m | e -> Printexc.to_string e in
    Printf.eprintf "Exception: %s\n" (one_line why);
    false

(* The answer's batch plugin is loaded (unless its image has it already,
   "-") and its registered thunk looked up: nothing of the answer has run,
   so a plugin that does not load is the driver's ERROR, never the answer's
   FAIL (Hol_check reads a Failure as a failed tactic). *)
let answer plugin entry () =
  if plugin <> "-" then
    (try load_plugin plugin
     with Failure why -> raise (Hol_check.Verdict ("ERROR", "driver: " ^ why)));
  try Hashtbl.find Hol_native_slot.answers entry
  with Not_found -> raise (Hol_check.Verdict ("ERROR", "driver: no compiled answer " ^ entry))

let request = function
  | "FORK" :: child_cmd :: child_rep :: log :: plugins ->
      Hol_check.Fork_image (child_cmd, child_rep, log, load_image plugins)
  | ["CHECK"; verdict; query; plugin; entry; timeout; log; scratch; nonce; jail] ->
      let jail_uid = if jail = "-" then None else Some (int_of_string jail) in
      Hol_check.Fork_check (log, scratch, fun () ->
        Hol_check.run_check ~answer:(answer plugin entry)
          ~describe:(fun exn -> one_line (Printexc.to_string exn))
          ~verdict_path:verdict ~query_file:query ~limit:timeout ~nonce
          ~scratch ~jail_uid)
  | ["LOAD"; plugin] ->
      (try load_plugin plugin; Hol_check.Reply "LOADED"
       with Failure why -> Hol_check.Reply ("FAILED " ^ one_line why))
  | _ -> Hol_check.Bad

let () =
  let args = match Array.to_list Sys.argv with
    | prog :: "--trust" :: rest -> Hol_trust.trusting := true; prog :: rest
    | args -> args in
  match args with
  | _ :: cmd :: rep :: preload ->
      (try List.iter load_plugin preload
       with Failure why -> prerr_endline ("Exception: preloading: " ^ why); exit 3);
      Hol_check.flush_all ();
      Hol_check.serve request cmd rep
  | _ -> prerr_endline "usage: hol-native-server [--trust] CMD REP [PLUGIN.cmxs ...]"; exit 2
