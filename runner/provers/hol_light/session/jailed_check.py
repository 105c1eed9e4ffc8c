"""One check forked from a loaded image, jailed and guarded: its files (a
scratch directory that is its jail, holding its verdict pipe, and beside it,
out of the jail's sight, its answer, query and log), the CHECK that starts
it, the outside guards that box and watch it until its verdict or its kill,
and the REAP that ends it. The session's side of it (counting, the verdict
record read into a result) is ForkSession._jailed_check (fork_session.py).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import psutil

from .... import events
from ....checks import sandbox
from ....checks.guard import GuardLimits, Observation, kill_tree, watch
from ....checks.sandbox import SandboxConfig
from ....corpus import Problem
from ....errors import ProverError
from ....prover import CheckLimits
from .fork_server import ImageProcess

# RLIMIT_CPU (SIGXCPU) backs up the guard's own kill at the limit plus grace;
# it sits further out, so that the guard's TIMEOUT, which says why, comes first.
RLIMIT_CPU_MARGIN_S = 5.0


@dataclass(frozen=True)
class CheckFiles:
    """Check ``n``'s files under the session's ``checks`` folder: ``scratch``
    (its jail, holding the ``verdict`` pipe) and, beside it, its answer,
    query and log."""

    checks: Path
    n: int

    @property
    def scratch(self) -> Path:
        return self.checks / str(self.n)

    @property
    def verdict_fifo(self) -> Path:
        return self.scratch / "verdict"

    @property
    def answer(self) -> Path:
        return self.checks / f"{self.n}.answer"

    @property
    def query(self) -> Path:
        return self.checks / f"{self.n}.query"

    @property
    def log(self) -> Path:
        return self.checks / f"{self.n}.log"

    def remove(self) -> None:
        """Remove the check's files, whatever of them exists."""
        for path in (self.answer, self.query, self.log):
            path.unlink(missing_ok=True)
        shutil.rmtree(self.scratch, ignore_errors=True)


def prepare(files: CheckFiles, problem: Problem, answer_fields: Callable[[Path], Sequence[str]],
            kind: str) -> tuple[list[str], str, int]:
    """Make a check's files: its jail, the answer (``answer_fields`` may
    write it to the file it is given, and returns the CHECK fields that name
    it), the query and the verdict pipe, owned by the jail's uid when the
    sandbox ``kind`` jails. Returns the fields, the uid the check runs as
    ("-": unjailed) and the pipe's read end, open. Raises ProverError (a
    fault of the machine), with none of the files left, when one cannot be
    made."""
    uid = "-"
    try:
        # 0711: the image process keeps no capability to read other uids' files,
        # but must enter the directory it jails the check in.
        files.scratch.mkdir(mode=0o711)
        fields = list(answer_fields(files.answer))
        shutil.copyfile(problem.query_path, files.query)
        os.mkfifo(files.verdict_fifo, 0o600)
        if sandbox.jails(kind):
            jail = sandbox.jail_uid()
            for path in (files.scratch, files.verdict_fifo):
                os.chown(path, jail, jail)
            # Writable by the jailed check (its owner) and by the image's
            # child before it enters the jail (root without CAP_DAC_OVERRIDE),
            # which reports an answer refused before it ran.
            os.chmod(files.verdict_fifo, 0o622)
            uid = str(jail)
        verdict_fd = os.open(files.verdict_fifo, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        # The session's own files: a full disk, a folder removed under
        # the runner. The machine's fault; no verdict of the answer.
        for path in (files.answer, files.query):
            path.unlink(missing_ok=True)
        shutil.rmtree(files.scratch, ignore_errors=True)
        raise ProverError(f"cannot prepare a check's files in {files.checks} ({exc.strerror or exc}"
                          f"{': ' + str(exc.filename) if exc.filename else ''}): a fault of this "
                          "machine, not of the answer; fix it and run the same command again "
                          "to resume") from None
    return fields, uid, verdict_fd


def run(image: ImageProcess, problem: Problem, limits: CheckLimits, files: CheckFiles,
        fields: Sequence[str], uid: str, verdict_fd: int, nonce: str, guard: GuardLimits,
        kind: str, cfg: SandboxConfig, gc: str = "") -> tuple[Observation, str, float]:
    """Start the prepared check in ``image`` (CHECK), box it (sandbox
    ``kind``), watch it under ``guard`` until its verdict or its kill, and
    reap it (REAP). ``gc``: the OCaml runtime parameters the check sets as
    it starts (runtime.py's ``Runtime.check_gc``; "" for its image's). Returns
    what the runner saw, how the check ended (as hol_check.ml's REAP says)
    and when it was forked (epoch seconds). Raises ProverError, its
    ``check_started`` saying whether the check had started, when the image
    fails it; a check started is killed."""
    pid, obs = None, None
    try:
        started, forked_at = time.monotonic(), time.time()
        # Its image is loaded: from here on the check's own time runs.
        events.say("forked", name=problem.problem_id, limit_s=limits.time_s)
        reply = image.request("CHECK", str(files.verdict_fifo), str(files.query), *fields,
                              f"{limits.clock}:{float(limits.time_s)!r}" + (f":{gc}" if gc else ""),
                              str(files.log), str(files.scratch), nonce, uid)
        pid = int(reply.split()[1])
        if kind != "none":
            try:
                sandbox.limit_check(psutil.Process(pid), cfg, limits.time_s + guard.grace_s
                                    + RLIMIT_CPU_MARGIN_S)
            except psutil.NoSuchProcess:
                pass      # already done; watch() reads its verdict
        obs = watch(pid, verdict_fd, guard, started)
        status = image.request("REAP", str(pid)).split(maxsplit=2)[2]
    except (ProverError, psutil.NoSuchProcess) as exc:
        if pid is not None and obs is None:
            kill_orphan(pid)
        error = exc if isinstance(exc, ProverError) else ProverError(str(exc))
        # Whether the check had started: an image found dead before is
        # rebuilt and the check run with no retry counted.
        error.check_started = pid is not None
        raise error
    return obs, status, forked_at


def kill_orphan(pid: int) -> None:
    """Kill ``pid`` and its descendants, if it is still there."""
    try:
        kill_tree(pid, psutil.Process(pid))
    except psutil.Error:
        pass
