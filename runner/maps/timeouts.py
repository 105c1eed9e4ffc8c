"""Time limits: per problem, per category, or a default, in that order.

The files are s2n-bignum-bench's:

- ``timeout-map.json``: a JSON list of objects ``{"problem_id": str,
  "prove_secs": number, "timeout_sec": number}``. ``timeout_sec`` is the
  limit; ``prove_secs`` (the measured proof time) is optional here and only
  checked to be a number when present.
- ``timeouts.json``: a JSON object ``{"category": seconds}``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from ..corpus import Problem
from ..errors import InputError, utf8_text

# A check runs for hours at most (the bench's cap is 3 h); a limit beyond a
# week is a unit mistake (milliseconds), not a plan.
MAX_TIMEOUT_S = 7 * 24 * 3600.0
# A measured proof time is bounded by the limit it ran under: a proof that
# outlasts its limit is a TIMEOUT, not a time. Derived limits stop at the
# cap (MapPolicy.cap_s, the bench's 10,800 s) and no limit a map may hold
# passes MAX_TIMEOUT_S, so a longer prove_secs was never measured: it is a
# unit mistake (milliseconds, microseconds). The bound also keeps what plans,
# ETAs and reports compute from these times (sums over 10^5 problems, times
# a host factor of up to 1000) finite and printable.
MAX_PROVE_S = MAX_TIMEOUT_S
# No check (a fork, reading and typing the answer) ends within a millisecond:
# a default limit below it times every check out, and is a unit mistake
# (hours or minutes written as a fraction), not a plan.
MIN_DEFAULT_TIMEOUT_S = 0.001


@dataclass(frozen=True)
class TimeLimit:
    seconds: float
    source: str  # "map", "category" or "default"


@dataclass(frozen=True)
class TimeoutPolicy:
    """Where time limits come from. The mappings are copied read-only."""

    by_problem: Mapping[str, float]
    by_category: Mapping[str, float] | None
    default: float
    map_path: Path | None = None
    category_path: Path | None = None

    def __post_init__(self):
        where = "default timeout"
        if isinstance(self.default, bool) or not isinstance(self.default, (int, float)):
            raise InputError(where, f"{self.default!r} is not a number", "give seconds, e.g. 600")
        if not math.isfinite(self.default) or self.default <= 0:
            raise InputError(where, f"{self.default!r} seconds is not a positive finite time",
                             "give a positive number of seconds, e.g. 600")
        if self.default > MAX_TIMEOUT_S:
            raise InputError(where, f"{self.default:g} seconds is more than a week",
                             "give seconds, not milliseconds, e.g. 600")
        if self.default < MIN_DEFAULT_TIMEOUT_S:
            raise InputError(where, f"{self.default:g} seconds is below a millisecond, so every "
                             "check would time out before it starts",
                             "give seconds, e.g. 600 (not hours or minutes)")
        object.__setattr__(self, "by_problem", MappingProxyType(dict(self.by_problem)))
        if self.by_category is not None:
            object.__setattr__(self, "by_category", MappingProxyType(dict(self.by_category)))

    def limit_for(self, problem_id: str, category: str) -> TimeLimit:
        """The limit of one problem: its map entry, else its category's, else the default.

        When category timeouts are given, every category must be in them:
        a category missing there is a mistake, not a reason to use the
        default.
        """
        if problem_id in self.by_problem:
            return TimeLimit(float(self.by_problem[problem_id]), "map")
        if self.by_category is None:
            return TimeLimit(float(self.default), "default")
        if category in self.by_category:
            return TimeLimit(float(self.by_category[category]), "category")
        raise InputError(self.category_path or "category timeouts",
                         f"unknown category {category!r} of problem {problem_id}",
                         f"add it to the file or fix {problem_id}/category.txt")


def resolve_limits(problems: Iterable[Problem], policy: TimeoutPolicy) -> dict[str, TimeLimit]:
    """The limit of every problem, by problem id.

    Map entries for problems outside the corpus are fine: maps cover a whole
    benchmark, and a sweep may cover part of it.
    """
    return {p.problem_id: policy.limit_for(p.problem_id, p.category) for p in problems}


@dataclass(frozen=True)
class MapEntry:
    """One entry of a timeout map, in the bench's format."""

    problem_id: str
    prove_secs: float | None    # the measured proof time; optional in the bench's files
    timeout_sec: float


def read_map(path: Path, data: bytes | None = None) -> dict[str, MapEntry]:
    """Parse a timeout map: problem id -> entry. Raises InputError naming the
    entry at fault. Extra keys in an entry are allowed, as other tools add them.
    ``data``: the file's bytes, when read already. The runner reads maps
    through runner.maps.provenance.load, which adds the sidecar."""
    path = Path(path)
    data = _load_json(path, data)
    if not isinstance(data, list):
        raise InputError(path, f"top level is a JSON {_json_type(data)}, not a list",
                         'write a list of {"problem_id": ..., "timeout_sec": ...} objects')
    out: dict[str, MapEntry] = {}
    index_of: dict[str, int] = {}
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise InputError(path, f"entry {i} is a JSON {_json_type(entry)}, not an object",
                             'write {"problem_id": ..., "timeout_sec": ...}')
        for key in ("problem_id", "timeout_sec"):
            if key not in entry:
                raise InputError(path, f"entry {i} has no {key!r}",
                                 'give every entry "problem_id" and "timeout_sec"')
        pid = entry["problem_id"]
        if not isinstance(pid, str) or not pid:
            raise InputError(path, f"entry {i}: problem_id {pid!r} is not a non-empty string",
                             "write the problem's folder name")
        timeout = _seconds(entry["timeout_sec"], path, f"entry {i} ({pid}): timeout_sec")
        prove = entry.get("prove_secs")
        if prove is not None and not _is_number(prove):
            raise InputError(path, f"entry {i} ({pid}): prove_secs {prove!r} is not a number",
                             "write the measured proof time in seconds, or drop the key")
        # A planner and `proofbatch simulate` add these up: a negative or
        # infinite one makes their predictions nonsense, quietly.
        if prove is not None and not (_finite(prove) and prove >= 0):
            raise InputError(path, f"entry {i} ({pid}): prove_secs {prove!r} is not a measured "
                             "time (negative or not finite)",
                             "write the measured proof time in seconds (0 or more), or drop the key")
        if prove is not None and prove > MAX_PROVE_S:
            raise InputError(path, f"entry {i} ({pid}): prove_secs {prove!r} is more than a week, "
                             "longer than any limit a proof can be measured under",
                             "write the measured proof time in seconds (not milliseconds), or "
                             "drop the key")
        if pid in index_of:
            raise InputError(path, f"problem id {pid} appears in entry {index_of[pid]} and entry {i}",
                             "keep one entry per problem")
        index_of[pid] = i
        out[pid] = MapEntry(pid, None if prove is None else float(prove), timeout)
    return out


def load_category_timeouts(path: Path) -> dict[str, float]:
    """Read category timeouts: category -> seconds."""
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"top level is a JSON {_json_type(data)}, not an object",
                         'write {"category": seconds, ...}')
    return {cat: _seconds(secs, path, f"category {cat!r}") for cat, secs in data.items()}


def read_file(path: Path) -> bytes:
    """The bytes of an input file, or InputError saying why there are none."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "file does not exist", "check the path")
    if not path.is_file():
        raise InputError(path, "not a file", "pass the JSON file itself")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(path, f"unreadable ({exc.strerror})", "check its permissions") from None


def _load_json(path: Path, data: bytes | None = None) -> Any:
    if data is None:
        data = read_file(path)
    text = utf8_text(data, path)

    def no_duplicate_keys(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise InputError(path, f"key {key!r} appears twice in one object", "keep one of them")
            seen[key] = value
        return seen

    try:
        return json.loads(text, object_pairs_hook=no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                         "fix the JSON syntax") from None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:       # an integer beyond a float
        return False


def _seconds(value: Any, path: Path, what: str) -> float:
    """A timeout in seconds: a positive, finite JSON number."""
    if not _is_number(value):
        raise InputError(path, f"{what} {value!r} is not a number", "write seconds as a JSON number")
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0:
        raise InputError(path, f"{what} {value!r} is not a positive finite number of seconds",
                         "write a number of seconds greater than zero")
    if seconds > MAX_TIMEOUT_S:
        raise InputError(path, f"{what} {value!r} is more than a week",
                         "write seconds, not milliseconds")
    return seconds


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")
