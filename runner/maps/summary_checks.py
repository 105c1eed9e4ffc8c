"""What a profile's ``summary.json`` must hold before a map or a plan is
derived from it.

``timeout-map`` and ``simulate --profile`` read it as ``proofbatch
profile`` wrote it; a file edited by hand, cut short or written over gave
tracebacks (``ValueError`` on a NaN, ``KeyError: 'prove_secs'``,
``AttributeError`` on a map written over it), and negative times or a
problem listed twice went into a map that ``run`` then refused. Each is
refused here in one line naming the file, the entry and the field.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import InputError
from .timeouts import MAX_PROVE_S

FIX = "profile again into a new --out (`proofbatch profile` writes summary.json), or restore the file"
# Fields of a problem's entry: (name, what it holds). Lists of times hold
# one finite number of seconds (0 or more) per run; the CPU-time lists are
# absent from profiles taken before CPU time was measured, and cpu_secs has
# null for a run that did not measure it.
TIMES = ("prove_secs", "wall_secs", "peak_rss_mb")
OPTIONAL_TIMES = ("prove_cpu_secs",)
OPTIONAL_TIMES_OR_NULL = ("cpu_secs",)
# The proof's own times ran under the profile's limit: a longer one was
# never measured (runner.maps.timeouts.MAX_PROVE_S says why).
PROOF_TIMES = ("prove_secs", "prove_cpu_secs")


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def _shown(x) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def check_profile(provenance_path: Path, provenance, summary_path: Path, summary,
                  summary_format: str) -> None:
    """Raise InputError unless a profile's profile.json and summary.json, as
    parsed, can be read (``check_summary``)."""
    if not isinstance(provenance, dict):
        raise InputError(provenance_path, f"is not a profile's provenance (a JSON "
                         f"{type(provenance).__name__}, not an object; a timeout map written over "
                         "it?)", FIX.replace("summary.json", "profile.json"))
    check_summary(summary, summary_path, summary_format)


def check_summary(summary, path: Path | str, expected_format: str) -> None:
    """Raise InputError unless ``summary`` (summary.json as parsed) is a
    profile summary whose every entry ``load_profile`` can read and a map can
    be derived from. A summary of another format is left to the caller's
    format check."""
    if not isinstance(summary, dict):
        raise InputError(path, f"is not a profile summary (a JSON {type(summary).__name__}, not an "
                         "object; a timeout map written over it?)", FIX)
    if summary.get("format") != expected_format:
        return
    problems, defects = summary.get("problems"), summary.get("defects")
    for name, value in (("problems", problems), ("defects", defects)):
        if not isinstance(value, list):
            raise InputError(path, f"its {name} is {_shown(value)}, not a list", FIX)
    seen: dict[str, int] = {}
    for i, entry in enumerate(problems):
        pid = _check_problem(entry, i, path)
        if pid in seen:
            raise InputError(path, f"problem id {pid} appears in entry {seen[pid]} and entry {i}",
                             "keep one entry per problem, or " + FIX)
        seen[pid] = i
    for i, defect in enumerate(defects):
        if not isinstance(defect, dict):
            raise InputError(path, f"defect {i} is {_shown(defect)}, not an object", FIX)
        for field in ("problem_id", "verdict", "reason", "run"):
            if field not in defect:
                raise InputError(path, f"defect {i} has no {field}", FIX)
        if not isinstance(defect["problem_id"], str) or not defect["problem_id"]:
            raise InputError(path, f"defect {i}: problem_id {_shown(defect['problem_id'])} is not "
                             "a problem id", FIX)


def _check_problem(entry, i: int, path) -> str:
    if not isinstance(entry, dict):
        raise InputError(path, f"entry {i} is {_shown(entry)}, not an object", FIX)
    pid = entry.get("problem_id")
    if not isinstance(pid, str) or not pid:
        raise InputError(path, f"entry {i}: problem_id {_shown(pid)} is not a problem id", FIX)
    where = f"entry {i} ({pid})"
    for field in ("category", "image_key", *TIMES):
        if field not in entry:
            raise InputError(path, f"{where} has no {field}", FIX)
    for field in ("category", "image_key"):
        if not isinstance(entry[field], str):
            raise InputError(path, f"{where}: {field} {_shown(entry[field])} is not text", FIX)
    for field in TIMES + OPTIONAL_TIMES + OPTIONAL_TIMES_OR_NULL:
        if field not in entry or (field not in TIMES and entry[field] is None):
            continue
        values = entry[field]
        if not isinstance(values, list):
            raise InputError(path, f"{where}: {field} is {_shown(values)}, not a list with one "
                             "value per run", FIX)
        for k, x in enumerate(values):
            if x is None and field in OPTIONAL_TIMES_OR_NULL:
                continue
            if not _number(x):
                unit = "MiB" if field == "peak_rss_mb" else "seconds"
                raise InputError(path, f"{where}: {field}[{k}] is {_shown(x)}, not a measurement "
                                 f"(a finite number of {unit}, 0 or more)", FIX)
            if field in PROOF_TIMES and x > MAX_PROVE_S:
                raise InputError(path, f"{where}: {field}[{k}] is {_shown(x)}, more than a week, "
                                 "longer than any limit a proof can be measured under", FIX)
    for field in ("run_hosts", "cpu_models"):
        # The node of each run (runner/maps/nodes.py); absent or empty where
        # they were not recorded.
        values = entry.get(field)
        if values not in (None, []) and (not isinstance(values, list) or len(values) != len(entry["prove_secs"])
                                   or not all(isinstance(x, str) for x in values)):
            raise InputError(path, f"{where}: {field} is {_shown(values)}, not a list with one "
                             "name per run", FIX)
    if not entry["prove_secs"]:
        raise InputError(path, f"{where}: prove_secs is empty (a profiled problem has one time "
                         "per run)", FIX)
    return pid
