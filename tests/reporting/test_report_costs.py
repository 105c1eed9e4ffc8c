"""Where a sweep's time went (runner/reporting/report.py), on a sweep directory whose
timings are known exactly: two runs of two workers, a boot, image builds, a
worker waiting for an image the other one builds. The split must add up to
what was paid, and name the wait."""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import struct
from pathlib import Path

import pytest

from runner.reporting import html as report_html
from runner.results import shards
from runner.reporting.report import PARTS, load
from runner.results.rows import ResultRow

T0 = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.timezone.utc)


def row(pid: str, run: str, worker: str, start: float, end: float, prove: float | None,
        wait: float | None, verdict: str = "OK") -> ResultRow:
    return ResultRow(
        problem_id=pid, attempt=0, category="generic", verdict=verdict, reason="r",
        prove_secs=prove, wall_secs=end - start, peak_rss_mb=None, timeout_s=60.0,
        timeout_source="default", worker=f"host/1/{worker}", host="host",
        started_at=T0 + dt.timedelta(seconds=start), finished_at=T0 + dt.timedelta(seconds=end),
        image_key="k", prover_build="b", mode="bytecode", exit_status="exit 0",
        answer_sha256="", run_id=run, wait_secs=wait)


@pytest.fixture
def sweep(tmp_path) -> Path:
    """Run r1 boots for 90 s (t = -90 .. 0). At t = 0, w0 builds image A for
    40 s, then checks p1; w1 needs A too and waits the same 40 s, then p2.
    Run r2, resumed later, boots 10 s and checks p3 on its w0."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"config": {"workers": 2}}))
    rows = [row("p1", "r1", "w0", 0, 50, 9.0, 40.0), row("p2", "r1", "w1", 0, 45, 4.0, 40.0),
            row("p3", "r2", "w0", 1000, 1003, 2.0, 0.5)]
    with shards.ShardWriter(out, "w") as writer:
        for r in rows:
            writer.add(r)
    (out / "images").mkdir()
    epoch = T0.timestamp()
    for run, builds in (("r1", [{"key": "base", "parent": None, "secs": 90.0, "finished_at": epoch},
                                {"key": "A", "parent": "base", "secs": 40.0,
                                 "finished_at": epoch + 40}]),
                        ("r2", [{"key": "base", "parent": None, "secs": 10.0,
                                 "finished_at": epoch + 1000}])):
        (out / "images" / f"{run}.json").write_text(json.dumps({"run_id": run, "builds": builds}))
    return out


def test_the_split_names_the_wait_for_another_workers_image(sweep):
    r = load(sweep)
    paid = 2 * (90 + 50) + 2 * (10 + 3)
    assert sum(r.seconds.values()) == pytest.approx(paid)
    assert r.seconds["proof"] == pytest.approx(15.0)
    assert r.seconds["image builds"] == pytest.approx(140.0)
    # w1's 40 s wait for the image w0 built; w0's own wait was its build.
    assert r.seconds["waiting"] == pytest.approx(40.5)
    assert r.seconds["dispatch overhead"] == pytest.approx((50 - 40 - 9) + (45 - 40 - 4)
                                                            + (3 - 0.5 - 2))
    assert set(PARTS) == set(r.seconds)


def test_utilization_and_idle_share_one_span_and_runs_are_told_apart(sweep):
    r = load(sweep)
    util = r.utilization()
    # Resumed: both runs have a w0, named by run.
    assert util == pytest.approx({"run 1 w0": 50 / 140, "run 1 w1": 45 / 140, "run 2 w0": 3 / 13})
    busy = sum(u * run.makespan_s for u, run in zip(util.values(), [r.runs[0]] * 2 + [r.runs[1]]))
    assert sum(run.workers * run.makespan_s for run in r.runs) - busy == pytest.approx(
        r.seconds["idle"] + r.seconds["image builds"] - 40.0)


def test_the_timeline_starts_at_the_boot(sweep):
    r = load(sweep)
    assert r.throughput()[0] == (pytest.approx(135.0), 1)        # p2 at 45 s after a 90 s boot
    assert ("boot", pytest.approx(0.0), pytest.approx(90.0)) in r.timeline()
    assert ("image build", pytest.approx(90.0), pytest.approx(130.0)) in r.timeline()


def png_width(data: bytes) -> int:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">I", data[16:20])[0]


def test_the_page_has_readable_plots_and_no_empty_header(sweep, tmp_path):
    text = report_html.render(load(sweep))
    images = [base64.b64decode(i) for i in re.findall(r'src="data:image/png;base64,([^"]+)"', text)]
    assert len(images) >= 3
    assert all(png_width(i) >= 900 for i in images), [png_width(i) for i in images]
    assert "<tr><th></th><th></th></tr>" not in text
    assert "waiting" in text and "another worker was building" in text


# The plan of run r1: the base booted in 70 s and image A built in 50 s,
# p1 and p2 expected at 8 and 4 s.
PLAN = {"format": "proofbatch-plan/1", "run_id": "r1", "sources": {"map": 2},
        "predicted": {"makespan_s": 150.0, "lower_bound_s": 140.0, "core_hours": 300 / 3600,
                      "image_build_core_hours": (70.0 + 50.0) / 3600,
                      "busy_core_hours": (70.0 + 50.0 + 12.0) / 3600,
                      "image_rebuild_core_hours": 0.0},
        "images": [{"key": "base", "parent": None, "build_s": 70.0, "source": "default"},
                   {"key": "A", "parent": "base", "build_s": 50.0, "source": "estimated"}],
        "checks": [{"problem_id": "p1", "attempt": 0, "expected_s": 8.0, "source": "map"},
                   {"problem_id": "p2", "attempt": 0, "expected_s": 4.0, "source": "map"}]}


def test_the_plans_predicted_core_hours_stand_beside_the_measured_ones(sweep, capsys):
    """Issue 25, part 2: after a real sweep, the report puts the plan's
    predicted image and proof core-hours beside the measured ones, and the
    error per class of image (its role in the context tree)."""
    from rich.console import Console

    from runner.commands.report import term_prediction

    (sweep / "plan.json").write_text(json.dumps(PLAN))
    c = load(sweep).predicted_costs()
    assert c["predicted_image_core_hours"] * 3600 == pytest.approx(120.0)
    assert c["measured_image_core_hours"] * 3600 == pytest.approx(130.0)    # r1's builds only
    assert c["predicted_proof_core_hours"] * 3600 == pytest.approx(12.0)
    assert c["measured_proof_core_hours"] * 3600 == pytest.approx(13.0)     # p1 9 s + p2 4 s
    assert c["by_class"] == {
        "boot": {"images": 1, "builds": 1, "predicted_s": 70.0, "measured_s": 90.0,
                 "error": pytest.approx(-20 / 90)},
        "file head": {"images": 1, "builds": 1, "predicted_s": 50.0, "measured_s": 40.0,
                      "error": pytest.approx(0.25)}}
    console = Console(width=200)
    with console.capture() as cap:
        term_prediction(console, load(sweep), None)
    text = cap.get()
    assert "predicted against measured" in text and "+25%" in text and "-22%" in text


def test_a_native_images_measured_build_counts_its_compiles(sweep):
    """A native image's plan prices its context's compile and its answers'
    (runner/provers/hol_light/session/native_session.py records them under native-compile:),
    so its class is measured with them, as benchmarks/planning/predictions.py does."""
    (sweep / "plan.json").write_text(json.dumps(PLAN))
    compiles = [{"key": "native-compile:A", "parent": None, "secs": 2.0, "finished_at": T0.timestamp()},
                {"key": "native-compile:answers:A", "parent": "A", "secs": 0.5,
                 "finished_at": T0.timestamp() + 41}]
    (sweep / "images" / "r1-compiles.json").write_text(json.dumps({"run_id": "r1", "builds": compiles}))
    head = load(sweep).predicted_costs()["by_class"]["file head"]
    assert head["measured_s"] == pytest.approx(40.0 + 2.0 + 0.5) and head["builds"] == 1


def test_images_are_classed_by_their_role_in_the_tree():
    from runner.reporting.report import image_classes

    tree = {"base": None, "lib": "base", "words": "lib", "head1": "words", "c1": "head1",
            "c2": "c1", "head2": "words", "alone": "base"}
    classes = image_classes({k: {"parent": p} for k, p in tree.items()})
    assert classes == {"base": "boot", "lib": "library prefix", "words": "library prefix",
                       "head1": "file head", "c1": "chain image", "c2": "chain image",
                       "head2": "file head", "alone": "file head"}
