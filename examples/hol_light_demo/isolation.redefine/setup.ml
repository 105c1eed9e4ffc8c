(* A context shared by the two isolation problems. *)

let double_def = new_definition
 `double n = n + n`;;
