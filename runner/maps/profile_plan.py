"""Planning a profile's generations: which problems a new or resumed
generation checks, with which seeds, and the paths and machine it records
(runner/profile.py runs them; profile.json's format is profile_data's).

A generation already recorded but not finished resumes as it was planned;
--runs asks a finished one for more runs, never fewer; --incremental
profiles only problems that are new or changed.
"""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

import psutil

from ..checks.worker import cpu_model
from ..errors import InputError
from .profile_data import FORMAT, _now

DEFAULT_RUNS = 3


def record_path(path: Path | None, out: Path) -> str | None:
    """A path as provenance records it: relative to the profile directory, so
    that a profile shipped in a repository (profiles/NAME beside the corpus)
    still finds its corpus from another clone."""
    if path is None:
        return None
    return os.path.relpath(Path(path).resolve(), Path(out).resolve())


def recorded_path(provenance: dict, key: str, profile_dir: Path) -> Path | None:
    """A path recorded by ``record_path`` (or an absolute one), resolved."""
    value = provenance.get(key)
    return None if value is None else (Path(profile_dir) / value).resolve()


def machine() -> dict:
    return {"host": socket.gethostname(), "platform": platform.platform(),
            "cpu": platform.processor() or platform.machine(), "cpu_model": cpu_model(),
            "cores": os.cpu_count(),
            "memory_bytes": psutil.virtual_memory().total, "python": platform.python_version()}


def _plan_generation(cfg, provenance: dict | None, hashes: dict[str, str],
                     summary: dict | None) -> tuple[dict, dict | None]:
    """The provenance to work under and the generation to run (None: nothing to do).

    A generation already recorded but not finished is resumed as it was
    planned, seeds included.
    """
    if provenance is None:
        provenance = {"format": FORMAT, "corpus": record_path(cfg.corpus, cfg.out),
                      "answers": record_path(cfg.answers, cfg.out),
                      "created": _now(), "generations": []}
    generations = provenance["generations"]
    if generations and not generations[-1].get("finished"):
        return provenance, _with_runs_asked(cfg, generations)
    runs = cfg.runs or (len(generations[-1]["runs"]) if generations else DEFAULT_RUNS)
    if generations:
        profiled = {p["problem_id"]: p["content_sha256"] for p in (summary or {}).get("problems", [])}
        profiled.update({d["problem_id"]: d["content_sha256"] for d in (summary or {}).get("defects", [])})
        todo = sorted(pid for pid, h in hashes.items() if profiled.get(pid) != h)
        if not cfg.incremental:
            if todo:
                raise InputError(cfg.out, f"{len(todo)} problems are new or changed since this profile "
                                 f"was taken (e.g. {todo[0]})",
                                 "pass --incremental to profile just those, or use a new --out")
            return provenance, _with_runs_asked(cfg, generations)
        if not todo:
            return provenance, _with_runs_asked(cfg, generations)
    else:
        todo = sorted(hashes)
    g = len(generations) + 1
    seed = cfg.seed + 1000 * (g - 1)
    generation = {"id": f"g{g}", "started": _now(), "finished": None, "ceiling_s": cfg.ceiling_s,
                  "problems": todo, "content_sha256": {pid: hashes[pid] for pid in todo},
                  "command": list(cfg.command), "machine": machine(), "cluster": cfg.executor,
                  "runs": [{"dir": f"runs/g{g}-r{r}", "seed": seed + r - 1} for r in range(1, runs + 1)]}
    generations.append(generation)
    return provenance, generation


def _with_runs_asked(cfg, generations: list[dict]) -> dict | None:
    """The last generation to run: resumed as planned, or given the more
    runs --runs asks for (only those run; their seeds go on from its own).
    None when it is finished and nothing more is asked. Fewer runs than it
    has, or more for a profile of several generations (whose earlier
    problems would keep fewer), are refused naming the count it has."""
    last = generations[-1]
    have = len(last["runs"])
    if cfg.runs is None or cfg.runs == have:
        return None if last.get("finished") else last
    taken = f"{cfg.out} was taken with --runs {have}, not {cfg.runs}"
    if cfg.runs < have or (last.get("finished") and len(generations) > 1):
        why = ("a profile keeps every run it took" if cfg.runs < have else "more runs extend a "
               f"profile of one generation only, and this has {len(generations)}")
        raise InputError("--runs", f"{taken} ({why})", f"pass --runs {have} or leave --runs out, "
                         f"or profile {cfg.runs} runs into a new --out")
    first = last["runs"][0]["seed"]
    last["runs"] += [{"dir": f"runs/{last['id']}-r{r}", "seed": first + r - 1}
                     for r in range(have + 1, cfg.runs + 1)]
    last.setdefault("extended", []).append({"runs": cfg.runs, "at": _now(),
                                            "command": list(cfg.command)})
    last["finished"] = None
    return last
