"""A library file's problems start where the tree's loader loads it (issue 32).

s2n-bignum's ``instruction.ml`` is loaded by ``base.ml`` after
``Library/records.ml``; cut alone, its theorems' contexts stopped at
``Unbound value define_auto_record_type`` in the toplevel and natively. The
story here, on a small tree of our own under the sessions' context root: a
``base.ml`` loads a helper, defines a tactic of its own, then loads a
library file whose theorems use both; extract, given the library file alone,
finds base.ml under the root and puts its phrases before that load at the
start of each setup, and the ground truths check OK in the real HOL Light.
Before, each setup was the library file's own text and every check failed.
"""

from __future__ import annotations

import json

import pytest

from runner.provers.hol_light.extract.extract import extract
from runner.provers.hol_light.extract.extract_model import MANIFEST, ExtractConfig
from runner.provers.hol_light.extract.extract_prefix import CHOSEN

from ..helpers import DEMO, extracted_config, sweep_with


def _tree(folder, name):
    """``base.ml`` loads ``helper.ml``, defines BASE_TAC, loads ``lib.ml``
    (two theorems needing both) and ends; ``proof.ml`` needs base.ml."""
    folder.mkdir()
    rel = f"{name}/{folder.name}"
    files = {
        "helper.ml": "let HELPER_TAC = ARITH_TAC;;\n",
        "base.ml": (f'(* the tree\'s base *)\nloadt "{rel}/helper.ml";;\n\n'
                    "let BASE_TAC = HELPER_TAC;;\n"
                    f'loadt "{rel}/lib.ml";;\n'
                    "let AFTER_LIB = 1;;\n"),
        "lib.ml": ("let LIB_A = prove(`2 + 2 = 4`, BASE_TAC);;\n\n"
                   "let LIB_B = prove\n (`(2 + 2 = 4) /\\ 3 + 3 = 6`,\n"
                   "  REWRITE_TAC[LIB_A] THEN HELPER_TAC);;\n"),
        "proof.ml": f'needs "{rel}/base.ml";;\nlet P = prove(`5 + 5 = 10`, BASE_TAC);;\n',
    }
    for f, text in files.items():
        (folder / f).write_text(text)
    return rel


@pytest.mark.hol
def test_a_library_file_s_problems_start_with_its_loader_s_prefix_and_check_ok(
        hol_session, context_lib, tmp_path):
    lib_dir, name = context_lib
    folder = lib_dir / "libtree"
    rel = _tree(folder, name)
    corpus = tmp_path / "c"
    r = extract(ExtractConfig(files=(folder / "lib.ml", folder / "proof.ml"), out=corpus,
                              prefix="dev", context_root=DEMO))
    assert [p.problem_id for p in r.problems] == ["dev.lib.LIB_A", "dev.lib.LIB_B", "dev.proof.P"]
    # The real HOL Light loads each context and checks each ground truth.
    summary = sweep_with(hol_session, extracted_config(corpus, tmp_path / "out"))
    rows = {row["problem_id"]: row for row in summary.table.to_pylist()}
    assert {pid: row["verdict"] for pid, row in rows.items()} == {
        "dev.lib.LIB_A": "OK", "dev.lib.LIB_B": "OK", "dev.proof.P": "OK"}, rows
    # base.ml's phrases before its load of lib.ml, then lib.ml's own.
    setup = (corpus / "dev.lib.LIB_B" / "setup.ml").read_text()
    base = (folder / "base.ml").read_text()
    upto = base[:base.index(f'loadt "{rel}/lib.ml"')]
    assert setup.index(upto) < setup.index("let LIB_A = prove")
    assert "AFTER_LIB" not in setup and f'"{rel}/lib.ml"' not in setup
    assert (corpus / "dev.proof.P" / "setup.ml").read_text() == f'needs "{rel}/base.ml";;\n'
    manifest = json.loads((corpus / MANIFEST).read_text())
    [lib] = manifest["library_files"]
    assert lib["path"] == str(folder / "lib.ml")
    assert lib["context_prefix"] == [{"loader": f"{rel}/base.ml", "up_to_line": 5,
                                      "loads": f"{rel}/lib.ml", "other_loaders": [],
                                      "chosen": CHOSEN}]
