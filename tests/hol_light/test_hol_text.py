"""runner/provers/hol_light/ml/hol_text.ml finds the phrase separator of an answer as
ocaml_lexer.split_phrases finds it in a context: the same OCaml lexer
rules, written twice (the drivers cannot call Python, and contexts are split
before any prover runs). Compiled here with plain ocamlopt, as the native
build compiles it, and run on a catalogue of tricky texts and on random ones:
every text must give the same first separator in both.

A ";;" inside a comment, a string, a quoted string, a character literal or a
HOL term quotation separates nothing; an answer with a real one is refused.
"""

from __future__ import annotations

import random
import shutil

import pytest

from runner import subproc
from runner.provers.hol_light.ocaml_lexer import split_phrases

from ..helpers import ROOT

HOL_TEXT = ROOT / "runner" / "provers" / "hol_light" / "ml" / "hol_text.ml"

# Reads one hex-encoded text per line, prints the offset of its first phrase
# separator (or -1) per line.
MAIN = r"""
let () =
  try
    while true do
      let line = input_line stdin in
      let text = String.init (String.length line / 2)
          (fun i -> Char.chr (int_of_string ("0x" ^ String.sub line (2 * i) 2))) in
      print_endline (string_of_int (Hol_text.phrase_separator text))
    done
  with End_of_file -> ()
"""


@pytest.fixture(scope="module")
def separator_of(tmp_path_factory):
    """The OCaml side, compiled with plain ocamlfind ocamlopt."""
    if shutil.which("ocamlfind") is None:
        pytest.skip("ocamlfind is not installed (apt-get install ocaml-findlib)")
    build = tmp_path_factory.mktemp("hol-text")
    shutil.copy(HOL_TEXT, build / "hol_text.ml")
    (build / "main.ml").write_text(MAIN)
    subproc.run(["ocamlfind", "ocamlopt", "-package", "str", "hol_text.ml", "main.ml", "-o", "sep"],
                cwd=build, timeout=300)

    def run(texts: list[str]) -> list[int]:
        for t in texts:
            assert t.isascii(), "positions are compared as bytes"
        out = subproc.run([str(build / "sep")], input_text="".join(t.encode().hex() + "\n"
                                                                   for t in texts))
        return [int(x) for x in out.split()]
    return run


def python_separator(text: str) -> int:
    """The first separator by ocaml_lexer.split_phrases: a phrase other than the
    last always ends with ";;" and then blanks up to the end of its line."""
    phrases = split_phrases(text + "\nx")     # the x is a remainder, never a phrase
    if len(phrases) < 2:
        return -1
    return len(phrases[0].rstrip(" \t\r\n")) - 2


CATALOGUE = [
    # the bench's ground truth of arm.bignum_mod_n25519.BIGNUM_MOD_N25519_SAFE has this
    "REWRITE_TAC[] THEN\n(* safety_print_log := 1;; revealed that ... *)\nARITH_TAC",
    "ARITH_TAC;; ALL_TAC",
    "ARITH_TAC;;",
    "ARITH_TAC ;;\n",
    "(* a (* nested ;; *) still a comment ;; *) ARITH_TAC",
    "(* a (* nested *) ;; *) X",
    "(* unbalanced (* opener *) ;; X",
    '(* "*)" ;; *) X',                      # a string in a comment hides its *)
    '(* "(*" *) ;; X',                      # ... and its (*
    "(* '\"' ;; *) X",                      # a char literal '"' opens no string
    "(* '\"' *) ;; X",
    "(* x'\" *) ;; \" *) X",               # x' is an identifier; its " opens a string
    "(* ''\" ;; \" *) ;; X",               # '' is a unit in a comment
    "(* ''' *) ;; X",
    "(* ''\"' ;; *) ;; X",                 # not the char '"': the string runs on
    "(* {|*)|} ;; *) X",                   # a quoted string in a comment
    "(* {id|*) |} ;; |id} *) ;; X",
    "(* {%ext|*)|} ;; *) X",
    "(* {%%ext.sub id|*)|id} *) ;; X",
    "(* {%ext  |*)|} ;; *) X",
    "(* {A|*)|A} ;; *) X",                 # upper case: no quoted string
    '"a string ;; with \\" an escaped quote" ;; X',
    '"a string \\\\" ;; X',
    '"unterminated ;; string',
    "{|a quoted ;; string|} X",
    "{id|a quoted |} ;; string|id} ;; X",
    "{%ext id|x ;; |id} ;; X",
    "{%ext|x ;; |} ;; X",
    "`x ;; y` ;; X",                        # a HOL term quotation
    "`unterminated ;; quotation",
    "'\"' ;; X",
    "'\\'' ;; X",
    "'\\\\' ;; X",
    "'\\n' ;; '\\065' ;; '\\o101' ;; '\\x41' ;; X",
    "'\\q' ;; X",
    "'\n' ;; X",
    "'\r\r\n' ;; X",
    "'ab' ;; X",
    "'a ;; X",
    "f'a' \" ;; \" ;; X",                  # f'a' is one identifier
    "x' ;; X",
    "a1'b' ;; X",
    "0x1F'a' ;; X",
    "(fun x -> x) ;; X",
    "(*) ;; *) ;; X",
    "(* *) *) ;; X",
    "*) ;; X",
    "( * ) ;; X",
    "a ; ; b",
    ";;;",
    "",
    "(* never closed ;;",
    "(* \"never closed *) ;;",
    "(* {|never closed *) ;;",
]


def test_a_semicolon_in_the_bench_ground_truth_comment_separates_nothing(separator_of):
    assert separator_of([CATALOGUE[0]]) == [-1]
    assert python_separator(CATALOGUE[0]) == -1


def test_the_catalogue_gives_the_same_separator_in_ocaml_and_python(separator_of):
    got = separator_of(CATALOGUE)
    want = [python_separator(t) for t in CATALOGUE]
    mismatches = [(t, g, w) for t, g, w in zip(CATALOGUE, got, want) if g != w]
    assert not mismatches
    # The catalogue has both kinds, and most texts have one after a decoy.
    assert sum(g >= 0 for g in got) >= 30 and sum(g < 0 for g in got) >= 8


def test_random_texts_give_the_same_separator_in_ocaml_and_python(separator_of):
    rng = random.Random(14)
    atoms = [";;", ";", "(*", "*)", "(", ")", "*", '"', "'", "\\", "{", "}", "|", "%", "{|", "|}",
             "{id|", "|id}", "{%e|", "{%e x|", "|x}", "`", "''", "'\"'", "x'", "a", "b", "0",
             " ", "\n", "\r", "\t", ".", "n", "o1", "x4"]
    texts = ["".join(rng.choice(atoms) for _ in range(rng.randint(1, 30))) for _ in range(4000)]
    got = separator_of(texts)
    want = [python_separator(t) for t in texts]
    mismatches = [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
    assert not mismatches[:5]
    # Both kinds are well represented: real separators, and ";;" that hide
    # in a comment, a string or a quotation (decoys).
    assert sum(g >= 0 for g in got) > 400
    assert sum(";;" in t and g < 0 for t, g in zip(texts, got)) > 500
