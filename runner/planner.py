"""The planner: in which order checks are dispatched and which worker takes
which. Every executor uses it: local threads now, Slurm and Dask later.

A plan is data (``OUT/plan.json``): every check with its expected duration
and where that figure came from, its expected memory and the image it forks
from; the images with their build costs; the workers as nodes x cores x
memory; and the schedule predicted by running the dispatcher below on a
virtual clock (``runner.simulate``). ``proofbatch status``, ``report`` and
``simulate`` read it back.

Policies:

- ``planned``: longest first (LPT), because in s2n-bignum's CI "two or three
  proofs dominate CI time" and "seem to start late". With context affinity:
  a worker prefers checks whose image its node already holds, since a HOL
  Light context costs tens of seconds to load, unless the longest remaining
  check is *critical* (long against the work left per worker); that one
  starts at once and its image is built.
- ``naive``: submission (corpus) order. ``shuffle``: seeded random order.
  Neither looks at images.

Every policy respects memory: a node never runs checks whose expected memory
sums past its own. A check that needs more than a whole node runs alone.
Durations are only expectations, so the order is decided live, each time a
worker is free (``Dispatcher``): a check that runs longer or shorter than
expected shifts the rest instead of breaking a fixed timetable.
"""

from __future__ import annotations

import heapq
import json
import math
import random
import threading
from collections import defaultdict, deque
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from . import shards
from .errors import InputError

FORMAT = "proofbatch-plan/1"
PLAN_FILE = "plan.json"
POLICIES = ("planned", "naive", "shuffle")


def _help(text: str, **kw):
    return field(metadata={"help": text}, **kw)


@dataclass(frozen=True)
class Workers:
    nodes: int = _help("machines", default=1)
    cores_per_node: int = _help("checks run at once on each machine", default=1)
    mem_per_node: int = _help("bytes of memory the checks of one machine may use together",
                              default=8 * 2**30)

    def __post_init__(self):
        for name in ("nodes", "cores_per_node", "mem_per_node"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"--{name.replace('_', '-')}", f"{value!r} is not a positive "
                                 "whole number", "pass 1 or more")

    @property
    def count(self) -> int:
        return self.nodes * self.cores_per_node


@dataclass(frozen=True)
class PlanCheck:
    problem_id: str = _help("the problem's folder name")
    attempt: int = _help("which answer of the problem")
    category: str = _help("the problem's category")
    expected_s: float = _help("expected time of the check, image load excluded")
    source: str = _help("where expected_s came from: profile, map, category or default")
    mem_bytes: int = _help("memory the check is expected to need")
    image_key: str = _help("the image (loaded context) the check forks from")
    limit_s: float = _help("its time limit; breaks ties between equal expectations")
    index: int = _help("position in submission order")


@dataclass(frozen=True)
class Image:
    key: str = _help("image key (runner.contexts.image_key)")
    parent: str | None = _help("the image it is forked from; None for the base")
    build_s: float = _help("seconds to build it on top of its parent")
    source: str = _help("measured (a sweep's or profile's images/*.json) or default")


@dataclass(frozen=True)
class PlanConfig:
    policy: str = _help("planned (longest first, context affinity), naive (submission order) "
                        "or shuffle (seeded random)", default="planned")
    seed: int = _help("seed of the shuffle policy and of tie-breaking between equal checks",
                      default=0)
    dispatch_s: float = _help("overhead per check with a warm image: benchmarks/overhead.py "
                              "measured 11.8 ms median, 15.4 ms p99", default=0.02)
    critical_share: float = _help("a check at least this share of the work left per worker "
                                  "starts at once, even on a node that must build its image",
                                  default=0.25)
    affinity_factor: float = _help("a worker passes over the longest remaining check for one "
                                   "whose image its node holds only if that check is shorter "
                                   "than this many times the build it would need", default=4.0)
    lookahead: int = _help("checks the planned policy looks past when the next one does not "
                           "fit in a node's free memory", default=64)

    def __post_init__(self):
        if self.policy not in POLICIES:
            raise InputError("--policy", f"unknown policy {self.policy!r}",
                             f"pass one of {', '.join(POLICIES)}")


@dataclass(frozen=True)
class Plan:
    config: PlanConfig
    workers: Workers
    checks: tuple[PlanCheck, ...]      # in dispatch priority order
    images: Mapping[str, Image]        # every image a check needs, ancestors included
    base: str                          # booted on every node before any check runs
    prebuilt: frozenset[str] = frozenset()   # loaded on every node before the sweep

    def chain(self, key: str) -> tuple[str, ...]:
        """The images from the base down to ``key``."""
        out = []
        current: str | None = key
        while current is not None:
            out.append(current)
            current = self.images[current].parent
        return tuple(reversed(out))

    def build_s(self, key: str) -> float:
        return 0.0 if key in self.prebuilt else self.images[key].build_s

    def cost(self, check: PlanCheck) -> float:
        """Worker time a check takes once its image is loaded."""
        return check.expected_s + self.config.dispatch_s

    def boot_s(self) -> float:
        """Time before any check can start: every node boots its base image."""
        return self.build_s(self.base)

    def lower_bound(self) -> float:
        """No schedule finishes sooner: the boot, then the largest of all work
        (each needed image built once) over the workers, the memory-time all
        checks hold over the memory of all nodes, and the longest single
        problem (its attempts) with its chain of images."""
        chain_s: dict[str, float] = {}
        longest = total = mem_time = 0.0
        node_mem = self.workers.mem_per_node
        dispatch = self.config.dispatch_s
        for a, b in units_of(self.checks):         # one worker drains a problem's attempts
            first = self.checks[a]
            key = first.image_key
            if key not in chain_s:
                chain_s[key] = sum(self.build_s(k) for k in self.chain(key)[1:])
            if b == a + 1:
                cost, mem = first.expected_s + dispatch, first.mem_bytes
            else:
                cost = sum(c.expected_s + dispatch for c in self.checks[a:b])
                mem = max(c.mem_bytes for c in self.checks[a:b])
            total += cost
            mem_time += cost * min(mem, node_mem)
            if chain_s[key] + cost > longest:
                longest = chain_s[key] + cost
        needed = {k for key in chain_s for k in self.chain(key)[1:]}
        total += sum(self.build_s(k) for k in needed)
        if not self.checks:
            return 0.0
        return self.boot_s() + max(total / self.workers.count,
                                   mem_time / (node_mem * self.workers.nodes), longest)

    def only(self, keys: Iterable[tuple[str, int]]) -> "Plan":
        """The same plan restricted to these (problem_id, attempt) checks."""
        wanted = set(keys)
        return replace(self, checks=tuple(c for c in self.checks
                                          if (c.problem_id, c.attempt) in wanted))

    def with_workers(self, workers: Workers) -> "Plan":
        return replace(self, workers=workers)

    def with_policy(self, policy: str, seed: int | None = None) -> "Plan":
        """The same checks ordered by another policy."""
        config = replace(self.config, policy=policy,
                         seed=self.config.seed if seed is None else seed)
        return make_plan(sorted(self.checks, key=lambda c: c.index), self.images, self.base,
                         self.workers, config, self.prebuilt)


def make_plan(checks: Sequence[PlanCheck], images: Mapping[str, Image], base: str,
              workers: Workers, config: PlanConfig = PlanConfig(),
              prebuilt: Iterable[str] = ()) -> Plan:
    """Order ``checks`` (given in submission order) by ``config.policy``.

    The unit of dispatch is a problem: all its attempts, in attempt order,
    go to one worker, which drains them against one loaded context
    (runner/attempts.py). Problems are ordered; a problem's expectation is
    the sum of its attempts'. Deterministic for a given seed: ties between
    problems with the same expectation and limit are broken by a seeded
    permutation of their images (so that equal checks of one image stay
    together), then by submission order.
    """
    for c in checks:
        if c.image_key not in images:
            raise ValueError(f"{c.problem_id}: image {c.image_key} is not in the plan's images")
    runs: dict[str, list[PlanCheck]] = {}
    for c in checks:
        runs.setdefault(c.problem_id, []).append(c)
    units = list(runs.values())
    for u in units:
        if len(u) > 1:
            u.sort(key=lambda c: c.attempt)
    rng = random.Random(config.seed)
    if config.policy == "shuffle":
        rng.shuffle(units)
    elif config.policy == "planned":
        keys = sorted({c.image_key for c in checks})
        rng.shuffle(keys)
        rank = {k: i for i, k in enumerate(keys)}

        def priority(u: list[PlanCheck]):
            first = u[0]
            if len(u) == 1:
                return (-first.expected_s, -first.limit_s, rank[first.image_key], first.index)
            return (-sum(c.expected_s for c in u), -max(c.limit_s for c in u),
                    rank[first.image_key], first.index)
        units.sort(key=priority)
    ordered = tuple(c for u in units for c in u)
    return Plan(config, workers, ordered, dict(images), base, frozenset(prebuilt))


def units_of(checks: Sequence[PlanCheck]) -> list[tuple[int, int]]:
    """(start, end) of each problem's consecutive run of attempts in ``checks``."""
    out: list[tuple[int, int]] = []
    for i, c in enumerate(checks):
        if out and checks[out[-1][0]].problem_id == c.problem_id:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


# -- dispatch -----------------------------------------------------------------

WAIT = "wait"   # take(): nothing fits this node's free memory until a check ends
_CLASS_UNIT, _CLASS_STEP = 2**26, 2**0.25     # memory classes: up to 64 MiB, then +19% each


def _mem_class(mem: int) -> int:
    return max(0, math.ceil(math.log(max(mem, 1) / _CLASS_UNIT, _CLASS_STEP)))


@dataclass(frozen=True)
class Take:
    index: int                      # the problem's unit (Dispatcher.units)
    checks: tuple[PlanCheck, ...]   # its attempts, drained in this order by one worker
    new_images: tuple[str, ...] # images this worker's node gains, base first: it builds them


class Dispatcher:
    """The scheduling policy: gives a free worker its next problem (all its
    attempts; ``make_plan`` keeps them together).

    Not thread-safe; the local executor holds a lock around it. Workers are
    numbered 0 .. count-1; worker w runs on node w // cores_per_node. Each
    node starts with its base image and the plan's prebuilt images.
    """

    def __init__(self, plan: Plan):
        self.plan = plan
        cfg, workers = plan.config, plan.workers
        checks = plan.checks
        self.units = units_of(checks)
        self.image = [checks[a].image_key for a, _ in self.units]
        self.affinity = cfg.policy == "planned"
        self.lookahead = cfg.lookahead if self.affinity else 1
        self.cores = workers.cores_per_node
        self.workers = workers.count
        self.cost = [sum(plan.cost(c) for c in checks[a:b]) for a, b in self.units]
        # A check larger than a whole node runs alone rather than never.
        self.mem = [min(max(c.mem_bytes for c in checks[a:b]), workers.mem_per_node)
                    for a, b in self.units]
        self.taken = bytearray(len(self.units))
        self.left = len(self.units)
        self.work_left = sum(self.cost)
        self.head = 0
        # Checks by memory class, each in priority order, to find the first one
        # that fits when the head does not. A class fits when its largest
        # member does, so a fit is never optimistic.
        self.classes: dict[int, deque[int]] = {}
        for i, m in enumerate(self.mem):
            self.classes.setdefault(_mem_class(m), deque()).append(i)
        self.class_bound = {k: max(self.mem[i] for i in q) for k, q in self.classes.items()}
        self.class_min = {k: min(self.mem[i] for i in q) for k, q in self.classes.items()}
        self.chains = {key: plan.chain(key) for key in set(self.image)}
        self.by_image: dict[str, deque[int]] = {}
        for i, key in enumerate(self.image):
            self.by_image.setdefault(key, deque()).append(i)
        for key in self.chains:    # an image holds the checks of the images below it too
            for ancestor in self.chains[key][:-1]:
                self.by_image.setdefault(ancestor, deque())
        start = {plan.base} | set(plan.prebuilt)
        self.node_images = [set(start) for _ in range(workers.nodes)]
        # Images no node holds yet, by their next check: where a node with
        # nothing warm left goes, rather than after the images others hold.
        self.unheld = [(q[0], key) for key, q in self.by_image.items() if q and key not in start]
        heapq.heapify(self.unheld)
        self.held = set(start)
        self.holders: dict[str, int] = {key: workers.nodes for key in start}
        self.image_work: dict[str, float] = defaultdict(float)
        for i, key in enumerate(self.image):
            self.image_work[key] += self.cost[i]
        self.free_mem = [workers.mem_per_node] * workers.nodes
        self.running = [0] * workers.nodes
        # Per node, a lazy max-heap of (-expected, index, image) over its images' next checks.
        self.heaps: list[list] = [[] for _ in range(workers.nodes)]
        for node in range(workers.nodes):
            for key in start:
                self._push(node, key)

    def _queue_head(self, key: str) -> int | None:
        q = self.by_image.get(key)
        while q and self.taken[q[0]]:
            q.popleft()
        return q[0] if q else None

    def _push(self, node: int, key: str) -> None:
        i = self._queue_head(key)
        if i is not None:
            heapq.heappush(self.heaps[node], (-self.cost[i], i, key))

    def _best_warm(self, node: int, free: int) -> int | None:
        """The longest check whose image this node holds and that fits ``free``."""
        heap, skipped, found = self.heaps[node], [], None
        while heap and len(skipped) < self.lookahead:
            _, i, key = heap[0]
            actual = self._queue_head(key)
            if actual != i:                # its check was taken: refresh the entry
                heapq.heappop(heap)
                if actual is not None:
                    heapq.heappush(heap, (-self.cost[actual], actual, key))
                continue
            if self.mem[i] <= free:
                found = i
                break
            skipped.append(heapq.heappop(heap))
        for entry in skipped:
            heapq.heappush(heap, entry)
        return found

    def _first_unheld(self, free: int) -> int | None:
        """The next check of the first image no node holds, if it fits ``free``."""
        heap = self.unheld
        while heap:
            i, key = heap[0]
            actual = self._queue_head(key) if key not in self.held else None
            if actual != i:
                heapq.heappop(heap)
                if actual is not None:
                    heapq.heappush(heap, (actual, key))
                continue
            return i if self.mem[i] <= free else None
        return None

    def _first_fitting(self, free: int) -> int | None:
        """The first check in priority order that fits ``free``; for the naive
        and shuffle policies only the very next one (submission order waits)."""
        taken = self.taken
        while self.head < len(taken) and taken[self.head]:
            self.head += 1
        if self.head == len(taken) or self.mem[self.head] <= free:
            return self.head if self.head < len(taken) else None
        if not self.affinity:
            return None
        best = None
        for k, q in self.classes.items():
            if self.class_bound[k] > free:
                continue
            while q and taken[q[0]]:
                q.popleft()
            if q and (best is None or q[0] < best):
                best = q[0]
        return best

    def _smallest_mem(self) -> int:
        smallest = None
        for k, q in self.classes.items():
            while q and self.taken[q[0]]:
                q.popleft()
            if q and (smallest is None or self.class_min[k] < smallest):
                smallest = self.class_min[k]
        return smallest or 0

    def take(self, worker: int) -> Take | str | None:
        """The next problem for ``worker``; WAIT when none fits its node's
        free memory yet, or when only problems of images other nodes hold and
        will soon finish are left; None when nothing is left for it."""
        if self.left == 0:
            return None
        node = worker // self.cores
        free = self.free_mem[node]
        if self.affinity:
            # Pack memory so that no core is stranded: leave room for the
            # smallest remaining check on each other idle core of the node.
            smallest = self._smallest_mem()
            packed = free - (self.cores - self.running[node] - 1) * smallest
            if packed >= smallest:
                free = packed
        pick = self._first_fitting(free)
        if pick is None and free < self.free_mem[node]:
            free = self.free_mem[node]
            pick = self._first_fitting(free)
        if (self.affinity and pick is not None
                and self.image[pick] not in self.node_images[node]):
            pick = self._affine(pick, node, free)
            if pick is None:
                return WAIT if self.running[node] else None
        if pick is None:
            if self.running[node]:
                return WAIT
            pick = self.head       # nothing runs here and nothing fits: it runs alone
        return self._assign(pick, node)

    def _affine(self, pick: int, node: int, free: int) -> int | None:
        """``pick`` needs an image this node lacks: keep it, or take a check
        of an image the node holds (or one nobody holds yet); None when the
        worker had better wait."""
        cfg, key = self.plan.config, self.image[pick]
        have = self.node_images[node]
        missing = sum(self.plan.build_s(k) for k in self.chains[key] if k not in have)
        if self.cost[pick] >= cfg.affinity_factor * missing:
            return pick                 # long next to the load: longest first wins
        critical = cfg.critical_share * self.work_left / self.workers
        # Other nodes hold the image and finish its checks before this one could load it.
        soon = bool(self.holders.get(key)) and \
            self.image_work[key] / (self.holders[key] * self.cores) < missing
        if self.cost[pick] >= critical and not soon:
            return pick
        other = self._best_warm(node, free)
        if other is None:
            other = self._first_unheld(free)
        if other is not None:
            return other
        return None if soon else pick

    def _assign(self, i: int, node: int) -> Take:
        self.taken[i] = 1
        self.left -= 1
        self.work_left -= self.cost[i]
        self.image_work[self.image[i]] -= self.cost[i]
        self.free_mem[node] -= self.mem[i]
        self.running[node] += 1
        have = self.node_images[node]
        new = tuple(k for k in self.chains[self.image[i]] if k not in have)
        for key in new:
            have.add(key)
            self.held.add(key)
            self.holders[key] = self.holders.get(key, 0) + 1
            self._push(node, key)
        a, b = self.units[i]
        return Take(i, self.plan.checks[a:b], new)

    def finish(self, worker: int, index: int) -> None:
        """``worker`` is done with unit ``index``: its memory is free again."""
        node = worker // self.cores
        self.free_mem[node] += self.mem[index]
        self.running[node] -= 1


class LiveQueue:
    """The dispatcher for an executor that runs real checks: thread-safe, and
    a worker whose node has no memory free for any remaining problem blocks
    until a check of that node ends. ``units`` maps each problem id of the
    plan to what the executor runs for it (its pending attempts)."""

    def __init__(self, plan: Plan, units: Mapping[str, object]):
        self._dispatcher = Dispatcher(plan)
        self._units = units
        self._cond = threading.Condition()
        self._held: dict[int, int] = {}

    def next(self, worker: int, stop: threading.Event | None = None):
        """The next unit for ``worker``, or None when none is left (or ``stop`` is set)."""
        with self._cond:
            while not (stop is not None and stop.is_set()):
                take = self._dispatcher.take(worker)
                if take is None:
                    return None
                if take is WAIT:
                    self._cond.wait(timeout=0.5)
                    continue
                self._held[worker] = take.index
                return self._units[take.checks[0].problem_id]
            return None

    def done(self, worker: int) -> None:
        """``worker`` finished its unit: the memory it held is free."""
        with self._cond:
            index = self._held.pop(worker, None)
            if index is not None:
                self._dispatcher.finish(worker, index)
                self._cond.notify_all()


# -- the plan as a file ---------------------------------------------------------

def plan_to_json(plan: Plan, prediction=None, run_id: str | None = None) -> dict:
    """The plan as one JSON object; ``prediction`` (runner.simulate.Prediction)
    adds the predicted schedule per check."""
    per_check = prediction.schedule if prediction is not None else {}
    checks = []
    for rank, c in enumerate(plan.checks):
        entry = dict(asdict(c), rank=rank)
        if (c.problem_id, c.attempt) in per_check:
            worker, start, end = per_check[(c.problem_id, c.attempt)]
            entry.update(worker=worker, start_s=round(start, 6), end_s=round(end, 6))
        checks.append(entry)
    return {
        "format": FORMAT, "run_id": run_id, "config": asdict(plan.config), "workers": asdict(plan.workers),
        "base": plan.base, "prebuilt": sorted(plan.prebuilt),
        "lower_bound_s": plan.lower_bound(),
        "predicted": prediction.summary() if prediction is not None else None,
        "sources": _count(c.source for c in plan.checks),
        "images": [asdict(img) for img in plan.images.values()],
        "checks": checks,
    }


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def write_plan(path: Path, plan: Plan, prediction=None, run_id: str | None = None) -> None:
    data = plan_to_json(plan, prediction, run_id)
    shards.publish(Path(path), lambda tmp: tmp.write_text(json.dumps(data, indent=1) + "\n"))


def read_plan(path: Path) -> tuple[Plan, dict]:
    """A plan file back as a Plan, with the raw JSON (predictions included)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(path, f"unreadable plan ({exc})", "pass a plan.json written by proofbatch")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(path, "not a proofbatch plan", f"pass a plan.json of format {FORMAT}")
    fields = {f for f in PlanCheck.__dataclass_fields__}
    checks = tuple(PlanCheck(**{k: v for k, v in c.items() if k in fields}) for c in data["checks"])
    images = {i["key"]: Image(**i) for i in data["images"]}
    plan = Plan(PlanConfig(**data["config"]), Workers(**data["workers"]), checks, images,
                data["base"], frozenset(data["prebuilt"]))
    return plan, data
