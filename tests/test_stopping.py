"""Stopping a sweep: Ctrl-C stops it within seconds, and no signal to the
runner (SIGINT, SIGTERM, SIGKILL) leaves a prover process or a work
directory behind, whether it comes during the base boot, while an image
loads its context or while checks run.

Each runner is a real `proofbatch run` subprocess with its own HOL Light.
Its TMPDIR is the test's own folder: the work directory is made there, and
every process of the runner's session inherits that TMPDIR in its
environment, which is how a leftover is found. A boot is what costs here,
so the stages after the boot share one runner per signal: two workers, one
check that loops until its 300 s limit beside an image that loads a context
for 120 s. SIGKILL runs in bytecode, where a loading image used to outlive
its runner for ever; SIGINT and SIGTERM run natively, whose base boots in a
fraction of the time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from runner.results import heartbeat, lost
from runner.results.running import retire_boards

from .helpers import ROOT, make_corpus

pytestmark = pytest.mark.hol

LOOP = "(fun g -> let rec go (_, gs, _) = go (ONCE_REWRITE_TAC[ADD_SYM] (hd gs)) in go (ALL_TAC g))"
# A context that keeps its image loading for two minutes of CPU.
SLOW_CONTEXT = ("let proofbatch_slow_context =\n"
                "  let t = Sys.time () in while Sys.time () -. t < 120.0 do () done;;\n")
STOPPED_WITHIN_S = 10.0
# A suite started from a background shell (`&`, nohup) hands its children
# SIGINT (and under nohup SIGHUP) ignored, and proofbatch rightly keeps an
# ignored signal ignored; so each runner here is started through coreutils'
# `env --default-signal`, which execs it (same pid) with both at their
# default, as a terminal's foreground job has them.
SIGNALS_AT_DEFAULT = ("env", "--default-signal=INT,HUP")


QUICK = {"stop.quick": ("", "`x + 0 = x`\n", "ARITH_TAC\n")}
BUSY = {"stop.loop": ("", "`!n. n + 1 = n`\n", LOOP + "\n"),
        "stop.slow_context": (SLOW_CONTEXT, "`x + 0 = x`\n", "ARITH_TAC\n")}


def start_runner(tmp_path: Path, *, busy: bool, mode: str) -> tuple[subprocess.Popen, Path]:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    c = make_corpus(tmp_path / "corpus", BUSY if busy else QUICK)
    argv = [*SIGNALS_AT_DEFAULT, sys.executable, "-m", "runner.cli", "run", str(c),
            "--out", str(tmp_path / "out"),
            "--workers", "2", "--default-timeout", "300", "--mem-limit", "2G", "--mode", mode]
    env = {**__import__("os").environ, "TMPDIR": str(tmp)}
    runner = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    return runner, tmp


def leftovers(tmp: Path) -> list[str]:
    """Live processes started under the test's TMPDIR."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("TMPDIR") == str(tmp) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{proc.pid} {' '.join(proc.cmdline())[:100]}")
        except (psutil.Error, OSError):
            continue
    return found


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def workdir(tmp: Path) -> Path | None:
    return next(tmp.glob("proofbatch-*"), None)


# A session keeps images/ and checks/ in its work directory; a native one in
# WORKDIR/native/, beside the bytecode session it falls back to.
def booting(tmp: Path) -> bool:
    d = workdir(tmp)
    return d is not None and any(d.rglob("images/base.log"))


def busy(tmp: Path) -> bool:
    """A check runs and a context image loads, both at once."""
    d = workdir(tmp)
    if d is None:
        return False
    checking = any(p.is_dir() for p in d.rglob("checks/*"))
    # Not the base, nor the empty images checks of blank contexts fork from.
    loading = [p for p in d.rglob("images/*.log")
               if p.name != "base.log" and not p.stem.endswith(("-checks", "-blank"))]
    return checking and bool(loading)


def stop_and_check(runner: subprocess.Popen, tmp: Path, sig: signal.Signals) -> None:
    signalled = time.monotonic()
    runner.send_signal(sig)
    code = runner.wait(timeout=60)
    took = time.monotonic() - signalled
    stderr = runner.stderr.read()
    expected = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -signal.SIGKILL}[sig]
    assert code == expected, (code, stderr)
    assert "Traceback" not in stderr, stderr
    if sig is not signal.SIGKILL:
        assert took < STOPPED_WITHIN_S, f"the runner took {took:.1f} s to stop"
    # After a kill -9 the janitor tidies up; after a clean stop it is done already.
    wait_for(lambda: not leftovers(tmp), STOPPED_WITHIN_S, f"no process left ({leftovers(tmp)})")
    wait_for(lambda: workdir(tmp) is None, STOPPED_WITHIN_S, "the work directory to go")


def signal_when(tmp_path, sig, *, busy: bool, mode: str, ready, within_s: float, what: str):
    """Start a runner, wait until ``ready(tmp)``, signal it, and find nothing left."""
    runner, tmp = start_runner(tmp_path, busy=busy, mode=mode)
    try:
        wait_for(lambda: ready(tmp), within_s, what)
        time.sleep(2 if not busy else 1)
        stop_and_check(runner, tmp, sig)
    finally:
        runner.kill()


def lost_loop(out: Path, sig: signal.Signals) -> None:
    """The endless check the signal cut short is counted as lost, under the
    signal's name; after a kill -9, once the next runner retires the board
    entry it left (runner/results/running.py)."""
    if sig is signal.SIGKILL:
        assert not lost.read(out)               # nobody was left to say it
        # As the next runner does it: the dead one was alive until its last beat.
        retired = retire_boards(out, alive_until=heartbeat.read(out)["beat"])
        assert [r.problem_id for r in retired] == ["stop.loop"] and retired[0].cause == lost.SILENT
    (loss,) = [x for x in lost.read(out) if x.problem_id == "stop.loop"]
    assert loss.cause == {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM",
                          signal.SIGKILL: lost.SILENT}[sig], loss
    # From its start in its image; its CPU time is what its guard last
    # published (every 10 s: none yet, a second in), a lower bound. A runner
    # killed without a word was alive until its last beat (every 2 s), which
    # may have come before the check started: a lower bound of 0.
    assert loss.cpu_s >= 0 and (loss.wall_s > 0 if sig is not signal.SIGKILL else loss.wall_s >= 0)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_signal_during_the_base_boot_leaves_nothing(tmp_path, sig):
    signal_when(tmp_path, sig, busy=False, mode="bytecode", ready=booting, within_s=60,
                what="the base image to start booting")


@pytest.mark.parametrize("sig, mode", [(signal.SIGINT, "native"), (signal.SIGTERM, "native"),
                                       (signal.SIGKILL, "bytecode")])
def test_a_signal_while_images_load_and_checks_run_leaves_nothing(native_build, tmp_path, sig, mode):
    signal_when(tmp_path, sig, busy=True, mode=mode, ready=busy, within_s=300,
                what="a check and an image build at once")
    lost_loop(tmp_path / "out", sig)
    if sig is not signal.SIGKILL:
        # The images the stopped run built are recorded, its base boot among
        # them: the stop closes the session before the record is written.
        (record,) = (tmp_path / "out" / "images").glob("*.json")
        builds = json.loads(record.read_text())["builds"]
        assert any(b["parent"] is None and b["secs"] > 0 and not b["key"].startswith("native-compile:")
                   for b in builds), builds
