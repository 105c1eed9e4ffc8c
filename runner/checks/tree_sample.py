"""What a check's process tree uses: resident memory and CPU time, summed
over a process and its descendants, as runner.checks.guard samples them."""

from __future__ import annotations

import time

import psutil


def cpu_of(proc: psutil.Process) -> float:
    """User + system CPU seconds of ``proc`` and of the children it reaped.
    A zombie keeps its times until it is reaped, and a reaped child's go to
    its reaper, so summed over the live members of a tree nothing counts
    twice."""
    t = proc.cpu_times()
    return t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)


class TreeSampler:
    """Resident memory (bytes) and CPU time (seconds) of a process and its
    descendants.

    Listing descendants reads every process's /proc entry, which costs
    milliseconds; the list is refreshed when the interval a sample is given
    has passed since the last listing, while the resident size and CPU time
    of the known members are read every time. CPU time only grows: a member
    that vanished between samples (reaped by a member, whose own
    reaped-children time then holds it) cannot lower it.
    """

    def __init__(self, proc: psutil.Process):
        self.proc, self.members, self._listed_at = proc, [proc], None
        self.cpu_secs = 0.0

    def sample(self, list_s: float) -> int:
        """Sample the tree, listing it again when ``list_s`` seconds have
        passed since the last listing; the tree's resident bytes."""
        now = time.monotonic()
        if self._listed_at is None or now - self._listed_at >= list_s:
            self._listed_at = now
            try:
                self.members = [self.proc] + self.proc.children(recursive=True)
            except psutil.Error:
                self.members = [self.proc]
        self.cpu_secs = max(self.cpu_secs, tree_cpu(self.members))
        return tree_rss(self.members)


def tree_rss(members: list[psutil.Process]) -> int:
    total = 0
    for member in members:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            pass
    return total


def tree_cpu(members: list[psutil.Process]) -> float:
    total = 0.0
    for member in members:
        try:
            total += cpu_of(member)
        except psutil.Error:
            pass
    return total
