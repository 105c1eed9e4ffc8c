"""The planner's model of the images one node holds: which a node keeps, and
which it evicts to load another, by the rule a HOL Light session applies
(runner/provers/hol_light/session/image_tree.py). The dispatcher
(runner/planning/dispatch.py) keeps one per node."""

from __future__ import annotations

from collections import defaultdict
from typing import Callable


class NodeImages:
    """The images one node's session holds and how many running problems use
    each. Beyond ``cap`` (None: no limit) it evicts idle ones before it loads
    another, in the order of runner/provers/hol_light/session/image_tree.py: first
    those no pending problem needs (``needed(key)``: problems not yet taken
    whose chain has it), least recently used first; then those cheapest to
    build again (``rebuild_s(key)``), least recently used first among equals.
    A session counts as needed only the nearest loaded image on a pending
    chain; this model holds a running problem's whole chain, so it counts
    them all, and plans a few rebuilds more than a session pays."""

    def __init__(self, cap: int | None, start: set[str], base: str,
                 needed: Callable[[str], int] = lambda key: 0,
                 rebuild_s: Callable[[str], float] = lambda key: 0.0):
        self.cap, self.base = cap, base
        self.needed, self.rebuild_s = needed, rebuild_s
        self.last_used: dict[str, int] = dict.fromkeys(start, 0)
        self.in_use: dict[str, int] = defaultdict(int)
        self.tick = 0

    def __contains__(self, key: str) -> bool:
        return key in self.last_used

    def victims(self, chain: tuple[str, ...]) -> list[str]:
        """What loading ``chain``'s missing images would evict, oldest first."""
        missing = sum(1 for key in chain if key not in self.last_used)
        if self.cap is None or not missing:
            return []
        def order(key: str):
            needed = self.needed(key) > 0
            return (needed, self.rebuild_s(key) if needed else 0.0, self.last_used[key], key)
        idle = sorted(order(k) for k in self.last_used
                      if k != self.base and not self.in_use[k] and k not in chain)
        return [o[-1] for o in idle[:max(0, len(self.last_used) + missing - self.cap)]]

    def take(self, chain: tuple[str, ...]) -> tuple[tuple[str, ...], list[str]]:
        """Hold ``chain`` for a problem: (the images loaded for it, base
        first; the images evicted to make room)."""
        evicted = self.victims(chain)
        for key in evicted:
            del self.last_used[key]
        self.tick += 1
        new = tuple(key for key in chain if key not in self.last_used)
        for key in chain:
            self.last_used[key] = self.tick
            self.in_use[key] += 1
        return new, evicted

    def release(self, chain: tuple[str, ...]) -> None:
        for key in chain:
            self.in_use[key] -= 1
