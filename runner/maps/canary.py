"""A node's canary (issue 47, "kept live"): its factor kept current between
checks.

A node's factor is resolved once, before its first check
(runner/maps/node_factor.py), but a node's speed moves within a sweep:
thermal throttling, a noisy neighbour on a shared node. So each node checks
one ground truth of the sweep, the *canary*, right after it resolved its
factor (its baseline) and again every ``--canary-checks`` checks or
``--canary-minutes`` minutes. The canary's time over its baseline is the
node's *drift*: 1.0 while the node runs at the speed it started with, 2.0
at half of it; the node's current factor is its factor times its drift.

Every check records the drift its node's latest canary measured before it
started (the rows' ``node_drift``). A node whose drift passes
``--canary-drift`` either way is named by the report; a TIMEOUT it gave
within the drift of its limit is checked again at the end of the sweep
(runner/maps/drift_confirm.py): there a node first checks its canary again,
and waits (at most CONFIRM_WAIT_S) until its drift is back within bounds.

The canary is measured against the node itself, not against the map: a
single proof's ratio to the map's time differs from the node's factor (the
median over a sample) by that proof's own spread, while its ratio to its
own earlier time on the same node is the node's change alone.

Each node keeps its baseline and what its canary saw in
``OUT/node-factors/canary/<host>.json``: a resumed sweep, and the
confirmation run of the same sweep, measure drift from the same baseline.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

from ..checks.tasks import CheckTask
from ..checks.worker import check_retrying, cpu_model, node_host
from ..errors import InputError
from ..prover import LimitClock
from ..results.publish import publish_json
from ..verdicts import Verdict
from .host_factor import BAND_S
from .node_files import node_dir, slug

# The canary is the ground truth whose expected time is nearest this (in
# log-time), among those of at least CANARY_MIN_S: long enough to measure
# the node rather than the fork and the clock (reporting/limits.FACTOR_MIN_S),
# short enough to be cheap at every check interval: at most the top of the
# calibration band (host_factor.BAND_S). A sweep of heavy proofs alone has
# none: its one 321 s ground truth was chosen once (heavy_preemption.py), a
# node's baseline alone costing as much as the sweep's one check.
CANARY_TARGET_S, CANARY_MIN_S, CANARY_MAX_S = 2.0, 0.5, BAND_S[1]
# How long a node waits for its canary to come back before it confirms a
# TIMEOUT anyway (its row then says the drift it ran at): the default
# canary interval, the time a passing neighbour or throttle is given.
CONFIRM_WAIT_S = 600.0
CONFIRM_POLL_S = 10.0

# TEST HOOK, read in ``_test_drift`` alone: FACTOR or FACTOR:RUNS. Every
# canary after a node's first (or the first RUNS of them, after which the
# node is back) takes FACTOR times its measured time, as on a node that
# slowed down (tests/cluster/test_node_canary.py). Unset on every real run.
TEST_DRIFT_ENV = "PROOFBATCH_TEST_CANARY_DRIFT"


@dataclass(frozen=True)
class CanarySpec:
    """The canary of a sweep, handed to every node with its NodeFactorSpec."""

    task: CheckTask          # the ground truth, under a calibration sample's generous limit
    expected_s: float        # its map time, moved to the checks' mode
    every_checks: int        # 0: not by count
    every_s: float           # 0: not by time
    drift: float             # a node is drifting past 1 +/- this


def check_flags(config) -> None:
    """Raises InputError for canary settings of ``config`` (a SweepConfig)
    that mean nothing."""
    if config.canary_checks < 0:
        raise InputError("--canary-checks", f"{config.canary_checks} is not a count of checks",
                         "pass 0 (not by count) or more")
    if not 0 <= config.canary_minutes <= 10080:
        raise InputError("--canary-minutes", f"{config.canary_minutes} is not minutes",
                         "pass 0 (not by time) to 10080 (a week)")
    if not 0 < config.canary_drift < 1:
        raise InputError("--canary-drift", f"{config.canary_drift} is not a share of a node's "
                         "speed", "pass a share above 0 and below 1 (default 0.25)")


def choose(expected: Mapping[str, float], tasks: Mapping[str, CheckTask], config
           ) -> CanarySpec | None:
    """The canary of a sweep of ``config``: of the ground truths' ``tasks``
    (problem id -> its check under a sample's limit), the one whose
    ``expected`` time is nearest CANARY_TARGET_S in log-time among those
    of CANARY_MIN_S (a shorter one measures the clock) to CANARY_MAX_S; None
    when the canary is off or there is none."""
    pid = nearest(expected, tasks) if wanted(config) else None
    if pid is None:
        return None
    return CanarySpec(tasks[pid], expected[pid], int(config.canary_checks),
                      60.0 * float(config.canary_minutes), float(config.canary_drift))


def wanted(config) -> bool:
    """Whether a sweep of ``config`` checks a canary at all."""
    return bool(config.canary_checks or config.canary_minutes)


def nearest(expected: Mapping[str, float], candidates: Iterable[str]) -> str | None:
    """Of ``candidates``, the one whose ``expected`` time is nearest
    CANARY_TARGET_S in log-time among those of CANARY_MIN_S to CANARY_MAX_S."""
    long_enough = {pid: expected[pid] for pid in candidates
                   if CANARY_MIN_S <= (expected.get(pid) or 0) <= CANARY_MAX_S}
    if not long_enough:
        return None
    return min(long_enough, key=lambda p: (abs(math.log(long_enough[p] / CANARY_TARGET_S)), p))


def cost_note(spec: CanarySpec | None, source: str = "the sweep") -> str:
    """What the canary costs, said with the per-node factor's cost;
    ``source``: what its ground truths were drawn from."""
    if spec is None:
        return (f"; no canary keeps the factors current (off, or no ground truth of {source} has "
                f"a map time of {CANARY_MIN_S:g} to {CANARY_MAX_S:g} s)")
    every = " or ".join(x for x in (f"{spec.every_checks} checks" if spec.every_checks else "",
                                    f"{spec.every_s / 60:g} minutes" if spec.every_s else "") if x)
    return (f"; each node checks the canary {spec.task.problem.problem_id} (about "
            f"{spec.expected_s:.1f} s at the map's speed) before its first check and every {every}"
            f", to keep its factor current (drift past {spec.drift:g} marks it)")


def _test_drift(run: int) -> float:
    """The TEST HOOK's factor (TEST_DRIFT_ENV) for a node's ``run``-th canary
    after its first (from 1); 1.0 when unset."""
    factor, _, runs = (os.environ.get(TEST_DRIFT_ENV) or "1").partition(":")
    return float(factor) if not runs or run <= int(runs) else 1.0


def canary_path(out: Path, host: str) -> Path:
    return node_dir(out) / "canary" / f"{slug(host)}.json"


def recorded(out: Path) -> list[dict]:
    """What every node's canary saw in the sweep in ``out``."""
    found = []
    for path in sorted((node_dir(out) / "canary").glob("*.json")):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue            # being published: the next record has it
    return found


def drifting(ratio: float | None, drift: float) -> bool:
    return ratio is not None and abs(ratio - 1.0) > drift


class NodeCanary:
    """One node's canary in one sweep, shared by the node's worker threads:
    one of them checks it when it is due, the others go on checking."""

    def __init__(self, spec: CanarySpec, session, out: Path,
                 say: Callable[[str], None] = lambda text: print(f"proofbatch: {text}", flush=True)):
        self.spec, self.session, self.say = spec, session, say
        self.host, self.cpu = node_host(), cpu_model()
        self.path = canary_path(out, self.host)
        try:
            kept = json.loads(self.path.read_text())
        except (OSError, ValueError):
            kept = {}
        if kept.get("cpu_model") != self.cpu or kept.get("problem_id") != spec.task.problem.problem_id:
            kept = {}
        self.baseline_s: float | None = kept.get("baseline_s")
        self.ratio: float | None = kept.get("ratio")
        self.worst: float | None = kept.get("worst")
        self.runs, self.cost_s = int(kept.get("runs", 0)), float(kept.get("cost_cpu_s", 0.0))
        self.drifted = max(0, self.runs - 1)        # canaries measured against the baseline
        self.checking = threading.Lock()        # one canary at a time on this node
        self.counting = threading.Lock()
        self.checks, self.since = 0, time.monotonic()

    def start(self) -> None:
        """The baseline, before the node's first check (kept from an earlier
        run of the sweep on this node)."""
        with self.checking:
            if self.baseline_s is None:
                self._check()

    def _check(self) -> None:
        """Check the canary once (under ``checking``) and update the drift."""
        task = self.spec.task
        self.session.prepare([task.problem])
        result, _ = check_retrying(self.session, task, threading.Event())
        secs = result.prove_cpu_secs if task.limits.clock == LimitClock.CPU else result.prove_secs
        if secs is None:
            secs = result.cpu_secs if task.limits.clock == LimitClock.CPU else result.wall_secs
        self.runs += 1
        self.cost_s += result.cpu_secs or result.wall_secs or 0.0
        if result.outcome.verdict != Verdict.OK or not secs:
            self.say(f"node {self.host}: its canary {task.problem.problem_id} gave "
                     f"{result.outcome.verdict.value} ({result.outcome.reason}): its drift stays "
                     "as last measured")
        elif self.baseline_s is None:
            self.baseline_s, self.ratio, self.worst = secs, 1.0, 1.0
        else:
            was = drifting(self.ratio, self.spec.drift)
            self.drifted += 1
            self.ratio = round(secs * _test_drift(self.drifted) / self.baseline_s, 4)
            if self.worst is None or abs(math.log(self.ratio)) > abs(math.log(self.worst)):
                self.worst = self.ratio
            if drifting(self.ratio, self.spec.drift) != was:
                self.say(f"node {self.host}: its canary {task.problem.problem_id} took "
                         f"{self.ratio:.2f}x its first time"
                         + (f", past --canary-drift {self.spec.drift:g}: its checks are marked, "
                            "and its TIMEOUTs within the drift are checked again at the end"
                            if not was else ": back within --canary-drift"))
        self._publish()

    def _publish(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        publish_json(self.path, {
            "host": self.host, "cpu_model": self.cpu, "problem_id": self.spec.task.problem.problem_id,
            "baseline_s": self.baseline_s, "ratio": self.ratio, "worst": self.worst,
            "runs": self.runs, "cost_cpu_s": round(self.cost_s, 2),
            "drifting": drifting(self.ratio, self.spec.drift)}, indent=1)

    def _due(self) -> bool:
        """Whether the canary is due before the check about to start: after
        every_checks checks of this node, or every_s seconds."""
        with self.counting:
            spec = self.spec
            due = ((spec.every_checks and self.checks >= spec.every_checks)
                   or (spec.every_s and time.monotonic() - self.since >= spec.every_s))
            if due:
                self.checks, self.since = 0, time.monotonic()
            self.checks += 1
            return bool(due)

    def _settle(self, task: CheckTask) -> None:
        """Before a confirming check: the canary again, until this node's
        drift is within bounds or CONFIRM_WAIT_S passed."""
        deadline = time.monotonic() + CONFIRM_WAIT_S
        while True:
            with self.checking:
                self._check()
            if not drifting(self.ratio, self.spec.drift):
                return
            if time.monotonic() >= deadline:
                self.say(f"node {self.host}: its canary is still at {self.ratio:.2f}x after "
                         f"{CONFIRM_WAIT_S:.0f} s: {task.problem.problem_id} is confirmed at that "
                         "drift (its row says it)")
                return
            time.sleep(CONFIRM_POLL_S)

    def between(self, tasks: Iterable[CheckTask]) -> Iterator[CheckTask]:
        """``tasks`` with the canary checked between them when due, each
        marked with the node's drift as it starts."""
        for task in tasks:
            if task.confirms is not None:
                self._settle(task)
            elif self._due() and self.checking.acquire(blocking=False):
                try:
                    self._check()
                finally:
                    self.checking.release()
            yield dataclasses.replace(task, node_drift=self.ratio)
