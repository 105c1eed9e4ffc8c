"""A timeout map as the runner uses it: read once, with its sidecar and what
it was measured on, into one object (``LoadedMap``) that everything else is
handed instead of a path.

The files' formats are read by runner/maps/timeouts.py (the bench's map) and
runner/maps/timeout_map.py (the sidecar ``NAME.meta.json`` it writes); ``load``
here is the one caller of both. A map's limits and ``prove_secs`` hold only
for the execution mode and the prover build that measured them
(../shared/notes/hol-light.md: proofs run 2.5-6x slower in the bytecode
toplevel than natively). A map derived by ``proofbatch timeout-map`` says
which in its sidecar. A map without one, such as s2n-bignum-bench's own
``timeout-map.json`` (measured natively), says nothing: a HOL Light sweep
refuses it until the user declares its mode (``--map-mode native|bytecode``,
and optionally ``--map-build``). A map measured in another mode than a check
runs in gets its limits converted by runner.provers.hol_light.costs.map_modes.MapModes, loudly.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from ..errors import InputError
from ..prover import Mode
from . import host_factor
from .timeout_map import read_sidecar, sidecar_path
from .timeouts import MapEntry, read_file, read_map

# --map-mode values -> the modes checks run in (runner.prover.Mode).
DECLARED_MODES = {"bytecode": Mode.BYTECODE, "native": Mode.NATIVE}
MB = 1 << 20


@dataclass(frozen=True)
class Provenance:
    prover: str | None
    build: str | None
    mode: Mode | str | None  # what measured it (runner.prover.Mode); None: unknown
    source: str             # "sidecar", "declared" or "none"
    # The clock its times are in (runner.prover.LimitClock). A map without a
    # sidecar saying so, s2n-bignum-bench's own included, was timed in wall
    # seconds (its harness: Unix.gettimeofday around prove).
    clock: str = "wall"
    # The OCaml runtime setting its times were measured under
    # (runner/provers/hol_light/runtime.py's key). A map without the record,
    # the bench's own and those derived before it, ran under OCaml's defaults.
    runtime: str = "default"


@dataclass(frozen=True)
class ProblemMeta:
    """What a sidecar says of one problem besides its limit."""

    category: str | None
    expected_mem_bytes: int | None   # the profiled peak RSS of its check's process tree
    mem_guard_bytes: int | None      # that peak times the policy's mem_margin


@dataclass(frozen=True)
class Sidecar:
    """A map's sidecar (runner.maps.timeout_map.write_map), checked and typed."""

    path: Path
    provenance: Mapping[str, Any]    # prover, hol_build, mode, profile, corpus, ...
    problems: Mapping[str, ProblemMeta]

    @property
    def profile(self) -> Path | None:
        """The profile the map was derived from, as the sidecar names it."""
        profile = self.provenance.get("profile")
        return Path(profile) if isinstance(profile, str) and profile else None


@dataclass(frozen=True)
class LoadedMap:
    """A timeout map and its sidecar, read once."""

    path: Path
    entries: Mapping[str, MapEntry]
    sidecar: Sidecar | None         # None for a map without one (e.g. the bench's own)
    provenance: Provenance
    digest: str                     # sha256 of the map file's bytes
    # How much slower this host proves than the map's (runner/maps/host_factor.py):
    # its limits are multiplied by max(1, factor), its times by the factor.
    host_factor: float = 1.0

    def limits(self) -> dict[str, float]:
        return {pid: e.timeout_sec for pid, e in self.entries.items()}

    def scaled(self, factor: float) -> "LoadedMap":
        """This map on a host ``factor`` times slower than its own: proof times
        times the factor (what plans and ETAs expect), limits times
        max(1, factor) (a faster host keeps the map's limits), rounded up to
        whole seconds as the bench's are."""
        if factor == self.host_factor:
            return self
        ratio, limit_ratio = factor / self.host_factor, max(1.0, factor) / max(1.0, self.host_factor)
        # To the millisecond before rounding up: the guard samples a check's
        # time every 5 ms or more (runner/checks/guard.py), so a factor that
        # moves a limit by less (1.0000001 x 30 s) must not add a whole second.
        entries = {pid: MapEntry(pid, None if e.prove_secs is None else e.prove_secs * ratio,
                                 float(math.ceil(round(e.timeout_sec * limit_ratio, 3))))
                   for pid, e in self.entries.items()}
        return replace(self, entries=MappingProxyType(entries), host_factor=factor)

    def prove_secs(self) -> dict[str, float]:
        return {pid: e.prove_secs for pid, e in self.entries.items() if e.prove_secs is not None}

    @property
    def problems(self) -> Mapping[str, ProblemMeta]:
        """What the sidecar says of each problem; nothing without a sidecar."""
        return MappingProxyType({}) if self.sidecar is None else self.sidecar.problems

    @property
    def profile(self) -> Path | None:
        """The profile the map was derived from, as its sidecar names it."""
        return None if self.sidecar is None else self.sidecar.profile

    def describe(self) -> str:
        p = self.provenance
        if p.mode is None:
            return "mode unknown (no sidecar, not declared)"
        build = f", build {p.build}" if p.build else ""
        host = (f", limits x{host_factor.shown(max(1.0, self.host_factor))} for this host"
                if self.host_factor != 1 else "")
        return f"measured in {p.mode}{build} ({p.source}), {p.clock} clock{host}"


def load(path: Path, mode: str | None = None, build: str | None = None) -> LoadedMap:
    """Read the map at ``path`` and its sidecar; ``mode`` (``native`` or
    ``bytecode``) and ``build`` declare what measured a map without a
    sidecar. A declaration that contradicts the sidecar is refused."""
    path = Path(path)
    if mode is not None and mode not in DECLARED_MODES:
        raise InputError("--map-mode", f"{mode!r} is not an execution mode",
                         f"pass one of {', '.join(DECLARED_MODES)}")
    data = read_file(path)
    entries = read_map(path, data)
    meta = read_sidecar(path)
    sidecar = None if meta is None else _sidecar(sidecar_path(path), meta)
    declared = DECLARED_MODES.get(mode) if mode else None
    if sidecar is not None:
        prov = sidecar.provenance
        # Sidecars written before the vocabulary of modes and the prover_build
        # key say bytecode-fork/native-fork and hol_build: read as today's.
        theirs_build = prov.get("prover_build") or prov.get("hol_build")
        for what, theirs, ours in (("mode", Mode.of(prov.get("mode")), declared),
                                   ("build", theirs_build, build)):
            if ours is not None and theirs is not None and ours != theirs:
                raise InputError(sidecar.path, f"the map's sidecar says it was measured with "
                                 f"{what} '{theirs}', but --map-{what} declares '{ours}'",
                                 f"drop --map-{what} (the sidecar knows), or derive the map again")
        provenance = Provenance(prov.get("prover"), theirs_build or build,
                                Mode.of(prov.get("mode")) or declared, "sidecar",
                                clock=prov.get("clock") or "wall", runtime=prov.get("runtime") or "default")
    elif declared is not None or build is not None:
        provenance = Provenance(None, build, declared, "declared")
    else:
        provenance = Provenance(None, None, None, "none")
    return LoadedMap(path, MappingProxyType(entries), sidecar, provenance,
                     hashlib.sha256(data).hexdigest())


def _sidecar(path: Path, meta: Mapping) -> Sidecar:
    """The typed sidecar; a field of the wrong type is one InputError naming it."""
    def bad(what: str, value) -> InputError:
        return InputError(path, f"{what} is {value!r}, not what `proofbatch timeout-map` writes",
                          "derive the map again, or delete the sidecar to use the map alone")

    prov = meta.get("provenance") or {}
    if not isinstance(prov, dict):
        raise bad("provenance", prov)
    for key in ("prover", "prover_build", "hol_build", "mode", "profile", "clock", "runtime"):
        if prov.get(key) is not None and not isinstance(prov[key], str):
            raise bad(f"provenance.{key}", prov[key])
    problems = meta.get("problems") or {}
    if not isinstance(problems, dict):
        raise bad("problems", problems)
    typed = {}
    for pid, p in problems.items():
        if not isinstance(p, dict):
            raise bad(f"problems.{pid}", p)
        category = p.get("category")
        if category is not None and not isinstance(category, str):
            raise bad(f"problems.{pid}.category", category)
        mem = []
        for key in ("expected_mem_mb", "mem_guard_mb"):
            value = p.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or value < 0):
                raise bad(f"problems.{pid}.{key}", value)
            mem.append(None if value is None else int(value * MB))
        typed[pid] = ProblemMeta(category or None, *mem)
    return Sidecar(path, MappingProxyType(dict(prov)), MappingProxyType(typed))


def measured_elsewhere(loaded: LoadedMap, host: str) -> str | None:
    """Why ``loaded`` was measured on another machine than ``host``, or None:
    a map without a sidecar (s2n-bignum-bench's own, measured on its authors'
    machine), or one whose sidecar names the hosts its profile ran on and
    not this one. A sidecar that names no hosts (written before they were
    recorded) says nothing either way: None."""
    if loaded.sidecar is None:
        return "it has no sidecar saying where"
    hosts = loaded.sidecar.provenance.get("hosts")
    if not isinstance(hosts, list) or not hosts:
        return None
    names = sorted({h.get("host") for h in hosts if isinstance(h, dict) and h.get("host")})
    if not names or host in names:
        return None
    return f"its sidecar names {', '.join(names[:3])}{', ...' if len(names) > 3 else ''}"


def require_mode(loaded: LoadedMap, prover: str) -> None:
    """Refuse a map of unknown mode for a prover whose checks run in several
    modes: its limits may be 2.5-6x off in either direction."""
    from .. import prover_registry as provers  # only provers whose checks run in several modes need a map's

    if not provers.modal_maps(prover) or loaded.provenance.mode is not None:
        return
    raise InputError(loaded.path, "this timeout map says nothing of the mode it was measured in (no "
                     f"sidecar {sidecar_path(loaded.path).name}), and bytecode runs 2.5-6x slower "
                     "than native", "declare it with --map-mode native|bytecode [--map-build B] "
                     "(s2n-bignum-bench's map is native)")


def coverage(loaded: LoadedMap, problem_ids: list[str]) -> tuple[str, ...]:
    """How much of the corpus a map limits. One that names none of its
    problems is refused: every problem would silently fall to the category
    or default limit. One that names some says how many (a warning)."""
    if not problem_ids:
        return ()
    named = sum(pid in loaded.entries for pid in problem_ids)
    if named == 0:
        example = next(iter(loaded.entries), None)
        seen = f" (the map names e.g. {example}, the corpus {problem_ids[0]})" if example else ""
        raise InputError(loaded.path, f"names none of the corpus's {len(problem_ids)} "
                         f"problems{seen}", "pass the map made for this corpus, or drop --timeout-map")
    if named < len(problem_ids):
        return (f"MAP: {loaded.path} covers {named} of the corpus's {len(problem_ids)} problems; "
                f"the other {len(problem_ids) - named} get category or default limits",)
    return ()
