"""Were a sweep's limits tight? A reader's question when a TIMEOUT may be the
host's doing rather than the answer's (issue 31).

Per sweep: the clock its limits counted, the host factor its map was
scaled by and the niceness its checks ran at; the OK checks that used more
than ``TIGHT`` of their limit (a slower host would have cut them); the
TIMEOUTs that came while the host's 1-minute load was above its CPUs (each
row records both); the checks the wall-clock backstop ended as starved; and,
under a timeout map, this sweep's proof times against the map's (the factor
between this host and the map's, as `timeout-map compare` gives it between
two maps).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from ..checks.guard import BACKSTOP
from ..maps.host_factor import shown
from ..maps.timeouts import read_map

TIGHT = 0.8
# The row columns ``check`` reads: a report must load these (issue 46: the
# report loaded only its own columns, and under the CPU clock every OK check
# looked unmeasured, every TIMEOUT's load unknown and no check retried).
COLUMNS = ("problem_id", "verdict", "reason", "prove_secs", "prove_cpu_secs", "cpu_secs",
           "timeout_s", "host_load", "host_cpus", "infra_retries", "limit_clock", "host",
           "host_factor", "node_drift", "confirmed")
# Proofs shorter than this measure the clock more than the host.
FACTOR_MIN_S = 0.5


@dataclass(frozen=True)
class LimitsCheck:
    clock: str
    host_factor: float | None
    ok: int
    nice: int | None = None         # the checks' niceness (sweep.json); None before it was kept
    unmeasured: int = 0             # OK checks without a time on the sweep's clock
    tight: list[tuple[str, float, float]] = field(default_factory=list)   # (id, used s, limit s)
    timeouts: int = 0
    timeouts_loaded: int = 0        # while the host's load was above its CPUs
    timeouts_unknown_load: int = 0  # rows written before load was recorded
    starved: int = 0                # ended by the wall-clock backstop after their retries
    retried: int = 0                # checks run again (killed from outside, starved, paused)
    map_ratio: float | None = None  # median measured / map prove_secs
    map_ratio_n: int = 0
    # (host, its factor, checks) of the rows that record a factor: the speed
    # each node's limits were scaled by (issue 47: each node its own).
    by_node: list[tuple[str, float, int]] = field(default_factory=list)
    # (host, its canary's drift furthest from 1, checks it marked) of the
    # nodes whose canary drifted past --canary-drift (runner/maps/canary.py).
    drifting: list[tuple[str, float, int]] = field(default_factory=list)
    drift: float = 0.25
    # (problem, the confirming run's verdict, its host, what the first gave)
    # of TIMEOUTs of drifting nodes checked again (runner/maps/drift_confirm.py).
    confirmed: list[tuple[str, str, str, str]] = field(default_factory=list)


def _col(table: pa.Table, name: str) -> list:
    return table[name].to_pylist() if name in table.column_names else [None] * table.num_rows


def check(table: pa.Table, manifest: dict) -> LimitsCheck:
    rows = table.select([c for c in COLUMNS if c in table.column_names])
    clock = manifest.get("limit_clock") or "wall"
    ids, verdicts, reasons = _col(rows, "problem_id"), _col(rows, "verdict"), _col(rows, "reason")
    # On the CPU clock: prove's own CPU time, else (a prover that does not
    # measure it) the check's process tree's, which the limit counted.
    used = ([p if p is not None else t for p, t in zip(_col(rows, "prove_cpu_secs"),
                                                       _col(rows, "cpu_secs"))]
            if clock == "cpu" else _col(rows, "prove_secs"))
    limits, loads, cpus = _col(rows, "timeout_s"), _col(rows, "host_load"), _col(rows, "host_cpus")
    tight, timeouts, loaded, unknown, starved, unmeasured = [], 0, 0, 0, 0, 0
    measured: dict[str, float] = {}
    for pid, verdict, reason, secs, limit, load, n in zip(ids, verdicts, reasons, used, limits,
                                                          loads, cpus):
        if verdict == "OK" and secs is None:
            unmeasured += 1
        elif verdict == "OK":
            measured[pid] = secs
            if limit and secs > TIGHT * limit:
                tight.append((pid, secs, limit))
        elif verdict == "TIMEOUT":
            timeouts += 1
            if load is None or not n:
                unknown += 1
            elif load > n:
                loaded += 1
        elif verdict == "ERROR" and (reason or "").startswith(BACKSTOP):
            starved += 1
    retried = sum(1 for r in _col(rows, "infra_retries") if r)
    nodes = Counter((host or "?", factor) for host, factor in zip(_col(rows, "host"),
                                                                  _col(rows, "host_factor"))
                    if factor is not None)
    ratio, n_ratio = _against_map(measured, manifest)
    drift = float((manifest.get("config") or {}).get("canary_drift") or 0.25)
    drifting = _drifting(_col(rows, "host"), _col(rows, "node_drift"), drift)
    confirmed = [(pid, v, host or "?", note) for pid, v, host, note in zip(
        ids, verdicts, _col(rows, "host"), _col(rows, "confirmed")) if note]
    nice = manifest.get("nice")
    return LimitsCheck(clock, manifest.get("host_factor"), sum(v == "OK" for v in verdicts),
                       nice if isinstance(nice, int) and not isinstance(nice, bool) else None,
                       unmeasured, sorted(tight, key=lambda t: -t[1] / t[2]), timeouts, loaded,
                       unknown, starved, retried, ratio, n_ratio,
                       [(h, f, n) for (h, f), n in sorted(nodes.items())], drifting, drift,
                       confirmed)


def _drifting(hosts: list, drifts: list, drift: float) -> list[tuple[str, float, int]]:
    """The nodes whose rows say their canary drifted past ``drift``."""
    worst: dict[str, float] = {}
    marked: Counter = Counter()
    for host, ratio in zip(hosts, drifts):
        if ratio is None or abs(ratio - 1.0) <= drift:
            continue
        host = host or "?"
        marked[host] += 1
        if host not in worst or abs(ratio - 1.0) > abs(worst[host] - 1.0):
            worst[host] = ratio
    return [(h, worst[h], marked[h]) for h in sorted(worst)]


def _against_map(measured: dict[str, float], manifest: dict) -> tuple[float | None, int]:
    """Median of this sweep's proof times over the map's, for proofs of at
    least FACTOR_MIN_S in the map; (None, 0) without a readable map."""
    config = manifest.get("config") or {}
    path = config.get("timeout_map")
    if not path:
        return None, 0
    path = Path(manifest.get("cwd") or ".", path) if not Path(path).is_absolute() else Path(path)
    try:
        entries = read_map(path)
    except Exception:       # a map moved or changed since: the rest of the report stands
        return None, 0
    ratios = [secs / entries[pid].prove_secs for pid, secs in measured.items()
              if pid in entries and (entries[pid].prove_secs or 0) >= FACTOR_MIN_S]
    return (statistics.median(ratios), len(ratios)) if ratios else (None, 0)


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, with an s unless ``n`` is 1: "1 TIMEOUT", "3 TIMEOUTs"."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def lines(c: LimitsCheck) -> list[str]:
    """What the report says of its limits, a line each."""
    factor = f", map limits x{shown(max(1.0, c.host_factor))} for this host" if c.host_factor else ""
    # The niceness decides how much of a core a check got on a shared host
    # (docs/limits.md, "Priority"): CPU times are read beside it.
    nice = "" if c.nice is None else f", checks at niceness {c.nice}"
    out = [f"limits counted {'CPU' if c.clock == 'cpu' else 'wall'} time{factor}{nice}"]
    if len(c.by_node) > 1 or (c.by_node and c.by_node[0][1] != c.host_factor):
        out.append("host factors by node: " + "; ".join(
            f"{host} x{shown(f)} ({plural(n, 'check')})" for host, f, n in c.by_node))
    if c.drifting:
        out.append(f"nodes whose canary drifted past --canary-drift {c.drift:g} (its time over its "
                   "first; their checks are marked in node_drift): " + "; ".join(
                       f"{host} up to {ratio:.2f}x ({plural(n, 'check')})"
                       for host, ratio, n in c.drifting))
    if c.confirmed:
        shown_ = ", ".join(f"{pid} {verdict} on {host}" for pid, verdict, host, _ in c.confirmed[:5])
        out.append(f"{plural(len(c.confirmed), 'TIMEOUT')} of drifting nodes checked again at the "
                   f"end of the sweep, the confirming verdict recorded: {shown_}"
                   + (", ..." if len(c.confirmed) > 5 else ""))
    if c.map_ratio is not None:
        out.append(f"proof times against the map's: median {c.map_ratio:.2f}x over {c.map_ratio_n} "
                   f"proofs of {FACTOR_MIN_S:g} s or more ({c.clock} seconds against the map's)")
    tightest = ", ".join(f"{pid} {used:.1f}/{limit:g} s" for pid, used, limit in c.tight[:3])
    unmeasured = f"; {c.unmeasured} of them recorded no {c.clock} time" if c.unmeasured else ""
    out.append(f"{len(c.tight)} of {plural(c.ok, 'OK check')} used more than {TIGHT:.0%} of their "
               "limit" + (f" ({tightest}{', ...' if len(c.tight) > 3 else ''})" if c.tight else "")
               + unmeasured)
    if c.timeouts:
        known = c.timeouts - c.timeouts_unknown_load
        out.append(f"{plural(c.timeouts, 'TIMEOUT')}, {c.timeouts_loaded} of {known} with a "
                   "recorded load while the host's load was above its CPUs"
                   + (" (on the wall clock the host, not the answer, may have spent the time)"
                      if c.timeouts_loaded and c.clock == "wall" else ""))
    if c.starved or c.retried:
        out.append(f"{plural(c.retried, 'check')} ran again after an end that was not their "
                   f"answer's; {c.starved} starved past the wall-clock backstop every time")
    return out
