"""The plan's expected work still to do, as a sweep goes: what an ETA counts.

A check cannot start before the prover has booted and its image is built,
and on a real development those cost more than the proofs: 32 s2n-bignum
problems spent 69% of their sweep building images, while an ETA that counted
only the checks read 0 s with workers waiting minutes for images. So the
work left is the boot still to come, plus every check not yet finished, plus
every image a pending check needs that is not yet built (each once, however
many checks need it).

An image counts as built when its build ends (an ``imaged`` event in the
runner's process) or when a check that ran in it finishes (a row, from any
executor: Slurm array tasks and Dask workers send rows, not events).

The plan's build times are estimates, and on a loaded host builds took
2.5-5x them (issue 46): the builds measured in this process (an ``image``
event, then its ``imaged``) give the ratio of measured to planned seconds,
and the builds still to come are scaled by it (``build_ratio``) when it is
above 1. A build quicker than its plan (a small context, a cached one) says
little of the others, and an ETA that shrank on it would be read as a promise.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .planner import Plan


class WorkLeft:
    """Expected seconds left of one sweep's plan; thread-safe."""

    def __init__(self, plan: "Plan"):
        self.plan = plan
        self._lock = threading.Lock()
        self._cost = {(c.problem_id, c.attempt): (plan.cost(c), c.image_key) for c in plan.checks}
        self._pending = Counter(key for _, key in self._cost.values())
        self._checks_s = sum(cost for cost, _ in self._cost.values())
        self._built: set[str] = set(plan.prebuilt) | {plan.base}
        self._chains: dict[str, tuple[str, ...]] = {}
        self._boot_started: float | None = None
        self._booted = False
        self._building: dict[str, float] = {}       # image key -> when its build began
        self._measured_s = self._planned_s = 0.0    # of the builds measured here
        self._measured = 0

    # -- what happened ---------------------------------------------------

    def booting(self) -> None:
        with self._lock:
            if self._boot_started is None:
                self._boot_started = time.monotonic()

    def booted(self) -> None:
        with self._lock:
            self._booted = True

    def building(self, image_key: str, at: float | None = None) -> None:
        """An image's build began (at ``at``, time.monotonic)."""
        with self._lock:
            self._building.setdefault(image_key, time.monotonic() if at is None else at)

    def built(self, image_key: str, at: float | None = None) -> None:
        with self._lock:
            self._built.add(image_key)
            began = self._building.pop(image_key, None)
            planned = self.plan.build_s(image_key) if image_key in self.plan.images else 0.0
            if began is not None and planned > 0:
                self._measured_s += max(0.0, (time.monotonic() if at is None else at) - began)
                self._planned_s += planned
                self._measured += 1

    def build_ratio(self) -> tuple[float, int] | None:
        """(measured / planned seconds of the builds measured here, how many),
        or None before the first."""
        with self._lock:
            return self._ratio()

    def basis(self) -> str:
        """What an ETA from this is: an estimate from the plan, and what of
        it was corrected by measuring."""
        ratio = self.build_ratio()
        if ratio is None:
            return "estimated from the plan (no image build measured yet)" if self.images_left() \
                else "estimated from the plan"
        left = "those left are scaled by it" if ratio[0] > 1 else "those left keep the plan's times"
        return (f"estimated from the plan, corrected by what was measured: image builds so far took "
                f"{ratio[0]:.1f}x the plan's time ({ratio[1]} measured), and {left}")

    def _ratio(self) -> tuple[float, int] | None:
        return (self._measured_s / self._planned_s, self._measured) if self._measured else None

    def finished(self, problem_id: str, attempt: int) -> None:
        """A check's row arrived: its work is done, and so are its images."""
        with self._lock:
            entry = self._cost.pop((problem_id, attempt), None)
            if entry is None:
                return
            cost, key = entry
            self._checks_s -= cost
            self._pending[key] -= 1
            if self._pending[key] <= 0:
                del self._pending[key]
            self._built.update(self._chain(key))
            self._booted = True

    # -- what is left ----------------------------------------------------

    def cost_of(self, problem_id: str, attempt: int) -> float | None:
        """The plan's seconds for a check not yet finished, or None."""
        with self._lock:
            entry = self._cost.get((problem_id, attempt))
            return None if entry is None else entry[0]

    def boot_left_s(self) -> float:
        """Seconds of boot still expected: the whole boot before it starts,
        what remains of the estimate while it runs, none once it is up."""
        with self._lock:
            if self._booted:
                return 0.0
            expected = self.plan.boot_s()
            if self._boot_started is None:
                return expected
            return max(0.0, expected - (time.monotonic() - self._boot_started))

    @property
    def booting_now(self) -> bool:
        with self._lock:
            return self._boot_started is not None and not self._booted

    def work_s(self) -> float:
        """Worker-seconds left: pending checks and the images they still need,
        each build the plan's seconds times the measured ratio (build_ratio),
        less what a build under way has run."""
        with self._lock:
            needed = {k for key in self._pending for k in self._chain(key)}
            scale = max(1.0, (self._ratio() or (1.0, 0))[0])
            now = time.monotonic()
            images = sum(max(0.0, self.plan.build_s(k) * scale - (now - self._building[k]
                                                                   if k in self._building else 0.0))
                         for k in needed - self._built)
            return max(0.0, self._checks_s) + images

    def images_left(self) -> int:
        with self._lock:
            needed = {k for key in self._pending for k in self._chain(key)}
            return len(needed - self._built)

    def _chain(self, key: str) -> tuple[str, ...]:
        if key not in self._chains:
            self._chains[key] = self.plan.chain(key)
        return self._chains[key]
