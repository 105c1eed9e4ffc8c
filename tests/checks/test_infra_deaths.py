"""Deaths that are not the check's doing (issue 24, parts 3 and 5).

A check killed from outside (the kernel's OOM killer, an admin's kill -9)
says nothing of its answer: it runs again on a fresh fork, at most
runner.checks.guard.OUTSIDE_RETRIES times, and only then is its death recorded,
naming the signal as the OS does (SIGKILL, not OCaml's -7). Kills of our own
guards stay TIMEOUT and MEMOUT. And when a piece of the infrastructure goes
(the image server, an image), the message says what went and what to do.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from runner.errors import ProverError
from runner.checks.guard import OUTSIDE_RETRIES, death_reason, signal_name
from runner.checks.image_server import RemoteSession
from runner.prover import BackendInfo, CheckLimits, CheckResult
from runner.results import lost
from runner.results.rows import rows_to_table
from runner.results.running import RunningBoard
from runner.results.shards import ShardWriter
from runner.verdicts import Outcome, Verdict
from runner.checks.tasks import CheckTask
from runner.checks.worker import outside_deaths, work

from ..helpers import ROOT, on_its_checks, problem, spin_then_prove

LIMITS = CheckLimits(time_s=30, time_source="default", mem_bytes=2**31, expected_mem_bytes=2**20)


# -- the signal, as the OS names it --------------------------------------------


def test_ocaml_signal_numbers_are_named_as_the_os_names_them():
    assert signal_name("signal -7") == "SIGKILL"       # Sys.sigkill
    assert signal_name("signal -10") == "SIGSEGV"      # Sys.sigsegv
    assert signal_name("signal -11") == "SIGTERM"
    assert signal_name("signal -27") == "SIGXCPU"
    assert signal_name("signal 9") == "SIGKILL"        # one OCaml does not know: the OS's number
    assert signal_name("signal SIGKILL") == "SIGKILL"
    assert signal_name("exit 0") is None
    reason = death_reason("signal -7")
    assert "SIGKILL" in reason and "from outside" in reason
    assert "from outside" not in death_reason("signal -10")     # a crash is the check's own


# -- the worker's retries, on a session that dies as told -------------------------


class Scripted:
    """A session whose checks end as ``script`` says, in order."""

    info = BackendInfo(prover="hol-light", build="test", mode="bytecode")

    def __init__(self, script: list[CheckResult]):
        self.script, self.calls = list(script), 0

    def check(self, problem, limits):
        self.calls += 1
        return self.script.pop(0)

    def withdraw(self, problem):
        pass


def died(status: str = "signal -7") -> CheckResult:
    return CheckResult(Outcome(Verdict.ERROR, death_reason(status)), None, 0.5, None, "k", status)


def ended(verdict: Verdict, reason: str, status: str = "exit 0") -> CheckResult:
    return CheckResult(Outcome(verdict, reason), 0.1, 0.5, None, "k", status)


def run_one(tmp_path: Path, session) -> "object":
    p = problem(tmp_path / "corpus", "infra.one", "x + 0 = x", "ARITH_TAC")
    rows = []
    with ShardWriter(tmp_path / "out", "w0") as writer:
        work(session, iter([CheckTask(p, LIMITS)]), writer, worker="w0", run_id="r",
             on_row=rows.append)
    (row,) = rows
    return row


def test_a_check_killed_from_outside_runs_again_and_its_verdict_is_recorded(tmp_path):
    session = Scripted([died(), ended(Verdict.OK, "proved in 0.1 s")])
    row = run_one(tmp_path, session)
    assert (row.verdict, row.infra_retries, session.calls) == ("OK", 1, 2)


def test_a_check_killed_past_the_bound_is_recorded_naming_sigkill(tmp_path):
    session = Scripted([died()] * (OUTSIDE_RETRIES + 1))
    row = run_one(tmp_path, session)
    assert session.calls == OUTSIDE_RETRIES + 1
    assert row.verdict == "ERROR" and row.infra_retries == OUTSIDE_RETRIES
    assert "SIGKILL" in row.reason and "-7" not in row.reason.split("(")[0], row.reason
    summary = outside_deaths(rows_to_table([row]))
    assert summary is not None and summary.startswith(f"{OUTSIDE_RETRIES + 1} deaths"), summary


@pytest.mark.parametrize("result", [
    ended(Verdict.TIMEOUT, "time limit 30 s (+2 s grace) passed without a verdict; killed from "
          "outside", "signal -7"),
    ended(Verdict.MEMOUT, "memory guard: 2100 MiB passed the 2048 MiB limit; killed", "signal -7"),
    ended(Verdict.ERROR, "verdict channel overflow; killed", "signal -7"),
    died("signal -10"),                   # a crash: SIGSEGV
    died("signal -27"),                   # the CPU limit: SIGXCPU
], ids=["our-timer", "our-memory-guard", "our-channel-guard", "sigsegv", "sigxcpu"])
def test_kills_of_our_own_guards_and_crashes_are_not_retried(tmp_path, result):
    session = Scripted([result, ended(Verdict.OK, "proved")])
    row = run_one(tmp_path, session)
    assert session.calls == 1 and row.infra_retries == 0
    assert row.verdict == result.outcome.verdict.value
    assert outside_deaths(rows_to_table([row])) is None


# -- a real check, killed from outside -------------------------------------------


# About a second of work here (0.98 s on a quiet EPYC), then a proof; the kill
# lands KILL_AFTER_S into a run, well before a faster host would finish.
LONG = spin_then_prove(300_000_000)
# Never finishes under its kills: ten times LONG, so no host outruns them.
ENDLESS = spin_then_prove(3_000_000_000)
KILL_AFTER_S = 0.2


def kill_its_checks(session, p, times: int) -> threading.Thread:
    """kill -9, from outside, the first ``times`` checks ``p``'s image forks,
    each KILL_AFTER_S into its run."""
    def kill(check) -> None:
        time.sleep(KILL_AFTER_S)
        try:
            check.kill()
        except psutil.NoSuchProcess:
            pass

    return on_its_checks(session, p, times, kill)


def check_killed(hol_session, tmp_path: Path, pid: str, answer: str, setup: str, *,
                 kills: int, time_s: float = 120):
    """The row of ``answer``'s check, its first ``kills`` forks killed from
    outside; its context's image is loaded first, by a check of its own."""
    warm = problem(tmp_path / "corpus", f"{pid}.warm", "x + 0 = x", "ARITH_TAC", setup=setup)
    p = problem(tmp_path / "corpus", pid, "x + 0 = x", answer, setup=setup)
    hol_session.prepare([warm, p])
    limits = CheckLimits(time_s=time_s, time_source="default", mem_bytes=2**31,
                         expected_mem_bytes=2**20)
    rows = []
    with ShardWriter(tmp_path / "out", "w0") as writer:
        work(hol_session, iter([CheckTask(warm, limits)]), writer, worker="w0", run_id="r",
             on_row=rows.append)
        assert rows[-1].verdict == "OK", rows[-1]
        killer = kill_its_checks(hol_session, p, times=kills) if kills else None
        work(hol_session, iter([CheckTask(p, limits)]), writer, worker="w0", run_id="r",
             on_row=rows.append, board=RunningBoard(tmp_path / "out", "w0", "w0"))
    if killer is not None:
        killer.join(timeout=5)
    return rows[-1]


def test_a_real_check_killed_by_kill_9_is_retried_then_ok(hol_session, tmp_path):
    row = check_killed(hol_session, tmp_path, "infra.once", LONG,
                       "let PB_INFRA_A = new_definition `pb_infra_a = 1`;;\n", kills=1)
    assert (row.verdict, row.infra_retries) == ("OK", 1), row
    # The killed run is compute lost: report counts it (runner/results/lost.py).
    (loss,) = lost.read(tmp_path / "out")
    assert (loss.problem_id, loss.cause) == ("infra.once", lost.RETRIED) and loss.wall_s > 0


def test_a_real_check_killed_every_time_is_recorded_as_sigkill(hol_session, tmp_path):
    # A 1 s kill once missed LONG on a fast fresh host: it proved in 0.98 s.
    row = check_killed(hol_session, tmp_path, "infra.always", ENDLESS,
                       "let PB_INFRA_B = new_definition `pb_infra_b = 2`;;\n",
                       kills=OUTSIDE_RETRIES + 1)
    assert row.verdict == "ERROR" and row.infra_retries == OUTSIDE_RETRIES, row
    assert "killed by SIGKILL" in row.reason, row.reason


def test_our_own_timer_kill_stays_timeout_and_is_not_retried(hol_session, tmp_path):
    # A loop that never allocates never sees the prover's alarm: the guard kills it.
    spin = "(fun g -> let rec go () = go () in go (); ALL_TAC g)"
    row = check_killed(hol_session, tmp_path, "infra.timer", spin,
                       "let PB_INFRA_C = new_definition `pb_infra_c = 3`;;\n", kills=0, time_s=1)
    assert (row.verdict, row.infra_retries) == ("TIMEOUT", 0), row


# -- the infrastructure going away: what the message says --------------------------


FAKE_SERVER = textwrap.dedent("""
    import sys, time
    from runner.checks.image_server import ImageServer
    from runner.prover import BackendInfo

    class Session:
        info = BackendInfo(prover="hol-light", build="test", mode="bytecode")
        backend = None          # the server's session answers for its backend (runner.prover)
        def check(self, problem, limits):
            time.sleep(60)

    ImageServer(Session(), sys.argv[1]).start()
    print("up", flush=True)
    time.sleep(600)
""")


def test_a_killed_image_server_is_named_with_the_fix(tmp_path):
    d = tmp_path / "server"
    server = subprocess.Popen([sys.executable, "-c", FAKE_SERVER, str(d)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "up"
        remote = RemoteSession(d)
        p = problem(tmp_path / "corpus", "server.gone", "x + 0 = x", "ARITH_TAC")
        threading.Timer(0.5, lambda: os.kill(server.pid, signal.SIGKILL)).start()
        with pytest.raises(ProverError) as caught:
            remote.check(p, LIMITS)
    finally:
        server.kill()
        server.wait()
    message = str(caught.value)
    assert not message.rstrip().endswith(":"), message
    assert f"the image server in {d} went away" in message
    assert f"proofbatch serve {d}" in message and "run the same command again" in message


def test_a_killed_image_is_named_with_the_fix(tmp_path):
    from runner.provers.hol_light.session.fork_server import ImageProcess, PipePair

    read, write = os.pipe()
    os.close(read)                   # the image is gone: nothing reads its commands
    image = ImageProcess("0605abc", os.getpid(), PipePair(tmp_path / "c", tmp_path / "r"),
                         tmp_path / "0605abc.log", cmd_fd=write)
    try:
        with pytest.raises(ProverError) as caught:
            image.request("FORK", "a", "b")
    finally:
        os.close(write)
    message = str(caught.value)
    assert "killed or crashed" in message and "run the same command again" in message.lower()
    assert str(tmp_path / "0605abc.log") in message


@pytest.mark.hol
def test_serve_says_what_it_does_while_hol_light_boots(tmp_path):
    """Its boot takes minutes on a loaded host: it says so at once, not
    only when it serves; and SIGTERM stops it cleanly."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    serve = subprocess.Popen([sys.executable, "-m", "runner.cli", "serve", str(tmp_path / "srv")],
                             cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp)},
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("booting HOL Light" in l for l in lines):
            lines.append(serve.stderr.readline())
        assert any("booting HOL Light" in l for l in lines), lines
        assert not any("serving" in l for l in lines), lines      # still booting
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=60) == 143
    finally:
        serve.kill()
        serve.wait()
    deadline = time.monotonic() + 15
    while list(tmp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not list(tmp.iterdir()), list(tmp.iterdir())
