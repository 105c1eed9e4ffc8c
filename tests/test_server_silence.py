"""A silent image server (issue 33, point 4): `run --server` stops, it never waits for ever.

A server stopped by kill -STOP keeps its socket: connecting and asking wait
on a process that never answers. A runner hears the server's beat while a
check runs (runner/checks/image_server.py); after --server-timeout seconds
of silence it stops with exit 1 and one line naming the server folder, what
did not answer, how long it waited and what to do, and records nothing for
it. A live server whose check outlasts that timeout is no silence.

The server is a real process that can be stopped: an ImageServer serving
the toy prover's session (tests/toy_prover, a real process behind every
check), since what is tested is the server's transport, the same whatever
session it serves; booting HOL Light for it would cost 70-90 s of CPU.
The runner is the real `proofbatch run --server` in a subprocess.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from runner.prover_registry import ENV

from .helpers import ROOT
from .test_registry import TOY_REF, toy_corpus

TIMEOUT_S = 3

SERVER = """
import sys
from pathlib import Path
from runner.checks.image_server import ImageServer
from tests.toy_prover import ToyBackend
corpus, folder = Path(sys.argv[1]), Path(sys.argv[2])
server = ImageServer(ToyBackend(corpus).start(folder.parent / "server-work"), folder)
print("serving", flush=True)
server.serve_forever()
"""


def _env() -> dict[str, str]:
    return {**os.environ, ENV: TOY_REF,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


@pytest.fixture
def toy_server(tmp_path):
    """(corpus, server folder, server process): a toy corpus whose `slow`
    problem takes hours, served by a real server process."""
    corpus = toy_corpus(tmp_path / "corpus", {"ok": ("6 * 7", "42", "OK"),
                                              "slow": ("sum(range(10**12))", "0", "TIMEOUT")})
    folder = tmp_path / "srv"
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(corpus), str(folder)], cwd=ROOT,
                            env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "serving"
        yield corpus, folder, proc
    finally:
        _end(proc)


def _end(proc: subprocess.Popen) -> None:
    """The process and every child it left (a toy check runs in its own session)."""
    try:
        family = [proc.pid] + [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = [proc.pid]
    for pid in family:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def _runner(corpus: Path, folder: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "runner.cli", "run", str(corpus), "--out",
                             str(out), "--server", str(folder), "--server-timeout", str(TIMEOUT_S),
                             "--workers", "1", *extra], cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(runner: subprocess.Popen, within: float) -> tuple[int, list[str], float]:
    """(exit code, stderr lines, seconds waited); kills a runner that hangs."""
    started = time.monotonic()
    try:
        _, err = runner.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        _end(runner)
        pytest.fail(f"the runner was still waiting after {within:.0f} s")
    return runner.returncode, err.strip().splitlines(), time.monotonic() - started


def _rows(out: Path) -> int:
    from runner.results.shards import read_results

    return read_results(out).num_rows if out.exists() else 0


def _said_silence(line: str, folder: Path, what: str, pid: int) -> None:
    assert line.startswith("proofbatch: the image server in "), line
    assert f"{folder} (pid {pid}) did not answer {what} within {TIMEOUT_S} s" in line, line
    assert f"kill -CONT {pid}" in line and "run the same command again" in line, line


def test_a_stopped_server_is_reported_not_waited_for(toy_server, tmp_path):
    corpus, folder, server = toy_server
    os.kill(server.pid, signal.SIGSTOP)
    try:
        code, err, secs = _finish(_runner(corpus, folder, tmp_path / "out"), within=30)
    finally:
        os.kill(server.pid, signal.SIGCONT)
    assert code == 1, err
    _said_silence(err[-1], folder, "the connection's handshake", server.pid)
    assert secs < 4 * TIMEOUT_S + 10
    assert _rows(tmp_path / "out") == 0


def test_a_server_stopped_mid_check_records_no_verdict(toy_server, tmp_path):
    corpus, folder, server = toy_server
    runner = _runner(corpus, folder, tmp_path / "out", "--problems", "slow")
    # The check of `slow` is running once the server has a child (the toy's checker).
    deadline = time.monotonic() + 60
    while not psutil.Process(server.pid).children() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert psutil.Process(server.pid).children(), "the check never started"
    os.kill(server.pid, signal.SIGSTOP)
    try:
        code, err, _ = _finish(runner, within=30)
    finally:
        os.kill(server.pid, signal.SIGCONT)
    assert code == 1, err
    _said_silence(err[-1], folder, "the check of slow", server.pid)
    assert _rows(tmp_path / "out") == 0


def test_a_live_server_s_check_may_outlast_the_timeout(toy_server, tmp_path):
    """The server beats while `slow` runs to its 5 s limit, past the 3 s timeout."""
    corpus, folder, _ = toy_server
    runner = _runner(corpus, folder, tmp_path / "out", "--default-timeout", "5", "--grace", "0.5",
                     "--limit-clock", "wall")
    code, err, secs = _finish(runner, within=60)
    assert code == 0, err
    from runner.results.shards import read_results

    rows = {r["problem_id"]: r["verdict"] for r in read_results(tmp_path / "out").to_pylist()}
    assert rows == {"ok": "OK", "slow": "TIMEOUT"} and secs > TIMEOUT_S


def test_a_timeout_shorter_than_the_beat_allows_is_refused(tmp_path):
    from runner.checks.image_server import RemoteSession
    from runner.errors import InputError

    with pytest.raises(InputError, match="--server-timeout: 1 s is shorter than the server's beat"):
        RemoteSession(tmp_path, 1)
