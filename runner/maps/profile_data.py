"""What a profile measured about one problem: the data that timeout maps,
memory needs and plans are derived from.

A profile (``proofbatch profile``) runs each ground-truth proof several times;
``load_profile`` reads one back as a list of ProblemRuns. The
derivations take this type only, so they are tested on synthetic profiles.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

from ..results.publish import publish_json
from ..errors import InputError



@dataclass(frozen=True)
class ProblemRuns:
    problem_id: str
    category: str
    prove_secs: tuple[float, ...]       # one per run, measured inside the prover
    peak_rss_mb: tuple[float, ...] = ()  # one per run where it was measured
    wall_secs: tuple[float, ...] = ()    # dispatch to verdict, one per run
    image_key: str = ""                  # the loaded context the check forked from
    prove_cpu_secs: tuple[float, ...] = ()  # CPU time of prove(), one per run where measured
    # The node of each run, in the order of prove_secs (runner/maps/nodes.py);
    # empty in profiles written before they were recorded.
    hosts: tuple[str, ...] = ()
    cpu_models: tuple[str, ...] = ()

    def __post_init__(self):
        if not self.prove_secs:
            raise ValueError(f"{self.problem_id}: a profiled problem needs at least one run")


FORMAT = "proofbatch-profile/1"
SUMMARY_FORMAT = "proofbatch-profile-summary/1"
PROVENANCE, SUMMARY, SUMMARY_CSV = "profile.json", "summary.json", "summary.csv"


def on_clock(runs: list[ProblemRuns], clock: str) -> tuple[list[ProblemRuns], str]:
    """The runs with ``prove_secs`` in ``clock``'s seconds (CPU or wall) and
    the clock they are in: CPU times where every run of every problem has
    one, else wall (a profile taken before CPU time was measured)."""
    if str(clock) == "cpu" and runs and all(len(r.prove_cpu_secs) == len(r.prove_secs) for r in runs):
        return [dataclasses.replace(r, prove_secs=r.prove_cpu_secs) for r in runs], "cpu"
    return list(runs), "wall"


@dataclass(frozen=True)
class Defect:
    problem_id: str
    verdict: str
    reason: str
    run: str


@dataclass(frozen=True)
class Profile:
    path: Path
    provenance: dict
    runs: list[ProblemRuns]
    defects: list[Defect]
    stats: list[dict]


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _write_json(path: Path, data) -> None:
    publish_json(path, data, indent=2)


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(path, f"unreadable {what} ({exc})", "restore it, or profile into a new --out") from None


def load_profile(path: Path) -> Profile:
    """Read a profile directory written by ``profile``."""
    path = Path(path)
    prov_path, summary_path = path / PROVENANCE, path / SUMMARY
    if not path.exists():
        raise InputError(path, "does not exist", "check the path: pass the directory that "
                         "`proofbatch profile --out` wrote")
    if not path.is_dir():
        raise InputError(path, "is a file, not a profile directory",
                         "pass the directory that `proofbatch profile --out` wrote")
    if not prov_path.is_file() or not summary_path.is_file():
        raise InputError(path, "not a finished profile (no profile.json and summary.json)",
                         "pass a directory written by `proofbatch profile`, or rerun that to finish it")
    provenance = _read_json(prov_path, "profile provenance")
    summary = _read_json(summary_path, "profile summary")
    from .summary_checks import check_profile
    check_profile(prov_path, provenance, summary_path, summary, SUMMARY_FORMAT)
    if provenance.get("format") != FORMAT or summary.get("format") != SUMMARY_FORMAT:
        raise InputError(path, "unknown profile format", f"profile again with this proofbatch ({FORMAT})")
    runs = [ProblemRuns(problem_id=p["problem_id"], category=p["category"],
                        prove_secs=tuple(p["prove_secs"]), peak_rss_mb=tuple(p["peak_rss_mb"]),
                        wall_secs=tuple(p["wall_secs"]), image_key=p["image_key"],
                        prove_cpu_secs=tuple(p.get("prove_cpu_secs") or ()),
                        hosts=tuple(p.get("run_hosts") or ()), cpu_models=tuple(p.get("cpu_models") or ()))
            for p in summary["problems"]]
    defects = [Defect(d["problem_id"], d["verdict"], d["reason"], d["run"]) for d in summary["defects"]]
    return Profile(path=path, provenance=provenance, runs=runs, defects=defects, stats=summary["problems"])


def write_profile(path: Path, runs: list[ProblemRuns], provenance: dict) -> Path:
    """Write ``runs`` as a profile directory that ``load_profile`` reads: the
    inverse of it, for profiles made elsewhere (a synthetic workload, another
    tool's measurements). ``provenance`` says where they came from."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    _write_json(path / PROVENANCE, {"format": FORMAT, "generations": [], "problems": {}, **provenance})
    _write_json(path / SUMMARY, {"format": SUMMARY_FORMAT, "written": _now(), "defects": [], "problems": [
        {"problem_id": r.problem_id, "category": r.category, "prove_secs": list(r.prove_secs),
         "peak_rss_mb": list(r.peak_rss_mb), "wall_secs": list(r.wall_secs or r.prove_secs),
         "image_key": r.image_key, "prove_cpu_secs": list(r.prove_cpu_secs),
         "run_hosts": list(r.hosts), "cpu_models": list(r.cpu_models)} for r in runs]})
    return path
