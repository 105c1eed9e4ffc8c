"""The guard's sampling: often as a check starts, rarely once it is long.

A sample costs the runner CPU time that a full node's checks pay for in wall
time (runner/checks/guard.py). These tests watch a real spinning process
through ``enforce``, the loop every prover's checks run under.
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from runner.checks.guard import POLL_AGE_SHARE, GuardLimits, enforce
from runner.verdicts import Termination, Verdict

LIMITS = GuardLimits(time_s=60.0, mem_bytes=1 << 34, clock="wall")


def test_a_check_is_sampled_every_2_percent_of_its_age_between_the_bounds():
    assert LIMITS.interval(0.0) == LIMITS.poll_s
    assert LIMITS.interval(0.5) == LIMITS.poll_s
    assert LIMITS.interval(10.0) == pytest.approx(10.0 * POLL_AGE_SHARE)
    assert LIMITS.interval(3600.0) == LIMITS.max_poll_s
    # A three-hour check: about 22,000 samples where 50 Hz took 540,000.
    age, samples = 0.0, 0
    while age < 10800.0:
        age += LIMITS.interval(age)
        samples += 1
    assert samples < 25_000


@pytest.fixture
def spinner():
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield psutil.Process(proc.pid)
    proc.kill()
    proc.wait()


def watch_for(proc: psutil.Process, seconds: float, limits: GuardLimits = LIMITS):
    """Run the guard on ``proc`` for ``seconds``; (its waits, what it saw, termination)."""
    waits: list[float] = []
    started = time.monotonic()

    def wait(s: float) -> bool:
        waits.append(s)
        time.sleep(s)
        return time.monotonic() - started >= seconds

    term = Termination()
    seen = enforce(proc, limits, started, term, wait=wait, kill=proc.kill, timeout_reason="limit")
    return waits, seen, term


def test_a_four_second_check_is_sampled_about_120_times_not_200(spinner):
    waits, seen, term = watch_for(spinner, 4.0)
    # 50 in the first second, then 2% of the age: ln(4) / 0.02 more. A loaded
    # host makes sleeps longer and samples fewer, never more.
    assert 40 <= len(waits) <= 150, len(waits)
    assert waits[-1] > 3 * waits[0]
    assert seen.cpu_secs > 0.5 and seen.peak_rss_bytes > 0
    assert term.outcome is None


def test_a_check_past_its_cpu_limit_is_killed_within_its_sampling_interval(spinner):
    limits = GuardLimits(time_s=1.0, mem_bytes=1 << 34, grace_s=0.5)   # the cpu clock
    killed_at: list[float] = []

    def kill() -> None:
        killed_at.append(spinner.cpu_times().user + spinner.cpu_times().system)
        spinner.kill()

    term = Termination()
    started = time.monotonic()
    enforce(spinner, limits, started, term, kill=kill, timeout_reason="limit",
            wait=lambda s: bool(time.sleep(s)) or not spinner.is_running()
            or spinner.status() == psutil.STATUS_ZOMBIE)
    assert term.outcome is not None and term.outcome.verdict == Verdict.TIMEOUT
    # A kill lands within one interval of the budget (plus the runner's own
    # delay in waking on a loaded host).
    assert 1.5 <= killed_at[0] <= 1.5 + limits.interval(5.0) + 0.3


def test_a_young_checks_tree_is_listed_often_an_old_ones_every_list_s():
    # A fork bomb forks a copy per 10 ms: listing only every 0.5 s let it reach
    # the process limit (31 forks) before the memory guard saw the copies.
    limits = GuardLimits(time_s=60, mem_bytes=1 << 30)
    assert limits.list_interval(0.0) == pytest.approx(0.16)
    assert limits.list_interval(1.0) == pytest.approx(0.16)
    assert limits.list_interval(60.0) == limits.list_s == 0.5
    ages = [i * 0.1 for i in range(600)]
    assert all(limits.list_interval(a) <= limits.list_interval(b) for a, b in zip(ages, ages[1:]))
