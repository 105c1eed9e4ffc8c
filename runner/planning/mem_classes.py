"""The problems left, by memory class: which fits a node's free memory."""

from __future__ import annotations

import math
from collections import deque
from typing import Sequence

_CLASS_UNIT, _CLASS_STEP = 2**26, 2**0.25     # memory classes: up to 64 MiB, then +19% each


def _mem_class(mem: int) -> int:
    return max(0, math.ceil(math.log(max(mem, 1) / _CLASS_UNIT, _CLASS_STEP)))


class MemoryClasses:
    """Problems by memory class, each in priority order, to find the first
    one that fits when the head of the queue does not. A class fits when its
    largest member does, so a fit is never optimistic. ``taken`` is the
    dispatcher's: a problem set there is passed over from then on."""

    def __init__(self, mem: Sequence[int], taken: bytearray):
        self.taken = taken
        self.queues: dict[int, deque[int]] = {}
        for i, m in enumerate(mem):
            self.queues.setdefault(_mem_class(m), deque()).append(i)
        self.bound = {k: max(mem[i] for i in q) for k, q in self.queues.items()}
        self.least = {k: min(mem[i] for i in q) for k, q in self.queues.items()}

    def _live(self) -> dict[int, deque[int]]:
        """Each class with its taken problems dropped from its front."""
        for q in self.queues.values():
            while q and self.taken[q[0]]:
                q.popleft()
        return self.queues

    def first_fitting(self, free: int) -> int | None:
        """The first problem in priority order of a class that fits ``free``."""
        heads = [q[0] for k, q in self._live().items() if q and self.bound[k] <= free]
        return min(heads, default=None)

    def smallest(self) -> int:
        """The least memory a problem left needs (0 when none is left)."""
        return min((self.least[k] for k, q in self._live().items() if q), default=0)
