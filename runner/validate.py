"""Validating a timeout map: does every ground truth fit in its limit?

Two checks. On paper: each problem's largest profiled prove_secs against its
timeout. In practice: the ground truths run once more under the map, and the
acceptance criterion is zero TIMEOUT.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .profile import Profile, recorded_path
from .sweep import SweepConfig, SweepSummary, prepare, run_sweep
from .map_provenance import load


@dataclass(frozen=True)
class Headroom:
    problem_id: str
    max_prove_secs: float
    timeout_sec: float | None      # None: the map has no entry for it

    @property
    def ratio(self) -> float | None:
        return None if self.timeout_sec is None else self.max_prove_secs / self.timeout_sec


@dataclass(frozen=True)
class Validation:
    map_path: Path
    out: Path                       # the validation sweep's directory
    headroom: list[Headroom]        # worst first
    summary: SweepSummary
    false_timeouts: list[str]       # ground truths that timed out under the map

    @property
    def passed(self) -> bool:
        return not self.false_timeouts and all(h.timeout_sec is not None for h in self.headroom)


def headroom(profile: Profile, timeouts: dict[str, float]) -> list[Headroom]:
    """max prove_secs / timeout per profiled problem, the tightest first."""
    rows = [Headroom(r.problem_id, max(r.prove_secs), timeouts.get(r.problem_id)) for r in profile.runs]
    return sorted(rows, key=lambda h: (-(h.ratio if h.ratio is not None else float("inf")), h.problem_id))


def validate(profile: Profile, map_path: Path, executor_for: Callable[[SweepConfig], object], *,
             workers: int = 1, mem_limit: int | None = None, hol_light: Path | None = None,
             context_root: Path | None = None, on_row=lambda row: None,
             on_start=lambda total, done: None) -> Validation:
    """Rerun the profiled ground truths once under the map at ``map_path``.

    The sweep goes to ``PROFILE/validations/<map>-<hash>/`` and resumes like
    any sweep. Defects of the profile are left out: they never verified.
    """
    loaded = load(map_path)
    out = profile.path / "validations" / f"{Path(map_path).stem}-{loaded.digest[:10]}"
    prov = profile.provenance
    # Validate under the profile's own prover and contexts unless told otherwise.
    hol_light = hol_light or recorded_path(prov, "hol_light", profile.path)
    context_root = context_root or recorded_path(prov, "context_root", profile.path)
    config = SweepConfig(corpus=recorded_path(prov, "corpus", profile.path), out=out,
                         answers=recorded_path(prov, "answers", profile.path),
                         workers=workers, timeout_map=Path(map_path), mem_limit=mem_limit,
                         hol_light=hol_light, context_root=context_root,
                         only=tuple(sorted(r.problem_id for r in profile.runs)))
    summary = run_sweep(prepare(config), executor_for(config), on_row=on_row, on_start=on_start)
    timed_out = sorted(r["problem_id"] for r in summary.table.to_pylist()
                       if r["problem_id"] in set(config.only) and r["verdict"] == "TIMEOUT")
    return Validation(map_path=Path(map_path), out=out, headroom=headroom(profile, loaded.limits()),
                      summary=summary, false_timeouts=timed_out)
