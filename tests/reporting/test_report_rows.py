"""`proofbatch report` read against the rows it reports on (issue 46).

The story: a new user ran a sweep under the default CPU clock, and the
report's Limits section said "0 of 3 OK checks used more than 80% of their
limit" while two had used 87% and 83%: the report loaded only its own
columns, never the CPU times, loads and retries its Limits section counts.
Here real sweeps (the real HOL Light, the shared session) go through the
`report` command, and what it prints is held against their rows:

- a ladder of limits around one proof's CPU time, so some OK checks use
  more than 80% of theirs and the rungs below it are TIMEOUTs, under a
  timeout map, with three problems whose setup reads an object file that
  was never built (the arm `unopt` objects of the issue);
- the same corpus on the wall clock, compared with it: the clocks differ;
- two runs of one profile, the second without the first's failed ground
  truth, compared; and a sweep of a changed problem, refused.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import html
import json
import statistics
from pathlib import Path

import pytest

from cluster.local import LocalExecutor
from runner import cli
from runner.planning.sweep_config import SweepConfig
from runner.profile import ProfileConfig, profile
from runner.reporting import error_causes, limits
from runner.reporting.html import render
from runner.reporting.report import load
from runner.results import shards

from ..helpers import DEMO, TEST_MEM_LIMIT, row, spin_then_prove, sweep_with

# About two seconds of CPU on a quiet EPYC here (helpers.spin_then_prove;
# 0.84 s of prove's CPU for 300M under load 6). A check's process spends
# about 0.15 s of CPU besides prove's, which its limit counts too: at two
# seconds that leaves a window [t + 0.15, 1.25 t) where a limit is kept and
# more than 80% of it used.
WORK = spin_then_prove(600_000_000)
# Limits from 1.2 s to 3.9 s, each 7% above the last: whatever this host
# gives the proof (t, 1.0-3.1 s of CPU), a limit lies in that window.
RUNGS = [round(1.2 * 1.07 ** k, 3) for k in range(18)]
MAP_PROVE_S = 0.6
MISSING = "/nonexistent-proofbatch/arm/p521/unopt/bignum_mul_p521_base.o"
UNOPT = [f"unopt.p{i}" for i in range(3)]


def _problem(root: Path, pid: str, setup: str, query: str, answer: str) -> None:
    d = root / pid
    d.mkdir(parents=True)
    (d / "setup.ml").write_text(setup)
    (d / "query.txt").write_text(query)
    (d / "answer.txt").write_text(answer)


def _config(corpus: Path, out: Path, **overrides) -> SweepConfig:
    # The demo's context root keeps the shared session's salt (helpers.extracted_config).
    settings = dict(corpus=corpus, out=out, workers=2, mem_limit=TEST_MEM_LIMIT,
                    context_root=DEMO, default_timeout=60.0)
    settings.update(overrides)
    return SweepConfig(**settings)


@pytest.fixture(scope="module")
def ladder(hol_session, tmp_path_factory):
    """The ladder swept on the CPU clock: (corpus, map, out, rows)."""
    root = tmp_path_factory.mktemp("ladder")
    corpus = root / "corpus"
    for k in range(len(RUNGS)):
        _problem(corpus, f"ladder.r{k:02d}", "", "`1 + 1 = 2`\n", WORK + "\n")
    # As an s2n-bignum proof file reads its object code: open_in_bin at load time.
    for pid in UNOPT:
        _problem(corpus, pid, f'let pb_code = open_in_bin "{MISSING}";;\n', "`T`\n", "ALL_TAC\n")
    timeout_map = root / "map.json"
    timeout_map.write_text(json.dumps([
        {"problem_id": f"ladder.r{k:02d}", "prove_secs": MAP_PROVE_S, "timeout_sec": limit}
        for k, limit in enumerate(RUNGS)]))
    out = root / "cpu"
    summary = sweep_with(hol_session, _config(corpus, out, timeout_map=timeout_map,
                                              map_mode="bytecode"))
    return corpus, timeout_map, out, summary.table.to_pylist()


def _printed(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


def test_the_limits_section_matches_the_rows_of_a_cpu_clock_sweep(ladder, capsys):
    corpus, timeout_map, out, rows = ladder
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["limit_clock"] == "cpu"
    ok = [r for r in rows if r["verdict"] == "OK"]
    timeouts = [r for r in rows if r["verdict"] == "TIMEOUT"]
    # The figures the limits counted, as the rows hold them.
    tight = [r for r in ok if r["prove_cpu_secs"] > 0.8 * r["timeout_s"]]
    assert tight and timeouts, [(r["problem_id"], r["verdict"], r["prove_cpu_secs"], r["cpu_secs"],
                                 r["timeout_s"]) for r in rows]
    assert all(r["host_load"] is not None and r["host_cpus"] for r in timeouts)
    loaded = sum(r["host_load"] > r["host_cpus"] for r in timeouts)
    ratio = statistics.median(r["prove_cpu_secs"] / MAP_PROVE_S for r in ok)
    retried = sum(1 for r in rows if r["infra_retries"])

    assert cli.main(["report", str(out)]) == 0
    printed = _printed(capsys)
    said = [
        f"checks at niceness {manifest['nice']}",
        f"proof times against the map's: median {ratio:.2f}x over {len(ok)} proofs",
        f"{len(tight)} of {len(ok)} OK checks used more than 80% of their limit",
        f"{len(timeouts)} TIMEOUT{'' if len(timeouts) == 1 else 's'}, {loaded} of "
        f"{len(timeouts)} with a recorded load",
    ] + ([f"{retried} check{'' if retried == 1 else 's'} ran again"] if retried else [])
    assert printed.count("limits counted CPU time") == 1
    for line in said:
        assert line in printed, (line, printed[printed.find("limits counted"):])
    # The HTML page says the same.
    page = render(load(out))
    for line in said:
        assert html.escape(line) in page, line


def test_a_sweep_ends_with_its_errors_grouped_by_cause(ladder, capsys):
    corpus, timeout_map, out, rows = ladder
    errors = [r for r in rows if r["verdict"] == "ERROR"]
    assert sorted(r["problem_id"] for r in errors) == UNOPT, [r["reason"] for r in errors]
    assert cli.main(["report", str(out)]) == 0
    # Its last line (wrapped at the terminal's width).
    assert _printed(capsys).endswith(f" 3 ERROR: setup could not load a file: {MISSING}")
    assert html.escape(f"3 ERROR: setup could not load a file: {MISSING}") in render(load(out))


def test_two_sweeps_on_different_clocks_say_so(hol_session, ladder, capsys):
    corpus, timeout_map, out, rows = ladder
    wall = out.parent / "wall"
    sweep_with(hol_session, _config(corpus, wall, timeout_map=timeout_map, map_mode="bytecode",
                                    limit_clock="wall", only=("ladder.r00", "ladder.r17")))
    assert cli.main(["report", str(out), str(wall)]) == 0
    printed = _printed(capsys)
    assert "the sweeps ran differently (A's limits counted CPU time, B's wall time" in printed
    assert "a verdict change may come from that, not from the answers" in printed
    assert "checks only A has: 19; only B has: 0" in printed


# A context of the profile's own, so that its first run builds an image.
PROFILE_SETUP = "let pb_profiled = 1;;\n"


def test_two_runs_of_one_profile_compare_and_another_corpus_does_not(hol_session, tmp_path, capsys,
                                                                     monkeypatch):
    # Wide enough that the prediction table's cells are not wrapped.
    monkeypatch.setenv("COLUMNS", "200")
    corpus = tmp_path / "corpus"
    _problem(corpus, "prof.ok1", PROFILE_SETUP, "`1 + 1 = 2`\n", "ARITH_TAC\n")
    _problem(corpus, "prof.ok2", PROFILE_SETUP, "`2 + 2 = 4`\n", "ARITH_TAC\n")
    _problem(corpus, "prof.wrong", PROFILE_SETUP, "`2 + 2 = 5`\n", "ARITH_TAC\n")
    cfg = ProfileConfig(corpus=corpus, out=tmp_path / "profile", runs=2, ceiling_s=60, workers=2,
                        mem_limit=TEST_MEM_LIMIT, context_root=DEMO)
    profile(cfg, lambda prepared: LocalExecutor(workers=prepared.config.workers, session=hol_session))
    run1, run2 = cfg.out / "runs" / "g1-r1", cfg.out / "runs" / "g1-r2"
    # Run 2 leaves out the ground truth that failed in run 1: another selection of one corpus.
    assert (json.loads((run1 / "sweep.json").read_text())["corpus_fingerprint"]
            != json.loads((run2 / "sweep.json").read_text())["corpus_fingerprint"])
    assert cli.main(["report", str(run1), str(run2)]) == 0
    printed = _printed(capsys)
    assert "verdict changes: 0" in printed and "checks only A has: 1; only B has: 0" in printed
    # Its prediction rows count images and builds in words (one sweep of the profile).
    assert cli.main(["report", str(run1)]) == 0
    printed = _printed(capsys)
    assert ", s each once" not in printed and "1 images" not in printed
    assert "s to build each once: 1 image (1 build measured)" in printed, printed
    # A problem whose query changed is another corpus's, however the rest agrees.
    changed = tmp_path / "changed"
    for pid in ("prof.ok1", "prof.ok2"):
        _problem(changed, pid, PROFILE_SETUP, "`1 + 2 = 3`\n" if pid == "prof.ok1" else "`2 + 2 = 4`\n",
                 "ARITH_TAC\n")
    sweep_with(hol_session, _config(changed, tmp_path / "other"))
    assert cli.main(["report", str(run1), str(tmp_path / "other")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "another corpus" in err and "1 of the 2 problems both checked differ" in err
    assert "(e.g. prof.ok1)" in err


# -- through load(), rows of a known shape (no HOL Light) -------------------------

def test_a_loaded_timeout_and_a_retried_check_are_read_from_the_shards(tmp_path, capsys):
    """The issue's rows: a TIMEOUT at load 4.73 on 2 CPUs, a check run again,
    two OK checks at 87% and 83% of their CPU limits and one at 20%."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"limit_clock": "cpu", "nice": -10,
                                                "config": {"workers": 1}}))
    base = dict(limit_clock="cpu", host_load=0.5, host_cpus=2)
    rows = [dataclasses.replace(row("a", prove_secs=9.9, finished=1.0), prove_cpu_secs=8.7, **base),
            dataclasses.replace(row("b", prove_secs=9.0, finished=2.0), prove_cpu_secs=8.3,
                                infra_retries=1, **base),
            dataclasses.replace(row("c", prove_secs=2.0, finished=3.0), prove_cpu_secs=2.0, **base),
            dataclasses.replace(row("d", verdict="TIMEOUT", prove_secs=None, finished=4.0),
                                **{**base, "host_load": 4.73})]
    rows = [dataclasses.replace(r, timeout_s=10.0, started_at=r.finished_at - dt.timedelta(
        seconds=0.5)) for r in rows]
    with shards.ShardWriter(out, "w") as writer:
        for r in rows:
            writer.add(r)
    assert cli.main(["report", str(out)]) == 0
    printed = _printed(capsys)
    for line in ("limits counted CPU time, checks at niceness -10",
                 "2 of 3 OK checks used more than 80% of their limit (a 8.7/10 s, b 8.3/10 s)",
                 "1 TIMEOUT, 1 of 1 with a recorded load while the host's load was above its CPUs",
                 "1 check ran again after an end that was not their answer's"):
        assert line in printed, (line, printed)
    assert error_causes.error_causes(load(out).table) == []
    assert limits.check(load(out).table, {"limit_clock": "wall"}).tight == [
        ("a", 9.9, 10.0), ("b", 9.0, 10.0)]


def test_errors_of_one_cause_naming_several_files_are_one_line():
    from runner.results.rows import rows_to_table

    def missing(pid, path):
        return row(pid, verdict="ERROR", prove_secs=None,
                   reason=f'setup: Exception: Sys_error("{path}: No such file or directory").')

    table = rows_to_table([missing(f"p{i}", f"/s2n/arm/{d}/unopt/{d}_base.o")
                           for i, d in enumerate(["p256", "p256", "p384", "p521", "fastmul"])]
                          + [row("q", verdict="ERROR", prove_secs=None, reason="infra: killed\nagain"),
                             row("ok")])
    assert error_causes.lines(error_causes.error_causes(table)) == [
        "5 ERROR: setup could not load a file: /s2n/arm/p256/unopt/p256_base.o, "
        "/s2n/arm/p384/unopt/p384_base.o and 2 more files",
        "1 ERROR: infra: killed"]
