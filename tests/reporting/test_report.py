"""Reports on real sweeps of the example corpus: where the core-hours of the
shared demo sweep went, a planned sweep whose actual makespan is held
against its prediction, two sweeps of one corpus compared, and the HTML
page rendered by headless Chromium."""

from __future__ import annotations

import base64
import csv
import dataclasses
import json
import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from runner import cli, subproc
from runner.reporting.compare import compare
from runner.reporting.report import PARTS, load
from runner.reporting.html import render
from runner.sweep import prepare, run_sweep

from ..helpers import DEMO, demo_config, expected_verdicts

pytestmark = pytest.mark.hol

# Problems that verify, from three contexts: one heavy proof (tens of
# seconds) and light ones (a tenth of a second each).
HEAVY = "heavy.arith_cases"
LIGHT = ("arith.add_comm", "arith.linear_bound", "logic.drinker", "logic.meson_puzzle",
         "ring.defs_step1", "ring.defs_step2", "sets.subset_trans", "sets.union_comm")


def test_report_of_the_demo_sweep(demo_sweep, tmp_path, capsys):
    report = load(demo_sweep.out)
    # Counts per verdict are the corpus's expected verdicts.
    assert report.verdicts() == Counter(expected_verdicts().values())
    assert sum(sum(c.values()) for c in report.by_category().values()) == len(expected_verdicts())
    # The split adds up to what was paid: every worker, boot to last verdict.
    paid = sum(run.workers * run.makespan_s for run in report.runs)
    assert sum(report.seconds.values()) == pytest.approx(paid)
    rows = report.table.to_pylist()
    assert report.seconds["proof"] == pytest.approx(sum(
        r["prove_secs"] or 0 for r in rows if r["verdict"] not in ("TIMEOUT", "MEMOUT")))
    # Two runaway loops ran to their 10 s limit: at least 20 s wasted in TIMEOUT.
    timeouts = [r for r in rows if r["verdict"] == "TIMEOUT"]
    assert len(timeouts) == 2 and report.seconds["TIMEOUT"] >= sum(r["timeout_s"] for r in timeouts)
    assert report.seconds["MEMOUT"] > 0
    slowest = report.slowest(6)
    assert [r["wall_secs"] for r in slowest] == sorted((r["wall_secs"] for r in rows), reverse=True)[:6]
    assert {"fault.loop_alloc", "fault.loop_nonalloc"} <= {r["problem_id"] for r in slowest}
    assert set(report.utilization()) == {r["worker"] for r in rows}
    assert report.throughput()[-1][1] == len(rows)

    html = tmp_path / "report.html"
    assert cli.main(["report", str(demo_sweep.out), "--html", str(html),
                     "--core-hour-price", "2.5"]) == 0
    printed = capsys.readouterr().out
    for part in PARTS:
        assert part in printed
    assert "slowest checks" in printed and "fault.loop" in printed
    text = html.read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', text)
    assert len(images) >= 3 and all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    assert not re.search(r'(src|href)="(https?:)?//', text)       # self-contained
    _screenshot(html, tmp_path / "report.png")


def _screenshot(page: Path, png: Path) -> None:
    """Render ``page`` in headless Chromium; the screenshot must show a page."""
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is missing: run scripts/setup.sh"
    with tempfile.TemporaryDirectory() as profile:
        subproc.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
                     "--hide-scrollbars", "--window-size=1200,2600", f"--screenshot={png}",
                     page.resolve().as_uri()], timeout=120)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # A blank page compresses to a few kB; a rendered report with plots does not.
    assert len(data) > 60_000


def _map_from(rows: dict[str, dict], path: Path, ids) -> Path:
    """A timeout map in the bench's format whose prove_secs are the demo sweep's measurements."""
    entries = [{"problem_id": pid, "prove_secs": rows[pid]["wall_secs"], "timeout_sec": 300}
               for pid in ids]
    path.write_text(json.dumps(entries))
    return path


def _planned_sweep(hol_session, out: Path, ids, timeout_map: Path, answers: Path | None = None):
    # The map holds this machine's bytecode times, and says so.
    config = demo_config(out, only=tuple(ids), timeout_map=timeout_map, map_mode="bytecode",
                         answers=answers)
    prepared = prepare(config)
    # The shared session has every context of the corpus loaded already: the
    # plan must not count their loads, nor the boot; planned again with that known.
    plan = dataclasses.replace(prepared.plan, prebuilt=frozenset(hol_session.image_build_secs))
    prepared = dataclasses.replace(prepared, plan=plan.with_policy(plan.config.policy))
    from cluster.local import LocalExecutor

    return run_sweep(prepared, LocalExecutor(workers=config.workers, session=hol_session))


def test_a_planned_sweep_against_its_prediction(hol_session, demo_rows, tmp_path, capsys):
    ids = (HEAVY,) + LIGHT
    # The prediction comes from durations measured right before, in this
    # test: the host is shared, and a heavy proof's time measured minutes
    # earlier under another load (the session's demo sweep) can be off by 2x.
    measured = _planned_sweep(hol_session, tmp_path / "measure", ids,
                              _map_from(demo_rows, tmp_path / "demo_map.json", ids))
    rows = {r["problem_id"]: r for r in measured.table.to_pylist()}
    out = tmp_path / "planned"
    summary = _planned_sweep(hol_session, out, ids, _map_from(rows, tmp_path / "map.json", ids))
    assert summary.counts == Counter({"OK": len(ids)})
    plan = json.loads((out / "plan.json").read_text())
    assert plan["sources"] == {"map": len(ids)}
    assert plan["checks"][0]["problem_id"] == HEAVY            # longest expected first
    p = load(out).prediction()
    assert p is not None and p["run_id"] == plan["run_id"]
    predicted, actual = p["predicted_makespan_s"], p["actual_makespan_s"]
    # The report's prediction is the plan's, and its actual makespan is the
    # run's: at least its heavy check's wall time. How close the two come is
    # a timed figure of the host's load, measured by benchmarks/planning/predictions.py
    # (here it missed 30% at load 8 while passing on a quiet host).
    assert predicted == plan["predicted"]["makespan_s"] >= p["lower_bound_s"] > 0
    heavy = next(r for r in summary.table.to_pylist() if r["problem_id"] == HEAVY)
    assert actual >= heavy["wall_secs"] > 0, (predicted, actual)
    assert cli.main(["report", str(out)]) == 0
    assert "predicted makespan" in capsys.readouterr().out


def test_two_sweeps_of_one_corpus_compared(hol_session, demo_sweep, demo_rows, tmp_path, capsys):
    timeout_map = _map_from(demo_rows, tmp_path / "map.json", LIGHT)
    _planned_sweep(hol_session, tmp_path / "a", LIGHT, timeout_map)
    # The same problems again with two answers changed.
    answers = tmp_path / "answers.csv"
    with open(answers, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["problem_id", "answer"])
        for pid in LIGHT:
            text = (DEMO / pid / "answer.txt").read_text().strip()
            w.writerow([pid, {"logic.drinker": "ALL_TAC", "sets.union_comm": "NO_TAC"}.get(pid, text)])
    _planned_sweep(hol_session, tmp_path / "b", LIGHT, timeout_map, answers)
    c = compare(load(tmp_path / "a"), load(tmp_path / "b"))
    assert c.solved_only_a == ["logic.drinker", "sets.union_comm"] and c.solved_only_b == []
    assert c.changes == [("logic.drinker", 0, "OK", "FAIL"), ("sets.union_comm", 0, "OK", "FAIL")]
    html = tmp_path / "compare.html"
    assert cli.main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "--html", str(html)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "solved by A only (2): logic.drinker, sets.union_comm" in printed
    assert "OK -&gt; FAIL" in html.read_text()
    # The whole demo is the same corpus, another selection of it (issue 46:
    # two runs of one profile were refused as "a sweep of another corpus"):
    # compared on the eight problems both checked. Another corpus is refused
    # in one line (tests/reporting/test_report_rows.py).
    assert cli.main(["report", str(tmp_path / "a"), str(demo_sweep.out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    only_b = len(expected_verdicts()) - len(LIGHT)
    assert f"checks only A has: 0; only B has: {only_b}" in printed


def test_report_refuses_what_is_not_a_sweep(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(tmp_path) in err and "sweep.json" in err and len(err.splitlines()) == 1
    (tmp_path / "sweep.json").write_text("{}")
    assert "Summary" in render(load(tmp_path))     # an empty sweep still renders
