"""Splitting a planned sweep into per-worker shares, for executors whose
workers each get a fixed part of the plan (Slurm array tasks).

A share keeps whole image groups together, so that each worker builds a
context once. This is the one place to swap in a smarter planner.
"""

from __future__ import annotations

from typing import Callable, Sequence

from runner.worker import CheckTask


def split_shares(tasks: Sequence[CheckTask], n: int,
                 image_key: Callable[[CheckTask], str]) -> list[list[CheckTask]]:
    """Deal the image groups of ``tasks`` round-robin over ``n`` shares.

    ``tasks`` come in the planned order (heaviest groups first), so each
    share gets heavy groups early; the order within a share is kept. Empty
    shares are dropped.
    """
    if n < 1:
        raise ValueError("need at least one share")
    groups: dict[str, list[CheckTask]] = {}
    for task in tasks:
        groups.setdefault(image_key(task), []).append(task)
    shares: list[list[CheckTask]] = [[] for _ in range(n)]
    for i, group in enumerate(groups.values()):
        shares[i % n].extend(group)
    return [s for s in shares if s]
