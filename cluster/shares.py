"""A planned sweep on an executor's worker shape: what the planner's
simulation gives each node, for the prediction ``proofbatch status`` and
reports compare against (Slurm array tasks pull their work as they go,
cluster/claims.py, so the shares are a forecast, not an assignment).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from runner.checks.tasks import CheckTask
from runner.planning.simulate import simulate


def planned_shares(tasks: Sequence[CheckTask], plan, nodes: int, cores: int, mem_per_node: int):
    """The planner's split (runner/planning/planner.py): simulate ``plan`` on ``nodes``
    x ``cores`` workers and give each node the checks the simulation ran on
    it, in their predicted start order. Returns (plan, prediction, shares);
    the plan carries the worker shape, so ``proofbatch status`` divides the
    work left by the right number of workers."""
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
