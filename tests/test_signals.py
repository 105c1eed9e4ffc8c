"""Stopping, continued (issue 24, parts 1 and 2): SIGHUP (an ssh session
dropped) stops a sweep as SIGTERM does, says so and marks it stopped; Ctrl-C
whose output pipe died with it (`| tee`) still exits 130 and marks it
stopped; and a kill -9 of the runner leaves nothing in TMPDIR in every
mode: bytecode (tests/test_stopping.py), native, and --server.

Built on tests/test_stopping.py's way: a real `proofbatch run` subprocess
whose TMPDIR is the test's own folder, signalled during the base boot.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.checks.image_server import ImageServer

from .helpers import DEMO, ROOT, make_corpus
from .test_stopping import LOOP, QUICK, SIGNALS_AT_DEFAULT, STOPPED_WITHIN_S, booting, leftovers, \
    wait_for, workdir

pytestmark = pytest.mark.hol


def start(tmp_path: Path, problems: dict, *extra: str, mode: str = "bytecode", stdout=None,
          stderr=None) -> tuple[subprocess.Popen, Path, Path]:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    c = make_corpus(tmp_path / "corpus", problems)
    out = tmp_path / "out"
    argv = [*SIGNALS_AT_DEFAULT, sys.executable, "-m", "runner.cli", "run", str(c), "--out", str(out),
            "--workers", "2", "--default-timeout", "300", "--mem-limit", "2G", "--mode", mode,
            *extra]
    env = {**os.environ, "TMPDIR": str(tmp)}
    runner = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL if stdout is None else stdout,
                              stderr=subprocess.DEVNULL if stderr is None else stderr)
    return runner, tmp, out


def state(out: Path) -> str | None:
    try:
        return json.loads((out / "status.json").read_text())["state"]
    except (OSError, ValueError, KeyError):
        return None


def nothing_left(tmp: Path) -> None:
    wait_for(lambda: not leftovers(tmp), STOPPED_WITHIN_S, f"no process left ({leftovers(tmp)})")
    wait_for(lambda: not list(tmp.iterdir()), STOPPED_WITHIN_S,
             f"nothing left in TMPDIR ({[p.name for p in tmp.iterdir()]})")


def signal_in_boot(runner: subprocess.Popen, tmp: Path, sig: signal.Signals) -> tuple[int, float]:
    wait_for(lambda: booting(tmp), 60, "the base image to start booting")
    time.sleep(2)
    sent = time.monotonic()
    runner.send_signal(sig)
    code = runner.wait(timeout=60)
    return code, time.monotonic() - sent


# -- SIGHUP ----------------------------------------------------------------------


def test_sighup_stops_the_sweep_says_so_and_marks_it_stopped(tmp_path):
    log = tmp_path / "log"
    with open(log, "wb") as f:
        runner, tmp, out = start(tmp_path, QUICK, stdout=f, stderr=subprocess.STDOUT)
    try:
        code, took = signal_in_boot(runner, tmp, signal.SIGHUP)
    finally:
        runner.kill()
    text = log.read_text()
    assert code == 129, (code, text)
    assert took < STOPPED_WITHIN_S, f"the runner took {took:.1f} s to stop"
    assert "Traceback" not in text, text
    # The log ends with the word, on a line of its own.
    assert text.endswith("\n") and "SIGHUP" in text.splitlines()[-1], text
    assert state(out) == "stopped"
    nothing_left(tmp)


def test_sighup_with_its_terminal_gone_still_stops_cleanly(tmp_path):
    """A dropped ssh session: the terminal hangs up, then every write to it
    fails (EIO), the live display's included."""
    master, slave = os.openpty()
    runner, tmp, out = start(tmp_path, QUICK, stdout=slave, stderr=slave)
    os.close(slave)
    try:
        wait_for(lambda: booting(tmp), 60, "the base image to start booting")
        time.sleep(2)
        os.close(master)
        runner.send_signal(signal.SIGHUP)
        code = runner.wait(timeout=60)
    finally:
        runner.kill()
    assert code == 129, code
    assert state(out) == "stopped"
    nothing_left(tmp)


def test_nohup_ignores_the_hang_up(tmp_path):
    """`nohup proofbatch run ...` asked to survive a hang-up: it does."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # SIGHUP at its default first: the launcher's own nohup must not be what passes this.
    argv = [*SIGNALS_AT_DEFAULT, "nohup", sys.executable, "-m", "runner.cli", "run",
            str(make_corpus(tmp_path / "corpus", QUICK)), "--out", str(tmp_path / "out"),
            "--mem-limit", "2G"]
    runner = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp)},
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: booting(tmp), 60, "the base image to start booting")
        runner.send_signal(signal.SIGHUP)
        time.sleep(2)
        assert runner.poll() is None, "a nohup'd runner stopped on SIGHUP"
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=60) == 143
    finally:
        runner.kill()
    nothing_left(tmp)


# -- Ctrl-C through `| tee` ----------------------------------------------------------


def test_ctrl_c_with_its_output_pipe_closed_exits_130_and_marks_stopped(tmp_path):
    """Ctrl-C reaches tee too: the runner's stdout and stderr are a pipe
    nobody reads any more."""
    read, write = os.pipe()
    runner, tmp, out = start(tmp_path, QUICK, stdout=write, stderr=write)
    os.close(write)
    try:
        wait_for(lambda: booting(tmp), 60, "the base image to start booting")
        time.sleep(2)
        os.close(read)                  # tee is gone
        runner.send_signal(signal.SIGINT)
        code = runner.wait(timeout=60)
    finally:
        runner.kill()
    assert code == 130, code
    assert state(out) == "stopped"
    nothing_left(tmp)


# -- kill -9: nothing left, in every mode ----------------------------------------------


def test_kill_9_of_a_native_runner_leaves_nothing(native_build, tmp_path):
    runner, tmp, out = start(tmp_path, QUICK, mode="native")
    try:
        code, _ = signal_in_boot(runner, tmp, signal.SIGKILL)
    finally:
        runner.kill()
    assert code == -signal.SIGKILL
    nothing_left(tmp)


@pytest.fixture(scope="module")
def image_server(hol_session, tmp_path_factory):
    srv = ImageServer(hol_session, tmp_path_factory.mktemp("image-server")).start()
    yield srv
    srv.close()


def test_kill_9_of_a_runner_with_server_leaves_nothing(image_server, tmp_path):
    problems = {"stop.loop": ("", "`!n. n + 1 = n`\n", LOOP + "\n")}
    # The server finishes an orphaned check: let it be a short one.
    runner, tmp, out = start(tmp_path, problems, "--server", str(image_server.dir),
                             "--context-root", str(DEMO), "--default-timeout", "5")
    try:
        # Its check runs in the server; the runner has made its scratch folder.
        wait_for(lambda: workdir(tmp) is not None and (out / "running").is_dir()
                 and any((out / "running").iterdir()), 60, "the check to start")
        time.sleep(1)
        runner.send_signal(signal.SIGKILL)
        assert runner.wait(timeout=60) == -signal.SIGKILL
    finally:
        runner.kill()
    nothing_left(tmp)
