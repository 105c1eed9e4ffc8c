(* ring.ml: squares, cubes and sums of squares over :num.                   *)

let sq_def = new_definition
 `sq (n:num) = n * n`;;

let cube_def = new_definition
 `cube (n:num) = n * sq n`;;

let SQ_MUL = prove
 (`!m n. sq (m * n) = sq m * sq n`,
  REWRITE_TAC[sq_def; MULT_AC]);;
