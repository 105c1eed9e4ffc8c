"""The shape of the image chains a plan's problems fork from, as the
dispatcher reads it: where a proof file's contexts run on without a branch."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Iterable

from .planner import Plan


def chain_shapes(plan: Plan, keys: Iterable[str]
                 ) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]], dict[str, str]]:
    """For the images ``keys`` problems fork from: each one's chain (base
    first), its *stem* and the *next context* of each image.

    - The stem of an image: its ancestors below its chain's last branch
      point, the earlier contexts of one proof file, each extending the last.
    - The next context of an image: its one child when it has no other (a
      proof file's next theorem), the base aside. A node holding the parent
      holds all but one cheap build of it, so its problems count as warm
      there; else every problem of a chain, each on its own image, looked
      cold, and longest first sent a node's workers down as many files'
      chains as it has cores, more than the images a node keeps: each chain
      was evicted between its problems and built again from its head
      (simulate, x86 proofs at 8 workers: 0.77 core-h of rebuilds, 3% slower
      than submission order).
    """
    chains = {key: plan.chain(key) for key in keys}
    every = {k for c in chains.values() for k in c}
    children = Counter(plan.images[k].parent for k in every)
    stems = {key: chain[max((n + 1 for n, k in enumerate(chain[:-1]) if children[k] > 1),
                            default=0):-1] for key, chain in chains.items()}
    kids: dict[str, list[str]] = defaultdict(list)
    for key in every:
        parent = plan.images[key].parent
        if parent is not None:
            kids[parent].append(key)
    next_context = {parent: ks[0] for parent, ks in kids.items()
                    if len(ks) == 1 and parent != plan.base}
    return chains, stems, next_context
