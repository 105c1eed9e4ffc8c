"""Each node's own host factor (issue 47): on a cluster, ``--host-factor
auto`` is resolved by the node that runs the checks, before its first one.

The machine that submits a sweep is often a login node whose CPU is not the
compute nodes', and one partition mixes node generations: a factor measured
there scales limits by the wrong speed. So each Slurm array task and each
Dask worker resolves its own factor (``resolve``), in this order:

1. the factor it already ran this sweep with (``OUT/node-factors/nodes/``):
   a resume keeps its limits, as a local resume keeps sweep.json's factor;
2. the calibration cached for this node, keyed by its host name and CPU
   model (runner/maps/host_factor.py, ``$PROOFBATCH_CACHE/calibrations/<host>/``;
   a cache may be shared by a cluster's nodes);
3. the factor a peer of the same CPU model measured for this sweep
   (``OUT/node-factors/cpu-<model>.json``);
4. else it measures one: the sweep's sample of its own ground truths, or of
   those of ``--calibration-corpus`` (runner/maps/calibration_corpus.py)
   (``Sample``, drawn by host_factor.sample within ``--calibration-budget``),
   each checked in this node's session under a generous limit; the median of
   measured / map time. The first node of a CPU model claims the
   measurement (``cpu-<model>.claim``, made with O_CREAT|O_EXCL, atomic on
   NFSv3 and later); its peers wait for the result it publishes (atomic
   rename) instead of measuring too.

Each check's limit from the map is then multiplied by max(1, factor)
(``scaled``), and the node's record says what it was and how it was had
(cached, measured, peer, given, unmeasured); the driver copies the records
into sweep.json (``record``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..checks.tasks import CheckTask
from ..checks.worker import check_retrying, cpu_model, node_host
from ..prover import CheckLimits, LimitClock, backstop_s
from ..results.publish import publish_json
from ..verdicts import Verdict
from . import canary, host_factor
from .node_files import NODE_DIR, node_dir, slug as _slug  # noqa: F401  (NODE_DIR: callers' name)

# A sampled ground truth may take this many times its sweep limit: every one
# is a correct proof, and a node many times slower is what is measured
# (runner/commands/calibrate.py gives its sample the same room).
SAMPLE_LIMIT_MULTIPLE, SAMPLE_LIMIT_CAP_S = 20.0, 10800.0
# A peer waits this long past the claim's sample limits for the node that
# measures; then it measures itself (that node died or hangs).
CLAIM_EXTRA_S = 600.0
POLL_S = 2.0


@dataclass(frozen=True)
class Sample:
    """One ground truth a node checks to measure its factor."""

    task: CheckTask          # its check, under SAMPLE_LIMIT_MULTIPLE x its sweep limit
    expected_s: float        # its map time moved to the checks' mode


@dataclass(frozen=True)
class NodeFactorSpec:
    """What a node needs to resolve its own factor: handed to every Slurm
    task and Dask worker with the sweep's checks (picklable)."""

    map_sha256: str
    map_mode: str | None     # the mode the map was measured in (part of a calibration's key)
    mode: str                # the mode checks run in
    clock: str               # the limits' clock: what is measured against the map's times
    sample: tuple[Sample, ...]
    budget_s: float          # the sample's expected seconds may not pass this
    slack_s: float           # --limit-slack: wall seconds added after scaling
    backstop_factor: float
    backstop_extra: float
    canary: object = None    # runner.maps.canary.CanarySpec; None: no canary
    source: str = "the sweep"    # what the sample and canary were drawn from
    runtime: str = ""        # the checks' runtime setting (BackendInfo.runtime; part of the key)

    @property
    def cost_s(self) -> float:
        return sum(s.expected_s for s in self.sample)


@dataclass(frozen=True)
class NodeFactor:
    """A node's factor and how it was had."""

    host: str
    cpu_model: str
    factor: float
    how: str                 # cached, measured, peer, unmeasured
    measured_on: str = ""    # the node that measured it (a peer's, for ``peer``)
    problems: int = 0        # ground truths its median is of
    low: float | None = None
    high: float | None = None
    cost_cpu_s: float | None = None   # CPU seconds its measurement took, on the node that measured
    at: str = ""
    note: str = ""

    def describe(self) -> str:
        got = {"cached": "cached calibration", "measured": "measured here",
               "peer": f"measured by {self.measured_on}, a node of the same CPU model",
               "unmeasured": "not measured"}.get(self.how, self.how)
        cost = f", {self.cost_cpu_s:.1f} s of CPU" if self.cost_cpu_s is not None else ""
        note = f"; {self.note}" if self.note else ""
        return (f"node {self.host} ({self.cpu_model}): host factor {host_factor.shown(self.factor)} "
                f"({got}{cost}){note}")


def _read(path: Path) -> NodeFactor | None:
    try:
        return NodeFactor(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None         # absent, or being published: asked again


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def scaled(limits: CheckLimits, factor: float, spec: NodeFactorSpec) -> CheckLimits:
    """``limits`` on a node ``factor`` times slower than the map's: a limit
    from the map times max(1, factor) (a faster node keeps the map's), to
    the millisecond, the bench's slack added after; others as they are."""
    # "map", or "map (bytecode x0.40)" for a map's limit moved to the checks' mode.
    if not limits.time_source.startswith("map"):
        return dataclasses.replace(limits, host_factor=factor)
    time_s = round((limits.time_s - spec.slack_s) * max(1.0, factor), 3) + spec.slack_s
    return dataclasses.replace(limits, time_s=time_s, host_factor=factor,
                               backstop_s=backstop_s(time_s, spec.backstop_factor, spec.backstop_extra))


def scale_tasks(tasks: Sequence[CheckTask], factor: float, spec: NodeFactorSpec) -> list[CheckTask]:
    return [dataclasses.replace(t, limits=scaled(t.limits, factor, spec)) for t in tasks]


def resolve(spec: NodeFactorSpec, session, out: Path,
            say: Callable[[str], None] = lambda text: print(f"proofbatch: {text}", flush=True)
            ) -> NodeFactor:
    """This node's factor for the sweep in ``out`` (see the module's
    docstring for the order), recorded under OUT/node-factors/nodes/."""
    host, cpu = node_host(), cpu_model()
    mine = node_dir(out) / "nodes" / f"{_slug(host)}.json"
    kept = _read(mine)
    if kept is not None and kept.cpu_model == cpu:
        return kept
    found = _cached(spec, host, cpu) or _shared_or_measured(spec, session, out, host, cpu, say)
    mine.parent.mkdir(parents=True, exist_ok=True)
    publish_json(mine, dataclasses.asdict(found), indent=1)
    say(found.describe())
    return found


def _cached(spec: NodeFactorSpec, host: str, cpu: str) -> NodeFactor | None:
    cal = host_factor.load(spec.map_sha256, spec.map_mode, spec.mode, spec.clock, host=host,
                           cpu_model=cpu, runtime=spec.runtime)
    return None if cal is None else NodeFactor(host, cpu, cal.factor, "cached", cal.host,
                                               cal.problems, cal.low, cal.high, at=cal.measured_at)


def known(spec: NodeFactorSpec, out: Path) -> NodeFactor | None:
    """This node's factor for the sweep in ``out`` when it can be had
    without measuring (kept, cached, or a peer's of its CPU model), else
    None: what a driver asks its workers before it places checks by speed
    (cluster/dask.py)."""
    host, cpu = node_host(), cpu_model()
    kept = _read(node_dir(out) / "nodes" / f"{_slug(host)}.json")
    if kept is not None and kept.cpu_model == cpu:
        return kept
    peer = _read(node_dir(out) / f"cpu-{_slug(cpu)}.json")
    return _cached(spec, host, cpu) or (None if peer is None else dataclasses.replace(peer, host=host))


def _shared_or_measured(spec: NodeFactorSpec, session, out: Path, host: str, cpu: str,
                        say) -> NodeFactor:
    shared = node_dir(out) / f"cpu-{_slug(cpu)}.json"
    claim = shared.with_suffix(".claim")
    claim.parent.mkdir(parents=True, exist_ok=True)
    wait_s = sum(s.task.limits.time_s for s in spec.sample) + CLAIM_EXTRA_S
    while True:
        peer = _read(shared)
        if peer is not None:
            return dataclasses.replace(peer, host=host, how="peer" if peer.host != host else peer.how)
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                age = time.time() - claim.stat().st_mtime
            except FileNotFoundError:
                continue
            if age > wait_s:
                say(f"the node measuring {cpu}'s factor has held its claim {age:.0f} s: measuring here")
                break
            time.sleep(POLL_S)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(f"{host} {os.getpid()}\n")
        break
    try:
        found = measure(spec, session, host, cpu, say)
        publish_json(shared, dataclasses.asdict(found), indent=1)
        return found
    finally:
        claim.unlink(missing_ok=True)


def measure(spec: NodeFactorSpec, session, host: str, cpu: str, say) -> NodeFactor:
    """Check the sweep's sample of ground truths in ``session`` and take the
    median of measured / expected time (on the sweep's clock); kept in this
    node's calibration cache. A node whose sample is empty, or proves none
    of it, keeps the map's limits (factor 1) and says why."""
    if not spec.sample:
        return NodeFactor(host, cpu, 1.0, "unmeasured", host, at=_now(),
                          note=f"no ground truth of {spec.source} fits --calibration-budget "
                               f"({spec.budget_s:.0f} s): the map's limits as they are")
    say(f"node {host} ({cpu}): measuring its host factor on {len(spec.sample)} ground truths of "
        f"{spec.source}, about {spec.cost_s:.0f} s of proofs expected at the map's speed (within "
        f"--calibration-budget, {spec.budget_s:.0f} s)")
    session.prepare([s.task.problem for s in spec.sample])
    key = "prove_cpu_secs" if spec.clock == LimitClock.CPU else "prove_secs"
    measured, cost, loads = {}, 0.0, []
    for s in spec.sample:
        result, _ = check_retrying(session, s.task, threading.Event())
        secs = getattr(result, key)
        cost += result.cpu_secs or result.wall_secs or 0.0
        if result.outcome.verdict == Verdict.OK and secs is not None:
            measured[s.task.problem.problem_id] = secs
        try:
            loads.append(os.getloadavg()[0])
        except OSError:
            pass
    expected = {s.task.problem.problem_id: s.expected_s for s in spec.sample}
    if not measured:
        return NodeFactor(host, cpu, 1.0, "unmeasured", host, cost_cpu_s=round(cost, 2), at=_now(),
                          note="no sampled ground truth was proved OK here: the map's limits as "
                               "they are")
    factor, low, high, ratios = host_factor.measure(measured, expected)
    kept = [float(f"{v:.4g}") for v in (factor, low, high)]
    cal = host_factor.Calibration(
        host=host, map_sha256=spec.map_sha256, mode=spec.mode, clock=spec.clock, factor=kept[0],
        low=kept[1], high=kept[2], problems=len(ratios), measured_at=_now(),
        load=round(statistics.mean(loads), 2) if loads else None, sweep="",
        ratios={p: float(f"{r:.4g}") for p, r in ratios.items()}, map_mode=spec.map_mode,
        cpu_model=cpu, runtime=spec.runtime)
    host_factor.save(cal)
    return NodeFactor(host, cpu, kept[0], "measured", host, len(ratios), kept[1], kept[2],
                      round(cost, 2), cal.measured_at,
                      note=f"load {cal.load:.1f}" if cal.load is not None else "")


def recorded(out: Path) -> list[dict]:
    """The factor of every node that resolved one for the sweep in ``out``."""
    found = [_read(p) for p in sorted((node_dir(out) / "nodes").glob("*.json"))]
    return [dataclasses.asdict(f) for f in found if f is not None]


def ground_truths(problems, answers_given: bool) -> dict[str, object]:
    """The problems whose ground truth is at hand, as problems answered by
    it: their answers when the sweep checks answer.txt (no --answers), else
    each problem folder's answer.txt."""
    found = {}
    for p in problems:
        if not answers_given:
            answer = p.answer
        else:
            try:
                answer = (Path(p.directory) / "answer.txt").read_bytes()
            except OSError:
                answer = None
        if answer:
            found[p.problem_id] = dataclasses.replace(p, answer=answer, answer_given=None,
                                                      attempts=(), answer_source="answer.txt")
    return found


def truth_checks(tasks: Sequence[CheckTask], problems, loaded, backend, answers_given: bool
                 ) -> tuple[dict[str, float], dict[str, CheckTask]]:
    """The ground truths of the sweep's ``tasks`` as checks a node measures
    itself by, each under SAMPLE_LIMIT_MULTIPLE x its sweep limit, and the
    map's times of them moved to the checks' mode."""
    truths = ground_truths(problems, answers_given)
    expected = dict(backend.expected_in_mode(list(truths.values()), {
        pid: secs for pid, secs in loaded.prove_secs().items() if pid in truths}))
    first = {}
    for t in tasks:
        first.setdefault(t.problem.problem_id, t)
    checks = {}
    for pid in sorted(p for p in truths if p in first):
        limits = first[pid].limits
        time_s = min(SAMPLE_LIMIT_CAP_S, SAMPLE_LIMIT_MULTIPLE * limits.time_s)
        checks[pid] = CheckTask(truths[pid], dataclasses.replace(
            limits, time_s=time_s, backstop_s=None, host_factor=None))
    return expected, checks


def spec_for(tasks: Sequence[CheckTask], problems, loaded, backend, *, budget_share: float,
             expected_core_s: float, answers_given: bool, slack_s: float, backstop_factor: float,
             backstop_extra: float, clock: str, mode: str, canary_config=None,
             source: str = "the sweep") -> NodeFactorSpec:
    """The spec every node of the sweep resolves its factor by: the sample of
    its ground truths (host_factor.sample: stratified by log time in the
    calibration band, cheapest slices first) whose expected times, in the
    checks' mode, add up to at most ``budget_share`` of the sweep's
    expected core-seconds; and the sweep's canary (runner/maps/canary.py)
    when ``canary_config`` (its SweepConfig) is given."""
    budget_s = budget_share * expected_core_s
    expected, checks = truth_checks(tasks, problems, loaded, backend, answers_given)
    chosen = host_factor.sample(expected, sorted(checks), budget_s=budget_s)
    sample = [Sample(checks[pid], expected[pid]) for pid in chosen]
    watch = None if canary_config is None else canary.choose(expected, checks, canary_config)
    return NodeFactorSpec(loaded.digest, None if loaded.provenance.mode is None
                          else str(loaded.provenance.mode), mode, clock, tuple(sample), budget_s,
                          slack_s, backstop_factor, backstop_extra, watch, source,
                          backend.info.runtime)


def cost_note(spec: NodeFactorSpec, where: str, expected_core_s: float, share: float) -> str:
    """What the per-node factor costs, said before the sweep starts."""
    if not spec.sample:
        return (f"--host-factor auto on {where}: each node uses its cached calibration, else one a "
                f"peer of its CPU model measured; no ground truth of {spec.source} fits "
                f"--calibration-budget {share:g} ({spec.budget_s:.0f} s of the sweep's "
                f"{expected_core_s / 3600:.2f} expected core-hours), so a node without one keeps "
                "the map's limits")
    return (f"--host-factor auto on {where}: each node uses its cached calibration (host and CPU "
            f"model), else the first node of each CPU model measures one on {len(spec.sample)} "
            f"ground truths of {spec.source}, about {spec.cost_s:.0f} s of proofs at the map's speed "
            f"(times its factor), {spec.cost_s / max(expected_core_s, 1e-9):.1%} of the sweep's "
            f"{expected_core_s / 3600:.2f} expected core-hours (--calibration-budget {share:g})")


def for_sweep(tasks: Sequence[CheckTask], problems, loaded, backend, config, plan, truths=None
              ) -> tuple[NodeFactorSpec, str]:
    """The spec of a sweep of ``config`` (a SweepConfig) whose nodes each
    resolve their factor, and what it costs, said before it starts. The
    sweep's expected core-seconds are its plan's (the map's times moved to
    the checks' mode), else its limits'. ``truths``: (tasks, problems,
    source) whose answer.txt ground truths the sample and the canary are
    drawn from instead of the sweep's (runner/maps/calibration_corpus.py)."""
    expected = (sum(c.expected_s for c in plan.checks) if plan is not None
                else sum(t.limits.time_s for t in tasks))
    share = float(config.calibration_budget)
    drawn, among, source = truths or (tasks, problems, "the sweep")
    spec = spec_for(drawn, among, loaded, backend, budget_share=share, expected_core_s=expected,
                    answers_given=truths is not None or config.answers is not None,
                    slack_s=float(config.limit_slack), backstop_factor=float(config.backstop_factor),
                    backstop_extra=float(config.backstop_extra), clock=str(config.limit_clock),
                    mode=str(config.mode), canary_config=config, source=source)
    return spec, (cost_note(spec, "a cluster", expected, share)
                  + canary.cost_note(spec.canary, source))


def record(out: Path) -> None:
    """Copy each node's factor and how it was had into OUT/sweep.json
    (``node_factors``), beside the sweep's own ``host_factor`` (null: each
    node's), and what each node's canary saw (``node_canaries``)."""
    from ..results.sweep_manifest import NAME, read_sweep_manifest
    nodes, watched = recorded(out), canary.recorded(out)
    manifest = read_sweep_manifest(out)
    if manifest.get("node_factors") == nodes and manifest.get("node_canaries", []) == watched:
        return
    manifest["node_factors"] = nodes
    if watched:
        manifest["node_canaries"] = watched
    publish_json(Path(out) / NAME, manifest, indent=2)


def unscaled_limits(out: Path, slack_s: float):
    """(problem_id, attempt, timeout_s) of the rows of the sweep in ``out``
    with each map limit as it was before its node's factor scaled it: what
    a resume compares with the limits it gives (runner/sweep_dir.py)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..results import shards

    table = shards.scan(out, repair=False, columns=("host_factor", "timeout_source")).done.table
    factor = pc.if_else(pc.starts_with(table["timeout_source"].fill_null(""), "map"),
                        pc.max_element_wise(table["host_factor"].fill_null(1.0), 1.0), 1.0)
    base = pc.add(pc.divide(pc.subtract(table["timeout_s"], slack_s), factor), slack_s)
    return pa.table({"problem_id": table["problem_id"], "attempt": table["attempt"], "timeout_s": base})
