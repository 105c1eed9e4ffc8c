"""Two timeout maps compared problem by problem: which problems each holds,
the factor between the hosts that measured them, each problem's deviation
after that factor, its class in each map, and the limits of one map that a
correct proof timed by the other would exceed.

Either map may be s2n-bignum-bench's own ``timeout-map.json`` or one that
``proofbatch timeout-map`` derived: both are lists of ``{problem_id,
prove_secs, timeout_sec}`` (runner.maps.timeouts.read_map), and ours has a
sidecar ``NAME.meta.json`` giving each problem's class. The bench's file
has none, so its classes are derived by the bench's rule, heavy from 60 s of
``prove_secs`` (``heavy_s``). In the bench's published map, problems under
60 s all sit at the 120 s floor, those of 60-120 s get twice their time, and
those from 120 s five times (cut at 10,800 s).

Pure functions on read maps; the command prints (runner.commands.map_compare).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..errors import InputError
from ..prover import Mode
from .host_factor import median_quartiles
from .timeout_map import read_sidecar, sidecar_path
from .timeouts import MapEntry, read_map

# Proofs that take milliseconds are timed by the prover's clock and the
# fork's start-up, not the proof: their ratios between two hosts are noise,
# so the host factor reads only problems at least this long in both maps.
FACTOR_MIN_S = 0.5
# The bench's class line (its appendix A.6, and MapPolicy.heavy_s).
HEAVY_S = 60.0
CLASSES = ("light", "heavy")


@dataclass(frozen=True)
class MapSide:
    """One map as compared: its entries, and its sidecar's classes if any."""

    path: Path
    entries: Mapping[str, MapEntry]
    classes: Mapping[str, str]     # problem id -> light/heavy, from the sidecar
    sidecar: Path | None           # None for a map without one (the bench's own)
    mode: str | None               # the mode the sidecar says it was measured in
    clock: str = "wall"            # what its seconds count: cpu or wall


@dataclass(frozen=True)
class Factor:
    """B's prove_secs over A's, across the problems timed well in both."""

    median: float | None           # None: no problem is long enough in both
    p25: float | None
    p75: float | None
    used: int                      # problems the ratios came from
    min_s: float

    @property
    def scale(self) -> float:
        """What B's times are divided by to be read on A's host (1 without a factor)."""
        return self.median if self.median is not None else 1.0

    @property
    def spread(self) -> float | None:
        """p75 / p25 of the ratios: 1 when every problem moved by the same factor."""
        return None if self.median is None else self.p75 / self.p25


@dataclass(frozen=True)
class Row:
    """One problem of either map."""

    problem_id: str
    a: MapEntry | None
    b: MapEntry | None
    a_class: str | None            # None: neither a sidecar nor a prove_secs says
    b_class: str | None
    a_class_from: str | None       # "sidecar" or "rule"
    b_class_from: str | None
    ratio: float | None            # B.prove_secs / A.prove_secs
    adjusted: float | None         # ratio / the host factor
    in_factor: bool                # long enough in both to count in the factor
    a_headroom: float | None       # A's limit / B's time moved to A's host
    b_headroom: float | None       # B's limit / A's time moved to B's host

    @property
    def where(self) -> str:
        return "both" if self.a and self.b else ("A" if self.a else "B")

    @property
    def class_changed(self) -> bool:
        return self.where == "both" and None not in (self.a_class, self.b_class) \
            and self.a_class != self.b_class

    @property
    def a_too_tight(self) -> bool:
        """A's limit is below B's measured time on A's host: a correct proof
        as slow as B measured it would time out under A."""
        return self.a_headroom is not None and self.a_headroom < 1

    @property
    def b_too_tight(self) -> bool:
        return self.b_headroom is not None and self.b_headroom < 1


@dataclass(frozen=True)
class Comparison:
    a: MapSide
    b: MapSide
    factor: Factor
    heavy_s: float
    rows: tuple[Row, ...]          # every problem of either map, in id order

    def where(self, which: str) -> list[Row]:
        return [r for r in self.rows if r.where == which]

    @property
    def class_changes(self) -> list[Row]:
        return [r for r in self.rows if r.class_changed]

    @property
    def a_too_tight(self) -> list[Row]:
        """Tightest first."""
        return sorted((r for r in self.rows if r.a_too_tight), key=lambda r: r.a_headroom)

    @property
    def b_too_tight(self) -> list[Row]:
        return sorted((r for r in self.rows if r.b_too_tight), key=lambda r: r.b_headroom)

    @property
    def deviations(self) -> list[Row]:
        """Problems in the factor, furthest from it first (either way)."""
        return sorted((r for r in self.rows if r.in_factor),
                      key=lambda r: -abs(math.log(r.adjusted)))


def read_side(path: Path) -> MapSide:
    """A map and its sidecar's classes; InputError naming the file at fault."""
    path = Path(path)
    if path.name.endswith(".meta.json"):
        raise InputError(path, "is a map's sidecar, not a map",
                         f"pass the map beside it, {path.name.removesuffix('.meta.json')}.json")
    entries = read_map(path)
    if not entries:
        raise InputError(path, "holds no entries", "pass a timeout map with at least one problem")
    meta = read_sidecar(path)
    if meta is None:
        # The bench's harness times prove with Unix.gettimeofday: wall seconds.
        return MapSide(path, entries, {}, None, None)
    prov = meta.get("provenance") if isinstance(meta.get("provenance"), dict) else {}
    # Sidecars written before today's vocabulary say bytecode-fork: read as
    # today's; those written before CPU time was measured timed wall seconds.
    mode = Mode.of(prov.get("mode") or None)
    clock = prov.get("clock") if prov.get("clock") in ("cpu", "wall") else "wall"
    return MapSide(path, entries, _classes(sidecar_path(path), meta), sidecar_path(path),
                   None if mode is None else str(mode), clock)


def _classes(sidecar: Path, meta: dict) -> dict[str, str]:
    problems = meta.get("problems") or {}
    if not isinstance(problems, dict):
        raise InputError(sidecar, "its problems are not an object", "derive the map again, or "
                         "delete the sidecar to compare the map alone")
    classes = {}
    for pid, p in problems.items():
        cls = p.get("class") if isinstance(p, dict) else None
        if cls not in CLASSES:
            raise InputError(sidecar, f"problem {pid}: class {cls!r} is not light or heavy",
                             "derive the map again, or delete the sidecar to compare the map alone")
        classes[pid] = cls
    return classes


def compare(a: MapSide, b: MapSide, min_s: float = FACTOR_MIN_S,
            heavy_s: float = HEAVY_S) -> Comparison:
    """``a`` and ``b`` compared; B's times are read on A's host by dividing
    by the factor, A's on B's by multiplying."""
    _check_seconds("--factor-min-s", min_s)
    _check_seconds("--heavy-s", heavy_s)
    factor = host_factor(a.entries, b.entries, min_s)
    ids = sorted(a.entries.keys() | b.entries.keys())
    rows = tuple(_row(pid, a, b, factor, heavy_s) for pid in ids)
    return Comparison(a, b, factor, heavy_s, rows)


def host_factor(a: Mapping[str, MapEntry], b: Mapping[str, MapEntry], min_s: float) -> Factor:
    """The median of B/A over the problems both timed at ``min_s`` or more."""
    ratios = sorted(b[pid].prove_secs / a[pid].prove_secs for pid in a.keys() & b.keys()
                    if _timed(a[pid], min_s) and _timed(b[pid], min_s))
    if not ratios:
        return Factor(None, None, None, 0, min_s)
    return Factor(*median_quartiles(ratios), len(ratios), min_s)


def class_of(entry: MapEntry | None, side: MapSide, heavy_s: float) -> tuple[str | None, str | None]:
    """The class of ``entry`` in ``side`` and where it came from: the
    sidecar's, else the bench's rule on its prove_secs."""
    if entry is None:
        return None, None
    if entry.problem_id in side.classes:
        return side.classes[entry.problem_id], "sidecar"
    if entry.prove_secs is None:
        return None, None
    return ("heavy" if entry.prove_secs >= heavy_s else "light"), "rule"


def _row(pid: str, a: MapSide, b: MapSide, factor: Factor, heavy_s: float) -> Row:
    ea, eb = a.entries.get(pid), b.entries.get(pid)
    a_class, a_from = class_of(ea, a, heavy_s)
    b_class, b_from = class_of(eb, b, heavy_s)
    ratio = adjusted = a_room = b_room = None
    if ea is not None and eb is not None:
        if ea.prove_secs and eb.prove_secs is not None:
            ratio = eb.prove_secs / ea.prove_secs
            adjusted = ratio / factor.scale
        if eb.prove_secs:
            a_room = ea.timeout_sec / (eb.prove_secs / factor.scale)
        if ea.prove_secs:
            b_room = eb.timeout_sec / (ea.prove_secs * factor.scale)
    in_factor = factor.median is not None and _timed(ea, factor.min_s) and _timed(eb, factor.min_s)
    return Row(pid, ea, eb, a_class, b_class, a_from, b_from, ratio, adjusted, in_factor,
               a_room, b_room)


def _timed(entry: MapEntry | None, min_s: float) -> bool:
    return entry is not None and entry.prove_secs is not None and entry.prove_secs >= min_s


def _check_seconds(flag: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise InputError(flag, f"{value!r} is not a positive number of seconds",
                         "pass seconds greater than zero")


# -- as records: one per problem, and a summary (the command writes them as CSV or JSON) --

COLUMNS = ("problem_id", "in", "a_prove_secs", "b_prove_secs", "ratio", "ratio_after_factor",
           "in_factor", "a_timeout_sec", "b_timeout_sec", "a_class", "a_class_from", "b_class",
           "b_class_from", "class_changed", "a_headroom", "b_headroom", "a_limit_below_b_time",
           "b_limit_below_a_time")


def record(r: Row) -> dict:
    """One problem as a flat record, COLUMNS in order."""
    values = (r.problem_id, r.where, _get(r.a, "prove_secs"), _get(r.b, "prove_secs"), r.ratio,
              r.adjusted, r.in_factor, _get(r.a, "timeout_sec"), _get(r.b, "timeout_sec"),
              r.a_class, r.a_class_from, r.b_class, r.b_class_from, r.class_changed,
              r.a_headroom, r.b_headroom, r.a_too_tight, r.b_too_tight)
    return dict(zip(COLUMNS, values))


def summary(c: Comparison) -> dict:
    """What the comparison found, without the per-problem records."""
    def side(s: MapSide) -> dict:
        return {"path": str(s.path), "problems": len(s.entries),
                "sidecar": None if s.sidecar is None else str(s.sidecar), "mode": s.mode,
                "clock": s.clock,
                "classes_from": "sidecar" if s.sidecar else f"prove_secs >= {c.heavy_s:g} s"}

    f = c.factor
    return {"a": side(c.a), "b": side(c.b),
            "counts": {w: len(c.where(w)) for w in ("both", "A", "B")},
            "factor": {"median": f.median, "p25": f.p25, "p75": f.p75, "spread_p75_over_p25": f.spread,
                       "used": f.used, "min_s": f.min_s},
            "heavy_s": c.heavy_s,
            "class_changes": [r.problem_id for r in c.class_changes],
            "a_limit_below_b_time": [r.problem_id for r in c.a_too_tight],
            "b_limit_below_a_time": [r.problem_id for r in c.b_too_tight]}


def _get(entry: MapEntry | None, field: str) -> float | None:
    return None if entry is None else getattr(entry, field)
