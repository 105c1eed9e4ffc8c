"""The prover-backend interface: all the sweep, the planner and the
executors know of a prover.

A backend (one per prover package under runner/provers/) resolves an
installation once, says what a plan and a batch job need to know of it
(image plan, allowances, limits, warnings) and starts *sessions*. A session
owns one host's loaded images and runs checks in them; it is shared by the
host's worker threads. Every executor (local, Slurm, Dask) drives sessions
through this interface only, so adding a prover touches its own package and
the registry (runner/prover_registry.py).
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from .corpus import Problem
from .verdicts import Outcome


class Prover(enum.StrEnum):
    """The provers proofbatch knows (runner/provers/<prover>/)."""

    HOL_LIGHT = "hol-light"
    ISABELLE = "isabelle"


class Mode(enum.StrEnum):
    """How checks run: the one vocabulary of rows, manifests, profiles and
    maps. ``auto`` is what a sweep asks for (native or bytecode per check);
    each check's row says which of the two it ran in."""

    BYTECODE = "bytecode"            # HOL Light's toplevel, forked per check
    NATIVE = "native"                # HOL Light compiled natively, forked per check
    AUTO = "auto"
    BUILD_SESSION = "build-session"  # Isabelle: one `isabelle build` per check

    @classmethod
    def _missing_(cls, value):
        # Sweeps, profiles and maps written before this vocabulary.
        return {"bytecode-fork": cls.BYTECODE, "native-fork": cls.NATIVE}.get(value)

    @classmethod
    def of(cls, text: str | None) -> "Mode | str | None":
        """``text`` as a Mode, old names included; None stays None, and a
        name from outside the vocabulary is kept as it was written."""
        if not text:
            return None
        try:
            return cls(text)
        except ValueError:
            return text


class LimitClock(enum.StrEnum):
    """The clock a check's time limit counts on. A map measured on one
    machine is used on others, often slower or loaded; wall time counts
    every second the host gave to other work, CPU time only the check's own
    (BenchExec limits CPU time for this reason)."""

    CPU = "cpu"      # user + system CPU time of the check's own processes
    WALL = "wall"    # elapsed time, as s2n-bignum-bench's harness (Unix.alarm) counts it


# A check under the CPU clock that is starved or blocked uses no CPU and
# would never reach its limit: past max(BACKSTOP_FACTOR x limit, limit +
# BACKSTOP_EXTRA_S) of wall time it is ended, and run again (runner/checks/guard.py).
BACKSTOP_FACTOR, BACKSTOP_EXTRA_S = 3.0, 300.0


def backstop_s(time_s: float, factor: float = BACKSTOP_FACTOR, extra_s: float = BACKSTOP_EXTRA_S) -> float:
    """The wall-clock backstop of a check whose CPU limit is ``time_s``."""
    return max(factor * time_s, time_s + extra_s)


@dataclass(frozen=True)
class CheckLimits:
    time_s: float = field(metadata={"help": "time limit of the check, in seconds of ``clock``"})
    time_source: str = field(metadata={"help": "map, category or default"})
    mem_bytes: int = field(metadata={"help": "memory limit of the check's process tree"})
    expected_mem_bytes: int = field(metadata={
        "help": "memory the check is expected to need; it waits until the host has it"})
    clock: str = field(default=LimitClock.CPU, metadata={
        "help": "what time_s counts: cpu (the check's CPU time) or wall (LimitClock)"})
    backstop_s: float | None = field(default=None, metadata={
        "help": "under the CPU clock, wall seconds after which a check that has not reached its "
                "limit is ended as starved or blocked and run again; None: backstop_s(time_s)"})
    nice: int = field(default=0, metadata={
        "help": "the niceness the check's processes run at (the guard sets it from outside)"})
    mem_source: str = field(default="", metadata={
        "help": "where mem_bytes came from (runner/maps/mem_needs.py), recorded in the check's row"})
    runtime: str = field(default="", metadata={
        "help": "the prover's runtime setting the check runs under, as the runner's backend "
                "names it (HOL Light: runtime.py's key), recorded in the check's row; an image "
                "server runs the check under it, not under its own; \"\": the session's"})
    host_factor: float | None = field(default=None, metadata={
        "help": "the factor the map's limits were scaled by for the host the check runs on "
                "(--host-factor); None: no map, recorded in the check's row"})


@dataclass(frozen=True)
class CheckResult:
    outcome: Outcome
    prove_secs: float | None        # measured inside the prover, around prove only
    wall_secs: float                # dispatch to recorded verdict
    peak_rss_bytes: int | None
    image_key: str
    exit_status: str
    sandbox: str = ""               # the box the check ran in (runner/checks/sandbox.py); "" if none ran
    mode: str = ""                  # the mode this check ran in, when a session mixes modes
                                    # (native with bytecode fallback); "" means the session's
    forked_at: float | None = None  # epoch seconds when the check started in its loaded
                                    # image; None when none ran
    cpu_secs: float | None = None   # CPU time (user + system) of the check's process tree,
                                    # from outside; a forked check counts only its own
    prove_cpu_secs: float | None = None  # CPU time of prove() alone, measured in the prover
    # Set when the check was ended by something that is not the answer's
    # doing and says nothing of it (the wall-clock backstop of a starved
    # check, a TIMEOUT while the runner was stopped): the worker runs it again.
    interrupted: str = ""
    # Set when the check ran in another mode than the one asked for, because
    # its context cannot run in that one (HOL Light: a context that cannot be
    # compiled natively runs in bytecode): why. "" when it ran as asked.
    fallback: str = ""
    # The prover's garbage-collector counters over the proof, as a JSON object
    # (HOL Light: verdict_record.GC_FIELDS); "" when it reports none.
    gc: str = ""


@dataclass(frozen=True)
class BackendInfo:
    prover: str     # "hol-light"
    build: str      # identifies the prover build
    mode: str       # execution mode (Mode), e.g. "bytecode"
    sandbox: str = "none"   # the box checks run in: bwrap, rlimits or none (runner/checks/sandbox.py)
    context_proofs: str = ""  # HOL Light: replay or trust (runner/checks/context_proofs.py); "" elsewhere
    runtime: str = ""       # HOL Light: the OCaml runtime setting's key (hol_light/runtime.py); "" elsewhere


# The key prefix of an ImageBuild that compiles (HOL Light's --mode native)
# rather than loads: reports count it in the time split and say it apart.
COMPILE_KEY = "native-compile:"


@dataclass(frozen=True)
class ImageBuild:
    """One image (loaded context) built by a session: real work a sweep pays."""

    key: str
    parent: str | None
    secs: float
    finished_at: float = 0.0        # epoch seconds; places the build on a sweep's timeline


@dataclass(frozen=True)
class ImagePlan:
    """The images a session would build for some problems, as a plan needs
    them: which image each problem's checks run in, the tree they form, and
    what building each is expected to cost."""

    base: str                               # the booted prover every other image derives from
    image_of: Mapping[str, str]             # problem id -> key of the image its checks run in
    parent: Mapping[str, str | None]        # image key -> its parent's key (None for the base)
    build_s: Mapping[str, float]            # image key -> expected seconds to build it from its parent
    source: Mapping[str, str] = field(default_factory=dict)  # image key -> "estimated" or "default"


@dataclass(frozen=True)
class JobAllowances:
    """What a batch job (a Slurm array task, a Dask worker job) must request
    for the prover besides its checks."""

    image_bytes: int = field(metadata={"help": "memory of the loaded images a task holds, counted "
                                               "once besides its checks' limits"})
    boot_s: float = field(metadata={"help": "walltime before a task's first check: starting the "
                                            "prover on a busy node"})


class ProverSession(abc.ABC):
    """A prover running on one host, with its images. Thread-safe.

    ``image_builds`` lists every image built so far, rebuilds after an
    eviction included, in the order they finished.
    """

    info: BackendInfo
    image_builds: list[ImageBuild]
    # The backend that started the session, whose settings it runs under
    # (context_root, log_dir); None for a session no backend of this process
    # started (one whose checks an image server runs: runner.checks.image_server).
    backend: ProverBackend | None = None

    @abc.abstractmethod
    def prepare(self, problems: Sequence[Problem]) -> None:
        """Learn the contexts of the problems about to be checked."""

    @abc.abstractmethod
    def image_key(self, problem: Problem) -> str:
        """Key of the loaded context this problem's checks fork from."""

    @abc.abstractmethod
    def check(self, problem: Problem, limits: CheckLimits) -> CheckResult:
        """Run one check to a verdict. Never raises for a bad answer or a bad
        context: those are verdicts. Raises ProverError if the prover died."""

    def withdraw(self, problem: Problem) -> None:
        """A check of ``problem`` that ``prepare`` announced will not run
        after all (its verdict is reused, or it is skipped). A session that
        keeps images for pending checks may let this one's go."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop every image."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ProverBackend(abc.ABC):
    """Resolves a prover installation once and starts sessions of it.

    Besides ``info``, a backend has ``salt`` (its cache key: what its image
    keys and a resumed sweep's identity depend on), ``grace_s`` (seconds
    past a check's limit before the outside kill), ``context_root`` (the
    directory contexts resolve against, recorded in the manifest) and
    ``allowances``, and ``log_dir``. The methods with a body are defaults a
    prover may keep.
    """

    info: BackendInfo
    salt: str
    grace_s: float
    context_root: Path
    allowances: JobAllowances
    # Where the backend keeps what its checks and images print (OUT/logs in
    # a sweep, DIR/logs beside an image server); None: it keeps none.
    log_dir: Path | None = None

    @abc.abstractmethod
    def start(self, workdir: Path) -> ProverSession:
        """Start a session whose scratch files live under ``workdir``."""

    @abc.abstractmethod
    def image_plan(self, problems: Sequence[Problem], prove_secs: Mapping[str, float]) -> ImagePlan:
        """The images a session of this backend builds for ``problems``;
        ``prove_secs`` (expected proof seconds by problem id, possibly of
        problems outside the list) may price loading contexts whose proofs
        are among them."""

    def check_mem_limit(self, mem_bytes: int, where: str = "--mem-limit") -> None:
        """Raise InputError when no check could pass under ``mem_bytes``
        (the prover's own floor); ``where`` names the flag to blame."""

    def use_map(self, loaded) -> None:
        """The sweep's timeout map as read once (runner.maps.provenance.LoadedMap,
        or None), before ``limits_for`` and before any session starts."""

    def classify(self, problems: Sequence[Problem]) -> Mapping[str, str]:
        """Before any ``limits_for``: the problems whose checks cannot run in
        the mode asked for (problem id -> why), found ahead so that their
        limits belong to the mode they will run in (a native context that
        does not compile runs in bytecode). Most backends run every check as
        asked: none."""
        return {}

    def problem_inputs(self, problems: Sequence[Problem]) -> Mapping[str, Sequence[tuple[str, Path]]]:
        """For each problem id, the files its verdicts depend on besides the
        answer, as (name, path) pairs; the name (not the path) and the
        content are hashed into every row (runner/checks/problem_hash.py), so
        name them as a corpus or context root moved whole would keep them.
        A resume checks a problem again when they change. By default its
        setup and query; a prover whose setups load other files adds them."""
        return {p.problem_id: (("setup", p.setup_path), ("query", p.query_path)) for p in problems}

    def limits_for(self, problem: Problem, limits: CheckLimits) -> CheckLimits:
        """The limits ``problem``'s checks run under, given those the sweep
        resolved (e.g. a map's limit converted to the mode the check runs in)."""
        return limits

    def expected_in_mode(self, problems: Sequence[Problem], prove_secs: Mapping[str, float]
                         ) -> dict[str, float]:
        """The timeout map's expected proof seconds (``prove_secs``, in the
        mode the map was measured in) in the mode each of ``problems``'
        checks runs in, for the planner. Most backends run in one mode and
        leave them as they are."""
        return dict(prove_secs)

    def warnings(self) -> tuple[str, ...]:
        """What to say before the sweep starts, after every ``limits_for``."""
        return ()
