"""Nodes of different speed in one profile: a factor per node, and times
normalised to one reference node.

A profile spread over a cluster (``proofbatch profile --cluster slurm``)
times each run of a problem on whichever node pulled it, and a cluster's
nodes are rarely alike: another CPU model, another clock, another memory
system. Three runs of one problem on two such nodes read as spread when
they are speed, and a map derived from them gives the problem a heavy
class and a margin it does not need, or a limit the slow node breaks.

A node's *factor* is how much longer it takes than the reference node: the
median, over the problems timed on both, of the problem's median time there
over its median time on the reference. Only problems of at least
``min_s`` on both count: milliseconds time the clock and the fork, not the
node. A node that shares no such problem with the reference is measured
through a node that does (its factor times that node's); one linked to no
measured node has no factor, its times stay as measured, and the result
says so. The reference is the node that timed the most runs (the first by
name of equals) unless one is named.

Pure functions on ProblemRuns (runner/maps/profile_data.py), whose
``hosts`` and ``cpu_models`` say where each run was timed.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from ..errors import InputError
from .compare import FACTOR_MIN_S
from .host_factor import median_quartiles
from .profile_data import ProblemRuns

# Only proofs of half a second or more, as the host factor between two maps
# reads them, for the same reason.
MIN_S = FACTOR_MIN_S
# Nodes whose factors are within this ratio are taken to be of one speed:
# the factor is a median of medians, and repeated proofs on one idle node
# differ by a few percent (docs/profiles-and-timeout-maps.md, pooled spread).
SAME_SPEED = 1.1


@dataclass(frozen=True)
class Node:
    host: str
    cpu_model: str          # as its rows recorded it; "" when they did not
    runs: int               # runs timed on it
    factor: float | None    # its times over the reference's; 1 for the reference; None: unknown
    problems: int           # problems its factor is the median of (0 for the reference)
    low: float | None = None    # the ratios' first quartile
    high: float | None = None   # and third
    via: str | None = None      # the measured node it was linked through, when not the reference

    def as_dict(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v)
                for k, v in dataclasses.asdict(self).items()}


@dataclass(frozen=True)
class NodeFactors:
    reference: str          # "" when no run recorded its host
    nodes: tuple[Node, ...]
    mixed: tuple[str, ...]  # problems whose runs came from nodes of different speed
    min_s: float = MIN_S

    def node(self, host: str) -> Node | None:
        return next((n for n in self.nodes if n.host == host), None)

    @property
    def differ(self) -> bool:
        """Whether any two nodes are of different speed (or one's is unknown)."""
        factors = [n.factor for n in self.nodes]
        if any(f is None for f in factors):
            return len(factors) > 1
        return bool(factors) and max(factors) / min(factors) >= SAME_SPEED

    @property
    def unknown(self) -> list[str]:
        return [n.host for n in self.nodes if n.factor is None]

    def normalise(self, runs: Sequence[ProblemRuns]) -> list[ProblemRuns]:
        """``runs`` with each run's times divided by its node's factor: as if
        every run was timed on the reference node. Runs of a node without a
        factor, or without a recorded host, stay as measured."""
        factor = {n.host: n.factor for n in self.nodes if n.factor is not None}

        def scaled(times: tuple[float, ...], hosts: tuple[str, ...]) -> tuple[float, ...]:
            if len(times) != len(hosts):
                return times
            return tuple(t / factor.get(h, 1.0) for t, h in zip(times, hosts))

        return [dataclasses.replace(r, prove_secs=scaled(r.prove_secs, r.hosts),
                                    prove_cpu_secs=scaled(r.prove_cpu_secs, r.hosts))
                for r in runs]

    def as_dict(self) -> dict:
        return {"reference": self.reference, "min_s": self.min_s, "same_speed": SAME_SPEED,
                "differ": self.differ, "nodes": [n.as_dict() for n in self.nodes],
                "mixed_problems": len(self.mixed), "mixed_examples": list(self.mixed[:10])}


def _by_node(r: ProblemRuns) -> dict[str, float]:
    """Host -> the problem's median time there (runs with a recorded host)."""
    if len(r.hosts) != len(r.prove_secs):
        return {}
    times: dict[str, list[float]] = {}
    for host, t in zip(r.hosts, r.prove_secs):
        if host:
            times.setdefault(host, []).append(t)
    return {h: statistics.median(ts) for h, ts in times.items()}


def _ratios(medians: list[dict[str, float]], host: str, base: str, min_s: float) -> list[float]:
    return [m[host] / m[base] for m in medians
            if host in m and base in m and m[host] >= min_s and m[base] >= min_s]


def node_factors(runs: Sequence[ProblemRuns], reference: str | None = None,
                 min_s: float = MIN_S) -> NodeFactors:
    """Each node's factor against ``reference`` (default: the node of the most
    runs), from the problems timed on both. Raises InputError for a named
    reference that timed nothing."""
    counts: Counter[str] = Counter(h for r in runs if len(r.hosts) == len(r.prove_secs)
                                   for h in r.hosts if h)
    models: dict[str, str] = {}
    for r in runs:
        for h, m in zip(r.hosts, r.cpu_models):
            if h and m:
                models.setdefault(h, m)
    if not counts:
        return NodeFactors("", (), (), min_s)
    if reference is not None and reference not in counts:
        raise InputError("--reference-node", f"{reference!r} timed no run of this profile",
                         f"name one of its nodes: {', '.join(sorted(counts))}")
    ref = reference or min(counts, key=lambda h: (-counts[h], h))
    medians = [m for m in map(_by_node, runs) if len(m) > 1]
    known: dict[str, tuple[float, int, float | None, float | None, str | None]] = {ref: (1.0, 0, None, None, None)}
    progress = True
    while progress:
        progress = False
        for host in sorted(counts):
            if host in known:
                continue
            # The reference first, then any node already measured: the most shared problems wins.
            best = max(((len(rs), base, rs) for base in sorted(known)
                        if (rs := _ratios(medians, host, base, min_s))),
                       key=lambda x: (x[0], x[1] == ref), default=None)
            if best is None:
                continue
            _, base, ratios = best
            median, low, high = median_quartiles(ratios)
            known[host] = (median * known[base][0], len(ratios), low * known[base][0],
                           high * known[base][0], None if base == ref else base)
            progress = True
    nodes = tuple(Node(h, models.get(h, ""), counts[h], *(known.get(h) or (None, 0, None, None, None)))
                  for h in sorted(counts, key=lambda h: (h != ref, h)))
    factor = {n.host: n.factor for n in nodes}
    mixed = []
    for r in runs:
        hosts = {h for h in r.hosts if h}
        if len(hosts) > 1:
            fs = [factor.get(h) for h in hosts]
            if any(f is None for f in fs) or max(fs) / min(fs) >= SAME_SPEED:
                mixed.append(r.problem_id)
    return NodeFactors(ref, nodes, tuple(sorted(mixed)), min_s)



def most_at_once(rows: Sequence[dict]) -> dict[str, dict]:
    """Per host of ``rows`` (result rows of one sweep), the most checks that
    ran at the same time and the host's logical CPUs, as its rows recorded
    them: a profile times one check per core, or it times their sharing."""
    events: dict[str, list[tuple[float, int]]] = {}
    cpus: dict[str, int | None] = {}
    for r in rows:
        start, end = r.get("started_at"), r.get("finished_at")
        if start is None or end is None or r.get("dedup_of") is not None:
            continue
        host = r.get("host") or ""
        # An end sorts before a start at the same instant: back to back is not at once.
        events.setdefault(host, []).extend([(start.timestamp(), 1), (end.timestamp(), -1)])
        cpus[host] = r.get("host_cpus") or cpus.get(host)
    found = {}
    for host, evs in events.items():
        now = most = 0
        for _, step in sorted(evs):
            now += step
            most = max(most, now)
        found[host] = {"most_at_once": most, "cpus": cpus.get(host)}
    return found


def summary_fields(out, problems: list[dict], provenance: dict) -> dict:
    """What a profile's summary.json says of its nodes: each node's factor
    on the clock of the profile's limits, and per run and node the most
    checks at once beside its CPUs."""
    from ..results import shards
    from .profile_data import on_clock

    runs = [ProblemRuns(p["problem_id"], p["category"], tuple(p["prove_secs"]),
                        prove_cpu_secs=tuple(p["prove_cpu_secs"]), hosts=tuple(p["run_hosts"]),
                        cpu_models=tuple(p["cpu_models"])) for p in problems]
    runs, clock = on_clock(runs, provenance.get("limit_clock", "wall"))
    at_once = {run["dir"]: most_at_once(shards.read_results(out / run["dir"]).to_pylist())
               for g in provenance["generations"] if g.get("finished") for run in g["runs"]}
    return {"nodes": {"clock": clock, **node_factors(runs).as_dict()}, "at_once": at_once}
