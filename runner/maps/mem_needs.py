"""The memory each check gets, and where that figure came from.

A sweep's ``--mem-limit`` default (8 GiB, or an even share of 80% of RAM per
worker) is a share, not a measurement: on a 32-core node with 128 GB it is
about 3.2 GiB, and s2n-bignum-bench's README puts a heavy proof at about
5 GB. Cutting a correct proof as MEMOUT because a share was small is a false
verdict, so a check gets what its problem was measured (or, failing that,
estimated) to need, within the node's memory, and the node runs fewer checks
at once (each check's expected need gates its start, runner/checks/worker.py
and the planner's packing) rather than cut one.

Where a limit comes from, in order:
- ``--mem-limit`` given: it is the user's cap; a profiled need only tightens it.
- a map's sidecar: the profiled peak times the policy's margin
  (runner/maps/timeout_map.py), at least MIN_GUARD_BYTES, within the node.
- no measurement, but the map's time puts the problem in a heavy class: that
  class's estimate (:data:`HEAVY_ESTIMATES`), or the sweep's default if larger.
- otherwise the sweep's default.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Mapping

from ..settings import format_size
from .timeout_map import MIN_GUARD_BYTES, MapPolicy

# The guard over an estimated peak: the same margin a profile's guard has over
# its measured peak (MapPolicy.mem_margin).
MARGIN = MapPolicy.__dataclass_fields__["mem_margin"].default

MB = 1 << 20


@dataclass(frozen=True)
class HeavyClass:
    """A time class of the map's ``prove_secs`` and the memory estimated for it."""

    low_s: float
    high_s: float
    peak_bytes: int     # the estimated peak RSS of one check's process tree
    basis: str          # what the estimate rests on, said by `run`


# The highest peak RSS of heavy ground truths run natively with trusted
# contexts on this project's host, by class (the first look of issue 44: a
# 182 s problem peaked at 346 MB, 328 s at 479 MB, 1,046 s at 1,036 MB;
# heavy_tail.py's seed 1 then gave 312 MB at 2,362 s and 609 MB at 1,387 s,
# and bignum_mul_p521's 2,131 s problem 379 MB, all under the 1,036 MB kept).
# Of 3,000 s or more, one problem has run here: x86.p521_jadd_alt's 3,431 s
# proof peaked at 850 MB. s2n-bignum-bench's README advises about 5 GB per
# heavy proof; that stays the class's estimate, the safer bound, until the
# longest of the class (up to 5,991 s) have been measured. These peaks were
# measured under OCaml's GC defaults; under the native default (s=16M,o=200,
# hol_light/runtime.py) a check peaked 124-208 MB higher (its 128 MB minor
# heap: docs/native.md), inside the guard's 2x margin over each peak.
HEAVY_ESTIMATES: tuple[HeavyClass, ...] = (
    HeavyClass(120, 300, 346 * MB, "measured peak 346 MB of a 182 s problem"),
    HeavyClass(300, 1000, 479 * MB, "measured peak 479 MB of a 328 s problem"),
    HeavyClass(1000, 3000, 1036 * MB, "measured peak 1,036 MB of a 1,046 s problem"),
    HeavyClass(3000, math.inf, 5 * 10**9, "s2n-bignum-bench's README: about 5 GB per heavy proof"),
)


def heavy_class(map_secs: float | None) -> HeavyClass | None:
    if map_secs is None:
        return None
    return next((c for c in HEAVY_ESTIMATES if c.low_s <= map_secs < c.high_s), None)


@dataclass(frozen=True)
class MemLimit:
    guard: int          # the check's memory guard (MEMOUT above it)
    expected: int       # what it is expected to need before it may start
    source: str         # where the guard came from, for `run` and the rows


def mem_limit(map_secs: float | None, profiled: tuple[int, int] | None, *, cap: int | None,
              default: int, node: int, default_expected: int) -> MemLimit:
    """The limit of one problem's checks.

    ``map_secs``: the map's (scaled) time for it, if listed; ``profiled``: the
    sidecar's (guard, expected need), if measured; ``cap``: ``--mem-limit`` if
    given; ``default``: the sweep's default share; ``node``: the memory the
    node's checks may use together; ``default_expected``: the expected need
    of a check nothing is known about."""
    if cap is not None:
        if profiled:
            g, e = profiled
            return MemLimit(min(cap, max(g, MIN_GUARD_BYTES)), min(cap, e),
                            "map's profile, within --mem-limit")
        return MemLimit(cap, min(cap, default_expected), "--mem-limit")
    if profiled:
        g, e = profiled
        guard = min(node, max(g, MIN_GUARD_BYTES))
        return MemLimit(guard, min(guard, e), "map's profile")
    cls = heavy_class(map_secs)
    if cls is not None:
        guard = min(node, max(default, int(cls.peak_bytes * MARGIN)))
        return MemLimit(guard, min(guard, max(default_expected, cls.peak_bytes)),
                        f"estimated for {_class_name(cls)} ({cls.basis}, x {MARGIN:g})")
    return MemLimit(default, min(default, default_expected), "default share")


def _class_name(cls: HeavyClass) -> str:
    return (f"map time {cls.low_s:,.0f} s or more" if math.isinf(cls.high_s)
            else f"map time {cls.low_s:,.0f}-{cls.high_s:,.0f} s")


def sweep_limits(problem_ids, map_secs: Mapping[str, float],
                 profiled: Mapping[str, tuple[int, int]], *, cap: int | None, default: int,
                 node: int, default_expected: int) -> tuple[dict[str, MemLimit], tuple[str, ...]]:
    """Each problem's limit (:func:`mem_limit`), and what `run` says of
    them: a line when a limit is above the sweep's (the flag's or the
    default share), which a user who knows only the flag would not expect."""
    limits = {pid: mem_limit(map_secs.get(pid), profiled.get(pid), cap=cap, default=default,
                             node=node, default_expected=default_expected) for pid in problem_ids}
    raised = any(m.guard > (cap or default) for m in limits.values())
    return limits, (summary(limits),) if raised else ()


def summary(limits: Mapping[str, MemLimit]) -> str:
    """One line for `run`: how many checks got their memory from where."""
    by: Counter = Counter()
    sizes: dict[str, set[int]] = {}
    for lim in limits.values():
        by[lim.source] += 1
        sizes.setdefault(lim.source, set()).add(lim.guard)
    parts = []
    for source, n in by.most_common():
        s = sorted(sizes[source])
        shown = format_size(s[0]) if len(s) == 1 else f"{format_size(s[0])}-{format_size(s[-1])}"
        parts.append(f"{n} {source}: {shown}")
    return "memory limits: " + "; ".join(parts)
