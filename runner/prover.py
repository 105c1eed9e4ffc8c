"""The prover-backend interface: HOL Light now, Isabelle next.

A backend knows how to start a *session* on one host. A session owns that
host's loaded images and runs checks in them; it is shared by the host's
worker threads. Every executor (local, Slurm, Dask) drives sessions through
this interface only, so adding a prover touches one module.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .corpus import Problem
from .verdicts import Outcome


@dataclass(frozen=True)
class CheckLimits:
    time_s: float = field(metadata={"help": "time limit of the check, in seconds"})
    time_source: str = field(metadata={"help": "map, category or default"})
    mem_bytes: int = field(metadata={"help": "memory limit of the check's process tree"})
    expected_mem_bytes: int = field(metadata={
        "help": "memory the check is expected to need; it waits until the host has it"})


@dataclass(frozen=True)
class CheckResult:
    outcome: Outcome
    prove_secs: float | None        # measured inside the prover, around prove only
    wall_secs: float                # dispatch to recorded verdict
    peak_rss_bytes: int | None
    image_key: str
    exit_status: str
    sandbox: str = ""               # the box the check ran in (runner/sandbox.py); "" if none ran
    mode: str = ""                  # the mode this check ran in, when a session mixes modes
                                    # (native with bytecode fallback); "" means the session's
    forked_at: float | None = None  # epoch seconds when the check started in its loaded
                                    # image; None when none ran


@dataclass(frozen=True)
class BackendInfo:
    prover: str     # "hol-light"
    build: str      # identifies the prover build
    mode: str       # execution mode, e.g. "bytecode-fork"
    sandbox: str = "none"   # the box checks run in: bwrap, rlimits or none (runner/sandbox.py)
    context_proofs: str = ""  # HOL Light: replay or trust (runner/context_proofs.py); "" elsewhere


@dataclass(frozen=True)
class ImageBuild:
    """One image (loaded context) built by a session: real work a sweep pays."""

    key: str
    parent: str | None
    secs: float
    finished_at: float = 0.0        # epoch seconds; places the build on a sweep's timeline


class ProverSession(abc.ABC):
    """A prover running on one host, with its images. Thread-safe.

    ``image_builds`` lists every image built so far, rebuilds after an
    eviction included, in the order they finished.
    """

    info: BackendInfo
    image_builds: list[ImageBuild]

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
    """Resolves a prover installation once and starts sessions of it."""

    info: BackendInfo

    @abc.abstractmethod
    def start(self, workdir: Path) -> ProverSession:
        """Start a session whose scratch files live under ``workdir``."""
