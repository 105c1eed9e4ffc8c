"""The planner: in which order checks are dispatched and which worker takes
which. Every executor uses it: local threads now, Slurm and Dask later.

A plan is data (``OUT/plan.json``): every check with its expected duration
and where that figure came from, its expected memory and the image it forks
from; the images with their build costs; the workers as nodes x cores x
memory; and the schedule predicted by running the dispatcher below on a
virtual clock (``runner.planning.simulate``). ``proofbatch status``, ``report`` and
``simulate`` read it back.

Policies:

- ``planned``: longest first (LPT), because in s2n-bignum's CI "two or three
  proofs dominate CI time" and "seem to start late". With context affinity:
  a worker prefers checks whose image its node already holds, since a HOL
  Light context costs tens of seconds to load, unless the longest remaining
  check is *critical* (long against the work left per worker); that one
  starts at once and its image is built. A chain of contexts (a proof file
  cut theorem by theorem) goes shallowest first, and a worker does not wait
  for images another worker is still loading when another check waits less.
- ``naive``: submission (corpus) order. ``shuffle``: seeded random order.
  Neither looks at images.

Every policy respects memory: a node never runs checks whose expected memory
sums past its own. A check that needs more than a whole node runs alone.
Durations are only expectations, so the order is decided live, each time a
worker is free (``runner.planning.dispatch.Dispatcher``): a check that runs
longer or shorter than expected shifts the rest instead of breaking a fixed
timetable.
"""

from __future__ import annotations

import enum
import json
import random
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..results.publish import publish_json
from ..errors import InputError
from ..settings import setting as _help

FORMAT = "proofbatch-plan/1"
PLAN_FILE = "plan.json"


class Policy(enum.StrEnum):
    """The order checks are dispatched in."""

    PLANNED = "planned"    # longest expected first, with context affinity and memory packing
    NAIVE = "naive"        # corpus order
    SHUFFLE = "shuffle"    # seeded random


POLICIES = tuple(p.value for p in Policy)    # as the command line offers them


@dataclass(frozen=True)
class Workers:
    nodes: int = _help("machines", default=1)
    cores_per_node: int = _help("checks run at once on each machine", default=1)
    mem_per_node: int = _help("bytes of memory the checks of one machine may use together",
                              default=8 * 2**30)
    images_per_node: int | None = _help(
        "loaded images a machine keeps at once, the base included (the session's max_images: "
        "the least recently used idle one is evicted and rebuilt when needed again); None: all",
        default=None)
    node_factors: tuple[float, ...] | None = _help(
        "how many times slower each machine proves than the plan's times, one per node (a mixed "
        "cluster: 1.0,1.0,1.8); its checks and image builds take that much longer there, and the "
        "fastest machines take the heaviest checks first; None: all 1", default=None)

    def __post_init__(self):
        if self.node_factors is not None and (len(self.node_factors) != self.nodes or not all(
                isinstance(f, (int, float)) and 0 < f <= 1000 for f in self.node_factors)):
            raise InputError("--node-factors", f"{self.node_factors!r} is not one factor above 0 "
                             f"(at most 1000) for each of {self.nodes} nodes",
                             "pass as many factors as nodes, e.g. 1.0,1.0,1.8")
        for name in ("nodes", "cores_per_node", "mem_per_node", "images_per_node"):
            value = getattr(self, name)
            if value is None and name == "images_per_node":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"--{name.replace('_', '-')}", f"{value!r} is not a positive "
                                 "whole number", "pass 1 or more")

    @property
    def count(self) -> int:
        return self.nodes * self.cores_per_node

    def factor(self, node: int) -> float:
        return 1.0 if self.node_factors is None else float(self.node_factors[node])

    def fastest_first(self) -> list[int]:
        """Workers, those of the fastest nodes first (a stable order)."""
        return sorted(range(self.count), key=lambda w: (self.factor(w // self.cores_per_node), w))


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
    key: str = _help("image key (the backend's image plan, runner.prover.ImagePlan)")
    parent: str | None = _help("the image it is forked from; None for the base")
    build_s: float = _help("seconds to build it on top of its parent")
    source: str = _help("measured (a sweep's or profile's images/*.json), estimated (from the "
                        "context's phrases and proofs, runner/provers/hol_light/costs/context_costs.py) or default")


@dataclass(frozen=True)
class PlanConfig:
    policy: str = _help("planned (longest first, context affinity), naive (submission order) "
                        "or shuffle (seeded random)", default="planned")
    seed: int = _help("seed of the shuffle policy and of tie-breaking between equal checks",
                      default=0)
    dispatch_s: float = _help("overhead per check with a warm image: benchmarks/checks/overhead.py "
                              "measured 11.8 ms median, 15.4 ms p99", default=0.02)
    critical_share: float = _help("a check at least this share of the work left per worker "
                                  "starts at once, even on a node that must build its image",
                                  default=0.25)
    affinity_factor: float = _help("a worker passes over the longest remaining check for one "
                                   "whose image its node holds only if that check is shorter "
                                   "than this many times the build it would need", default=4.0)
    lookahead: int = _help("checks the planned policy looks past when the next one does not "
                           "fit in a node's free memory", default=64)
    submission_order: bool = _help(
        "planned, but dispatched as naive: simulating both predicted submission order faster "
        "on this corpus and these workers (runner.planning.simulate.guard)", default=False)

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
        return self.bound_terms()[0]

    def bound_terms(self) -> tuple[float, dict[str, float], str | None]:
        """The lower bound, its terms after the boot (work, memory, longest)
        and the problem that sets the longest term."""
        chain_s: dict[str, float] = {}
        longest = total = mem_time = 0.0
        longest_id = None
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
                longest, longest_id = chain_s[key] + cost, first.problem_id
        needed = {k for key in chain_s for k in self.chain(key)[1:]}
        total += sum(self.build_s(k) for k in needed)
        if not self.checks:
            return 0.0, {}, None
        # A mixed cluster: work shares out by speed, and the longest check
        # runs at best on the fastest node.
        w = self.workers
        speed = sum(w.cores_per_node / w.factor(n) for n in range(w.nodes))
        fastest = min(w.factor(n) for n in range(w.nodes))
        terms = {"work": total / speed,
                 "memory": mem_time * fastest / (node_mem * w.nodes), "longest": longest * fastest}
        return self.boot_s() + max(terms.values()), terms, longest_id

    def only(self, keys: Iterable[tuple[str, int]]) -> "Plan":
        """The same plan restricted to these (problem_id, attempt) checks."""
        wanted = set(keys)
        return replace(self, checks=tuple(c for c in self.checks
                                          if (c.problem_id, c.attempt) in wanted))

    def with_workers(self, workers: Workers) -> "Plan":
        return replace(self, workers=workers)

    def with_policy(self, policy: str, seed: int | None = None) -> "Plan":
        """The same checks ordered by another policy."""
        config = replace(self.config, policy=policy, submission_order=False,
                         seed=self.config.seed if seed is None else seed)
        return make_plan(sorted(self.checks, key=lambda c: c.index), self.images, self.base,
                         self.workers, config, self.prebuilt)


def make_plan(checks: Sequence[PlanCheck], images: Mapping[str, Image], base: str,
              workers: Workers, config: PlanConfig = PlanConfig(),
              prebuilt: Iterable[str] = ()) -> Plan:
    """Order ``checks`` (given in submission order) by ``config.policy``.

    The unit of dispatch is a problem: all its attempts, in attempt order,
    go to one worker, which drains them against one loaded context
    (runner/checks/attempts.py). Problems are ordered; a problem's expectation is
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
        # Loading a context is work the first problem of its image waits for:
        # that problem ranks by its load plus its own time, so an image that
        # is slow to load starts early instead of ending the sweep.
        skip = set(prebuilt) | {base}
        above = {key: _ancestors(key, images, skip) for key in keys}
        load = {key: sum(images[k].build_s for k in above[key]) for key in keys}
        lead, seen = [], set()
        for u in units:
            key = u[0].image_key
            lead.append(key not in seen)
            seen.add(key)
        if any(load[u[0].image_key] for u, first in zip(units, lead) if first):
            reach = _reach(units, lead, load, above)
            order = sorted(range(len(units)), key=lambda i: (
                -(reach[units[i][0].image_key] if lead[i] else sum(c.expected_s for c in units[i])),
                len(above[units[i][0].image_key]), i))
            units = [units[i] for i in order]
    if config.policy == "planned" and config.submission_order:
        units.sort(key=lambda u: u[0].index)
    ordered = tuple(c for u in units for c in u)
    return Plan(config, workers, ordered, dict(images), base, frozenset(prebuilt))


def _ancestors(key: str, images: Mapping[str, Image], skip: set[str]) -> list[str]:
    """``key`` and the images above it that a sweep must build, deepest first."""
    out, k = [], key
    while k is not None and k not in skip:
        out.append(k)
        k = images[k].parent
    return out


def _reach(units, lead, load: Mapping[str, float],
           above: Mapping[str, list[str]]) -> dict[str, float]:
    """Per image, the longest path through it: the load of its chain and the
    time of its first problem, or of the first problem of any image below it.

    A chain of contexts (a proof file cut theorem by theorem: each problem's
    context extends the one before) is built top down whatever the order. The
    problem that builds an image ranks by the longest path through it, so a
    file's problems go shallowest first, each image just after its parent,
    and none is built while deeper ones hold the node's images: a session
    keeps a few (``images_per_node``), and a deepest-first order evicted the
    shallow images of a 13-image chain before their problems ran, to build
    them again (benchmarks/images/bench_prefix.py)."""
    reach: dict[str, float] = {}
    for u, first in zip(units, lead):
        if not first:
            continue
        key = u[0].image_key
        path = load[key] + sum(c.expected_s for c in u)
        for k in above[key] or [key]:
            if reach.get(k, -1.0) < path:
                reach[k] = path
    return reach


def units_of(checks: Sequence[PlanCheck]) -> list[tuple[int, int]]:
    """(start, end) of each problem's consecutive run of attempts in ``checks``."""
    out: list[tuple[int, int]] = []
    for i, c in enumerate(checks):
        if out and checks[out[-1][0]].problem_id == c.problem_id:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


# -- the plan as a file ---------------------------------------------------------

def plan_to_json(plan: Plan, prediction=None, run_id: str | None = None) -> dict:
    """The plan as one JSON object; ``prediction`` (runner.planning.simulate.Prediction)
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
    publish_json(Path(path), data, indent=1)


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
