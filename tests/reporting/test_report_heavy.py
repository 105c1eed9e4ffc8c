"""`proofbatch report` on a sweep's heavy tail (issue 44): the heavy checks'
own line, peak memory by time class with the highest peaks named, compute
lost to reruns by cause, and proof core-hours predicted against both wall
and CPU time. The rows go through shards and `load()`, as a sweep leaves
them; the real runner deaths that write OUT/lost/ are tested in
tests/test_stopping.py and tests/checks/test_infra_deaths.py."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

from runner import cli
from runner.reporting import heavy
from runner.reporting.html import render
from runner.reporting.report import load
from runner.results import lost, shards
from runner.results.running import RunningBoard, retire_boards

from ..helpers import left_by_a_dead_runner, row


def _sweep(out, specs):
    """specs: (id, proof CPU s, peak MB); each check's span is its proof plus a second."""
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"limit_clock": "cpu", "nice": -10,
                                                "config": {"workers": 2}}))
    rows, t = [], 0.0
    for pid, cpu, peak in specs:
        t += cpu + 1.0
        r = dataclasses.replace(row(pid, prove_secs=cpu * 1.1, finished=t), prove_cpu_secs=cpu,
                                peak_rss_mb=peak, limit_clock="cpu", timeout_s=max(120.0, 5 * cpu))
        rows.append(dataclasses.replace(r, wall_secs=cpu + 1.0,
                                        started_at=r.finished_at - dt.timedelta(seconds=cpu + 1.0)))
    with shards.ShardWriter(out, "w") as writer:
        for r in rows:
            writer.add(r)


def _printed(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


def test_the_heavy_tail_has_its_own_line_and_its_memory_by_class(tmp_path, capsys):
    out = tmp_path / "out"
    _sweep(out, [("arm.light.a", 0.2, 350.0), ("arm.light.b", 3.0, 360.0),
                 ("arm.mid.c", 200.0, 346.0), ("arm.heavy.d", 1100.0, 1036.0),
                 ("arm.mldsa_intt.e", 6000.0, 2400.0)])
    r = load(out)
    spans_h = (201 + 1101 + 6001) / 3600           # the three heavy checks' spans
    assert heavy.heavy_line(r.table, r.core_hours).startswith(
        f"heavy checks (120 s of proof time or more): 3 of 5, {spans_h:,.2f} core-hours from "
        f"dispatch to verdict ({100 * spans_h / r.core_hours:.0f}% of the sweep's")
    classes = {c["class"]: (c["checks"], c["max_mb"]) for c in heavy.memory_by_class(r.table)}
    assert classes == {"under 120 s": (2, 360.0), "120-300 s": (1, 346.0),
                       "1,000-3,000 s": (1, 1036.0), "3,000 s or more": (1, 2400.0)}
    assert cli.main(["report", str(out)]) == 0
    printed = _printed(capsys)
    assert "highest peaks: arm.mldsa_intt.e 2,400 MB (OK, 6,000 s); arm.heavy.d 1,036 MB" in printed
    assert "lost to reruns: nothing" in printed
    page = render(load(out))
    assert "Heavy checks, memory and reruns" in page and "arm.mldsa_intt.e 2,400 MB" in page


def test_compute_lost_to_reruns_is_counted_by_cause(tmp_path, capsys):
    out = tmp_path / "out"
    _sweep(out, [("arm.heavy.d", 1100.0, 1036.0)])
    # A Ctrl-C 400 s into the heavy check, recorded by its worker as it stopped ...
    board = RunningBoard(out, "run1-w0", "host/1/w0")
    board.start("arm.heavy.d", 0, 5500.0)
    board.started()
    board.lost(lost.stop_cause(KeyboardInterrupt()), 400.0, 410.0)
    board.clear()
    # ... then a kill -9 720 s into its rerun: the next runner retires its board.
    board = RunningBoard(out, "run2-w0", "host/2/w0")
    board.start("arm.heavy.d", 0, 5500.0)
    board.started()
    board.progress(720.0, 900 << 20, "cpu")
    left_by_a_dead_runner(board)
    retire_boards(out)
    assert cli.main(["report", str(out)]) == 0
    printed = _printed(capsys)
    assert "lost to reruns: 0.311 core-hours of CPU time in 2 checks that ran again" in printed
    assert f"0.200 core-hours, 1 check: {lost.SILENT}" in printed
    assert "0.111 core-hours, 1 check: Ctrl-C" in printed


def test_the_report_names_each_nodes_factor_when_they_differ(tmp_path, capsys):
    """Issue 47: rows of a mixed cluster carry their node's factor."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"limit_clock": "cpu", "host_factor": 1.2,
                                                "config": {"workers": 2}}))
    rows = [dataclasses.replace(row(f"p{i}", finished=float(i + 1)), host=host, host_factor=f)
            for i, (host, f) in enumerate([("fast", 1.2), ("fast", 1.2), ("slow", 2.05)])]
    with shards.ShardWriter(out, "w") as writer:
        for r in rows:
            writer.add(r)
    assert cli.main(["report", str(out)]) == 0
    assert "host factors by node: fast x1.20 (2 checks); slow x2.05 (1 check)" in _printed(capsys)
