"""`proofbatch extract` on a whole development tree in one run (issue 25).

The story: many files at once, each refused file listed with its reason
and the rest extracted (exit 0; 2 only with --strict); every load checked
recursively, a missing one named with the chain of loads reaching it;
files meant to be loaded by another (s2n-bignum's arm.ml) flagged as
library files; with the bench's map, problems kept under the bench's ids,
a duplicate statement kept once under the map's id. The fixtures are small
.ml trees: text only, no HOL Light boot. The last test runs the real
s2n-bignum tree when it is here.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from runner.cli import main
from runner.provers.hol_light.extract.extract import extract
from runner.provers.hol_light.extract.extract_model import MANIFEST, ExtractConfig
from runner.provers.hol_light.extract.extract_prefix import CHOSEN


def _tree(root: Path, files: dict[str, str]) -> dict[str, Path]:
    out = {}
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        out[rel] = p
    return out


# -- many files: the refused ones are listed, the rest extracted -------------------

def test_many_files_extract_every_file_they_can_and_list_each_refused_one(tmp_path, capsys):
    t = _tree(tmp_path / "dev", {
        "proofs/base.ml": "let x = 1;;\n",                       # no theorem
        "proofs/a.ml": "let A = prove(`1 + 1 = 2`, ARITH_TAC);;\n",
        "proofs/helpers.ml": "let f t = prove(t, ARITH_TAC);;\n",  # no extractable theorem
        "proofs/utils/b.ml": "let B = prove(`2 + 2 = 4`, ARITH_TAC);;\n",
    })
    out = tmp_path / "c"
    # A folder is taken too: its *.ml, recursively.
    assert main(["extract", str(tmp_path / "dev" / "proofs"), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "refused 2 of 4 files" in err
    assert f"{t['proofs/base.ml']}: proves no top-level theorem" in err
    assert f"{t['proofs/helpers.ml']}: none of its 1 proofs can be extracted" in err
    manifest = json.loads((out / MANIFEST).read_text())
    assert {r["source"]: r["reason"][:20] for r in manifest["refused"]} == {
        str(t["proofs/base.ml"]): "proves no top-level ", str(t["proofs/helpers.ml"]): "none of its 1 proofs"}
    assert sorted(p["problem_id"] for p in manifest["problems"]) == ["proofs.a.A", "utils.b.B"]
    # The same run again replaces it (the refused files are part of its sources).
    assert main(["extract", str(tmp_path / "dev" / "proofs"), "--out", str(out)]) == 0
    capsys.readouterr()
    # --strict: the same listing, exit 2, nothing written.
    strict = tmp_path / "strict"
    assert main(["extract", *map(str, t.values()), "--out", str(strict), "--strict"]) == 2
    err = capsys.readouterr().err
    assert f"{t['proofs/base.ml']}: proves no top-level theorem" in err and "--strict" in err
    assert not strict.exists()


# -- every load, recursively, before any prover ------------------------------------

def test_a_missing_load_deep_down_is_named_with_the_chain_that_reaches_it(tmp_path):
    hol = tmp_path / "hol"
    _tree(hol, {"Library/words.ml": "let W = 1;;\n", "update_database.ml": "(* dropped *)\n",
                "hol_only.ml": "let H = 1;;\n"})
    root = tmp_path / "s2n"
    t = _tree(root, {
        "arm/proofs/base.ml": ('loads "update_database.ml";;\nneeds "Library/words.ml";;\n'
                               'loadt "common/misc.ml";;\nloads "hol_only.ml";;\n'),
        "common/misc.ml": '(* header *)\n\nloadt "Library/records.ml";;\nloads "common/misc2.ml";;\n',
        "common/misc2.ml": "let M2 = 1;;\n",
        "arm/proofs/p.ml": 'needs "arm/proofs/base.ml";;\nlet P = prove(`T`, REWRITE_TAC[]);;\n',
    })
    r = extract(ExtractConfig(files=(t["arm/proofs/p.ml"],), out=tmp_path / "c", hol_dir=hol,
                              context_root=root))
    p = t["arm/proofs/p.ml"]
    # records.ml is nowhere; common/misc2.ml exists under the root, but
    # `loads` looks in HOL Light's directory only.
    assert r.unresolved == (
        f'{p}: needs "arm/proofs/base.ml" -> arm/proofs/base.ml: loadt "common/misc.ml"'
        ' -> common/misc.ml: loadt "Library/records.ml"',
        f'{p}: needs "arm/proofs/base.ml" -> arm/proofs/base.ml: loadt "common/misc.ml"'
        ' -> common/misc.ml: loads "common/misc2.ml"')
    manifest = json.loads((tmp_path / "c" / MANIFEST).read_text())
    first = manifest["missing_loads"][0]
    assert first["name"] == "Library/records.ml" and first["loaded_by"] == "common/misc.ml"
    assert first["chain"] == ['arm/proofs/p.ml:1 needs "arm/proofs/base.ml"',
                              'arm/proofs/base.ml:3 loadt "common/misc.ml"',
                              'common/misc.ml:3 loadt "Library/records.ml"']
    assert first["searched"] == [str(root), str(hol)]
    assert manifest["missing_loads"][1]["searched"] == [str(hol)]
    # update_database.ml is dropped, as the bench's pipeline and the runs drop it.
    assert manifest["dropped_loads"] == ["update_database.ml"]
    assert "inline_load.ml" in manifest["dropped_loads_note"]
    # With --strict nothing is written.
    s = extract(ExtractConfig(files=(p,), out=tmp_path / "s", hol_dir=hol, context_root=root,
                              strict=True))
    assert not s.published and not (tmp_path / "s").exists()


# -- library files -----------------------------------------------------------------

def test_a_file_meant_to_be_loaded_by_base_is_flagged_as_a_library_file(tmp_path, capsys):
    root = tmp_path / "s2n"
    t = _tree(root, {
        "common/first.ml": "let F = 1;;\n",
        "arm/proofs/base.ml": 'loadt "common/first.ml";;\nloadt "arm/proofs/arm.ml";;\n',
        "arm/proofs/arm.ml": "let ARM_LEMMA = prove(`T`, REWRITE_TAC[]);;\n",
        "arm/proofs/p.ml": 'needs "arm/proofs/base.ml";;\nlet P = prove(`T /\\ T`, REWRITE_TAC[]);;\n',
        # A proof file loaded by another proof file is no library file.
        "arm/proofs/q.ml": ('needs "arm/proofs/base.ml";;\nneeds "arm/proofs/p.ml";;\n'
                            "let Q = prove(`F ==> F`, REWRITE_TAC[]);;\n"),
    })
    out = tmp_path / "c"
    files = [t[f"arm/proofs/{n}.ml"] for n in ("arm", "p", "q")]
    assert main(["extract", *map(str, files), "--out", str(out), "--context-root", str(root)]) == 0
    err = capsys.readouterr().err
    assert f"library file: {t['arm/proofs/arm.ml']}: loaded by arm/proofs/base.ml after " \
           "common/first.ml" in err
    assert "its problems' contexts start with arm/proofs/base.ml up to line 2" in err
    assert err.count("library file:") == 1
    manifest = json.loads((out / MANIFEST).read_text())
    assert [f["path"] for f in manifest["library_files"]] == [str(t["arm/proofs/arm.ml"])]
    assert manifest["library_files"][0]["context_prefix"] == [{
        "loader": "arm/proofs/base.ml", "up_to_line": 2, "loads": "arm/proofs/arm.ml",
        "other_loaders": [], "chosen": CHOSEN}]
    flagged = {p["problem_id"]: p.get("library_file", False) for p in manifest["problems"]}
    # The ids' prefix is the file's first folder under the root, as the bench's.
    assert flagged == {"arm.arm.ARM_LEMMA": True, "arm.p.P": False, "arm.q.Q": False}
    # The library file's setup is base.ml up to its load of arm.ml, then arm.ml's
    # own phrases; the proof files' setups are their own text.
    setup = (out / "arm.arm.ARM_LEMMA" / "setup.ml").read_text()
    assert 'loadt "common/first.ml";;' in setup and "arm/proofs/arm.ml\";;" not in setup
    assert (out / "arm.p.P" / "setup.ml").read_text() == 'needs "arm/proofs/base.ml";;\n'
    # Given alone, arm.ml is still told: its loader is found under the root.
    alone = tmp_path / "alone"
    assert main(["extract", str(t["arm/proofs/arm.ml"]), "--out", str(alone),
                 "--context-root", str(root)]) == 0
    assert "contexts start with arm/proofs/base.ml up to line 2" in capsys.readouterr().err
    assert (alone / "arm.arm.ARM_LEMMA" / "setup.ml").read_text() == setup


def test_a_library_file_gets_the_prefix_of_the_loader_that_loads_it_soonest(tmp_path, capsys):
    """Several loaders (s2n-bignum's neon_helper.ml has 18 proof files): the
    one with the fewest phrases before its load is chosen, the others named;
    a library file loaded by a library file gets both loaders' prefixes."""
    root = tmp_path / "s2n"
    t = _tree(root, {
        "common/first.ml": "let F = 1;;\n",
        "arm/proofs/base.ml": 'loadt "common/first.ml";;\nlet B = 2;;\nloadt "arm/proofs/outer.ml";;\n',
        "common/second.ml": "let S = 4;;\n",
        "arm/proofs/outer.ml": 'needs "common/second.ml";;\nlet O = 3;;\nloadt "arm/proofs/inner.ml";;\n'
                               "let OUTER = prove(`O = 3`, REWRITE_TAC[O]);;\n",
        "arm/proofs/inner.ml": "let INNER = prove(`B = 2`, REWRITE_TAC[B]);;\n",
        "arm/proofs/helper.ml": "let HELPER = prove(`F = 1`, REWRITE_TAC[F]);;\n",
        # Both load helper.ml after base.ml: a.ml after a theorem of its own.
        "arm/proofs/a.ml": 'needs "arm/proofs/base.ml";;\nlet A = prove(`1 = 1`, REFL_TAC);;\n'
                           'needs "arm/proofs/helper.ml";;\n',
        "arm/proofs/z.ml": 'needs "arm/proofs/base.ml";;\nneeds "arm/proofs/helper.ml";;\n',
    })
    out = tmp_path / "c"
    given = [t[f"arm/proofs/{n}.ml"] for n in ("inner", "helper")]
    assert main(["extract", *map(str, given), "--out", str(out), "--context-root", str(root)]) == 0
    err = capsys.readouterr().err
    assert (f"library file: {t['arm/proofs/helper.ml']}: loaded by arm/proofs/z.ml after "
            "arm/proofs/base.ml, which it does not load itself: its problems' contexts start with "
            "arm/proofs/z.ml up to line 2, where it is loaded") in err
    assert ("its problems' contexts start with arm/proofs/base.ml up to line 3 then "
            "arm/proofs/outer.ml up to line 3, where it is loaded") in err
    manifest = json.loads((out / MANIFEST).read_text())
    prefix = {Path(f["path"]).name: f["context_prefix"] for f in manifest["library_files"]}
    assert [(s["loader"], s["up_to_line"], s["other_loaders"]) for s in prefix["helper.ml"]] == [
        ("arm/proofs/z.ml", 2, ["arm/proofs/a.ml"])]
    assert [(s["loader"], s["loads"]) for s in prefix["inner.ml"]] == [
        ("arm/proofs/base.ml", "arm/proofs/outer.ml"), ("arm/proofs/outer.ml", "arm/proofs/inner.ml")]
    setup = (out / "arm.inner.INNER" / "setup.ml").read_text()
    at = [setup.index(x) for x in ('loadt "common/first.ml"', "let B = 2", 'needs "common/second.ml"',
                                   "let O = 3")]
    assert at == sorted(at) and "OUTER" not in setup and "inner.ml\";;" not in setup
    assert 'needs "arm/proofs/base.ml";;' in (out / "arm.helper.HELPER" / "setup.ml").read_text()


# -- the bench's ids ---------------------------------------------------------------

def test_ids_from_the_map_keep_a_duplicate_statement_under_the_map_s_id(tmp_path, capsys):
    root = tmp_path / "s2n"
    t = _tree(root, {
        "common/misc.ml": "let COMMON_LEMMA = prove(`0 + 0 = 0`, ARITH_TAC);;\n",
        "arm/proofs/base.ml": 'loadt "common/misc.ml";;\n',
        # The bench met bignum_x's lemma first: the map keeps it there.
        "arm/proofs/bignum_x.ml": ('needs "arm/proofs/base.ml";;\n'
                                   "let lemma = prove(`1 + 1 = 2`, ARITH_TAC);;\n"),
        # Here the same statement, proved first under this name (lemma.0),
        # then lemma (.1): the bench skipped the repeat before numbering.
        "arm/proofs/bignum_x_alt.ml": ('needs "arm/proofs/base.ml";;\n'
                                       "let lemma = prove(`1 + 1 =  2`, ARITH_TAC);;\n"
                                       "let lemma = prove(`2 + 2 = 4`, ARITH_TAC);;\n"
                                       "let again = prove(`0 + 0 = 0`, ARITH_TAC);;\n"
                                       "let X_SUBROUTINE_CORRECT = prove(`3 = 3`, REFL_TAC);;\n"),
        "arm/proofs/utils/spec.ml": "let SPEC_THM = prove(`5 = 5`, REFL_TAC);;\n",
        "arm/proofs/utils/other.ml": "let OTHER = prove(`6 = 6`, REFL_TAC);;\n",
        "arm/proofs/primed.ml": "let LEMMA' = prove(`7 = 7`, REFL_TAC);;\n",
    })
    ids = ["arm.bignum_x.lemma", "arm.bignum_x_alt.lemma", "common.misc.COMMON_LEMMA",
           "arm.utils_less.NONE", "arm.spec.SPEC_THM", "arm.other.OTHER", "arm.primed.LEMMA'"]
    (tmp_path / "map.json").write_text(json.dumps([{"problem_id": i, "timeout_sec": 120}
                                                   for i in ids]))
    out = tmp_path / "c"
    proofs = root / "arm" / "proofs"
    argv = ["extract", *(str(p) for p in sorted(proofs.glob("*.ml"))), str(t["arm/proofs/utils/spec.ml"]),
            "--ids-from", str(tmp_path / "map.json"), "--out", str(out), "--context-root", str(root)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    manifest = json.loads((out / MANIFEST).read_text())
    problems = {p["problem_id"]: p for p in manifest["problems"]}
    assert sorted(problems) == ["arm.bignum_x.lemma", "arm.bignum_x_alt.X_SUBROUTINE_CORRECT",
                                "arm.bignum_x_alt.lemma", "arm.primed.LEMMA_", "arm.spec.SPEC_THM"]
    # bignum_x_alt's lemma is the bench's: its second statement.
    assert (out / "arm.bignum_x_alt.lemma" / "query.txt").read_text() == "`2 + 2 = 4`"
    skipped = {(Path(s["source"]).name, s["theorem"]): s["reason"] for s in manifest["skipped"]}
    assert skipped[("bignum_x_alt.ml", "lemma")].startswith(
        "duplicate statement of arm.bignum_x.lemma, the id the bench's map keeps it under")
    assert skipped[("bignum_x_alt.ml", "again")].startswith(
        "duplicate statement of common.misc.COMMON_LEMMA")
    assert problems["arm.primed.LEMMA_"]["bench_id"] == "arm.primed.LEMMA'"
    report = manifest["ids_from"]
    assert (report["wanted"], report["matched"]) == (6, 4)
    assert report["misses"] == {"arm.other.OTHER": f"its file {t['arm/proofs/utils/other.ml']} "
                                                    "was not given",
                                "arm.utils_less.NONE": "no file utils_less.ml was given or found "
                                                       "under the context root"}
    assert report["not_in_map"] == {"arm.bignum_x_alt.X_SUBROUTINE_CORRECT":
                                    "the bench drops SUBROUTINE_CORRECT theorems (they just use "
                                    "the core's _CORRECT)"}
    assert "ids: 4 of the map's 6 arm ids matched" in err
    assert f"the map's ids need 1 files of {proofs / 'utils'}/ that were not given" in err


def test_each_binding_of_a_let_and_that_proves_a_goal_is_a_problem(tmp_path):
    src = tmp_path / "arm.ml"
    src.write_text("let helper = 1;;\n"
                   "let lemma_a = MESON[] `p ==> p` and\n"
                   "  lemma_b =\n    prove(`q ==> q`,\n    DISCH_TAC THEN ASM_REWRITE_TAC[]) and\n"
                   "  f x = prove(x, ARITH_TAC);;\n")
    r = extract(ExtractConfig(files=(src,), out=tmp_path / "c", prefix="arm"))
    assert [(p.problem_id, p.line, p.query, p.answer) for p in r.problems] == [
        ("arm.arm.lemma_b", 3, "`q ==> q`", "DISCH_TAC THEN ASM_REWRITE_TAC[]")]
    assert r.problems[0].setup == "let helper = 1;;\n"
    assert [(s.theorem, s.line) for s in r.skipped] == [("f", 6)]


# -- the real tree (opt-in: where s2n-bignum is) -------------------------------------

S2N = Path(os.environ.get("PROOFBATCH_BENCH_S2N_BIGNUM", "/work/bench/s2n-bignum"))
BENCH_MAP = S2N.parent / "bench" / "timeout-map.json"
BENCH_HOL = S2N.parent / "hol-light"


@pytest.mark.skipif(not (S2N / "arm" / "proofs" / "base.ml").is_file() or not BENCH_MAP.is_file(),
                    reason=f"no s2n-bignum tree at {S2N} with the bench's map at {BENCH_MAP} "
                           "(set PROOFBATCH_BENCH_S2N_BIGNUM to a checkout beside bench/)")
def test_the_real_arm_tree_extracts_in_one_run_under_the_bench_s_ids(tmp_path, capsys):
    proofs = S2N / "arm" / "proofs"
    files = [str(p) for p in sorted(proofs.glob("*.ml"))]
    opts = ["--ids-from", str(BENCH_MAP), "--context-root", str(S2N)]
    if (BENCH_HOL / "hol.ml").is_file():
        opts += ["--hol-light", str(BENCH_HOL)]
    started = time.monotonic()
    # The glob misses arm/proofs/utils/: extract says so (--strict: it
    # writes nothing, refusing base.ml and the like).
    assert main(["extract", *files, *opts, "--strict", "--out", str(tmp_path / "strict")]) == 2
    err = capsys.readouterr().err
    assert f"of {proofs / 'utils'}/ that were not given" in err and "nothing written" in err
    utils = [str(p) for p in sorted((proofs / "utils").glob("*.ml"))]
    assert main(["extract", *files, *utils, *opts, "--out", str(tmp_path / "c")]) == 0
    wall = time.monotonic() - started
    err = capsys.readouterr().err
    manifest = json.loads((tmp_path / "c" / MANIFEST).read_text())
    report = manifest["ids_from"]
    wanted = report["wanted"]
    print(f"\nreal tree: {report['matched']} of {wanted} arm ids matched, "
          f"{len(manifest['refused'])} files refused, {len(manifest['missing_loads'])} missing loads, "
          f"{len(manifest['problems'])} problems; two runs {wall:.0f} s")
    assert report["matched"] == wanted and not report["misses"], report["misses"]
    refused = {Path(r["source"]).name for r in manifest["refused"]}
    assert {"base.ml", "utils.ml", "sha256.ml"} <= refused
    assert {"arm.ml", "decode.ml", "instruction.ml", "neon_helper.ml"} <= {
        Path(f["path"]).name for f in manifest["library_files"]}
    assert manifest["dropped_loads"] == ["update_database.ml"]
    assert "ids: " in err and "refused " in err
