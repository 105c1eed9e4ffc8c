"""`proofbatch extract`: a problem's id depends on its own file only.

Issue 23, finding 7: a statement already proved in an earlier file of the
same run was dropped, so `bignum_ksqr_32_64.lemma1` turned into
`edwards25519_decode.lemma1` depending on which files were extracted
together. These tests read .ml text only: no HOL Light needed.
"""

from __future__ import annotations

import json
from itertools import permutations

from runner.provers.hol_light.extract.extract import extract
from runner.provers.hol_light.extract.extract_model import MANIFEST, ExtractConfig

EDWARDS = """\
let lemma0 = prove(`1 + 1 = 2`, ARITH_TAC);;
let lemma1 = prove(`!x. x + 0 = x`, ARITH_TAC);;
let lemma1 = prove(`!x. 0 + x = x`, ARITH_TAC);;
"""

KSQR = """\
let lemma1 = prove(`!x.  x + 0 =
   x`, REWRITE_TAC[ADD_CLAUSES]);;
let lemma2 = prove(`2 + 2 = 4`, ARITH_TAC);;
(* the same statement again in this file *)
let lemma3 = prove(`2 + 2 =  4`, NUM_REDUCE_TAC);;
"""

OTHER = "let lemma9 = prove(`3 + 3 = 6`, ARITH_TAC);;\n"


def _sources(tmp_path):
    d = tmp_path / "arm"
    d.mkdir()
    files = {"edwards25519_decode": EDWARDS, "bignum_ksqr_32_64": KSQR, "other": OTHER}
    for stem, text in files.items():
        (d / f"{stem}.ml").write_text(text)
    return {stem: d / f"{stem}.ml" for stem in files}


def _by_file(result):
    out: dict[str, list[tuple[str, str]]] = {}
    for p in result.problems:
        out.setdefault(p.source, []).append((p.problem_id, p.query))
    return out


def test_a_file_gives_the_same_problems_whichever_files_are_extracted_with_it(tmp_path):
    src = _sources(tmp_path)
    alone = {}
    for stem, path in src.items():
        r = extract(ExtractConfig(files=(path,), out=tmp_path / f"alone-{stem}"))
        alone[str(path)] = [(p.problem_id, p.query) for p in r.problems]
    assert [i for i, _ in alone[str(src["bignum_ksqr_32_64"])]] == [
        "arm.bignum_ksqr_32_64.lemma1", "arm.bignum_ksqr_32_64.lemma2"]
    for k, order in enumerate(permutations(src.values())):
        r = extract(ExtractConfig(files=order, out=tmp_path / f"together-{k}"))
        assert _by_file(r) == alone, order
        # Each corpus folder is named by those ids.
        assert {d.name for d in (tmp_path / f"together-{k}").iterdir() if d.is_dir()} == {
            pid for ids in alone.values() for pid, _ in ids}


def test_a_statement_two_files_prove_is_kept_in_both_and_the_manifest_says_so(tmp_path):
    src = _sources(tmp_path)
    out = tmp_path / "c"
    r = extract(ExtractConfig(files=(src["edwards25519_decode"], src["bignum_ksqr_32_64"]),
                              out=out, prefix="arm"))
    ids = [p.problem_id for p in r.problems]
    assert "arm.edwards25519_decode.lemma1.0" in ids and "arm.bignum_ksqr_32_64.lemma1" in ids
    # Only the repeat inside one file is skipped, naming the id in that file.
    assert [(s.theorem, s.reason) for s in r.skipped] == [
        ("lemma3", "duplicate statement of arm.bignum_ksqr_32_64.lemma2")]
    manifest = json.loads((out / MANIFEST).read_text())
    entry = {p["problem_id"]: p for p in manifest["problems"]}
    assert entry["arm.bignum_ksqr_32_64.lemma1"]["same_statement_as"] == \
        "arm.edwards25519_decode.lemma1.0"
    assert "same_statement_as" not in entry["arm.edwards25519_decode.lemma1.0"]
    assert manifest["counts"]["problems"] == 5 and manifest["counts"]["skipped"] == 1
