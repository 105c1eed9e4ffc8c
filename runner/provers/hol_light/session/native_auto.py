"""Choosing native or bytecode per check, and time limits per mode.

``--mode native`` runs every check natively (contexts that cannot be
compiled fall back to bytecode, see hol_native). ``--mode auto`` runs a
check natively when its expected bytecode time is above ``THRESHOLD_S``
(costs/map_modes.py) and in the bytecode fork server otherwise; a check
with no expected time runs natively, batched, where compiling it costs
milliseconds.

A check that runs in another mode than the timeout map was measured in
gets its limit converted (map_modes.py), and says so. That includes a check
whose context cannot be compiled natively: the sweep compiles the contexts
before it makes its checks (``classify``), so such a check gets the
bytecode limit it will run under, and its row says so (``timeout_s``,
``timeout_source`` and ``mode`` agree). With ``--no-fallback`` it is ERROR
instead, under its native limit.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from ....corpus import Problem
from ....errors import InputError
from ....maps.provenance import LoadedMap
from .... import events
from ....checks.sandbox import for_sweep
from .backend import HolLightBackend
from ..install import HolLightInstall
from ..runtime import DEFAULT as DEFAULT_RUNTIME, Runtime, of_config as runtime_of
from ..costs.map_modes import BYTECODE_MODE, NATIVE_MODE, THRESHOLD_S, MapModes, converted_warning
from .verdict_record import not_run
from .native import NativeHolLightBackend
from .native_contexts import refused_natively
from .native_session import NativeSession
from ..native.native_build import build_native
from ..costs.plans import ALLOWANCES
from ....prover import (BackendInfo, Mode, Prover, CheckLimits, CheckResult, ImageBuild, ImagePlan, ProverBackend,
                       ProverSession)
from ....verdicts import Verdict

MODES = (Mode.BYTECODE, Mode.NATIVE, Mode.AUTO)    # what --mode asks for


class ModeBackend(ProverBackend):
    """``--mode native`` or ``--mode auto``: native and bytecode sessions
    behind one, each started only when a check needs it."""

    def __init__(self, mode: str, native: NativeHolLightBackend, loaded_map: LoadedMap | None = None,
                 threshold_s: float = THRESHOLD_S):
        if mode not in (Mode.NATIVE, Mode.AUTO):
            raise ValueError(mode)
        self.mode, self.native, self.threshold_s = mode, native, threshold_s
        self.bytecode: HolLightBackend = native.fallback
        self.maps = MapModes(loaded_map)
        self.salt, self.context_root = native.salt, native.context_root
        self.install, self.grace_s = native.install, native.grace_s
        self.info = BackendInfo(prover=Prover.HOL_LIGHT, build=native.info.build,
                                mode=Mode(mode),
                                sandbox=native.info.sandbox,
                                context_proofs=native.info.context_proofs,
                                runtime=native.info.runtime)
        self.converted: list[str] = []

    def route(self, problem: Problem) -> str:
        if self.mode == Mode.NATIVE:
            return NATIVE_MODE
        secs = self.maps.bytecode_secs(problem.problem_id)
        return BYTECODE_MODE if secs is not None and secs <= self.threshold_s else NATIVE_MODE

    def classify(self, problems: Sequence[Problem]) -> dict[str, str]:
        """Compile the contexts of the problems routed natively, before any
        limit is given (NativeHolLightBackend.classify); the problems whose
        context cannot run natively, with the reason."""
        return self.native.classify([p for p in problems if self.route(p) == NATIVE_MODE])

    @property
    def not_native(self) -> dict[str, str]:
        """Problem id -> why its context cannot run natively (after classify)."""
        return self.native.not_native

    @property
    def no_fallback(self) -> bool:
        return self.native.no_fallback

    def runs_in(self, problem: Problem) -> str:
        """The mode the problem's checks run in: its route, or bytecode when
        its context cannot run natively and it falls back."""
        mode = self.route(problem)
        if mode == NATIVE_MODE and problem.problem_id in self.not_native and not self.no_fallback:
            return BYTECODE_MODE
        return mode

    def limits_for(self, problem: Problem, limits: CheckLimits) -> CheckLimits:
        """``limits`` in the mode the check will run in (see module doc)."""
        adjusted = self.maps.convert(limits, self.runs_in(problem))
        if adjusted is not limits:
            self.converted.append(problem.problem_id)
        return replace(adjusted, runtime=self.native.runtime.key)

    def expected_in_mode(self, problems: Sequence[Problem], prove_secs) -> dict[str, float]:
        """The map's expected times in the mode each check runs in (``runs_in``:
        after ``classify``), moved by map_modes.RATIO_CENTRAL."""
        modes = {p.problem_id: self.runs_in(p) for p in problems}
        # Proofs of no problem here are replayed inside native images.
        return {pid: self.maps.expected_in(secs, modes.get(pid, NATIVE_MODE))
                for pid, secs in prove_secs.items()}

    def problem_inputs(self, problems: Sequence[Problem]):
        return self.native.problem_inputs(problems)

    def use_map(self, loaded: LoadedMap | None) -> None:
        """Route and convert by ``loaded``, the map the sweep read; before
        any session starts."""
        self.maps = MapModes(loaded)

    def warnings(self) -> tuple[str, ...]:
        return converted_warning(self.maps, len(self.converted))

    allowances = ALLOWANCES

    def image_plan(self, problems: Sequence[Problem], prove_secs) -> ImagePlan:
        return self.native.image_plan(problems, prove_secs)

    def start(self, workdir: Path) -> "ModeSession":
        return ModeSession(self, Path(workdir))


class ModeSession(ProverSession):
    def __init__(self, backend: ModeBackend, workdir: Path):
        self.backend, self.info, self.workdir = backend, backend.info, workdir
        self._lock = threading.Lock()
        self._native: NativeSession | None = None
        self._bytecode: ProverSession | None = None
        self._route: dict[str, str] = {}
        # What its sessions built, kept past close: a stopped run still
        # records its image builds (cluster/base.record_image_builds runs
        # after the stop closed the session; heavy_tail's stopped sweep
        # recorded none, its images' costs lost).
        self._closed_builds: list[ImageBuild] = []

    @property
    def image_builds(self) -> list[ImageBuild]:
        return self._closed_builds + [b for s in (self._native, self._bytecode) if s is not None
                                      for b in s.image_builds]

    def _session(self, mode: str) -> ProverSession:
        with self._lock:
            if mode == BYTECODE_MODE:
                if self._bytecode is None:
                    self._bytecode = self.backend.bytecode.start(self.workdir / "bytecode")
                return self._bytecode
            if self._native is None:
                self._native = NativeSession(self.backend.native, self.workdir / "native",
                                             bytecode=lambda: self._session(BYTECODE_MODE))
            return self._native

    def _refused(self, problem: Problem) -> str | None:
        """Why --no-fallback keeps this problem from running at all, or None."""
        if not self.backend.no_fallback or self.backend.route(problem) != NATIVE_MODE:
            return None
        return self.backend.not_native.get(problem.problem_id)

    def prepare(self, problems: Sequence[Problem]) -> None:
        groups: dict[str, list[Problem]] = {}
        for p in problems:
            self._route[p.problem_id] = self.backend.route(p)
            if self._refused(p) is None:       # those are ERROR without a session
                groups.setdefault(self._route[p.problem_id], []).append(p)
        for mode, group in sorted(groups.items()):
            self._session(mode).prepare(group)

    def image_key(self, problem: Problem) -> str:
        if self._refused(problem) is not None:
            return self.backend.native.tree.image_of[problem.problem_id]
        return self._session(self._route[problem.problem_id]).image_key(problem)

    def check(self, problem: Problem, limits: CheckLimits) -> CheckResult:
        if (why := self._refused(problem)) is not None:
            return not_run(Verdict.ERROR, refused_natively(why), self.image_key(problem), NATIVE_MODE)
        mode = self._route.get(problem.problem_id) or self.backend.route(problem)
        result = self._session(mode).check(problem, limits)
        return result if result.mode else replace(result, mode=mode)

    def withdraw(self, problem: Problem) -> None:
        if self._refused(problem) is not None:
            return
        mode = self._route.get(problem.problem_id)
        session = self._native if mode == NATIVE_MODE else self._bytecode
        if mode is not None and session is not None:
            session.withdraw(problem)

    def close(self) -> None:
        with self._lock:
            sessions, self._native, self._bytecode = [self._native, self._bytecode], None, None
            self._closed_builds += [b for s in sessions if s is not None for b in s.image_builds]
        for s in sessions:
            if s is not None:
                s.close()


def native_backend(config, install: HolLightInstall, context_root: Path) -> ProverBackend:
    """The backend of ``--mode native|auto`` for a sweep config; builds the
    native HOL Light into the cache first if it is not there."""
    return mode_backend(config.mode, install, context_root, grace_s=config.grace,
                        max_images=config.max_images, sandbox_config=for_sweep(config),
                        log_dir=Path(config.out) / "logs", context_proofs=config.context_proofs,
                        no_fallback=getattr(config, "no_fallback", False),
                        runtime=runtime_of(config))


def mode_backend(mode: str, install: HolLightInstall, context_root: Path, *, grace_s: float,
                 max_images: int, sandbox_config, log_dir: Path, context_proofs,
                 no_fallback: bool = False, runtime: Runtime = DEFAULT_RUNTIME) -> "ModeBackend":
    """A ``native`` or ``auto`` backend, for a sweep or for `proofbatch serve`."""
    if mode not in MODES:
        raise InputError("--mode", f"{mode!r} is not an execution mode", "pass bytecode, native or auto")
    # Said as a stage of preparing (the screen, or serve's log, prints it).
    build = build_native(install, log=lambda line: events.say("prepare", name=f"native build: {line}"))
    # The same box and jail as bytecode checks (runner/checks/sandbox.py).
    native = NativeHolLightBackend(install, build, context_root, grace_s=grace_s,
                                   max_images=max_images, sandbox_config=sandbox_config,
                                   log_dir=log_dir, context_proofs=context_proofs,
                                   no_fallback=no_fallback, runtime=runtime)
    # The sweep hands over its map, read once (ModeBackend.use_map).
    return ModeBackend(mode, native)
