"""What earlier sweeps measured, for the planner: the image builds each
sweep directory (or profile run) recorded, laid over a new plan's images
(``--costs-from``), and the cost cache that remembers them
(``PROOFBATCH_COST_CACHE``)."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..errors import InputError
from ..results.publish import publish_json


def measured_builds(dirs: Iterable[Path]) -> dict[str, tuple[str | None, float]]:
    """image key -> (parent, median build seconds) from ``DIR/images/*.json``
    (cluster.base.record_image_builds) of each sweep directory given."""
    secs: dict[str, list[float]] = defaultdict(list)
    parent: dict[str, str | None] = {}
    for d in dirs:
        for path in sorted((Path(d) / "images").glob("*.json")):
            try:
                data = json.loads(path.read_text())
                builds = data["builds"]
            except (OSError, ValueError, KeyError, TypeError):
                continue              # being written, or not ours: the defaults stand in
            for b in builds:
                secs[b["key"]].append(float(b["secs"]))
                parent[b["key"]] = b.get("parent")
    return {k: (parent[k], statistics.median(v)) for k, v in secs.items()}


# -- measured costs of earlier sweeps ------------------------------------------

@dataclass(frozen=True)
class Measured:
    """The image builds one sweep directory recorded, with what they hold
    for: the mode and build its contexts loaded in and its choice of
    --context-proofs (sweep.json), and which image each problem ran in (its
    rows, else its plan.json)."""

    out: Path
    mode: str | None
    choice: str | None
    build: str | None
    image_of: Mapping[str, str]                        # problem id -> image key
    builds: Mapping[str, tuple[str | None, float]]     # key -> (parent, median s)


def sweep_dirs(dirs: Iterable[Path]) -> list[Path]:
    """Each sweep directory given, a profile's runs in its place (runs/*)."""
    out = []
    for d in map(Path, dirs):
        if (d / "sweep.json").is_file():
            out.append(d)
        elif (d / "runs").is_dir() and any((r / "sweep.json").is_file() for r in (d / "runs").iterdir()):
            out += sorted(r for r in (d / "runs").iterdir() if (r / "sweep.json").is_file())
        else:
            raise InputError(d, "neither a sweep directory (no sweep.json) nor a profile (no runs/)",
                             "pass the --out of a `proofbatch run`, or a `proofbatch profile` directory")
    return out


def measured_sweeps(dirs: Iterable[Path]) -> list[Measured]:
    """What each sweep (or profile run) of ``dirs`` measured (sweep_dirs)."""
    from ..results import shards

    found = []
    for d in sweep_dirs(dirs):
        try:
            manifest = json.loads((d / "sweep.json").read_text())
        except (OSError, ValueError):
            manifest = {}
        image_of: dict[str, str] = {}
        try:
            plan = json.loads((d / "plan.json").read_text())
            image_of.update({c["problem_id"]: c["image_key"] for c in plan.get("checks", [])})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
        try:
            table = shards.scan(d, repair=False, columns=("problem_id", "image_key")).done.table
            image_of.update((p, k) for p, k in zip(table["problem_id"].to_pylist(),
                                                   table["image_key"].to_pylist()) if k)
        except Exception:                      # no rows yet, or not ours: the plan's stand
            pass
        found.append(Measured(d, manifest.get("mode"), manifest.get("context_proofs"),
                              manifest.get("prover_build"), image_of, measured_builds([d])))
    return found


def lay_over(plan, image_of: Mapping[str, str], builds: Mapping[str, tuple[str | None, float]]
             ) -> dict[str, float]:
    """Measured builds of ``plan``'s images (a runner.prover.ImagePlan) from
    builds recorded under other keys (another salt: a sweep keyed by its
    build, context root and driver): each problem's chain of measured builds
    laid over its chain in the plan when both are as long; an image given
    two different measured keys is dropped; the base gets a measured boot.
    Keys the plan shares with the builds count as they are."""
    out: dict[str, float] = {k: s for k, (_, s) in builds.items() if k in plan.parent}
    mapped: dict[str, str] = {}
    clash: set[str] = set()

    def chain_of(key, parents):
        chain, k = [], key
        while k is not None and k in parents:
            chain.append(k)
            k = parents[k]
        return chain[::-1]

    theirs_parent = {k: p for k, (p, _) in builds.items()}
    for pid, ours_key in plan.image_of.items():
        theirs = image_of.get(pid)
        if theirs is None or theirs not in builds or ours_key in out:
            continue
        ours = chain_of(ours_key, plan.parent)
        chain = chain_of(theirs, theirs_parent)
        if len(chain) != len(ours) or theirs_parent.get(chain[0]) is not None:
            continue
        for a, b in zip(ours, chain):
            if mapped.setdefault(a, b) != b:
                clash.add(a)
    out.update({a: builds[b][1] for a, b in mapped.items() if a not in clash and a not in out})
    roots = [s for p, s in builds.values() if p is None]
    if plan.base not in out and roots:
        out[plan.base] = statistics.median(roots)
    return out


def learned_for(plan, sets: Sequence[Measured], mode: str | None, choice: str | None
                ) -> tuple[dict[str, float], dict]:
    """Measured builds of ``plan``'s images from the sweeps ``sets``
    measured in ``mode`` under ``choice`` (the median where several did);
    and what was used and left out: a build of another mode or choice is
    not used as it is."""
    secs: dict[str, list[float]] = defaultdict(list)
    used, other_mode, other_choice = [], [], []
    for m in sets:
        if mode is not None and m.mode is not None and str(m.mode) != str(mode):
            other_mode.append(f"{m.out} ({m.mode})")
            continue
        if choice is not None and (m.choice or "replay") != str(choice):
            other_choice.append(f"{m.out} ({m.choice or 'replay'})")
            continue
        used.append(str(m.out))
        for k, v in lay_over(plan, m.image_of, m.builds).items():
            secs[k].append(v)
    measured = {k: statistics.median(v) for k, v in secs.items()}
    return measured, {"images": len(plan.parent), "measured": len(measured),
                      "sweeps": used, "other_mode": other_mode, "other_choice": other_choice}


# The cost cache: sweeps that asked for it are remembered, and every later
# sweep's plan is priced from what they all measured. Image keys hold the
# prover's build, the context root and the driver or native build (a
# session's salt), so a build is used only for the very image, in the very
# mode and build, it was measured in. Opt in: PROOFBATCH_COST_CACHE=FILE.
COST_CACHE_ENV = "PROOFBATCH_COST_CACHE"


def cached_builds(out: Path | None = None, path: Path | None = None
                  ) -> dict[str, tuple[str | None, float]]:
    """The cost cache's builds (key -> (parent, median s over the runs that
    built it)), after remembering ``out`` and gathering what every sweep it
    remembers has recorded since; {} when no cache is set."""
    import os

    if path is None:
        env = os.environ.get(COST_CACHE_ENV)
        if not env:
            return {}
        path = Path(env)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    sweeps = list(data.get("sweeps", []))
    builds = data.get("builds", {})
    if out is not None and str(Path(out).resolve()) not in sweeps:
        sweeps.append(str(Path(out).resolve()))
    for d in sweeps:
        for f in sorted((Path(d) / "images").glob("*.json")):
            try:
                rec = json.loads(f.read_text())
                run = rec.get("run_id", f.stem)
                for b in rec["builds"]:
                    entry = builds.setdefault(b["key"], {"parent": b.get("parent"), "runs": {}})
                    entry["runs"].setdefault(run, float(b["secs"]))
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        publish_json(path, {"format": "proofbatch-image-costs/1", "sweeps": sweeps, "builds": builds})
    except OSError:
        pass                          # a read-only cache still prices
    return {k: (e.get("parent"), statistics.median(e["runs"].values()))
            for k, e in builds.items() if e.get("runs")}


def require_sweeps(costs_from: Sequence) -> None:
    """Refuse a --costs-from folder that is no sweep directory (no images/)."""
    for d in costs_from:
        if not (Path(d) / "images").is_dir():
            raise InputError("--costs-from", f"{d} has no images/ folder: it is no sweep directory",
                             "pass sweep directories written by `proofbatch run --out`")
