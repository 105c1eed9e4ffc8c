"""Guards enforced from outside the prover: a hard time limit and a memory limit.

The prover also arms its own alarm, but OCaml handles signals only at
allocation and poll points, so a loop that never allocates never sees it.
The runner therefore watches every check from outside: at the time limit
plus a grace period it kills the check's process group, and whenever the
resident memory of the check's process tree passes the limit it kills it
too. The first cause wins (see verdicts.Termination).
"""

from __future__ import annotations

import os
import re
import select
import signal
import time
from dataclasses import dataclass, field
from typing import Callable

import psutil

from ..verdicts import Termination, Verdict

# A lone check may not start until the host has the memory it is expected to
# need; if nothing else is running to free some, waiting longer is pointless.
MEMORY_WAIT_ALONE_S = 30.0


@dataclass(frozen=True)
class GuardLimits:
    time_s: float = field(metadata={"help": "the check's time limit; the prover enforces it too"})
    mem_bytes: int = field(metadata={"help": "resident memory of the check's process tree"})
    grace_s: float = field(default=2.0, metadata={
        "help": "how long past the limit the prover gets to stop itself before the kill"})
    poll_s: float = field(default=0.02, metadata={"help": "how often memory is sampled"})


@dataclass
class Observation:
    record: bytes = b""            # what the check wrote on its verdict pipe
    peak_rss_bytes: int = 0        # highest sampled resident memory of the tree
    wall_secs: float = 0.0
    termination: Termination = field(default_factory=Termination)


class TreeSampler:
    """Resident memory of a process and its descendants, in bytes.

    Listing descendants reads every process's /proc entry, which costs
    milliseconds; the list is refreshed every few samples, while the
    resident size of the known members is read every time.
    """

    REFRESH_EVERY = 8

    def __init__(self, proc: psutil.Process):
        self.proc, self.members, self._count = proc, [proc], 0

    def sample(self) -> int:
        if self._count % self.REFRESH_EVERY == 0:
            try:
                self.members = [self.proc] + self.proc.children(recursive=True)
            except psutil.Error:
                self.members = [self.proc]
        self._count += 1
        return tree_rss(self.members)


def tree_rss(members: list[psutil.Process]) -> int:
    total = 0
    for member in members:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            pass
    return total


def kill_tree(pid: int, proc: psutil.Process) -> None:
    """SIGKILL the check's process group and every descendant we can see."""
    try:
        victims = proc.children(recursive=True)
    except psutil.Error:
        victims = []
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # not yet a group leader: the child calls setsid first thing
    for victim in [proc] + victims:
        try:
            victim.kill()
        except psutil.Error:
            pass


def cap_address_space(proc: psutil.Process, limits: GuardLimits) -> None:
    """A backstop for allocations faster than sampling: RLIMIT_AS at the limit
    plus what the image had already mapped, so OCaml raises Out_of_memory."""
    try:
        ceiling = proc.memory_info().vms + limits.mem_bytes
        proc.rlimit(psutil.RLIMIT_AS, (ceiling, ceiling))
    except (psutil.Error, OSError, ValueError):
        pass


# OCaml's own signal numbers (its Sys module: Sys.sigkill is -7), which its
# Unix.waitpid reports for the signals it knows; others are the OS's own.
OCAML_SIGNALS = ("SIGABRT", "SIGALRM", "SIGFPE", "SIGHUP", "SIGILL", "SIGINT", "SIGKILL",
                 "SIGPIPE", "SIGQUIT", "SIGSEGV", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGCHLD",
                 "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGVTALRM", "SIGPROF",
                 "SIGBUS", "SIGPOLL", "SIGSYS", "SIGTRAP", "SIGURG", "SIGXCPU", "SIGXFSZ")
DIED = "the check died without a verdict"
# Signals that come from outside a check, not from its own code or limits:
# the kernel's OOM killer and `kill -9` send SIGKILL, an admin's `kill`
# SIGTERM. (A crash is SIGSEGV or SIGBUS, the CPU and file-size limits
# SIGXCPU and SIGXFSZ: the check's own doing, and redoing it would not help.)
OUTSIDE_SIGNALS = frozenset({"SIGKILL", "SIGTERM"})
# How often a check killed from outside runs again on a fresh fork before
# its death is recorded.
OUTSIDE_RETRIES = 2


def signal_name(status: str) -> str | None:
    """The OS's name of the signal in an image's exit status ("signal -7",
    OCaml's numbering, is SIGKILL; "signal 9" too), or None."""
    m = re.fullmatch(r"\s*signal (-?\d+|SIG[A-Z0-9]+)\s*", status or "")
    if not m:
        return None
    if m[1].startswith("SIG"):
        return m[1]              # named already (hol_check.ml names those OCaml knows)
    n = int(m[1])
    if n < 0:
        return OCAML_SIGNALS[-n - 1] if -n <= len(OCAML_SIGNALS) else f"OCaml signal {n}"
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def death_reason(status: str) -> str:
    """Why a check that wrote no verdict ended, naming its signal as the OS does."""
    name = signal_name(status)
    if name is None:
        return f"{DIED} ({status})"
    outside = " from outside (the OOM killer, or a kill)" if name in OUTSIDE_SIGNALS else ""
    return f"{DIED}: killed by {name}{outside} ({status})"


def outside_death(verdict: str, reason: str, exit_status: str) -> str | None:
    """The signal (SIGKILL, SIGTERM) of a check killed from outside, as a
    check result says it, or None: an ERROR with no verdict from the check,
    none of our guards' (they say TIMEOUT, MEMOUT or their own reason), and
    an exit by one of OUTSIDE_SIGNALS."""
    if str(verdict) != "ERROR" or not reason.startswith(DIED):
        return None
    name = signal_name(exit_status)
    return name if name in OUTSIDE_SIGNALS else None


def admit(expected_bytes: int, running: Callable[[], int]) -> str | None:
    """Wait until the host has ``expected_bytes`` available for a check about
    to start. ``running()`` counts the checks of this session running now:
    while any runs, one will end and free memory; alone, after
    MEMORY_WAIT_ALONE_S the check is refused, and the reason returned."""
    waited_alone = 0.0
    while (available := psutil.virtual_memory().available) < expected_bytes:
        if running() == 0:
            waited_alone += 0.2
            if waited_alone >= MEMORY_WAIT_ALONE_S:
                return (f"not started: expected to need {expected_bytes >> 20} MiB, "
                        f"the host has {available >> 20} MiB available")
        time.sleep(0.2)
    return None


def enforce(root: psutil.Process | None, limits: GuardLimits, deadline: float, term: Termination, *,
            wait: Callable[[float], bool], kill: Callable[[], None], timeout_reason: str,
            tree: str = "", settled: Callable[[], bool] = lambda: False,
            stop: Callable[[], str | None] = lambda: None) -> int:
    """The one guard loop every prover's checks run under. Until ``wait(s)``
    (which blocks up to ``s`` seconds) says the check is over, sample the
    resident memory of the tree under ``root`` every ``limits.poll_s`` and
    ``kill()`` it past ``limits.mem_bytes`` (MEMOUT), at ``deadline``
    (monotonic; TIMEOUT with ``timeout_reason``) or when ``stop()`` gives a
    reason (ERROR). Once ``settled()`` (the check's own verdict is in) it
    only waits: the first cause wins (verdicts.Termination). ``tree`` names
    the processes measured, for the reason. Returns the peak sampled."""
    sampler = TreeSampler(root) if root is not None else None
    peak = 0
    # Past the deadline it still waits a little between kills: the tree takes
    # a moment to die, and a zero wait would spin.
    while not wait(max(0.005, min(limits.poll_s, deadline - time.monotonic()))):
        if settled():
            continue
        if sampler is not None:
            peak = max(peak, sampler.sample())
        if peak > limits.mem_bytes:
            term.set(Verdict.MEMOUT, f"memory guard: {peak >> 20} MiB passed the "
                     f"{limits.mem_bytes >> 20} MiB limit{tree}; killed")
            kill()
        elif time.monotonic() >= deadline:
            term.set(Verdict.TIMEOUT, timeout_reason)
            kill()
        elif (reason := stop()) is not None:
            term.set(Verdict.ERROR, reason)
            kill()
    return peak


def watch(pid: int, verdict_fd: int, limits: GuardLimits, started: float) -> Observation:
    """Follow one check until its verdict pipe closes and it has exited.

    ``started`` is the monotonic time the check was dispatched; the deadline
    counts from it. Returns everything the check wrote on its verdict pipe.
    """
    obs = Observation()
    # The check stays at least a zombie until its image reaps it on our
    # REAP, so its pid cannot be reused while we watch it.
    proc = psutil.Process(pid)
    cap_address_space(proc, limits)
    chunks: list[bytes] = []
    record_in = False

    def over(wait: float) -> bool:
        """Read what the check writes on its verdict pipe; over at EOF or exit."""
        nonlocal record_in
        if select.select([verdict_fd], [], [], wait)[0]:
            chunk = os.read(verdict_fd, 65536)
            if not chunk:
                return True
            chunks.append(chunk)
            record_in = record_in or b"\n" in chunk
            if sum(map(len, chunks)) > 1 << 16:
                obs.termination.set(Verdict.ERROR, "verdict channel overflow; killed")
                kill_tree(pid, proc)
            return False
        return not _running(proc)

    obs.peak_rss_bytes = enforce(
        proc, limits, started + limits.time_s + limits.grace_s, obs.termination, wait=over,
        kill=lambda: kill_tree(pid, proc), settled=lambda: record_in,
        timeout_reason=f"time limit {limits.time_s:g} s (+{limits.grace_s:g} s grace) passed "
                       "without a verdict; killed from outside")
    # The writer closed its end: the check is exiting. Give it a moment, then insist.
    _wait_exit(proc, limits.grace_s)
    if _running(proc):
        kill_tree(pid, proc)
    # Whatever the check started in its process group (it is the group's
    # leader, and stays a zombie until REAP, so the id is still its own).
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    while select.select([verdict_fd], [], [], 0)[0]:
        chunk = os.read(verdict_fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    obs.record = b"".join(chunks)
    obs.wall_secs = time.monotonic() - started
    return obs


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_exit(proc: psutil.Process, timeout: float) -> None:
    end = time.monotonic() + timeout
    while _running(proc) and time.monotonic() < end:
        time.sleep(0.002)
