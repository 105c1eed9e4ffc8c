(* ========================================================================= *)
(* proofbatch: text helpers of the HOL Light drivers (module Hol_text).      *)
(*                                                                           *)
(* One copy for all three places that run them: the bytecode driver         *)
(* (hol_light_driver.ml; hol_light.py loads this file into HOL Light's       *)
(* toplevel with #mod_use, HOL Light's lexer switched off), the native       *)
(* server and the native answer front end (native_build.py compiles it with  *)
(* plain ocamlopt and ocamlc). So it is plain OCaml that camlp5 reads alike, *)
(* and it names only the standard library, qualified where HOL Light        *)
(* defines the same name: in the toplevel, HOL Light's names are in scope.   *)
(* ========================================================================= *)

(* A reason for a verdict record or a reply: one line, bounded. *)
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

(* ------------------------------------------------------------------------- *)
(* Phrase separators. A ";;" ends a top-level phrase only outside comments  *)
(* (nested), string literals, quoted strings {id|...|id} ({%ext id|...|id}   *)
(* too), character literals and HOL term quotations `...`. The rules are     *)
(* OCaml's lexer's (parsing/lexer.mll): inside a comment it also reads       *)
(* identifiers, strings, quoted strings and character literals, so none of  *)
(* them can close the comment, and an identifier such as x' or f'a' is one  *)
(* token, so its primes open no character literal. runner/provers/hol_light/contexts.py       *)
(* (split_phrases) has the same rules; tests/test_hol_text.py holds the two  *)
(* to agreement. The lexer is byte-based: a multi-byte UTF-8 letter is never *)
(* a character literal.                                                     *)
(* ------------------------------------------------------------------------- *)

let is_ident_start c = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c = '_'
let is_ident_char c = is_ident_start c || (c >= '0' && c <= '9')
let is_delimiter_char c = (c >= 'a' && c <= 'z') || c = '_'
let is_digit c = c >= '0' && c <= '9'
let is_octal c = c >= '0' && c <= '7'
let is_hex c = is_digit c || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')

(* An identifier with a prime that starts at [i] (not inside another
   identifier): its end, or -1. *)
let ident_with_prime s i =
  let n = String.length s in
  if i >= n || not (is_ident_start s.[i]) || (i > 0 && is_ident_char s.[i - 1]) then -1
  else begin
    let j = ref (i + 1) in
    while !j < n && is_ident_char s.[!j] do incr j done;
    if !j < n && s.[!j] = '\'' then begin
      incr j;
      while !j < n && (is_ident_char s.[!j] || s.[!j] = '\'') do incr j done;
      !j
    end else -1
  end

(* A character literal that starts at [i]: its end, or -1. *)
let char_literal s i =
  let n = String.length s in
  let close k = if k < n && s.[k] = '\'' then k + 1 else -1 in
  if i + 1 >= n || s.[i] <> '\'' then -1
  else match s.[i + 1] with
    | '\\' ->
        if i + 2 >= n then -1
        else (match s.[i + 2] with
          | '\\' | '"' | '\'' | 'n' | 't' | 'b' | 'r' | ' ' -> close (i + 3)
          | '0' .. '9' ->
              if i + 4 < n && is_digit s.[i + 3] && is_digit s.[i + 4] then close (i + 5) else -1
          | 'o' ->
              if i + 5 < n && s.[i + 3] >= '0' && s.[i + 3] <= '3' && is_octal s.[i + 4]
                 && is_octal s.[i + 5] then close (i + 6) else -1
          | 'x' ->
              if i + 4 < n && is_hex s.[i + 3] && is_hex s.[i + 4] then close (i + 5) else -1
          | _ -> -1)
    | '\'' -> -1
    | '\r' ->
        let k = ref (i + 1) in
        while !k < n && s.[!k] = '\r' do incr k done;
        if !k < n && s.[!k] = '\n' then close (!k + 1) else -1
    | _ -> close (i + 2)

(* The opening of a quoted string that starts at [i]: its end and the
   delimiter that closes it, "|" ^ delimiter ^ "}". *)
let quoted_opening s i =
  let n = String.length s in
  let run_of p k = let k = ref k in while !k < n && p s.[!k] do incr k done; !k in
  let bar_after k = if k < n && s.[k] = '|' then Some (k + 1) else None in
  if i >= n || s.[i] <> '{' then None
  else if i + 1 < n && s.[i + 1] = '%' then begin
    let j = if i + 2 < n && s.[i + 2] = '%' then i + 3 else i + 2 in
    if j >= n || not (is_ident_start s.[j]) then None
    else
      let name_end = run_of (fun c -> is_ident_char c || c = '\'' || c = '.') (j + 1) in
      match bar_after name_end with
      | Some e -> Some (e, "")
      | None ->
          let blank_end = run_of (fun c -> c = ' ' || c = '\t') name_end in
          if blank_end = name_end then None
          else
            let delim_end = run_of is_delimiter_char blank_end in
            match bar_after delim_end with
            | Some e -> Some (e, String.sub s blank_end (delim_end - blank_end))
            | None -> None
  end else
    let delim_end = run_of is_delimiter_char (i + 1) in
    match bar_after delim_end with
    | Some e -> Some (e, String.sub s (i + 1) (delim_end - i - 1))
    | None -> None

(* Where [pat] first occurs in [s] at or after [i], or -1. *)
let find_from s i pat =
  let n = String.length s and m = String.length pat in
  let rec go k = if k + m > n then -1 else if String.sub s k m = pat then k else go (k + 1) in
  go i

(* Each skip_ takes the offset just after the opening and gives the offset
   just after the closing, or the length of [s] when it is never closed. *)
let skip_quoted s i delim =
  let closing = "|" ^ delim ^ "}" in
  let k = find_from s i closing in
  if k < 0 then String.length s else k + String.length closing

let skip_string s i =
  let n = String.length s in
  let rec go k =
    if k >= n then n
    else match s.[k] with
      | '"' -> k + 1
      | '\\' -> if k + 1 < n then go (k + 2) else n
      | _ -> go (k + 1) in
  go i

let skip_comment s i =
  let n = String.length s in
  let rec go depth k =
    if k >= n then n
    else if k + 1 < n && s.[k] = '(' && s.[k + 1] = '*' then go (depth + 1) (k + 2)
    else if k + 1 < n && s.[k] = '*' && s.[k + 1] = ')' then
      (if depth = 1 then k + 2 else go (depth - 1) (k + 2))
    else match s.[k] with
      | '"' -> go depth (skip_string s (k + 1))
      | '{' ->
          (match quoted_opening s k with
           | Some (e, delim) -> go depth (skip_quoted s e delim)
           | None -> go depth (k + 1))
      | '\'' ->
          (* In a comment OCaml reads '' as a unit, so ''' opens no char. *)
          if k + 1 < n && s.[k + 1] = '\'' then go depth (k + 2)
          else let e = char_literal s k in go depth (if e >= 0 then e else k + 1)
      | _ -> let e = ident_with_prime s k in go depth (if e >= 0 then e else k + 1) in
  go 1 i

(* The offset of the first ";;" that separates phrases, or -1. *)
let phrase_separator s =
  let n = String.length s in
  let rec go k =
    if k >= n then -1
    else if k + 1 < n && s.[k] = ';' && s.[k + 1] = ';' then k
    else if k + 1 < n && s.[k] = '(' && s.[k + 1] = '*' then go (skip_comment s (k + 2))
    else match s.[k] with
      | '"' -> go (skip_string s (k + 1))
      | '{' ->
          (match quoted_opening s k with
           | Some (e, delim) -> go (skip_quoted s e delim)
           | None -> go (k + 1))
      | '\096' ->                       (* a backquote: a HOL term quotation *)
          (match String.index_from_opt s (k + 1) '\096' with
           | Some e -> go (e + 1)
           | None -> -1)
      | '\'' -> let e = char_literal s k in go (if e >= 0 then e else k + 1)
      | _ -> let e = ident_with_prime s k in go (if e >= 0 then e else k + 1) in
  go 0
