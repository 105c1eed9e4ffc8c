"""`proofbatch status` without a scan: the runner's heartbeat file says what is
done, whether the sweep is alive, and how long the rest should take; a sweep
whose runner died is named dead, with the command that resumes it, and gets
no ETA. (A real sweep's status while it runs: tests/reporting/test_status.py.)"""

from __future__ import annotations

import json
import re
from collections import Counter
import subprocess
import sys

import pytest

from runner import cli, events
from runner.sweep_dir import resume_command
from runner.results import heartbeat, shards
from runner.results.running import RunningBoard
from runner.reporting import status
from runner.planning.work_left import WorkLeft
from runner.planning.planner import Image, PlanCheck, PlanConfig, Workers, make_plan
from runner.results.rows import ResultRow

from ..helpers import row


def _Plan(checks, workers):
    """A real plan whose checks all run in one image, built and booted in no time."""
    images = {"base": Image("base", None, 0.0, "measured"), "img": Image("img", "base", 0.0, "measured")}
    return make_plan(checks, images, "base", workers, PlanConfig(dispatch_s=0.0))


def _check(pid: str, secs: float, source: str = "map") -> PlanCheck:
    return PlanCheck(pid, 0, "generic", secs, source, 2**20, "img", 60.0, 0)


def sweep_dir(tmp_path, rows: list[ResultRow]):
    out = tmp_path / "out"
    with shards.ShardWriter(out, "w0") as w:
        for r in rows:
            w.add(r)
    (out / "sweep.json").write_text(json.dumps({
        "checks": 4, "corpus": "/data/corpus",
        "config": {"workers": 2, "timeout_map": "/data/map.json", "default_timeout": 120.0}}))
    return out


def test_running_sweep_status_reads_no_shard(tmp_path, monkeypatch):
    out = sweep_dir(tmp_path, [row("a"), row("b", verdict="FAIL")])
    done = shards.scan(out).done
    beat = heartbeat.Heartbeat(out, total=4, done=done, skipped=0, workers=2, resume="proofbatch run x")
    plan = _Plan([_check("c", 30.0), _check("d", 1.0, "default")], Workers(1, 2, 2**30))
    beat.plan(plan, WorkLeft(plan))
    with beat:
        beat.row(row("c", verdict="TIMEOUT"))
        beat.publish("running")
        # Reading the shards is what status must not do at a million rows.
        monkeypatch.setattr(shards, "scan", lambda *a, **k: pytest.fail("status scanned the shards"))
        s = status.read_status(out)
        assert s.state == "running" and s.done == 3 and s.total == 4
        assert s.counts == {"OK": 1, "FAIL": 1, "TIMEOUT": 1}
        assert s.eta_s == pytest.approx(1.0 / 2)           # d is left: 1 s on 2 workers
        assert "1 of 2 checks assume the planner's default of 1 s" in s.eta_basis
        assert s.resume is None
        monkeypatch.undo()
        beat.finish(Counter({"OK": 2, "FAIL": 1, "TIMEOUT": 1}), 4, 0)
    s = status.read_status(out)
    assert s.state == "finished" and s.done == 4 and s.eta_s == 0.0


def test_a_killed_runner_is_dead_with_its_resume_command(tmp_path, capsys):
    out = sweep_dir(tmp_path, [row("a")])
    beat = heartbeat.Heartbeat(out, total=4, done=shards.scan(out).done, skipped=0, workers=2,
                               resume=resume_command(json.loads(
                                   (out / "sweep.json").read_text()), out))
    plan = _Plan([_check("b", 30.0)], Workers(1, 2, 2**30))
    beat.plan(plan, WorkLeft(plan))
    beat.publish("running")
    # The runner is gone: its pid names no process on this host.
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    data = json.loads((out / heartbeat.STATUS_FILE).read_text())
    data["pid"] = gone.pid
    (out / heartbeat.STATUS_FILE).write_text(json.dumps(data))
    s = status.read_status(out)
    assert s.state == "dead" and s.eta_s is None
    assert s.resume.startswith("proofbatch run /data/corpus --out ")
    assert s.resume.endswith("--workers 2 --timeout-map /data/map.json")
    assert cli.main(["status", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "dead" in printed and f"resume with: {s.resume}" in printed
    assert "ETA" not in printed


def test_a_stale_heartbeat_from_another_host_is_dead(tmp_path):
    out = sweep_dir(tmp_path, [row("a")])
    heartbeat.Heartbeat(out, total=4, done=shards.scan(out).done, skipped=0, workers=1,
                        resume="proofbatch run c --out o").publish("running")
    data = json.loads((out / heartbeat.STATUS_FILE).read_text())
    data.update(host="elsewhere", beat=data["beat"] - heartbeat.STALE * heartbeat.INTERVAL - 1)
    (out / heartbeat.STATUS_FILE).write_text(json.dumps(data))
    assert status.read_status(out).state == "dead"
    data["beat"] += heartbeat.STALE * heartbeat.INTERVAL       # fresh again: alive
    (out / heartbeat.STATUS_FILE).write_text(json.dumps(data))
    assert status.read_status(out).state == "running"


def test_an_interrupted_runner_says_stopped(tmp_path):
    out = sweep_dir(tmp_path, [row("a")])
    beat = heartbeat.Heartbeat(out, total=4, done=shards.scan(out).done, skipped=0, workers=1,
                               resume="proofbatch run c --out o")
    with pytest.raises(KeyboardInterrupt):
        with beat:
            raise KeyboardInterrupt
    s = status.read_status(out)
    # The command names the sweep directory where it is now (a moved sweep resumes there).
    assert s.state == "stopped" and s.eta_s is None and s.resume == f"proofbatch run c --out {out.resolve()}"


def test_a_sweep_without_heartbeat_is_read_from_its_shards(tmp_path):
    out = sweep_dir(tmp_path, [row("a"), row("b", verdict="ERROR")])
    s = status.read_status(out)
    assert s.state == "unknown" and s.done == 2 and s.counts == {"OK": 1, "ERROR": 1}


def test_a_check_waiting_for_its_image_is_not_running_against_its_limit(tmp_path, capsys):
    """It used to show as past its limit, being stopped, before it had started."""
    import time

    out = sweep_dir(tmp_path, [row("a")])
    board = RunningBoard(out, "w1", "host/1/w1")
    board.start("b", 0, timeout_s=1.0)
    time.sleep(1.2)
    [waiting] = status.read_status(out).running
    assert waiting.elapsed_s == 0.0 and waiting.waiting_s >= 1.2
    assert cli.main(["status", str(out)]) == 0
    # The note may wrap inside its cell: read the words, not the table.
    printed = re.sub(r"[\s│]+", " ", capsys.readouterr().out)
    assert re.search(r"waiting \d+ s for its image", printed), printed
    assert "past its limit" not in printed
    board.started()
    time.sleep(0.1)
    [running] = status.read_status(out).running
    assert 0.1 <= running.elapsed_s < 1.0 and running.waiting_s >= 1.2


def test_status_counts_the_boot_and_the_images_still_to_build(tmp_path):
    """Issue 24: status said `ETA 0 s` with 29 of 32 checks left, their
    images still to build."""
    out = sweep_dir(tmp_path, [row("a")])
    images = {"base": Image("base", None, 80.0, "measured"),
              "i1": Image("i1", "base", 60.0, "estimated"), "i2": Image("i2", "base", 60.0, "estimated")}
    checks = [PlanCheck("b", 0, "generic", 1.0, "map", 2**20, "i1", 60.0, 0),
              PlanCheck("c", 0, "generic", 1.0, "map", 2**20, "i2", 60.0, 1)]
    beat = heartbeat.Heartbeat(out, total=3, done=shards.scan(out).done, skipped=0, workers=2,
                               resume="proofbatch run c --out o")
    plan = make_plan(checks, images, "base", Workers(1, 2, 2**30), PlanConfig(dispatch_s=0.0))
    beat.plan(plan, WorkLeft(plan))
    with beat:
        beat.publish("running")
        assert status.read_status(out).eta_s == pytest.approx(80.0 + (1 + 1 + 60 + 60) / 2)
        events.say("booted", key="base", name="HOL Light")
        beat.row(row("b"))           # b ran, so i1 was built
        beat.publish("running")
        assert status.read_status(out).eta_s == pytest.approx((1 + 60) / 2)
        events.say("imaged", key="i2", name="the context of c")
        beat.publish("running")
        assert status.read_status(out).eta_s == pytest.approx(1 / 2)
        beat.finish(Counter({"OK": 3}), 3, 0)
