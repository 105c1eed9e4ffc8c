"""Splitting a planned sweep into per-worker shares, for executors whose
workers each get a fixed part of the plan (Slurm array tasks).

A share keeps whole image groups together, so that each worker builds a
context once. This is the one place to swap in a smarter planner.
"""

from __future__ import annotations

import dataclasses
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


def planned_shares(tasks: Sequence[CheckTask], plan, nodes: int, cores: int, mem_per_node: int):
    """The planner's split (runner/planner.py): simulate ``plan`` on ``nodes``
    x ``cores`` workers and give each node the checks the simulation ran on
    it, in their predicted start order. Returns (plan, prediction, shares);
    the plan carries the worker shape, so ``proofbatch status`` divides the
    work left by the right number of workers."""
    from runner.simulate import simulate

    keys = {(t.problem.problem_id, t.attempt) for t in tasks}
    plan = plan.only(keys).with_workers(dataclasses.replace(
        plan.workers, nodes=nodes, cores_per_node=cores, mem_per_node=max(1, mem_per_node)))
    prediction = simulate(plan)
    by_key = {(t.problem.problem_id, t.attempt): t for t in tasks}
    shares: list[list[CheckTask]] = [[] for _ in range(nodes)]
    placed = set()
    for key, (worker, start, _end) in sorted(prediction.schedule.items(), key=lambda kv: kv[1][1]):
        if key in by_key:
            shares[worker // cores].append(by_key[key])
            placed.add(key)
    # Anything the simulation left out still runs: on the least loaded share.
    for key, task in by_key.items():
        if key not in placed:
            min(shares, key=len).append(task)
    return plan, prediction, [s for s in shares if s]
