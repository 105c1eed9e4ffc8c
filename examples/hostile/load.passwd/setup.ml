(* A context that loads a file of the host through the context root's
   parent folders. HOL Light would read it, print parse errors and go on
   (its use_file swallows them): the answer then proved its goal. A load
   outside the context root and HOL Light's directory is refused. *)
needs "../../../../../../../../../../etc/passwd";;
