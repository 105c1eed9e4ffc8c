"""Where the Dask executors (cluster/dask.py) ask each problem's checks to
run, beyond image affinity (issue 47):

- **By speed.** Once the workers' nodes have factors (cached, kept, or a
  peer's: runner/maps/node_factor.known), the heaviest checks go first to
  the fastest nodes, in the order ``simulate --node-factors`` prices
  (runner/planning/planner.Workers.fastest_first): the runs come heaviest
  first, and the first of them are hinted to the workers of the fastest
  nodes. A node whose factor is not known yet (it will measure one at its
  first check) counts at the median of the others'.
- **Away from a drifting node.** A check run again to confirm a TIMEOUT a
  drifting node gave (runner/maps/drift_confirm.py) goes to a worker of
  another node when there is one.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from runner.checks.tasks import CheckTask
from runner.checks.worker import node_host
from runner.planning.planner import Workers


def node_of(spec, out: str) -> tuple[str, float | None]:
    """Run on each worker (client.run, on its event loop: file reads only):
    its node, and its factor for the sweep when known without measuring."""
    from runner.maps import node_factor

    found = None if spec is None else node_factor.known(spec, Path(out))
    return node_host(), None if found is None else found.factor


def by_speed(workers: list[str], threads: dict[str, int],
             nodes: dict[str, tuple[str, float | None]]) -> list[str]:
    """The workers to hint the heaviest runs to, one per slot, heaviest
    first: the fastest nodes' slots first. Empty when the nodes' speeds are
    not known or all alike (image affinity places the runs)."""
    factors = [nodes.get(w, ("", None))[1] for w in workers]
    known = [f for f in factors if f is not None]
    if not known or len(set(known)) == 1 and len(known) == len(factors):
        return []
    middle = statistics.median(known)
    # Workers of one machine each: as many slots as the busiest of them has threads.
    cores = max(threads.get(w, 1) for w in workers)
    plan = Workers(nodes=len(workers), cores_per_node=cores,
                   node_factors=tuple(middle if f is None else f for f in factors))
    return [workers[slot // cores] for slot in plan.fastest_first()]


def hint(run: list[CheckTask], rank: int, fastest: list[str], workers: list[str],
         nodes: dict[str, tuple[str, float | None]], affinity: str) -> tuple[list[str], bool]:
    """(workers, allow others) for the ``rank``-th heaviest run."""
    confirms = run[0].confirms
    if confirms is not None:
        others = [w for w in workers if nodes.get(w, ("", None))[0] != confirms.host]
        if others:
            return others, False
    if rank < len(fastest):
        return [fastest[rank]], True
    return [affinity], True
