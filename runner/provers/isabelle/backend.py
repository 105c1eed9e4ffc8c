"""Isabelle backend: the second implementation of runner/prover.py.

A session makes sure the parent session's heap is built (once per heap key,
in a store every node shares; see isabelle_heap) and present on this host;
each check is then a per-problem session that processes only the problem's
theory against that heap (see isabelle_check). Limits are enforced from
outside as well: Isabelle's own build timer runs in the JVM outside ML, and
the runner kills the check's process group (the ``isabelle`` script, its JVM
and the poly process) past the limit plus a grace period and a startup
allowance, or when the tree's resident memory passes the limit.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Sequence

import psutil

from ... import events
from . import check as ic
from . import output as io_
from ... import subproc
from ...checks import sandbox
from ...corpus import Problem
from ...errors import CommandError, InputError, ProverError
from ...checks.guard import GuardLimits, Watched, admit, death_reason, enforce, kill_tree
from .corpus import IsabelleCorpus, build_candidate, read_goal
from .heap import HeapStore, IsabelleInstall, build_heap_argv, built_heap_dir, heap_key, session_sources
from .text import GoalTheory
from ...prover import (BackendInfo, CheckLimits, CheckResult, ImageBuild, ImagePlan, JobAllowances,
                       LimitClock, Prover, ProverBackend, ProverSession)
from ...verdicts import Outcome, Termination, Verdict

DEFAULT_STORE = Path.home() / ".cache" / "proofbatch" / "isabelle-heaps"
# The JVM and the heap load before Isabelle's own timer starts: seconds on a
# quiet host, more under load. The outside kill allows for it.
STARTUP_ALLOWANCE_S = 30.0
HEAP_BUILD_TIMEOUT_S = 6 * 3600.0
# The JVM of `isabelle build` plus poly with a HOL heap loaded: about a GiB
# resident before any proof runs.
MIN_CHECK_BYTES = 1 << 30
# Building the parent session's heap when the store lacks it. Not measured
# here (no registry carries Isabelle, see README): a placeholder the plan
# marks "default", until a built heap's heap.json gives the real figure.
HEAP_BUILD_S = 600.0
ALLOWANCES = JobAllowances(
    # Each check is its own `isabelle` process tree and its limit covers it
    # (MIN_CHECK_BYTES); the heap is a file the checks map, not a process a
    # task holds besides them.
    image_bytes=0,
    # A task whose store lacks the heap builds it before its first check.
    boot_s=HEAP_BUILD_S + STARTUP_ALLOWANCE_S)


class IsabelleBackend(ProverBackend):
    allowances = ALLOWANCES
    HEAP_BUILD_S = HEAP_BUILD_S

    def __init__(self, install: IsabelleInstall, corpus: IsabelleCorpus, *, grace_s: float = 2.0,
                 startup_s: float = STARTUP_ALLOWANCE_S, threads: int = 1,
                 store: Path | None = None, sandbox_kind: str = "none",
                 hidden: tuple[Path, ...] = ()):
        """``sandbox_kind`` "bwrap" runs every check inside bubblewrap
        (runner/checks/sandbox.py): no network, the host read-only, only
        $ISABELLE_HOME_USER writable, ``hidden`` (results, answers, ground
        truth) out of sight. Anything else runs checks unboxed."""
        if sandbox_kind == "bwrap" and install.home_user is None:
            raise InputError("--sandbox bwrap", "Isabelle did not report ISABELLE_HOME_USER, the "
                             "one directory its checks must write", "pass --sandbox none")
        self.sandbox_kind, self.hidden = ("bwrap" if sandbox_kind == "bwrap" else "none"), hidden
        self.install, self.corpus = install, corpus
        self.grace_s, self.startup_s, self.threads = grace_s, startup_s, threads
        self.store = HeapStore(store or corpus.heap_store or DEFAULT_STORE)
        self.key = heap_key(install.version, install.ml_identifier, corpus.parent_session,
                            session_sources(corpus.session_dirs))
        self.salt = self.key
        self.context_root = corpus.root
        self.info = BackendInfo(prover=Prover.ISABELLE,
                                build=f"{install.version}/{corpus.parent_session}-{self.key[:12]}",
                                mode=ic.MODE, sandbox=self.sandbox_kind)

    def image_plan(self, problems: Sequence[Problem], prove_secs) -> ImagePlan:
        """One image: the parent session's heap, which every check loads. It
        costs nothing when the store has it (checks copy it in), else a build."""
        stored = self.store.lookup(self.key, self.corpus.parent_session)
        secs, source = (0.0, "stored") if stored is not None else (HEAP_BUILD_S, "default")
        return ImagePlan(self.key, {p.problem_id: self.key for p in problems}, {self.key: None},
                         {self.key: secs}, {self.key: source})

    def check_mem_limit(self, mem_bytes: int, where: str = "--mem-limit") -> None:
        """Refuse a per-check limit below what the JVM and a loaded HOL heap
        occupy before any proof runs: every check would be MEMOUT."""
        if mem_bytes < MIN_CHECK_BYTES:
            raise InputError(where, f"{mem_bytes >> 20} MiB is below what an Isabelle check needs "
                             f"before its proof starts (the JVM and the parent heap, about "
                             f"{MIN_CHECK_BYTES >> 20} MiB), so every check would be MEMOUT",
                             "give 2G or more (the default is 8G)")

    def start(self, workdir: Path) -> "IsabelleSession":
        return IsabelleSession(self, Path(workdir))


class IsabelleSession(ProverSession):
    def __init__(self, backend: IsabelleBackend, workdir: Path):
        self.backend, self.info = backend, backend.info
        self.workdir = workdir
        (workdir / "checks").mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._goals: dict[str, GoalTheory] = {}
        self._running: dict[int, subprocess.Popen] = {}
        self._counter = itertools.count()
        self._closed = False
        self.image_builds: list[ImageBuild] = []
        self._ensure_heap()

    def _ensure_heap(self) -> None:
        b = self.backend
        corpus = b.corpus

        def build() -> Path:
            try:
                subproc.run(build_heap_argv(b.install, corpus.parent_session, corpus.session_dirs),
                            timeout=HEAP_BUILD_TIMEOUT_S)
            except CommandError as exc:
                raise ProverError(f"the parent session {corpus.parent_session} does not build: {exc}") from None
            return built_heap_dir(b.install, corpus.parent_session)

        entry = b.store.ensure(b.key, corpus.parent_session, build)
        HeapStore.install(entry, b.install.heaps_dir)
        if entry.built_here:
            self.image_builds.append(ImageBuild(b.key, None, entry.built_secs))

    def prepare(self, problems: Sequence[Problem]) -> None:
        goals = {p.problem_id: read_goal(p.setup_path) for p in problems}
        with self._lock:
            self._goals.update(goals)

    def image_key(self, problem: Problem) -> str:
        return self.backend.key

    def _goal(self, problem: Problem) -> GoalTheory:
        with self._lock:
            goal = self._goals.get(problem.problem_id)
        if goal is None:
            goal = read_goal(problem.setup_path)
            with self._lock:
                self._goals[problem.problem_id] = goal
        return goal

    def check(self, problem: Problem, limits: CheckLimits) -> CheckResult:
        started = time.monotonic()
        goal = self._goal(problem)
        candidate = build_candidate(problem.answer or b"", goal, self.backend.corpus)
        if candidate.refusal is not None:
            return CheckResult(candidate.refusal, None, time.monotonic() - started, None,
                               self.backend.key, "not run")
        refusal = admit(limits.expected_mem_bytes, self._running_count)
        if refusal:
            return CheckResult(Outcome(Verdict.ERROR, refusal), None, time.monotonic() - started,
                               None, self.backend.key, "not run")
        n = next(self._counter)
        session = f"Proofbatch_Check_{os.getpid()}_{n}"
        files = ic.write_check(self.workdir / "checks" / str(n), session, self.backend.corpus, goal,
                               candidate.text or "", limits.time_s, secrets.token_hex(8),
                               threads=self.backend.threads)
        # The check starts now (its heap is the session's own): its time runs.
        events.say("forked", name=problem.problem_id, limit_s=limits.time_s)
        try:
            return self._run(files, limits, started)
        finally:
            shutil.rmtree(files.directory, ignore_errors=True)
            log = self.backend.install.heaps_dir / "log"
            for name in (f"{session}.db", session, f"{session}.gz"):
                (log / name).unlink(missing_ok=True)

    def _run(self, files: ic.CheckFiles, limits: CheckLimits, started: float) -> CheckResult:
        b = self.backend
        argv = ic.build_check_argv(b.install.argv(), b.corpus, files)
        if b.sandbox_kind == "bwrap":
            readable = [files.directory, *b.corpus.session_dirs, b.install.executable.parent.parent]
            argv = sandbox.wrap(argv, "bwrap", writable=b.install.home_user, readable=readable,
                                hidden=b.hidden, chdir=files.directory)
        out_path = files.directory / "build.out"
        with self._lock:
            if self._closed:
                raise ProverError("the Isabelle session is closed")
            with open(out_path, "wb") as out:
                # Its own process group: the guard kills the script, the JVM
                # and poly together, and a Ctrl-C aimed at the runner is not
                # delivered to them.
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, cwd=files.directory,
                                        start_new_session=True)
            self._running[proc.pid] = proc
        try:
            term, seen = self._watch(proc, limits, started)
        finally:
            with self._lock:
                self._running.pop(proc.pid, None)
        wall, peak = time.monotonic() - started, seen.peak_rss_bytes
        result = self._result(files, term, proc, wall, peak)
        return dataclasses.replace(result, cpu_secs=seen.cpu_secs or None, interrupted=seen.interrupted)

    def _result(self, files: ic.CheckFiles, term: Termination, proc: subprocess.Popen, wall: float,
                peak: int) -> CheckResult:
        b, out_path = self.backend, files.directory / "build.out"
        code = proc.returncode
        status = f"exit {code}" if code is not None and code >= 0 else f"signal {-(code or 0)}"
        if term.outcome is not None:
            return CheckResult(term.outcome, None, wall, peak or None, b.key, status, b.sandbox_kind)
        if code is not None and code < 0:
            # `isabelle build` itself ended by a signal none of our guards
            # sent (the OOM killer, an admin's kill): its orphans go with it,
            # and the row says so in the words the worker retries on.
            _kill_orphans(proc.pid)
            return CheckResult(Outcome(Verdict.ERROR, death_reason(status)), None, wall, peak or None,
                               b.key, status, b.sandbox_kind)
        output = out_path.read_text(encoding="utf-8", errors="replace")
        report = io_.parse_build(output, files.session)
        outcome = io_.classify_build(report, nonce=files.nonce, original_file=f"{ic.ORIGINAL}.thy",
                                     exit_code=code if code is not None else -1)
        secs = report.elapsed_s if outcome.verdict is Verdict.OK else None
        return CheckResult(outcome, secs, wall, peak or None, b.key, status, b.sandbox_kind)

    def _running_count(self) -> int:
        with self._lock:
            return len(self._running)

    def _watch(self, proc: subprocess.Popen, limits: CheckLimits,
               started: float) -> tuple[Termination, Watched]:
        """Wait for the check under runner.checks.guard.enforce. The JVM reserves
        far more address space than it uses, so RLIMIT_AS (the HOL Light
        backstop) cannot be used here."""
        b, term = self.backend, Termination()
        try:
            root = psutil.Process(proc.pid)
        except psutil.Error:
            root = None
        killed: list[psutil.Process] = []

        def kill() -> None:
            if root is not None:
                try:
                    killed.extend([root] + root.children(recursive=True))
                except psutil.Error:
                    pass
                kill_tree(proc.pid, root)

        def over(wait: float) -> bool:
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                return False
            return True

        guard = GuardLimits(limits.time_s, limits.mem_bytes, b.grace_s, poll_s=0.05,
                            clock=limits.clock, backstop_s=limits.backstop_s, nice=limits.nice)
        clock = "CPU time limit" if str(limits.clock) == LimitClock.CPU else "time limit"
        # The JVM's start counts too: on the CPU clock, the CPU of its threads.
        seen = enforce(root, guard, started, term, wait=over, kill=kill,
                       tree=" (isabelle, java and poly)", allowance_s=b.startup_s,
                       timeout_reason=f"{clock} {limits.time_s:g} s (+{b.grace_s:g} s grace, "
                                      f"+{b.startup_s:g} s startup) passed; killed from outside",
                       stop=lambda: "the session closed during the check" if self._closed else None)
        # A killed process lives on until the kernel has torn it down (a big
        # heap takes a moment): the check is over only when its tree is gone.
        psutil.wait_procs(killed, timeout=10)
        return term, seen

    def close(self) -> None:
        with self._lock:
            self._closed = True
            running = list(self._running.values())
        for proc in running:
            try:
                kill_tree(proc.pid, psutil.Process(proc.pid))
            except psutil.Error:
                pass


def _kill_orphans(group: int) -> None:
    """SIGKILL what is left of a check's process group once its root died,
    and wait until it is gone: the JVM and poly, reparented away from the
    root, are found by their group only."""
    left = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == group:
                left.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    psutil.wait_procs(left, timeout=10)
