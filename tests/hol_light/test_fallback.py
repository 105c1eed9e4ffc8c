"""A native sweep whose context cannot be compiled natively (issue 23): the
check that falls back to bytecode runs under the bytecode limit converted
from the native map, and its row says so (timeout_s, timeout_source and mode
agree); the run counts its fallbacks on its last line; --no-fallback makes
such a check ERROR with the reason; native compiling is announced and
recorded where image builds are, so `proofbatch report` counts it.

One native server for the module; the fallback runs in the shared bytecode
session (``hol_session``), so no test boots HOL Light of its own. The count
of fallbacks is read off the backend's classification, never off the rows'
reasons (issue 35, point 4): that test needs no HOL Light.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

import pyarrow as pa

from cluster.local import LocalExecutor
from runner import events
from runner.reporting import progress, report
from runner.errors import InputError
from runner.provers.hol_light.costs.map_modes import RATIO_MAX
from runner.planning.sweep_config import SweepConfig
from runner.sweep import SweepSummary, prepare, run_sweep
from runner.sweep_dir import check_manifest

from ..helpers import TEST_MEM_LIMIT, make_corpus

LIMIT = 20.0
DEPTH = ("#print_depth 5;;\n", "`T`", "ACCEPT_TAC TRUTH")       # refused natively
NATIVE = ("let pb_two = 2;;\n", "`1 + 1 = 2`", "ARITH_TAC")


def _config(root, problems: dict, **overrides) -> SweepConfig:
    """A --mode native sweep of ``problems`` under a map declared native."""
    corpus = make_corpus(root / "corpus", problems)
    tmap = root / "map.json"
    tmap.write_text(json.dumps([{"problem_id": pid, "prove_secs": 1.0, "timeout_sec": LIMIT}
                                for pid in problems]))
    settings = dict(corpus=corpus, out=root / "out", timeout_map=tmap, map_mode="native",
                    mode="native", workers=1, mem_limit=TEST_MEM_LIMIT, context_root=corpus)
    settings.update(overrides)
    return SweepConfig(**settings)


@pytest.fixture(scope="module")
def fallback_sweep(native_build, hol_session, tmp_path_factory):
    """(prepared, summary, events said while preparing) of a native sweep
    of one context that compiles and one that cannot."""
    root = tmp_path_factory.mktemp("fallback")
    config = _config(root, {"fb.depth": DEPTH, "fb.native": NATIVE})
    said: list[events.Event] = []
    stop = events.listen(said.append)
    try:
        prepared = prepare(config)
    finally:
        stop()
    session = prepared.backend.start(root / "session")
    session._bytecode = hol_session         # the fallback's bytecode session: the shared one
    try:
        summary = run_sweep(prepared, LocalExecutor(workers=1, session=session))
    finally:
        session._bytecode = None            # not closed here: other tests use it
        session.close()
    return prepared, summary, said


def test_a_fallback_runs_under_the_converted_bytecode_limit_and_its_row_says_so(fallback_sweep):
    prepared, summary, _ = fallback_sweep
    rows = {r["problem_id"]: r for r in summary.table.to_pylist()}
    fell = rows["fb.depth"]
    assert fell["verdict"] == "OK", fell["reason"]
    assert fell["mode"] == "bytecode"
    assert "ran in bytecode" in fell["reason"] and "#print_depth" in fell["reason"]
    assert "#print_depth" in fell["fallback"] and rows["fb.native"]["fallback"] == ""
    assert fell["timeout_s"] == pytest.approx(round(LIMIT * RATIO_MAX, 1))
    assert fell["timeout_source"] == f"map (native x{RATIO_MAX:.2f})"
    native = rows["fb.native"]
    assert (native["verdict"], native["mode"], native["timeout_s"], native["timeout_source"]) == \
        ("OK", "native", LIMIT, "map")
    assert any("CONVERTED" in w and "1 checks" in w for w in prepared.warnings), prepared.warnings


def test_the_run_counts_its_fallbacks_on_its_last_line(fallback_sweep, capsys):
    _, summary, _ = fallback_sweep
    line = summary.fallbacks()
    assert line is not None and line.startswith("1 checks fell back to bytecode (")
    assert "#print_depth" in line
    progress.print_summary(summary)
    assert capsys.readouterr().out.strip().splitlines()[-1] == line


def test_native_compiling_is_announced_and_counted_by_the_report(fallback_sweep):
    prepared, summary, said = fallback_sweep
    [compile] = [e for e in said if e.kind == "compile" and "fb.native" in e.name]
    line = progress.NowDoing(None, 1).event(compile)
    assert line.startswith("compiling natively: context ") and " of 2: the context of fb.native" in line
    [refused] = [e for e in said if e.kind == "compiled" and "fb.depth" in e.name]
    assert not refused.ok
    builds = report.read_builds(summary.out)
    compiled = [b for b in builds if b["key"].startswith("native-compile:")]
    assert compiled and all(b["secs"] > 0 for b in compiled), builds
    counts = report.load(summary.out).image_counts()
    assert counts["compiles"] == len(compiled) and counts["compile_s"] > 0
    assert counts["builds"] == len(builds) - len(compiled)


def test_no_fallback_makes_a_context_that_cannot_run_natively_error(native_build, tmp_path):
    """Nothing boots: the only check is refused before any session needs a prover."""
    config = _config(tmp_path, {"fb.depth": DEPTH}, no_fallback=True)
    summary = run_sweep(prepare(config), LocalExecutor(workers=1))
    [row] = summary.table.to_pylist()
    assert row["verdict"] == "ERROR" and row["mode"] == "native"
    assert "--no-fallback" in row["reason"] and "#print_depth" in row["reason"]
    assert (row["timeout_s"], row["timeout_source"]) == (LIMIT, "map")    # it never left native
    assert "got ERROR" in summary.fallbacks()
    # It changes this check's verdict: a resume without it is refused.
    again = prepare(dataclasses.replace(config, no_fallback=False))
    with pytest.raises(InputError, match="no-fallback"):
        check_manifest(again, None)


def _summary(rows: list[tuple[str, str, str]], **kw) -> SweepSummary:
    table = pa.table({k: list(v) for k, v in zip(("problem_id", "image_key", "reason"), zip(*rows))})
    return SweepSummary(out=None, counts=None, total=len(rows), ran_now=len(rows), resumed=0,
                        quarantined=[], table=table, **kw)


def test_fallbacks_are_counted_from_the_classification_not_from_reasons():
    depth = "#print_depth is a toplevel directive"
    not_native = {"a": depth, "b": depth, "c": "a computed load", "gone": "not in this run"}
    rows = [("a", "k1", "OK"), ("b", "k1", "FAIL: no"), ("c", "k2", "OK"),
            ("d", "k3", "OK [ran in bytecode: a reason that is only words]"),    # not classified
            ("a", "", "no answer given for this problem")]                       # no check was due
    summary = _summary(rows, not_native=not_native, problem_ids=("a", "b", "c", "d"))
    assert summary.fallbacks() == ("3 checks fell back to bytecode (#print_depth is a toplevel "
                                   "directive; 1 for other reasons)")
    refused = _summary(rows, not_native=not_native, no_fallback=True)
    assert refused.fallbacks().startswith("3 checks got ERROR: their context cannot run natively")
    assert _summary(rows, not_native={}).fallbacks() is None
