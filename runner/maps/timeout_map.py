"""Deriving a per-problem timeout map from a profile, as s2n-bignum-bench
does (its appendix A.6), and a little further.

The bench's method, step by step:

1. Per problem, statistics over the profiled runs: the max and a high
   percentile (``percentile``; 100 is the max, the default).
2. Two classes. A problem is *heavy* when its statistic reaches ``heavy_s``
   or its runs spread by ``heavy_spread`` (max/min) or more. Spread is only
   read from problems of at least ``spread_min_s``: a proof of 2 ms that once
   took 6 ms is clock noise, not a heavy proof.
3. A multiplicative margin per class, larger for heavy problems, whose
   absolute variance is larger.
4. ``timeout = clamp(margin x statistic, floor, cap)``, rounded up to a whole
   second.

Beyond the bench: three runs are too few to know one problem's spread, so
runner.maps.spread pools the run-to-run spread of all problems by runtime band.
A margin is raised until the pooled model predicts that a correct proof
exceeds its limit with probability at most ``target_false_timeout``, and the
expected number of false timeouts over the corpus is reported. Proofs under
``spread_min_s`` keep their class margin: a 20 ms proof that once took 40 ms
shows the clock, and no relative model of it says anything about 120 s.

The map is a list of ``{problem_id, prove_secs, timeout_sec}``, exactly the
bench's format; ``prove_secs`` is the median profiled time (the expected
duration a planner wants). Everything else goes to a sidecar,
``NAME.meta.json`` beside ``NAME.json``: per problem the class, statistic,
margin, rule, headroom, false-timeout probability and expected memory; every
problem clipped by the cap; the policy; the spread model; the provenance.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..results.publish import publish
from ..errors import InputError, utf8_text
from ..prover import LimitClock, Mode
from .profile_data import ProblemRuns
from ..settings import setting

if TYPE_CHECKING:      # imported when deriving
    from . import spread


SIDECAR_FORMAT = "proofbatch-timeout-map-meta/1"



@dataclass(frozen=True)
class MapPolicy:
    """How limits are derived. Every field is a number, so that each is one
    command-line option of ``proofbatch timeout-map``."""

    floor_s: float = setting("no limit below this many seconds", default=120.0)
    cap_s: float = setting("no limit above this many seconds; problems clipped here are listed", default=10800.0)
    percentile: float = setting("percentile of a problem's runs that its margin multiplies; 100 is "
                                "the max", default=100.0)
    heavy_s: float = setting("a problem whose statistic reaches this many seconds is heavy", default=60.0)
    heavy_spread: float = setting("a problem whose runs spread this much (max/min) is heavy", default=1.5)
    spread_min_s: float = setting("spread is read from problems of this many seconds up: it makes "
                                  "them heavy, it raises their margins, and sparse runtime bands "
                                  "borrow it", default=1.0)
    light_margin: float = setting("margin of light problems", default=2.0)
    heavy_margin: float = setting("margin of heavy problems", default=3.0)
    target_false_timeout: float = setting(
        "per problem: margins are raised until the pooled run-to-run spread predicts at most this "
        "probability that a correct proof times out; 0 turns the pooled model off", default=1e-4)
    min_band_df: float = setting("a runtime band with fewer pooled degrees of freedom borrows the "
                                 "spread of all problems", default=10.0)
    resolution_s: float = setting("shorter times are read as this: the prover clock's resolution", default=0.001)
    mem_margin: float = setting("a problem's memory guard is its profiled peak times this, within "
                                "--mem-limit", default=2.0)

    def __post_init__(self):
        def bad(name: str, why: str, fix: str):
            raise InputError(f"--{name.replace('_', '-')}", f"{getattr(self, name)!r}: {why}", fix)

        for name in ("floor_s", "cap_s", "heavy_s", "resolution_s"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                bad(name, "not a positive number of seconds", "pass seconds greater than zero")
        if self.cap_s < self.floor_s:
            bad("cap_s", f"below the floor of {self.floor_s:g} s", "pass a cap at or above the floor")
        if not 50 <= self.percentile <= 100:
            bad("percentile", "not a high percentile", "pass a percentile from 50 to 100")
        for name in ("light_margin", "heavy_margin", "heavy_spread", "mem_margin"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 1):
                bad(name, "below 1 would cut under what was measured", "pass 1 or more")
        if not 0 <= self.target_false_timeout < 0.5:
            bad("target_false_timeout", "not a small probability", "pass e.g. 1e-4, or 0 to turn it off")


@dataclass(frozen=True)
class Entry:
    problem_id: str
    category: str
    cls: str                    # "light" or "heavy"
    runs: int
    median: float
    max: float
    statistic: float            # the policy's percentile of the runs
    margin: float               # the margin applied: the class's, or more for the spread target
    rule: str                   # what set the limit: class-margin, spread-target, floor or cap
    timeout_sec: float
    p_false_timeout: float | None   # the pooled model's probability; None without a model
    expected_mem_mb: float | None   # profiled peak RSS of the check's process tree

    @property
    def headroom(self) -> float:
        """timeout / the largest profiled time."""
        return self.timeout_sec / max(self.max, 1e-9)

    @property
    def clipped(self) -> bool:
        return self.rule == "cap"


@dataclass(frozen=True)
class DerivedMap:
    policy: MapPolicy
    entries: list[Entry]
    model: "spread.SpreadModel | None"   # runner.maps.spread, imported when deriving

    @property
    def clipped(self) -> list[Entry]:
        """Problems whose derived limit was cut by the cap: a correct proof may time out."""
        return [e for e in self.entries if e.clipped]

    @property
    def expected_false_timeouts(self) -> float | None:
        ps = [e.p_false_timeout for e in self.entries]
        return None if self.model is None or any(p is None for p in ps) else float(sum(ps))


def _percentile(times: Sequence[float], q: float) -> float:
    return float(np.percentile(times, q)) if q < 100 else max(times)


def derive(runs: Sequence[ProblemRuns], policy: MapPolicy = MapPolicy()) -> DerivedMap:
    """The map of ``runs`` under ``policy``; problems in id order."""
    # scipy takes 1.7 s to import: only deriving a map pays for it, not
    # every sweep that reads one.
    from . import spread

    runs = sorted(runs, key=lambda r: r.problem_id)
    model = None
    required = np.full(len(runs), np.nan)
    if policy.target_false_timeout > 0 and any(len(r.prove_secs) > 1 for r in runs):
        model = spread.fit(runs, resolution_s=policy.resolution_s, min_df=int(policy.min_band_df),
                           meaningful_s=policy.spread_min_s)
        required = model.predict(policy.target_false_timeout)
    entries = []
    for r, need in zip(runs, required):
        stat = max(_percentile(r.prove_secs, policy.percentile), policy.resolution_s)
        spread_ratio = max(r.prove_secs) / max(min(r.prove_secs), policy.resolution_s)
        heavy = stat >= policy.heavy_s or (max(r.prove_secs) >= policy.spread_min_s
                                           and spread_ratio >= policy.heavy_spread)
        margin = policy.heavy_margin if heavy else policy.light_margin
        raw, rule = margin * stat, "class-margin"
        # Below spread_min_s the run-to-run spread is the clock's and the
        # dispatcher's, not the proof's: the relative model does not apply.
        median = statistics.median(r.prove_secs)
        modelled = median >= policy.spread_min_s
        if modelled and not math.isnan(need) and need > raw:
            raw, rule = float(need), "spread-target"
        if raw > policy.cap_s:
            timeout, rule = policy.cap_s, "cap"
        elif math.ceil(raw) <= policy.floor_s:
            timeout, rule = policy.floor_s, "floor"
        else:
            timeout = float(min(math.ceil(raw), policy.cap_s))
        entries.append(Entry(
            problem_id=r.problem_id, category=r.category, cls="heavy" if heavy else "light",
            runs=len(r.prove_secs), median=median, max=max(r.prove_secs),
            statistic=stat, margin=raw / stat, rule=rule, timeout_sec=timeout, p_false_timeout=None,
            expected_mem_mb=max(r.peak_rss_mb) if r.peak_rss_mb else None))
    if model is not None:
        ps = model.exceedance([e.timeout_sec for e in entries])
        entries = [dataclasses.replace(e, p_false_timeout=float(p)) for e, p in zip(entries, ps)]
    return DerivedMap(policy, entries, model)


def sidecar_path(map_path: Path) -> Path:
    """``NAME.json`` -> ``NAME.meta.json``."""
    map_path = Path(map_path)
    return map_path.with_name(f"{map_path.stem}.meta.json")


def write_map(map_path: Path, derived: DerivedMap, provenance: dict) -> None:
    """Publish the map in the bench's format, then its sidecar."""
    map_path = Path(map_path)
    bench = [{"problem_id": e.problem_id, "prove_secs": round(e.median, 6), "timeout_sec": e.timeout_sec}
             for e in derived.entries]
    meta = {
        "format": SIDECAR_FORMAT, "map": map_path.name, "provenance": provenance,
        "policy": dataclasses.asdict(derived.policy),
        "expected_false_timeouts": derived.expected_false_timeouts,
        "clipped_at_cap": [e.problem_id for e in derived.clipped],
        "spread": None if derived.model is None else
        [b.as_dict() for b in derived.model.bands.values()],
        "problems": {e.problem_id: {
            "class": e.cls, "category": e.category, "runs": e.runs, "median_s": e.median,
            "max_s": e.max, "statistic_s": e.statistic, "margin": round(e.margin, 4), "rule": e.rule,
            "timeout_sec": e.timeout_sec, "headroom": round(e.headroom, 4),
            "p_false_timeout": e.p_false_timeout, "expected_mem_mb": e.expected_mem_mb,
            "mem_guard_mb": None if e.expected_mem_mb is None
            else e.expected_mem_mb * derived.policy.mem_margin,
        } for e in derived.entries},
    }
    map_path.parent.mkdir(parents=True, exist_ok=True)
    # One entry per line, so a map diffs well. (json's indent= would run its
    # pure-Python encoder, 5x slower on 100,000 entries.)
    publish(map_path, lambda tmp: tmp.write_text(
        "[\n" + ",\n".join(json.dumps(e) for e in bench) + "\n]\n"))
    problems = meta.pop("problems")
    publish(sidecar_path(map_path), lambda tmp: tmp.write_text(
        json.dumps(meta, indent=1)[:-2] + ',\n "problems": {\n'
        + ",\n".join(f"  {json.dumps(pid)}: {json.dumps(p)}" for pid, p in problems.items())
        + "\n }\n}\n"))


def read_sidecar(map_path: Path) -> dict | None:
    """Parse the sidecar of a map, or None for a map without one (e.g. the
    bench's own). The runner reads it through runner.maps.provenance.load,
    which types it and carries it with the map."""
    path = sidecar_path(map_path)
    if not path.exists():
        return None
    fix = "derive the map again, or delete the sidecar to use the map alone"
    try:
        meta = json.loads(utf8_text(path.read_bytes(), path, "the timeout-map sidecar", fix))
    except (OSError, ValueError) as exc:
        raise InputError(path, f"unreadable timeout-map sidecar ({exc})", fix) from None
    if not isinstance(meta, dict) or meta.get("format") != SIDECAR_FORMAT:
        raise InputError(path, "not a proofbatch timeout-map sidecar",
                         "derive the map again with `proofbatch timeout-map`")
    _check_sidecar_names(path, Path(map_path), meta)
    return meta


def _names(map_path: Path, named: str) -> bool:
    """Whether a sidecar's ``"map"`` (a file name, as write_map records it)
    is ``map_path``: by name, or beside it and the same file (a map read
    through a symlink or a hard link of another name, its sidecar too)."""
    if Path(named).name == map_path.name:
        return True
    try:
        return os.path.samefile(map_path.with_name(Path(named).name), map_path)
    except (OSError, ValueError):
        return False


def _check_sidecar_names(path: Path, map_path: Path, meta: dict) -> None:
    """The sidecar belongs to this map, and says a mode and a clock the
    runner knows: its mode decides how limits are converted, its clock
    what they limit, so an unknown word would be read as a guess."""
    named = meta.get("map")
    if named is not None and not (isinstance(named, str) and _names(map_path, named)):
        raise InputError(path, f"is the sidecar of the map {named!r}, not of {map_path}",
                         f'if it is this map\'s (renamed with it), set its "map" to '
                         f'"{map_path.name}"; else delete it, or derive the map again')
    prov = meta.get("provenance")
    if not isinstance(prov, dict):
        return                      # runner.maps.provenance names a provenance of the wrong type
    mode, clock = prov.get("mode"), prov.get("clock")
    if mode is not None and not isinstance(Mode.of(mode) if isinstance(mode, str) else None, Mode):
        raise InputError(path, f"provenance.mode {mode!r} is not an execution mode",
                         f"write one of {', '.join(m.value for m in Mode)}, or derive the map again")
    if clock is not None and clock not in tuple(LimitClock):
        raise InputError(path, f"provenance.clock {clock!r} is not a clock",
                         f"write one of {', '.join(c.value for c in LimitClock)}, or derive the "
                         "map again")


# A check's tree RSS counts its loaded image's pages (HOL Light alone is
# about 360 MB), so no guard derived from a profile goes below this.
MIN_GUARD_BYTES = 1 << 30


@dataclass(frozen=True)
class MapUse:
    """What a sweep takes from a map's sidecar besides the limits."""

    mem: dict[str, tuple[int, int]]   # problem id -> (memory guard, expected need), bytes
    warnings: tuple[str, ...]


def use_map(loaded, prover: str, build: str, mode: str, runtime: str = "",
            runtime_holds=None) -> MapUse:
    """What a sweep needs from ``loaded`` (runner.maps.provenance.LoadedMap,
    or None): memory from its sidecar, and a warning when the map was
    measured with another prover or build, or in a mode whose limits cannot
    be converted to the sweep's (native code proves 2.5-5 times faster than
    the bytecode toplevel; maps of either are converted by
    runner.provers.hol_light.costs.map_modes.MapModes, which says so itself),
    or under another OCaml runtime setting than the sweep's ``runtime`` (the
    backend's key; "" for provers without one): the garbage collector's
    settings change proof times, so its times and limits may not hold for
    another, unless the prover's ``runtime_holds(measured, swept)`` (its
    descriptor's map_runtime_holds) says they do."""
    if loaded is None:
        return MapUse({}, ())
    mem = {pid: (p.mem_guard_bytes, p.expected_mem_bytes) for pid, p in loaded.problems.items()
           if p.expected_mem_bytes and p.mem_guard_bytes is not None}
    prov, warnings = loaded.provenance, []
    convertible = (Mode.BYTECODE, Mode.NATIVE)
    for what, theirs, ours in (("prover", prov.prover, prover), ("prover_build", prov.build, build),
                               ("mode", prov.mode, Mode.of(mode))):
        if what == "mode" and theirs in convertible and (ours in convertible or ours == Mode.AUTO):
            continue
        if theirs and theirs != ours:
            warnings.append(f"{loaded.path}: this map was measured with {what} '{theirs}', but the "
                            f"sweep runs {what} '{ours}'; its limits may be wrong for these checks "
                            "(profile again with this prover and mode)")
    if runtime and prov.runtime != runtime and not (runtime_holds and runtime_holds(prov.runtime, runtime)):
        warnings.append(f"{loaded.path}: the map's times were measured under another runtime "
                        f"({prov.runtime}) than the sweep's --runtime {runtime}; its limits and "
                        f"expected times may be off (profile again under --runtime {runtime})")
    return MapUse(mem, tuple(warnings))
