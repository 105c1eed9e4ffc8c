"""A check's priority: the niceness it runs at, and who may give it.

A check that shares its core with busy processes needs about 1.2x the CPU
time it needs alone on this project's VMs (every switch away refills its
caches: benchmarks/limits/cpu_drift.py), so a verdict on CPU time would depend on
what else the host runs. With priority a check keeps its core nearly to
itself. The guard (runner.checks.guard) sets it from outside as a check
starts; a sweep resolves ``--nice`` once, before anything runs.
"""

from __future__ import annotations

import argparse
import os
import resource

import psutil

from ..errors import ProverError
from ..prover import LimitClock

# How long the guard waits for a check to lead its own session before it
# gives up setting its session group's niceness (give_priority).
PRIORITY_WAIT_S = 1.0
# --nice auto under the cpu clock, where allowed: the scheduler weighs -10
# about 9x a niceness of 0, and a check beside three busy sessions then
# needs 1.03x its quiet CPU time, against 1.2x at 0 (benchmarks/limits/cpu_drift.py).
AUTO_NICE = -10


NICE_RANGE = (-20, 19)        # setpriority(2): what a niceness can be on Linux


def priority_refused(nice: int) -> str | None:
    """Why this process may not give checks niceness ``nice``; None if it may.
    Raising priority (a niceness below 0) needs CAP_SYS_NICE, or an
    RLIMIT_NICE soft limit of at least 20 - nice (setrlimit(2))."""
    refusal = nice_refusal(nice)
    return None if refusal is None else refusal[0]


def nice_refusal(nice: int) -> tuple[str, str] | None:
    """(what is wrong, what to pass instead) when this process may not give
    checks niceness ``nice``; None if it may. Root may give any niceness in
    the range, so root is never told to run as root."""
    low, high = NICE_RANGE
    if not low <= nice <= high:
        return (f"{nice} is not a niceness ({low} to {high})",
                f"pass a niceness from {low} to {high}, or auto")
    if nice >= 0 or os.geteuid() == 0:
        return None
    try:
        with open("/proc/self/status") as status:
            caps = next(int(line.split()[1], 16) for line in status if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        caps = 0
    CAP_SYS_NICE = 23
    if caps >> CAP_SYS_NICE & 1 or resource.getrlimit(resource.RLIMIT_NICE)[0] >= 20 - nice:
        return None
    return (f"niceness {nice} raises priority, which needs root or CAP_SYS_NICE",
            "pass a niceness from 0 to 19 or auto, or run as root")


def resolve_nice(nice: int | None, clock: str) -> int:
    """The niceness checks run at: ``nice``, or for auto (None) AUTO_NICE
    where the limit is on CPU time and this process may raise priority,
    else 0. A check beside busy work needs about 1.2x its quiet CPU time,
    so under the cpu clock its verdict would depend on the host's load;
    with priority it does not (docs/limits.md). Under the wall clock checks
    run as s2n-bignum-bench's harness runs them, at the runner's niceness."""
    if nice is not None:
        return nice
    if str(clock) != LimitClock.CPU or priority_refused(AUTO_NICE) is not None:
        return 0
    return AUTO_NICE


def niceness(text: str) -> int | None:
    """argparse type of --nice: a niceness, or auto (None: resolve_nice)."""
    if text.strip().lower() == "auto":
        return None
    low, high = NICE_RANGE
    try:
        nice = int(text)
    except ValueError:
        nice = None
    if nice is None or not low <= nice <= high:
        # "problem; fix": the command line says both (runner/cli.py).
        raise argparse.ArgumentTypeError(f"{text} is not a niceness ({low} to {high}); pass auto "
                                         f"or a whole number from {low} to {high}")
    return nice


def autogroup_nice(pid: int | str) -> str | None:
    """The niceness of the session group ``pid`` is scheduled in, or None
    where there is none: a kernel without sched_autogroup has no
    /proc/PID/autogroup, and for a process still in the boot session's
    group (a child of init that never called setsid, as a CI job may be)
    the kernel prints nothing (kernel/sched/autogroup.c)."""
    try:
        with open(f"/proc/{pid}/autogroup") as group:
            words = group.read().split()
    except FileNotFoundError:
        return None
    return words[-1] if words else None


def give_priority(proc: psutil.Process, nice: int) -> bool:
    """Run the check at niceness ``nice``, set from outside as the guard
    starts (what the check starts later inherits it). A check that shares its
    core with busy processes needs about 1.2x its quiet CPU time on this
    project's VMs, whatever the clock it is limited on: every switch away
    refills its caches. With priority it keeps its core nearly to itself and
    its CPU time near quiet (benchmarks/limits/cpu_drift.py, docs/limits.md).

    A process's niceness weighs only against processes of its own session
    when the kernel groups sessions (sched_autogroup, on by default in
    Debian's kernels: each session's group gets an equal share), and a check
    is a session of its own (hol_check.ml calls setsid, Isabelle's is started
    as one). So a check that leads its session gets the niceness on its group
    too (/proc/PID/autogroup, sched(7)). Returns False while the check is not
    yet a session leader (a forked child calls setsid as it starts): ask again.
    Lowering niceness needs root or CAP_SYS_NICE, checked before the sweep
    starts (runner.sweep), so a refusal here is this process's privileges (an
    image server started by another user), not the answer's."""
    try:
        if proc.nice() != nice:
            proc.nice(nice)
        if os.getsid(proc.pid) != proc.pid:
            return False
        if not autogroup_nice(proc.pid):
            return True     # not in a session group: nothing more weighs against it
        with open(f"/proc/{proc.pid}/autogroup", "w") as group:
            group.write(str(nice))
        return True
    except (psutil.NoSuchProcess, ProcessLookupError, FileNotFoundError):
        return True     # already over; its verdict is read as usual
    except BlockingIOError:
        # The kernel takes one group niceness per 100 ms from a process
        # without CAP_SYS_ADMIN (EAGAIN, kernel/sched/autogroup.c): ask again.
        return False
    except (psutil.AccessDenied, PermissionError):
        raise ProverError(f"cannot set niceness {nice} on a check (process {proc.pid}): this "
                          "process lacks root or CAP_SYS_NICE; run it as root, or pass --nice 0"
                          ) from None
