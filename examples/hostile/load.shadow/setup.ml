(* A context that loads a secret of the host by its absolute path: refused
   as outside the context root and HOL Light's directory. *)
loadt "/etc/shadow";;
