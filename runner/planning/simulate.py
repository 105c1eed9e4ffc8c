"""The planner's dispatcher on a virtual clock: what a plan will cost before
anyone pays for it.

There is no separate model of the scheduler: ``simulate`` drives the very
``runner.planning.planner.Dispatcher`` that executors drive, and advances a clock by
each check's expected duration instead of running it. Image builds are work
done by the worker that first needs the image on its node; another worker of
that node that needs the image while it is being built waits for it. A node
keeps at most ``Workers.images_per_node`` images (the dispatcher evicts as a
session does), and an evicted image needed again is built again.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, replace

from .planner import Plan, make_plan
from .dispatch import WAIT, Dispatcher


@dataclass(frozen=True)
class Prediction:
    policy: str
    workers: int
    makespan_s: float               # boot to the last check's end
    lower_bound_s: float            # runner.planning.planner.Plan.lower_bound
    busy_s: float                   # worker time spent on checks and image builds
    build_s: float                  # of which image builds (the boots included)
    boots_s: float                  # base-image boots, one per node, all nodes at once
    checks: int
    schedule: dict                  # (problem_id, attempt) -> (worker, start_s, end_s)
    rebuild_s: float = 0.0          # of build_s: images built again on a node that evicted them
    steps: int = 0                  # events the virtual clock went through

    @property
    def ratio(self) -> float:
        return self.makespan_s / self.lower_bound_s if self.lower_bound_s > 0 else 1.0

    @property
    def core_hours(self) -> float:
        """What the allocation costs: every worker, from boot to the end."""
        return self.workers * self.makespan_s / 3600.0

    @property
    def utilization(self) -> float:
        paid = self.workers * self.makespan_s
        return self.busy_s / paid if paid > 0 else 0.0

    def summary(self) -> dict:
        return {"policy": self.policy, "workers": self.workers, "checks": self.checks,
                "makespan_s": self.makespan_s, "lower_bound_s": self.lower_bound_s,
                "ratio": self.ratio, "utilization": self.utilization,
                "core_hours": self.core_hours, "busy_core_hours": self.busy_s / 3600.0,
                "image_build_core_hours": self.build_s / 3600.0,
                "image_rebuild_core_hours": self.rebuild_s / 3600.0}


class OutOfTime(Exception):
    """The simulation ran past its time budget."""


def predict(plan: Plan, budget_s: float = 30.0) -> Prediction | None:
    """The prediction a sweep records in its plan, or None when simulating
    would take longer than ``budget_s``: the sweep then starts without one
    rather than late (dispatch does not depend on it)."""
    try:
        return simulate(plan, budget_s=budget_s)
    except OutOfTime:
        return None


def simulate(plan: Plan, *, keep_schedule: bool = True, budget_s: float | None = None,
             max_steps: int | None = None) -> Prediction:
    """Run ``plan`` on a virtual clock with its expected durations; raise
    OutOfTime past ``budget_s`` seconds of real time, or past ``max_steps``
    events (a budget that does not depend on how busy the host is)."""
    deadline = None if budget_s is None else time.monotonic() + budget_s
    steps = 0
    dispatcher = Dispatcher(plan)
    workers, cores = plan.workers.count, plan.workers.cores_per_node
    boot = plan.boot_s()
    # Each node boots its base image first; every core of the node waits for it.
    boots = boot * plan.workers.nodes
    build = work = rebuild = 0.0
    ready: dict[tuple[int, str], float] = {}
    events: list[tuple[float, int, int]] = []      # (end, worker, check index)
    parked: list[list[int]] = [[] for _ in range(plan.workers.nodes)]
    schedule: dict = {}
    now, makespan = boot, boot
    # The fastest nodes take first: the dispatcher hands out the heaviest
    # checks first, so they land on the fastest machines (node_factors).
    free = plan.workers.fastest_first()
    while True:
        for w in free:
            node = w // cores
            take = dispatcher.take(w)
            if take is None:
                continue                                  # this worker is done
            if take is WAIT:
                if dispatcher.retry_s > 0:
                    # It waits for other nodes: it asks again when loading
                    # here would have been done, not only when its own node
                    # frees memory (a live queue asks again on every verdict).
                    heapq.heappush(events, (now + dispatcher.retry_s, w, -1))
                else:
                    parked[node].append(w)
                continue
            t, new = now, set(take.new_images)
            # Down the chain, base first: an image is forked from its parent,
            # so this worker waits for a parent another worker is building.
            for key in dispatcher.chains[dispatcher.image[take.index]]:
                if key not in new:
                    t = max(t, ready.get((node, key), 0.0))
                    continue
                secs = plan.images[key].build_s * plan.workers.factor(node)   # prebuilt: only if evicted
                t += secs
                build += secs
                if (node, key) in ready or key in plan.prebuilt:    # it was evicted
                    rebuild += secs
                ready[(node, key)] = t
            speed = plan.workers.factor(node)
            cost = dispatcher.cost[take.index] * speed
            work += cost
            if keep_schedule:
                start = t
                for c in take.checks:
                    end = start + plan.cost(c) * speed
                    schedule[(c.problem_id, c.attempt)] = (w, start, end)
                    start = end
            heapq.heappush(events, (t + cost, w, take.index))
        if not events:
            # Every node finished; the dispatcher never leaves work behind.
            assert dispatcher.left == 0, f"{dispatcher.left} problems were never dispatched"
            break
        steps += 1
        if deadline is not None and steps % 2048 == 0 and time.monotonic() > deadline:
            raise OutOfTime(f"simulating {len(plan.checks)} checks took over {budget_s} s")
        if max_steps is not None and steps > max_steps:
            raise OutOfTime(f"simulating {len(plan.checks)} checks took over {max_steps} events")
        now, w, index = heapq.heappop(events)
        if index < 0:                                 # a waiting worker asks again
            free = [w]
            continue
        makespan = max(makespan, now)
        dispatcher.finish(w, index)
        node = w // cores
        free = [w] + sorted(parked[node])
        parked[node] = []
    return Prediction(policy=plan.config.policy, workers=workers, makespan_s=makespan,
                      lower_bound_s=plan.lower_bound(), busy_s=work + build + boots,
                      build_s=build + boots, boots_s=boots, checks=len(plan.checks),
                      schedule=schedule, rebuild_s=rebuild, steps=steps)


# The guard's budget in events of the virtual clock, not seconds: a plan must
# not depend on how busy the host was when it was made (a 10 s budget kept an
# unguarded plan for s2n-bignum's x86 tree at 512 workers, 10,822 s against
# naive order's 6,206 s, on a loaded host). That simulation takes 5,987
# events, about 4 s at load 3; a corpus that needs more than GUARD_STEPS
# keeps its plan unguarded.
GUARD_STEPS = 100_000


def guard(plan: Plan, max_steps: int = GUARD_STEPS) -> Plan:
    """``plan``, or, when simulating both predicts submission order faster,
    the same checks dispatched as naive (``PlanConfig.submission_order``):
    a planned sweep is never predicted slower than the naive one. Only the
    planned policy is guarded; a simulation past ``max_steps`` events keeps
    the plan.

    What the planner does not foresee is rare but real: on one node that
    keeps 8 images, 8 workers sent down 8 proof files' chains of contexts
    evict each other's chains between their problems, where submission
    order keeps the workers in one file (x86 proofs under trust, native, 8
    workers: 1% slower after the fixes of issue 25, 3% before)."""
    if plan.config.policy != "planned" or plan.config.submission_order or not plan.checks:
        return plan
    naive = make_plan(sorted(plan.checks, key=lambda c: c.index), plan.images, plan.base,
                      plan.workers, replace(plan.config, submission_order=True), plan.prebuilt)
    try:
        ours = simulate(plan, keep_schedule=False, max_steps=max_steps)
        theirs = simulate(naive, keep_schedule=False, max_steps=max_steps)
    except OutOfTime:
        return plan
    return naive if theirs.makespan_s < ours.makespan_s * (1 - 1e-9) else plan


# Where a check's expected time came from (runner.planning.inputs): a
# map's or a profile's measurement, or their category's median, all timed on
# the host that measured them. A default is a guess of no host.
MEASURED_SOURCES = ("map", "profile", "category")


def with_host_factor(plan: Plan, ratio: float) -> tuple[Plan, int]:
    """``plan`` on a host ``ratio`` times slower than the one it was planned
    for, as `run --host-factor` scales a map's times before planning: the
    expected times of checks from MEASURED_SOURCES are multiplied by
    ``ratio``; defaults and image builds stay (a map's factor scales neither).
    Returns the plan, ordered again by its policy, and how many checks
    were scaled."""
    if ratio == 1.0:
        return plan, sum(c.source in MEASURED_SOURCES for c in plan.checks)
    checks = sorted((replace(c, expected_s=c.expected_s * ratio) if c.source in MEASURED_SOURCES
                     else c for c in plan.checks), key=lambda c: c.index)
    scaled = sum(c.source in MEASURED_SOURCES for c in checks)
    return make_plan(checks, plan.images, plan.base, plan.workers, plan.config, plan.prebuilt), scaled
