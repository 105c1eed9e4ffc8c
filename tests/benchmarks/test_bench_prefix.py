"""bench_prefix.py's check of its baseline before any sweep: the old
raw-text keys (read from git) on the "after" setups give the tree today's
keys give the "before" ones. It broke once, unseen, when context_keys'
baseline_module came to take the source: the script died before its
first sweep."""

from __future__ import annotations

import sys

from ..helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import on_path  # noqa: E402,F401  (the groups' folders too)
import bench_prefix  # noqa: E402


def test_the_baseline_shape_compares_the_old_keys_with_todays_on_the_same_setups():
    library = "".join(f"let L{i} = prove(`{i} = {i}`, ARITH_TAC);;\n" for i in range(20))
    heads = {f: f"(* {f} *)\nlet {f.upper()} = 1;;\n" for f in ("a", "b")}
    # "after": every file's setups open with one library text; "before": each
    # file's own comment put in front of it, so the raw-text keys share nothing.
    after = {f"{f}.p{i}": f"{library}{heads[f]}let P{i} = {i};;\n" for f in heads for i in range(3)}
    before = {pid: f"(* {pid.split('.')[0]}/proofs *)\n{text}" for pid, text in after.items()}
    shape = bench_prefix.baseline_shape({"after": after, "before": before})
    assert set(shape) == {"raw_text_keys_on_after", "todays_keys_on_before", "todays_keys_on_after", "same"}
    assert shape["todays_keys_on_after"]["images"] >= 1
    assert shape["same"] == (shape["raw_text_keys_on_after"] == shape["todays_keys_on_before"])
