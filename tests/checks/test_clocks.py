"""Limits on CPU time, in the real HOL Light (issue 31).

The story: under the default clock a check's limit counts the CPU time of
its own processes. The prover stops an allocating loop at the limit with an
interval timer on its CPU time, and the guard kills a loop that never
allocates once the tree's CPU time passes the limit. A check that gets no
CPU (its process stopped, the host starved) is never a TIMEOUT for it: on
the CPU clock it runs on past its limit in wall time, and past the wall-clock
backstop it is ended and run again. A runner stopped with its checks (a
suspended Slurm job) and continued turns none of them into a TIMEOUT, on
either clock. Every check records its CPU time beside its wall time.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from runner.checks.guard import GuardLimits
from runner.checks.priority import AUTO_NICE, autogroup_nice, priority_refused, resolve_nice
from runner.checks.tasks import CheckTask
from runner.checks.worker import work
from runner.prover import CheckLimits
from runner.results.shards import ShardWriter

from ..helpers import SPIN, on_its_checks, problem, spin_then_prove

# The guard reads a tree's CPU time from /proc, whose user and system times
# are each counted in whole clock ticks; the prover's own (getrusage) is in
# microseconds. So the tree's may read up to two ticks below the proof's.
TICKS = 2 / os.sysconf("SC_CLK_TCK")

pytestmark = pytest.mark.hol

# An allocating loop that never ends (examples/hol_light_demo/fault.loop_alloc).
LOOP = "(fun g -> let rec go (_, gs, _) = go (ONCE_REWRITE_TAC[ADD_SYM] (hd gs)) in go (ALL_TAC g))"
# About a second of CPU that never allocates, then a proof (0.98 s on a quiet
# EPYC here; watchers act 0.2-0.3 s in, so a host three times faster still holds).
WORK = spin_then_prove(300_000_000)
SETUP = "let PB_CLOCKS = new_definition `pb_clocks = 7`;;\n"


def limits(time_s: float, clock: str = "cpu", backstop_s: float | None = None) -> CheckLimits:
    return CheckLimits(time_s=time_s, time_source="default", mem_bytes=2**31,
                       expected_mem_bytes=2**20, clock=clock, backstop_s=backstop_s)


@pytest.fixture(scope="module")
def warm(hol_session, tmp_path_factory):
    """The module's context image, loaded by a check of its own; returns a
    maker of problems in that context."""
    root = tmp_path_factory.mktemp("clocks")

    def make(pid: str, answer: str, query: str = "x + 0 = x"):
        p = problem(root / "corpus", pid, query, answer, setup=SETUP)
        hol_session.prepare([p])
        return p

    first = make("clocks.warm", "ARITH_TAC")
    assert hol_session.check(first, limits(60)).outcome.verdict.value == "OK"
    return make


def stop_its_checks(session, p, *, times: int, after_s: float, for_s: float | None,
                    runner: bool = False) -> threading.Thread:
    """SIGSTOP the first ``times`` checks ``p``'s image forks, ``after_s``
    into their run, and SIGCONT them ``for_s`` later (None: never; the
    guard must end them). With ``runner``, this process is stopped with
    them, as a suspended Slurm job's are: by a shell outside it."""
    def stop(check) -> None:
        targets = " ".join([str(check.pid)] + ([str(os.getpid())] if runner else []))
        script = f"sleep {after_s}; kill -STOP {targets}"
        if for_s is not None:
            script += f"; sleep {for_s}; kill -CONT {targets}"
        shell = subprocess.Popen(["sh", "-c", script])
        if not runner:          # a stopped runner cannot wait for its own stop
            shell.wait()

    return on_its_checks(session, p, times, stop)


def run_task(session, tmp_path: Path, p, lim: CheckLimits):
    rows = []
    with ShardWriter(tmp_path / "out", "w0") as writer:
        work(session, iter([CheckTask(p, lim)]), writer, worker="w0", run_id="r", on_row=rows.append)
    (row,) = rows
    return row


# -- the limit counts CPU time ------------------------------------------------------


def test_the_prover_stops_an_allocating_loop_at_its_cpu_limit(hol_session, warm):
    r = hol_session.check(warm("clocks.loop", LOOP, "!n. n + 1 = n"), limits(3))
    assert r.outcome.verdict.value == "TIMEOUT", r.outcome
    assert r.outcome.reason == "CPU time limit 3 s reached inside the prover"
    assert 2.5 <= r.cpu_secs <= r.wall_secs + 0.5, r
    assert r.prove_cpu_secs is not None and r.prove_cpu_secs <= r.cpu_secs + TICKS


def test_the_guard_kills_a_loop_that_never_allocates_at_its_cpu_limit(hol_session, warm):
    r = hol_session.check(warm("clocks.spin", SPIN), limits(2))
    assert r.outcome.verdict.value == "TIMEOUT", r.outcome
    assert r.outcome.reason.startswith("CPU time limit 2 s (+") and "killed from outside" in r.outcome.reason
    assert r.cpu_secs >= 2 + hol_session.backend.grace_s - 0.1, r


def test_a_check_records_its_cpu_time_beside_its_wall_time(hol_session, warm):
    r = hol_session.check(warm("clocks.work", WORK), limits(60))
    assert r.outcome.verdict.value == "OK", r.outcome
    assert 0.2 <= r.prove_cpu_secs <= r.prove_secs + 0.05, r
    # Its own CPU only: the image's load (seconds of it) is not counted.
    assert r.prove_cpu_secs <= r.cpu_secs + TICKS and r.cpu_secs <= r.wall_secs + 0.5, r


# -- a check can be given its core (issue 31) ----------------------------------------------


def test_a_check_runs_at_the_niceness_it_was_given(hol_session, warm):
    """A check sharing its core with busy processes needs about 1.2x its
    quiet CPU time (benchmarks/limits/cpu_drift.py); ``--nice`` gives it priority,
    set from outside on the forked check, not on its image."""
    p = warm("clocks.nice", WORK)
    seen: list[tuple[int, int]] = []

    def look(check) -> None:
        time.sleep(0.3)     # the guard sets it once it has the pid; WORK runs ~1 s
        seen.append((check.nice(), check.parent().nice(), autogroup_nice(check.pid)))

    mine = os.getpriority(os.PRIO_PROCESS, 0)      # the image's, inherited from this process
    own_before = autogroup_nice("self")     # None where sessions are not grouped
    watcher = on_its_checks(hol_session, p, 1, look)
    r = hol_session.check(p, dataclasses.replace(limits(60), nice=-7))
    watcher.join()
    assert r.outcome.verdict.value == "OK", r.outcome
    # Its session's group too, where the kernel groups sessions: the check
    # leads a session of its own, and niceness weighs only inside a group.
    # (Where the kernel has them, setsid(2) gives the check a group of its
    # own, even when this process is in the boot session's, which prints
    # nothing.)
    grouped = Path("/proc/self/autogroup").exists()
    assert seen == [(-7, mine, "-7" if grouped else None)], seen
    # The runner's own group is left as it was.
    assert autogroup_nice("self") == own_before


def test_a_niceness_the_runner_may_not_give_is_refused_before_the_sweep():
    assert priority_refused(0) is None and priority_refused(19) is None
    assert "not a niceness" in priority_refused(-21)
    # An unprivileged user may lower priority only (setpriority(2)).
    # (Imported first: the interpreter's own files need not be readable by nobody.)
    probe = ("import os, resource; from runner.checks.priority import priority_refused as r, "
             "resolve_nice as auto; resource.setrlimit(resource.RLIMIT_NICE, (0, 0)); "
             "os.setgroups([]); os.setgid(65534); os.setuid(65534); print(r(5)); print(r(-5)); "
             "print(auto(None, 'cpu'))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=Path(__file__).parents[2], check=True).stdout.splitlines()
    assert out == ["None", "niceness -5 raises priority, which needs root or CAP_SYS_NICE", "0"], out


def test_auto_gives_checks_priority_on_the_cpu_clock_where_it_may():
    """--nice auto, the default: a verdict on CPU time should not depend on
    the host's other work, so checks get -10 where the runner may give it;
    under the wall clock they run as the bench's harness runs them."""
    may = priority_refused(AUTO_NICE) is None
    assert resolve_nice(None, "cpu") == (AUTO_NICE if may else 0)
    assert resolve_nice(None, "wall") == 0
    assert resolve_nice(5, "cpu") == 5 and resolve_nice(-3, "wall") == -3
    if os.geteuid() == 0:
        assert may and AUTO_NICE < 0


# -- a check that gets no CPU is not a TIMEOUT ----------------------------------------------


def test_a_check_stopped_past_its_limit_is_ok_on_the_cpu_clock_and_not_on_the_wall_clock(
        hol_session, warm):
    p = warm("clocks.starved", WORK)
    stopper = stop_its_checks(hol_session, p, times=1, after_s=0.3, for_s=4)
    r = hol_session.check(p, limits(2))
    stopper.join(timeout=10)
    assert r.outcome.verdict.value == "OK" and r.wall_secs > 4, r
    # The same starvation under the wall clock, s2n-bignum-bench's, is a TIMEOUT.
    stopper = stop_its_checks(hol_session, p, times=1, after_s=0.3, for_s=4)
    r = hol_session.check(p, limits(2, clock="wall"))
    stopper.join(timeout=10)
    assert r.outcome.verdict.value == "TIMEOUT", r


def test_a_check_stopped_past_the_backstop_is_ended_and_run_again(hol_session, warm, tmp_path):
    p = warm("clocks.backstop", WORK)
    stopper = stop_its_checks(hol_session, p, times=1, after_s=0.3, for_s=None)
    # The backstop is wall time, and the check run again (about 1 s of CPU)
    # must not reach it: 8 s holds while it gets an eighth of a core.
    row = run_task(hol_session, tmp_path, p, limits(2, backstop_s=8))
    stopper.join(timeout=10)
    assert (row.verdict, row.infra_retries) == ("OK", 1), row
    assert row.cpu_secs is not None and row.limit_clock == "cpu" and row.host_cpus == os.cpu_count()


def test_a_check_starved_every_time_says_so_and_is_no_timeout(hol_session, warm, tmp_path):
    from runner.checks.guard import BACKSTOP, OUTSIDE_RETRIES

    p = warm("clocks.always", WORK)
    stopper = stop_its_checks(hol_session, p, times=OUTSIDE_RETRIES + 1, after_s=0.2, for_s=None)
    row = run_task(hol_session, tmp_path, p, limits(1, backstop_s=2))
    stopper.join(timeout=10)
    assert row.verdict == "ERROR" and row.infra_retries == OUTSIDE_RETRIES, row
    assert row.reason.startswith(BACKSTOP) and "starved by the host or blocked" in row.reason, row.reason
    assert f"{OUTSIDE_RETRIES + 1} times" in row.reason and "CPUs" in row.reason, row.reason


# -- the runner stopped and continued -------------------------------------------------------


@pytest.mark.parametrize("clock", ["cpu", "wall"])
def test_a_runner_stopped_with_its_checks_and_continued_turns_none_into_timeout(
        hol_session, warm, tmp_path, clock):
    """A suspended Slurm job stops every process of the job: the runner (its
    guard) and the check. The stop is 6 s, past the 3 s limit and the 5 s
    backstop. On the CPU clock nothing counts it; on the wall clock the
    prover's own alarm does, and the check runs again. (Half a second of
    CPU: on the wall clock a loaded host must still prove it in 3 s.)"""
    p = warm(f"clocks.suspended_{clock}", spin_then_prove(150_000_000))
    stopper = stop_its_checks(hol_session, p, times=1, after_s=0.2, for_s=6, runner=True)
    row = run_task(hol_session, tmp_path, p, limits(3, clock=clock, backstop_s=5))
    stopper.join(timeout=10)
    assert row.verdict == "OK", row
    if clock == "cpu":      # the same check, its stop excluded from its backstop
        assert row.infra_retries == 0 and row.wall_secs > 6, row
    else:                   # run again: the row is the second check's
        assert row.infra_retries == 1, row


def test_the_default_limits_count_cpu_time():
    assert limits(1).clock == "cpu" and dataclasses.replace(limits(1), clock="wall").clock == "wall"
    # The guard's backstop when none is given: max(3 x limit, limit + 300 s).
    assert GuardLimits(1, 1).backstop() == 301.0
    assert GuardLimits(200, 1).backstop() == 600.0
