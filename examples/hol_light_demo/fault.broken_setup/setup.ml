(* The second definition mentions k, which is not bound: new_definition
   rejects it, so this context cannot be loaded. *)

let double_def = new_definition
 `double n = n + n`;;

let scale_def = new_definition
 `scale n = k * n`;;
