"""`proofbatch extract`: HOL Light proof files cut into a corpus.

The story: the scanner reads a theorem's goal and proof out of one phrase,
whatever commas, `;;` and brackets hide in comments, strings and quotations,
and says why it leaves any other proof out; ids, repeats and duplicate
statements follow the bench; real Library files give real corpora whose
contexts are the file's own phrases; bad input writes nothing and exits 2;
and every extracted ground truth checks OK in the real HOL Light.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cli import main
from runner.provers.hol_light.ocaml_lexer import split_phrases
from runner.corpus import load_corpus
from runner.provers.hol_light.extract.extract import extract
from runner.provers.hol_light.extract.extract_model import MANIFEST, ExtractConfig
from runner.provers.hol_light.extract.extract_scan import Skip, Theorem, scan_phrase

from ..helpers import DEMO, HOL_LIBRARY, extracted_config, sweep_with

# -- the scanner -------------------------------------------------------------


def test_a_multi_line_let_prove_gives_its_goal_and_tactic_as_written():
    phrase = ("(* Lemma (with a comma, and a ;; in this comment). *)\n\n"
              "let ADD_PAIR = prove\n"
              " (`!x y. FST (x, y) + 0 = x`,\n"
              "  (* a comment before the proof is not part of it *)\n"
              "  REWRITE_TAC[ADD_CLAUSES; FST] THEN\n"
              "  (* first, simplify; then ;; nothing *)\n"
              "  MESON_TAC[ARITH_RULE `a, b = a, b`]);;\n")
    got = scan_phrase(phrase)
    assert got == Theorem(
        name="ADD_PAIR", form="prove", query="`!x y. FST (x, y) + 0 = x`",
        answer="REWRITE_TAC[ADD_CLAUSES; FST] THEN\n  (* first, simplify; then ;; nothing *)\n"
               "  MESON_TAC[ARITH_RULE `a, b = a, b`]")


def test_strings_char_literals_and_nested_brackets_split_nothing():
    phrase = ('let T1 = prove(`p ==> p`, DISCH_TAC THEN\n'
              '  (fun g -> (remark "a, b);; (c"; ACCEPT_TAC (ASSUME `p:bool`) g)) THEN\n'
              "  MAP_EVERY (fun c -> if c = ',' then ALL_TAC else ALL_TAC) [','; ')']);;\n")
    got = scan_phrase(phrase)
    assert isinstance(got, Theorem) and got.query == "`p ==> p`"
    assert got.answer.startswith("DISCH_TAC THEN") and got.answer.endswith("[','; ')']")
    # The phrase splitter agrees: this is one phrase.
    assert split_phrases(phrase) == [phrase]


def test_time_prove_a_typed_binding_and_a_parenthesised_goal():
    got = scan_phrase("let T2 = time prove\n ((`1 + 1 = 2`), ARITH_TAC);;\n")
    assert got == Theorem("T2", "time prove", "`1 + 1 = 2`", "ARITH_TAC")
    got = scan_phrase("let T2' : thm = prove(`T`, REWRITE_TAC[]);;\n")
    assert got == Theorem("T2'", "prove", "`T`", "REWRITE_TAC[]")


def test_prove_by_refinement_becomes_one_tactic_that_refines_goal_by_goal():
    got = scan_phrase("let T3 = prove_by_refinement(\n  `p /\\ q ==> q /\\ p`,\n"
                      "  [STRIP_TAC; CONJ_TAC;\n   ASM_REWRITE_TAC[]; ASM_REWRITE_TAC[]]);;\n")
    assert isinstance(got, Theorem) and got.form == "prove_by_refinement"
    assert got.answer == ("(fun g -> rev_itlist by [STRIP_TAC; CONJ_TAC;\n"
                          "   ASM_REWRITE_TAC[]; ASM_REWRITE_TAC[]] (mk_goalstate g))")


@pytest.mark.parametrize("phrase, reason", [
    ("let A = prove(`p ==> p`, DISCH_TAC) and B = prove(`q ==> q`, DISCH_TAC);;\n",
     "several theorems"),
    ("let th = prove(`p ==> p`, DISCH_TAC) in add_to_database th;;\n", "local lemma"),
    ("let CONV = let th = prove(`p ==> p`, DISCH_TAC) in REWRITE_CONV[th];;\n", "larger expression"),
    ("let LEMMA = REWRITE_RULE[] (prove(`p ==> p`, DISCH_TAC));;\n", "larger expression"),
    ("let T4 = prove(mk_imp(`p:bool`, `p:bool`), DISCH_TAC);;\n", "evaluated at runtime"),
    ("let f t = prove(t, ARITH_TAC);;\n", "inside a function"),
    ("let A, B = (CONJ_PAIR o prove)(`p /\\ q`, CHEAT_TAC);;\n", "several names"),
    ("let [A; B] = CONJUNCTS(prove(`p /\\ q`, CHEAT_TAC));;\n", "pattern"),
    ("let rec g n = prove(`p ==> p`, DISCH_TAC);;\n", "recursive"),
    ("prove(`p ==> p`, DISCH_TAC);;\n", "not bound to a name"),
    ("let _ = prove(`p ==> p`, DISCH_TAC);;\n", "not bound to a name"),
    ("let T5 = prove(`p ==> p`);;\n", "not a (goal, tactic) pair"),
    ("let T6 = prove_by_refinement(`p ==> p`, tacs);;\n", "not a literal list"),
    ("let T7 = prove(`p ==> p`, DISCH_TAC", "cannot be read"),
])
def test_other_proofs_are_skipped_with_a_reason(phrase, reason):
    got = scan_phrase(phrase)
    assert isinstance(got, Skip) and reason in got.reason, got


def test_phrases_that_prove_nothing_are_not_theorems():
    for phrase in ('needs "Library/products.ml";;\n', "let x = `prove (a, b)`;;\n",
                   '(* let X = prove(`p`, T);; *)\n', 'let s = "prove(";;\n'):
        assert scan_phrase(phrase) is None


# -- a file: ids, repeats, duplicates, setups --------------------------------

TOY = """\
(* toy development *)
let ID_A = prove(`!p. p ==> p`, GEN_TAC THEN DISCH_TAC THEN ASM_REWRITE_TAC[]);;

let THM = prove(`1 + 1 = 2`, ARITH_TAC);;
let THM = prove(`2 + 2 = 4`, ARITH_TAC);;
let THM = prove(`3 + 3 = 6`, ARITH_TAC);;

(* the same statement again, spaced differently *)
let ID_B = prove(`!p.  p ==>
   p`, MESON_TAC[]);;
let f t = prove(t, ARITH_TAC);;
"""


def test_repeated_names_get_occurrence_indices_and_duplicate_statements_are_kept_once(tmp_path):
    src = tmp_path / "toy.ml"
    src.write_text(TOY)
    r = extract(ExtractConfig(files=(src,), out=tmp_path / "c", prefix="demo", category="generic"))
    assert [p.problem_id for p in r.problems] == [
        "demo.toy.ID_A", "demo.toy.THM.0", "demo.toy.THM.1", "demo.toy.THM.2"]
    assert [(s.line, s.theorem, s.reason) for s in r.skipped] == [
        (9, "ID_B", "duplicate statement of demo.toy.ID_A"),
        (11, "f", "proves inside a function, not a top-level theorem")]
    # Each setup is the file's phrases before the theorem, exactly as written.
    phrases = split_phrases(TOY)
    assert (tmp_path / "c/demo.toy.THM.1/setup.ml").read_text() == "".join(phrases[:2])
    assert (tmp_path / "c/demo.toy.THM.1/query.txt").read_text() == "`2 + 2 = 4`"
    assert (tmp_path / "c/demo.toy.THM.1/answer.txt").read_text() == "ARITH_TAC"
    assert (tmp_path / "c/demo.toy.ID_A/setup.ml").read_text() == ""
    manifest = json.loads((tmp_path / "c" / MANIFEST).read_text())
    assert manifest["counts"] == {"theorems": 6, "problems": 4, "skipped": 2, "skipped_by_reason": {
        "duplicate statement": 1,
        "proves inside a function, not a top-level theorem": 1}}


def test_binomial_cuts_into_24_problems_whose_setups_are_the_file_before_them(tmp_path):
    src = HOL_LIBRARY / "binomial.ml"
    r = extract(ExtractConfig(files=(src,), out=tmp_path / "c", hol_dir=HOL_LIBRARY.parent))
    assert len(r.problems) == 24 and r.problems[0].problem_id == "Library.binomial.BINOM_0"
    # The one phrase left out proves four lemmas inside the definition of a conversion.
    assert [(s.theorem, s.line) for s in r.skipped] == [("NUM_BINOM_CONV", 323)]
    text = src.read_text()
    loaded = {p.problem_id: p for p in load_corpus(tmp_path / "c")}
    assert set(loaded) == {p.problem_id for p in r.problems}
    for p in r.problems:
        setup = loaded[p.problem_id].setup_path.read_text()
        assert text.startswith(setup)
        # The theorem's own phrase follows its setup, with its goal and proof in it.
        rest = text[len(setup):]
        assert f"let {p.theorem} = prove" in rest[:rest.index(";;")]
        assert p.query.startswith("`") and p.query.endswith("`") and p.query in rest
        assert (tmp_path / "c" / p.problem_id / "category.txt").read_text() == "generic"
    src_entry = json.loads((tmp_path / "c" / MANIFEST).read_text())["sources"][0]
    assert src_entry["path"] == str(src) and len(src_entry["sha256"]) == 64
    assert r.context_root is None


def test_needs_of_hol_light_libraries_need_no_context_root(tmp_path):
    r = extract(ExtractConfig(files=(HOL_LIBRARY / "agm.ml",), out=tmp_path / "c",
                              hol_dir=HOL_LIBRARY.parent))
    assert len(r.problems) == 7
    first = (tmp_path / "c" / r.problems[0].problem_id / "setup.ml").read_text()
    assert 'needs "Library/products.ml";;' in first
    assert r.context_root is None and not r.unresolved


def test_a_development_s_own_needs_name_its_root(tmp_path):
    dev = tmp_path / "dev" / "sub"
    dev.mkdir(parents=True)
    (dev / "lemmas.ml").write_text("let L = prove(`T`, REWRITE_TAC[]);;\n")
    (dev / "main.ml").write_text('needs "dev/sub/lemmas.ml";;\nneeds "Library/agm.ml";;\n'
                                 'loadt "nowhere/x.ml";;\nlet M = prove(`T /\\ T`, REWRITE_TAC[]);;\n')
    r = extract(ExtractConfig(files=(dev / "main.ml",), out=tmp_path / "c",
                              hol_dir=HOL_LIBRARY.parent))
    assert r.context_root == tmp_path
    assert r.unresolved == (f'{dev / "main.ml"}: loadt "nowhere/x.ml"',)
    manifest = json.loads((tmp_path / "c" / MANIFEST).read_text())
    assert manifest["context_root"] == str(tmp_path)
    assert f"--context-root {tmp_path}" in manifest["context_root_note"]


# -- the command: bad input writes nothing -------------------------------------


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "empty.ml").write_text("let x = 1;;\n(* prove(`p`, T) *)\n")
    (tmp_path / "busy").mkdir()
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "x.ml").write_text("let T = prove(`T`, REWRITE_TAC[]);;\n")
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    before = _listing(tmp_path)
    cases = [
        ([str(tmp_path / "missing.ml")], "does not exist"),
        ([str(tmp_path / "empty.ml")], "proves no top-level theorem"),
        ([str(HOL_LIBRARY / "agm.ml"), "--prefix", "bad prefix"], "--prefix"),
        ([str(tmp_path / "a/x.ml"), str(tmp_path / "b/x.ml"), "--prefix", "P"], "ids would start P.x."),
    ]
    for argv, words in cases:
        assert main(["extract", *argv, "--out", str(tmp_path / "new")]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, err
    assert main(["extract", str(HOL_LIBRARY / "agm.ml"), "--out", str(tmp_path / "busy")]) == 2
    assert "not a corpus made by proofbatch extract" in capsys.readouterr().err
    assert _listing(tmp_path) == before


def test_an_earlier_extract_of_the_same_files_is_replaced_and_of_others_refused(tmp_path, capsys):
    out = tmp_path / "c"
    agm, binomial = str(HOL_LIBRARY / "agm.ml"), str(HOL_LIBRARY / "binomial.ml")
    assert main(["extract", agm, "--out", str(out), "--category", "old"]) == 0
    assert "7 problems" in capsys.readouterr().err
    assert main(["extract", agm, "--out", str(out), "--category", "new"]) == 0
    assert {(d / "category.txt").read_text() for d in out.iterdir() if d.is_dir()} == {"new"}
    assert main(["extract", binomial, "--out", str(out)]) == 2
    assert "extract of other files" in capsys.readouterr().err
    # Nothing left beside it: the temporary build and the replaced corpus are gone.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


# -- the real HOL Light: every ground truth is OK ---------------------------------

@pytest.mark.hol
def test_every_extracted_ground_truth_checks_ok(extracted_library, extracted_sweep, hol_session):
    summary, rows, wall = extracted_sweep
    assert set(rows) == {p.problem_id for p in extracted_library.problems}
    bad = {pid: (r["verdict"], r["reason"]) for pid, r in rows.items() if r["verdict"] != "OK"}
    assert not bad
    # What each problem's context cost to load: its images from the base down.
    chains = {pid: [n for n in hol_session.image_chain(pid) if n.depth > 0] for pid in rows}
    loads = {n.key: hol_session.image_build_secs[n.key] for c in chains.values() for n in c}
    per_file: dict[str, int] = {}
    for p in extracted_library.problems:
        per_file[Path(p.source).name] = per_file.get(Path(p.source).name, 0) + 1
    print(f"\nextracted {per_file}; bytecode sweep {wall:.1f} s wall; {len(loads)} context images, "
          f"{sum(loads.values()):.1f} s in all, largest {max(loads.values()):.1f} s; proofs "
          f"{sum(r['prove_secs'] or 0 for r in rows.values()):.1f} s")
    # agm's problems share one image holding Library/products.ml, loaded once.
    agm = [c for pid, c in chains.items() if ".agm." in pid]
    assert len({c[0].key for c in agm}) == 1 and "Library/products.ml" in agm[0][0].segment


REFINE = """\
(* A development that proves by refinement, as HOL Light's Jordan/ does. *)
let prove_by_refinement (t, tacs) =
  let _, sgs, just = rev_itlist by tacs (mk_goalstate ([], t)) in
  if sgs = [] then just null_inst [] else failwith "prove_by_refinement: unsolved";;

let SWAP_AND = prove_by_refinement(
  `!p q. p /\\ q ==> q /\\ p`,
  [REPEAT GEN_TAC;
   STRIP_TAC;
   CONJ_TAC;
   (* the first conjunct only: refinement works on the first open goal *)
   FIRST_ASSUM ACCEPT_TAC;
   FIRST_ASSUM ACCEPT_TAC]);;

let TWICE = time prove
 (`2 * 2 = 4`,
  ARITH_TAC);;
"""


@pytest.mark.hol
def test_refinement_and_timed_proofs_check_ok(hol_session, tmp_path):
    src = tmp_path / "refine.ml"
    src.write_text(REFINE)
    r = extract(ExtractConfig(files=(src,), out=tmp_path / "c", prefix="dev"))
    assert [p.problem_id for p in r.problems] == ["dev.refine.SWAP_AND", "dev.refine.TWICE"]
    summary = sweep_with(hol_session, extracted_config(tmp_path / "c", tmp_path / "out",
                                                       context_root=DEMO))
    rows = {row["problem_id"]: row for row in summary.table.to_pylist()}
    assert {pid: r["verdict"] for pid, r in rows.items()} == {
        "dev.refine.SWAP_AND": "OK", "dev.refine.TWICE": "OK"}, rows


@pytest.mark.hol
def test_every_extracted_ground_truth_checks_ok_natively(native_build, extracted_library, tmp_path):
    """The same corpus through `--mode native`: agm's `needs "Library/products.ml"`
    compiles as a library module, and no check falls back to bytecode."""
    import time

    from cluster.local import LocalExecutor
    from runner.sweep import prepare, run_sweep

    prepared = prepare(extracted_config(extracted_library.out, tmp_path / "out", mode="native"))
    session = prepared.backend.start(tmp_path / "session")
    try:
        started = time.monotonic()
        summary = run_sweep(prepared, LocalExecutor(workers=2, session=session))
        wall = time.monotonic() - started
        built = [b.key for b in session.image_builds]
    finally:
        session.close()
    # Each file is a chain of contexts (binomial's is 24 deep) and the
    # session keeps 8 images: its problems go shallowest first, so no image
    # is evicted while a problem needs it and built again.
    assert len(built) == len(set(built)), sorted(k for k in built if built.count(k) > 1)
    rows = summary.table.to_pylist()
    assert len(rows) == len(extracted_library.problems)
    assert {(r["verdict"], r["mode"]) for r in rows} == {("OK", "native")}, \
        [(r["problem_id"], r["verdict"], r["mode"], r["reason"]) for r in rows
         if (r["verdict"], r["mode"]) != ("OK", "native")]
    print(f"\nnative sweep of {len(rows)} extracted problems: {wall:.1f} s wall; proofs "
          f"{sum(r['prove_secs'] or 0 for r in rows):.1f} s")
