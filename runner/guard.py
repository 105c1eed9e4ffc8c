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
import select
import signal
import time
from dataclasses import dataclass, field

import psutil

from .verdicts import Termination, Verdict


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
    sampler = TreeSampler(proc)
    deadline = started + limits.time_s + limits.grace_s
    chunks: list[bytes] = []
    record_in = eof = False
    while True:
        wait = max(0.0, min(limits.poll_s, deadline - time.monotonic()))
        if select.select([verdict_fd], [], [], wait)[0]:
            chunk = os.read(verdict_fd, 65536)
            if chunk:
                chunks.append(chunk)
                record_in = record_in or b"\n" in chunk
                if sum(map(len, chunks)) > 1 << 16:
                    obs.termination.set(Verdict.ERROR, "verdict channel overflow; killed")
                    kill_tree(pid, proc)
                continue
            eof = True
        if eof or not _running(proc):
            break
        if record_in:
            continue   # the verdict is in and the check is exiting: the first cause won
        obs.peak_rss_bytes = max(obs.peak_rss_bytes, sampler.sample())
        if obs.peak_rss_bytes > limits.mem_bytes:
            obs.termination.set(Verdict.MEMOUT, f"memory guard: {obs.peak_rss_bytes >> 20} MiB "
                                f"passed the {limits.mem_bytes >> 20} MiB limit; killed")
            kill_tree(pid, proc)
        elif time.monotonic() >= deadline:
            obs.termination.set(Verdict.TIMEOUT, f"time limit {limits.time_s:g} s (+{limits.grace_s:g} s"
                                " grace) passed without a verdict; killed from outside")
            kill_tree(pid, proc)
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
