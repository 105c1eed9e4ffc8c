"""Guards enforced from outside the prover: a hard time limit and a memory limit.

The prover also arms its own alarm, but OCaml handles signals only at
allocation and poll points, so a loop that never allocates never sees it.
The runner therefore watches every check from outside: at the time limit
plus a grace period it kills the check's process group, and whenever the
resident memory of the check's process tree passes the limit it kills it
too. The first cause wins (see verdicts.Termination).

The limit counts on the check's clock (runner.prover.LimitClock). Under
``cpu`` the guard samples the CPU time of the check's process tree; a check
that is starved or blocked never reaches a CPU limit, so a wall-clock
*backstop* ends it, and that end is no verdict on the answer: the worker
runs it again. Time the runner itself spent stopped (SIGSTOP, a suspended
Slurm job, a closed laptop) is not the check's: the guard sees the gap in
its own sampling and counts none of it against a wall deadline.
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

from .. import events
from ..errors import ProverError
from ..prover import LimitClock, backstop_s as default_backstop
from ..verdicts import Termination, Verdict
from .priority import PRIORITY_WAIT_S, give_priority
from .tree_sample import TreeSampler, cpu_of

# A sample costs the runner about 0.05 ms of CPU time, and listing the
# tree's descendants 1.2 ms (psutil reads every process's /proc entry; more
# on a node with more processes). At 50 samples a second per check that took
# 2.6% of a core from the checks of a full node: a two-worker s2n-bignum
# sweep's proofs ran 2.5% longer than their own CPU time. So a check is
# sampled every 2% of its age, between poll_s and max_poll_s, and its
# descendants listed every LIST_EVERY samples, at most every list_s: a kill
# lands at most 2% of its age (and 0.5 s) past the limit, and RLIMIT_AS
# (cap_address_space) stops allocations faster than that. A young check's
# tree is listed every 160 ms: an answer that forks copies of its image
# (examples/hostile/jail.fork_bomb, one copy per 10 ms) must meet the memory
# guard before the process limit of its uid, whatever the host's speed.
POLL_AGE_SHARE = 0.02
LIST_EVERY = 8
# A lone check may not start until the host has the memory it is expected to
# need; if nothing else is running to free some, waiting longer is pointless.
MEMORY_WAIT_ALONE_S = 30.0


@dataclass(frozen=True)
class GuardLimits:
    time_s: float = field(metadata={"help": "the check's time limit; the prover enforces it too"})
    mem_bytes: int = field(metadata={"help": "resident memory of the check's process tree"})
    grace_s: float = field(default=2.0, metadata={
        "help": "how long past the limit the prover gets to stop itself before the kill"})
    poll_s: float = field(default=0.02, metadata={
        "help": "how often memory and CPU time are sampled as a check starts"})
    max_poll_s: float = field(default=0.5, metadata={
        "help": "the longest wait between samples, reached as a check ages (see interval)"})
    list_s: float = field(default=0.5, metadata={
        "help": "the longest wait between two listings of the check's descendants (each reads "
                "all of /proc); a young check's are listed every LIST_EVERY samples"})
    clock: str = field(default=LimitClock.CPU, metadata={
        "help": "what time_s counts: the tree's CPU time (cpu) or elapsed time (wall)"})
    backstop_s: float | None = field(default=None, metadata={
        "help": "under the cpu clock, wall seconds (runner stops excluded) after which a check "
                "is ended as starved or blocked; None: runner.prover.backstop_s(time_s)"})
    nice: int = field(default=0, metadata={
        "help": "niceness set on the check's root process as the guard starts (0: left as is)"})

    def backstop(self) -> float:
        return self.backstop_s if self.backstop_s is not None else default_backstop(self.time_s)

    def interval(self, age_s: float) -> float:
        """The wait between two samples of a check that has run ``age_s``."""
        return min(self.max_poll_s, max(self.poll_s, age_s * POLL_AGE_SHARE))

    def list_interval(self, age_s: float) -> float:
        """The wait between two listings of the descendants of a check that
        has run ``age_s``: every LIST_EVERY samples, at most list_s."""
        return min(self.list_s, LIST_EVERY * self.interval(age_s))


@dataclass
class Observation:
    record: bytes = b""            # what the check wrote on its verdict pipe
    peak_rss_bytes: int = 0        # highest sampled resident memory of the tree
    wall_secs: float = 0.0
    termination: Termination = field(default_factory=Termination)
    cpu_secs: float | None = None  # CPU time of the check's tree, last sampled
    paused_secs: float = 0.0       # time the runner was stopped while it watched
    interrupted: str = ""          # why the end says nothing of the answer (see Watched)


@dataclass
class Watched:
    """What ``enforce`` saw of a check: its peak memory and CPU time, the
    time the runner was stopped meanwhile, and ``interrupted`` when the
    guard ended it for something that is not the answer's doing (the
    backstop)."""

    peak_rss_bytes: int = 0
    cpu_secs: float = 0.0
    paused_secs: float = 0.0
    interrupted: str = ""


# The guard's loop wakes every interval (at most max_poll_s); a gap this
# much longer means the runner itself did not run (stopped by SIGSTOP or a
# suspended job, or a host so loaded it was not scheduled): that time is not
# the check's.
PAUSE_GAP_S = 1.0
# How often a running check's CPU time and memory are said (events "progress"),
# for the running board that `status` reads: often enough to watch an
# hour-long check, seldom enough that a board file is not rewritten per sample.
PROGRESS_EVERY_S = 10.0
BACKSTOP = "wall-clock backstop"


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


def enforce(root: psutil.Process | None, limits: GuardLimits, started: float, term: Termination, *,
            wait: Callable[[float], bool], kill: Callable[[], None], timeout_reason: str,
            tree: str = "", settled: Callable[[], bool] = lambda: False,
            stop: Callable[[], str | None] = lambda: None, allowance_s: float = 0.0) -> Watched:
    """The one guard loop every prover's checks run under. Until ``wait(s)``
    (which blocks up to ``s`` seconds) says the check is over, sample the
    resident memory and CPU time of the tree under ``root`` every
    ``limits.interval(age)`` and ``kill()`` it past ``limits.mem_bytes`` (MEMOUT),
    past its time limit plus grace and ``allowance_s`` on its clock
    (TIMEOUT with ``timeout_reason``), under the cpu clock past the wall
    backstop (ERROR, ``interrupted``: run it again), or when ``stop()``
    gives a reason (ERROR). ``started`` is the monotonic time the check was
    dispatched; stops of the runner itself are not counted against it. Once
    ``settled()`` (the check's own verdict is in) it only waits: the first
    cause wins (verdicts.Termination). ``tree`` names the processes
    measured, for the reason."""
    # Until the check leads its session (give_priority), for a second at most.
    prioritise_until = started + PRIORITY_WAIT_S if root is not None and limits.nice else 0.0

    def prioritise() -> None:
        nonlocal prioritise_until
        try:
            if give_priority(root, limits.nice) or time.monotonic() > prioritise_until:
                prioritise_until = 0.0
        except ProverError:
            kill()
            raise

    if prioritise_until:
        prioritise()
    sampler = TreeSampler(root) if root is not None else None
    seen = Watched()
    budget = limits.time_s + limits.grace_s + allowance_s
    on_cpu = str(limits.clock) == LimitClock.CPU
    wall_limit = limits.backstop() + allowance_s if on_cpu else budget
    last = time.monotonic()

    def elapsed() -> float:
        return time.monotonic() - started - seen.paused_secs

    # A heavy check runs for hours: say how far it got, for `status`.
    said_at = time.monotonic()

    # Past the deadline it still waits a little between kills: the tree takes
    # a moment to die, and a zero wait would spin.
    while not wait(step := max(0.005, min(limits.interval(elapsed()), wall_limit - elapsed()))):
        now = time.monotonic()
        if now - last > PAUSE_GAP_S + step:
            seen.paused_secs += now - last - step
        last = now
        if settled():
            continue
        if prioritise_until:
            prioritise()
        if sampler is not None:
            seen.peak_rss_bytes = max(seen.peak_rss_bytes,
                                      sampler.sample(limits.list_interval(elapsed())))
            seen.cpu_secs = sampler.cpu_secs
        if sampler is not None and now - said_at >= PROGRESS_EVERY_S:
            said_at = now
            events.say("progress", cpu_s=seen.cpu_secs, rss_bytes=seen.peak_rss_bytes,
                       limit_s=limits.time_s)
        if seen.peak_rss_bytes > limits.mem_bytes:
            term.set(Verdict.MEMOUT, f"memory guard: {seen.peak_rss_bytes >> 20} MiB passed the "
                     f"{limits.mem_bytes >> 20} MiB limit{tree}; killed")
            kill()
        elif on_cpu and seen.cpu_secs >= budget:
            term.set(Verdict.TIMEOUT, timeout_reason)
            kill()
        elif elapsed() >= wall_limit:
            if not on_cpu:
                term.set(Verdict.TIMEOUT, timeout_reason)
            elif term.set(Verdict.ERROR, f"{BACKSTOP}: {elapsed():.0f} s of wall time gave it only "
                          f"{seen.cpu_secs:.1f} s of CPU time of its {limits.time_s:g} s limit; "
                          "starved by the host or blocked"):
                seen.interrupted = "backstop"
            kill()
        elif (reason := stop()) is not None:
            term.set(Verdict.ERROR, reason)
            kill()
    if sampler is not None:
        try:     # a zombie keeps its times until its parent reaps it
            sampler.sample(limits.list_s)
            seen.cpu_secs = sampler.cpu_secs
        except psutil.Error:
            pass
    return seen


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

    clock = "CPU time limit" if str(limits.clock) == LimitClock.CPU else "time limit"
    seen = enforce(
        proc, limits, started, obs.termination, wait=over,
        kill=lambda: kill_tree(pid, proc), settled=lambda: record_in,
        timeout_reason=f"{clock} {limits.time_s:g} s (+{limits.grace_s:g} s grace) passed "
                       "without a verdict; killed from outside")
    obs.peak_rss_bytes, obs.paused_secs, obs.interrupted = (seen.peak_rss_bytes, seen.paused_secs,
                                                            seen.interrupted)
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
    # The check is a zombie until its image reaps it on REAP: its times are final.
    try:
        obs.cpu_secs = max(seen.cpu_secs, cpu_of(proc))
    except psutil.Error:
        obs.cpu_secs = seen.cpu_secs or None
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
