"""The box every check runs in. Answers are hostile OCaml code.

Two layers, because a loaded image is an OCaml toplevel that only fork can
reuse and bubblewrap can only wrap a new exec:

- **The tree.** The base image is started under ``bwrap``, so it and every
  image and check forked from it share one sandbox: a network namespace of
  its own (only ``lo``, with nothing listening), the host's filesystem
  read-only, a private ``/tmp``, the session's work directory the only
  writable bind, and the results directory, the answers and the corpus's
  ``answer.txt`` files (the ground truth) hidden. ``--die-with-parent`` ties
  the base image to the runner; images and checks already follow the runner
  through their command pipes. Only the capabilities the jail needs are kept.
- **The jail.** Each check, after its answer is parsed, screened and typed
  but before any of it runs, ``chroot``s into its own empty scratch
  directory and drops to a uid of its own (see hol_check.ml): it sees
  no other file, not even ``/proc``, cannot signal any other process, and
  ``RLIMIT_NPROC`` bounds how many processes it can have.

The runner also sets per-check rlimits from outside (CPU time, address
space, file size; no core dumps). Where bubblewrap is not installed or we are
not root, that is all there is: the kind ``rlimits``. The kind a check ran
under is recorded in its result row and in the sweep's ``sweep.json``.
"""

from __future__ import annotations

import enum
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import psutil

from ..errors import InputError
from ..settings import setting as _help



class SandboxKind(enum.StrEnum):
    """The box checks run in."""

    AUTO = "auto"          # bwrap where it works, else rlimits
    BWRAP = "bwrap"        # bubblewrap: no network, the host read-only, the results hidden
    RLIMITS = "rlimits"    # resource limits only
    NONE = "none"


KINDS = tuple(k.value for k in SandboxKind)    # as the command line offers them

# Capabilities the image tree keeps inside bwrap: chroot and setuid/setgid
# for the per-check jail, kill so that an image can stop its jailed checks
# (they run under other uids) when the runner goes away. Everything else is
# dropped, so neither an image nor a check can mount, trace or reconfigure.
TREE_CAPS = ("CAP_SYS_CHROOT", "CAP_SETUID", "CAP_SETGID", "CAP_KILL")

# Jail uids: far above any uid a system hands out, one per check, so that
# checks cannot signal or read one another even when they run at once.
JAIL_UID_BASE = 1 << 30
JAIL_UID_SPAN = (1 << 30) - 2


@dataclass(frozen=True)
class SandboxConfig:
    kind: str = _help("auto (bwrap when installed and root, else rlimits), bwrap, rlimits, or "
                      "none (no box: only for measuring what the box costs)", default="auto")
    hidden: tuple[Path, ...] = _help("paths the prover tree must not see: the results directory, "
                                     "the answers, the ground truth", default=())
    nproc: int = _help("processes a jailed check may have at once (RLIMIT_NPROC of its uid)",
                       default=32)
    fsize_bytes: int = _help("largest file a check may write, its log included (RLIMIT_FSIZE)",
                             default=64 * 2**20)
    answer_max_bytes: int = _help("longer answers are an ERROR without a check", default=16 * 2**20)
    log_keep_bytes: int = _help("how much of a check's own output is kept as its log",
                                default=64 * 2**10)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise InputError("--sandbox", f"{self.kind!r} is not a sandbox kind",
                             f"pass one of {', '.join(KINDS)}")


def resolve_kind(requested: str) -> str:
    """The kind a session will use. Starts no process: validation must stay cheap.

    bwrap is used when it is installed and we are root (the per-check jail
    needs chroot and setuid). If bwrap is installed but cannot create its
    namespaces here, the session fails to start and says so.
    """
    have_bwrap = shutil.which("bwrap") is not None and os.geteuid() == 0
    if requested == SandboxKind.AUTO:
        return SandboxKind.BWRAP if have_bwrap else SandboxKind.RLIMITS
    if requested == SandboxKind.BWRAP and not have_bwrap:
        why = "bwrap is not installed" if shutil.which("bwrap") is None else "we are not root"
        raise InputError("--sandbox bwrap", f"cannot sandbox with bubblewrap: {why}",
                         "apt-get install bubblewrap and run as root, or pass --sandbox rlimits")
    return requested


def jails(kind: str) -> bool:
    return kind == SandboxKind.BWRAP


def jail_uid() -> int:
    return JAIL_UID_BASE + secrets.randbelow(JAIL_UID_SPAN)


def wrap(argv: Iterable[str], kind: str, *, writable: Path, readable: Iterable[Path],
         hidden: Iterable[Path], chdir: Path) -> list[str]:
    """The command that starts the prover tree inside the sandbox ``kind``."""
    argv = list(argv)
    if kind != SandboxKind.BWRAP:
        return argv
    args = ["bwrap", "--die-with-parent", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--tmpfs", "/dev/shm"]
    # /tmp is private; what the tree must read there (a checkout, a context
    # root under a temp dir) is bound back read-only.
    bound = [path for path in sorted({Path(p).resolve() for p in readable})
             if path.exists() and _under(path, Path("/tmp"))]
    for path in bound:
        args += ["--ro-bind", str(path), str(path)]
    writable = Path(writable).resolve()
    args += ["--bind", str(writable), str(writable)]
    # Files are hidden under an empty file. Not /dev/null: bwrap mounts binds
    # nodev, where a device node cannot be opened at all.
    empty = writable / ".empty"
    empty.touch(mode=0o444)
    for path in sorted({Path(p).resolve() for p in hidden}):
        if _under(writable, path) or not path.exists():
            continue
        if _under(path, Path("/tmp")) and not any(_under(path, b) for b in bound):
            continue    # the private /tmp already hides it
        # A directory disappears under an empty tmpfs, a file under an empty file.
        args += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", str(empty), str(path)]
    args += ["--cap-drop", "ALL"]
    for cap in TREE_CAPS:
        args += ["--cap-add", cap]
    args += ["--chdir", str(Path(chdir).resolve()), "--"]
    return args + argv


def ground_truth(corpus_dirs: Iterable[Path]) -> list[Path]:
    """The answer files inside problem folders: what an answer must never read."""
    return [d / name for d in corpus_dirs for name in ("answer.txt", "answers.jsonl")
            if (d / name).exists()] + \
        [p for d in corpus_dirs if d.is_dir() for p in d.glob("answer_*.txt")]


def limit_tree(pid: int, config: SandboxConfig, kind: str = "bwrap") -> None:
    """Limits every process forked from the base image inherits.

    RLIMIT_NPROC counts all processes of a uid, and root is exempt: it is
    set only for jailed checks, each alone under its own uid, where it stops
    a fork bomb. (For an unjailed non-root prover it would count the user's
    every process.)
    """
    if kind == SandboxKind.NONE:
        return
    proc = psutil.Process(pid)
    proc.rlimit(psutil.RLIMIT_CORE, (0, 0))
    if jails(kind):
        proc.rlimit(psutil.RLIMIT_NPROC, (config.nproc, config.nproc))


def limit_check(proc: psutil.Process, config: SandboxConfig, cpu_s: float) -> None:
    """Per-check limits, set from outside on the forked check.

    CPU time is a backstop behind the runner's wall-clock kill; the file
    size bounds the check's log and scratch files (SIGXFSZ ends a check that
    writes past it).
    """
    cpu = max(1, int(cpu_s) + 1)
    try:
        proc.rlimit(psutil.RLIMIT_CPU, (cpu, cpu + 1))
        proc.rlimit(psutil.RLIMIT_FSIZE, (config.fsize_bytes, config.fsize_bytes))
    except (psutil.Error, OSError):
        pass    # it has already exited


def _under(path: Path, parent: Path) -> bool:
    try:
        path.relative_to(parent)
        return True
    except ValueError:
        return False


def for_sweep(config) -> SandboxConfig:
    """The sandbox of a sweep (a SweepConfig): its kind, and the results
    directory, the answers and the corpus's ground truth hidden."""
    corpus = Path(config.corpus)
    folders = [d for d in corpus.iterdir() if d.is_dir()] if corpus.is_dir() else []
    hidden = [Path(config.out)] + ([Path(config.answers)] if config.answers else [])
    return SandboxConfig(kind=config.sandbox,
                         hidden=tuple(hidden + ground_truth(folders)))
