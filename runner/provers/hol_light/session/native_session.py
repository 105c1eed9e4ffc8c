"""A native HOL Light session (NativeSession): the compiled server booted,
its context images forked from it with their compiled plugins loaded, the
scopes of its contexts compiled as needed (native_contexts.py), its
problems' answers compiled in batches into plugins and preloaded into their
image, its checks jailed as the bytecode ones are (fork_session.py), and
the checks of a context that cannot run natively handed to a bytecode
session, or refused with ``no_fallback``. Its backend, which compiles ahead
of a sweep what its sessions take over, is NativeHolLightBackend
(native.py).
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Callable, Sequence

from .. import contexts
from ....checks import sandbox
from ....checks.context_proofs import ContextProofs
from ....corpus import Problem
from ....errors import ProverError
from .fork_server import ImageFailed, ImageProcess, PipePair
from ..native.native_compile import Compiled, NotNative, Scope
from .native_contexts import SessionCompiler, announced, compile_node, preloaded, refused_natively
from .fork_session import ForkSession
from .verdict_record import machine_fault, not_run
from ..costs.map_modes import BYTECODE_MODE, NATIVE_MODE
from ....prover import COMPILE_KEY, CheckLimits, CheckResult, ProverSession
from ....verdicts import Outcome, Verdict

MODE = NATIVE_MODE
FALLBACK_MODE = BYTECODE_MODE
# Native OCaml turns a stack overflow into Stack_overflow at the stack's
# rlimit. The bytecode toplevel stops at 16M words (128 MB, system.ml); a
# native frame is no bigger, so 1 GiB keeps every deep-but-finite proof the
# bytecode mode accepts while a runaway recursion still ends as ERROR.
STACK_BYTES = 1 << 30


class NativeSession(ForkSession):
    def __init__(self, backend, workdir: Path,
                 bytecode: Callable[[], ProverSession] | None = None):
        """``backend``: the NativeHolLightBackend (native.py) that starts it.
        ``bytecode``: gives the bytecode session that fallbacks share with
        the caller (auto mode); by default the session starts its own."""
        super().__init__(backend, workdir)
        self._shared_bytecode = bytecode
        extra = [backend.compiled_dir] if backend.compiled_dir is not None else []
        self.compiler = SessionCompiler(backend.build, backend.install, backend.context_root,
                                        workdir / "plugins", backend.context_proofs, extra=extra,
                                        log_dir=backend.log_dir)
        # Keyed by (problem, answer): the attempts of a problem (pass@k) are
        # Problems of one id, and their answers batch into one plugin.
        self._problems: dict[tuple[str, bytes | None], Problem] = {}
        self._scopes: dict[str, Scope] = {}
        self._not_native: dict[str, str] = {}       # cannot run natively: bytecode, with reason
        self._batch_locks: dict[str, threading.Lock] = {}
        self._compiled: dict[tuple[str, bytes], Compiled] = {}
        self._loaded: dict[int, set[Path]] = {}      # image pid -> batch plugins it has loaded
        self._plugin_loads: dict[int, threading.Lock] = {}  # image pid -> held while it loads one
        self._bytecode: ProverSession | None = None
        self._bytecode_lock = threading.Lock()
        # Checks never fork from the server itself: under bubblewrap it is
        # the first process killed when the runner dies, and checks it forked
        # would be orphaned. Blank contexts use a child image with nothing
        # loaded, which follows the runner through its own command pipe.
        self.blank_key = self.base_key + "-blank"
        self._nodes[self.blank_key] = contexts.ImageNode(self.blank_key, self.base_key, "", 1, ())
        self.compile_secs = 0.0
        self._boot()

    # -- images --------------------------------------------------------------

    def _boot(self) -> None:
        backend = self.backend
        scope, preload = preloaded(self.compiler, backend.preload)
        self._scopes[self.base_key] = self._scopes[self.blank_key] = scope
        pipes = PipePair.create(self.workdir / "fifo", "base")
        argv = sandbox.wrap(
            ["prlimit", f"--stack={STACK_BYTES}", "--", str(backend.build.server),
             *(["--trust"] if backend.context_proofs is ContextProofs.TRUST else []),
             str(pipes.cmd_path), str(pipes.rep_path), *map(str, preload)],
            backend.sandbox_kind, writable=self.workdir,
            readable=[backend.build.dir, *backend.build.include_dirs, backend.install.hol_dir,
                      backend.context_root, *self.compiler.extra],
            hidden=backend.sandbox_config.hidden, chdir=backend.context_root)
        self._start_base(argv, pipes, "the native HOL Light server")

    def prepare(self, problems: Sequence[Problem]) -> None:
        # What the backend compiled before this sweep (classify), taken over
        # here: an executor records the builds of a session it was handed
        # from its sweep's start on, and the compiles are that sweep's work.
        backend = self.backend
        if backend.compiled_dir is not None:
            self._scopes.update({k: s for k, s in backend.scopes.items()
                                 if all(p.exists() for p in s.plugins)})
        self._not_native.update(backend.refused)
        self.image_builds.extend(backend.take_compiles())
        setups = {p.problem_id: p.setup_path.read_text(encoding="utf-8", errors="replace")
                  for p in problems}
        tree = self.backend.tree
        if tree is None or not all(pid in tree.image_of for pid in setups):
            tree = contexts.build_context_tree(setups, self.backend.salt)
        # else the tree classify() compiled: its keys name what it compiled
        with self._lock:
            for key, node in tree.nodes.items():
                self._nodes.setdefault(key, node)
            self._image_of.update((pid, tree.image_of[pid]) for pid in setups)
            self._problems.update(((p.problem_id, p.answer), p) for p in problems)
        self._expect(p.problem_id for p in problems if p.answer is not None)
        fallback = [p for p in problems if self._not_native_reason(tree.image_of[p.problem_id])]
        if fallback and not self.backend.no_fallback:
            self._bytecode_session().prepare(fallback)

    def withdraw(self, problem: Problem) -> None:
        super().withdraw(problem)
        key = self._image_of.get(problem.problem_id)
        if key in self._not_native and self._bytecode_session_started() \
                and not self.backend.no_fallback:
            self._bytecode_session().withdraw(problem)   # prepare() handed it over

    def _bytecode_session_started(self) -> bool:
        return self._shared_bytecode is not None or self._bytecode is not None

    def _scope(self, key: str) -> Scope:
        """The compiled scope of an image, compiling its chain as needed;
        raises NotNative for a chain that cannot be compiled."""
        with self._lock:
            if key in self._not_native:
                raise NotNative(self._not_native[key])
            if key in self._scopes:
                return self._scopes[key]
            lock = self._build_locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._scopes:
                return self._scopes[key]
            node = self._nodes[key]
            try:
                parent = self._scope(node.parent)
                scope, secs = compile_node(self.compiler, node, parent,
                                           f"context: {contexts.context_name(node)}")
                self.compile_secs += secs
                # In prepare(), before any check: paid as the boot is (no parent).
                self._built(COMPILE_KEY + node.key, None, secs)
            except NotNative as exc:
                with self._lock:
                    self._not_native[key] = str(exc)
                raise
            with self._lock:
                self._scopes[key] = scope
            return scope

    def _not_native_reason(self, key: str) -> str | None:
        try:
            self._scope(key)
            return None
        except NotNative as exc:
            return str(exc)

    def _fork_image(self, parent: ImageProcess, node: contexts.ImageNode) -> ImageProcess:
        return self._fork_loading(parent, node, [str(p) for p in self._scopes[node.key].plugins])

    # -- answers -------------------------------------------------------------

    def _answer(self, problem: Problem, key: str, scope: Scope) -> Compiled:
        """The compiled answer of ``problem``, compiling its batch if needed:
        the not yet compiled answers of problems forking from the same image."""
        answer = problem.answer or b""
        with self._lock:
            lock = self._batch_locks.setdefault(key, threading.Lock())
        with lock:
            if (key, answer) in self._compiled:
                return self._compiled[(key, answer)]
            pending = {answer}
            for other in self._problems.values():
                if len(pending) >= self.backend.batch_size:
                    break
                if (other.answer is not None and other.problem_id in self._image_of
                        and self._check_image(other.problem_id) == key
                        and (key, other.answer) not in self._compiled):
                    pending.add(other.answer)
            texts = {f"k{i}": text for i, text in enumerate(sorted(pending))}
            done, secs = announced(f"{COMPILE_KEY}answers:{key}",
                                   f"{len(texts)} answers in {contexts.context_name(self._nodes[key])}",
                                   lambda: self.compiler.compile_answers(texts, scope.opens))
            self.compile_secs += secs
            # Inside the wait of the check that needed it, as an image load.
            self._built(f"{COMPILE_KEY}answers:{key}", key, secs)
            for name, text in texts.items():
                self._compiled[(key, text)] = done[name]
            found = self._compiled[(key, answer)]
            # The front end failed on its own files: compiled again when retried.
            for name, text in texts.items():
                if done[name].refusal is not None and machine_fault(done[name].refusal):
                    del self._compiled[(key, text)]
            return found

    # -- checks --------------------------------------------------------------

    def _check(self, problem: Problem, limits: CheckLimits) -> CheckResult:
        key = self._image_of[problem.problem_id]
        reason = self._not_native_reason(key)
        if reason is not None and self.backend.no_fallback:
            return not_run(Verdict.ERROR, refused_natively(reason), key, MODE)
        if reason is not None:
            return self._check_in_bytecode(problem, limits, reason)
        key = self._check_image(problem.problem_id)
        scope = self._scopes[key]
        try:
            image = self._acquire(key)
        except ImageFailed as failed:
            return not_run(Verdict.ERROR, f"setup: {failed.reason}", key, MODE)
        try:
            compiled = self._answer(problem, key, scope)
            if compiled.refusal is not None:
                refused = not_run(Verdict.ERROR, compiled.refusal, key, MODE)
                # The front end could not read its files: the machine's fault.
                return dataclasses.replace(refused, interrupted=machine_fault(compiled.refusal))
            return self._run_check(image, problem, limits, compiled, self._preload(image, compiled))
        except ProverError as exc:
            # Its image died under it: rebuilt, and the check run again (as in bytecode).
            if image.alive():
                raise
            return dataclasses.replace(self._image_lost(image, exc), mode=MODE)
        finally:
            self._release(key)

    def _preload(self, image: ImageProcess, compiled: Compiled) -> str:
        """Load the answer's batch plugin into its image once, so that each
        check forked from it skips Dynlink; "-" tells the check it is there."""
        assert compiled.plugin is not None
        with self._lock:
            loaded = self._loaded.setdefault(image.pid, set())
            loading = self._plugin_loads.setdefault(image.pid, threading.Lock())
        # One load at a time per image: Dynlink refuses a module already
        # loaded, so two workers loading one batch into one image at once
        # left the second's check loading it again, and failing.
        with loading:
            if compiled.plugin in loaded:
                return "-"
            reply = image.request("LOAD", str(compiled.plugin))
            if reply != "LOADED":
                return str(compiled.plugin)      # the check loads it and reports what fails
            loaded.add(compiled.plugin)
        return "-"

    def _check_image(self, problem_id: str) -> str:
        """The image a problem's checks fork from: its context's, or the
        blank child image for a blank context."""
        key = self._image_of[problem_id]
        return self.blank_key if key == self.base_key else key

    def _bytecode_session(self) -> ProverSession:
        if self._shared_bytecode is not None:
            return self._shared_bytecode()
        with self._bytecode_lock:
            if self._bytecode is None:
                self._bytecode = self.backend.fallback.start(self.workdir / "bytecode")
            return self._bytecode

    def _check_in_bytecode(self, problem: Problem, limits: CheckLimits, why: str) -> CheckResult:
        session = self._bytecode_session()
        if problem.problem_id not in session.problems():
            session.prepare([problem])     # else prepare() handed it over, counted once
        result = session.check(problem, limits)
        # Said in the reason too, for whoever reads the row: rows have no
        # column of their own for it yet. Nothing reads it back.
        outcome = Outcome(result.outcome.verdict, f"{result.outcome.reason} [ran in bytecode: {why}]")
        return dataclasses.replace(result, outcome=outcome, mode=FALLBACK_MODE, fallback=why)

    def _run_check(self, image: ImageProcess, problem: Problem, limits: CheckLimits,
                   compiled: Compiled, plugin: str) -> CheckResult:
        """One check in ``image``, jailed as in bytecode mode: its answer is
        the compiled ``compiled.entry``, in ``plugin`` ("-": already loaded)."""
        result = self._jailed_check(image, problem, limits,
                                    lambda path: [plugin, str(compiled.entry)])
        return dataclasses.replace(result, mode=MODE)

    def close(self) -> None:
        super().close()
        with self._bytecode_lock:
            if self._bytecode is not None:
                self._bytecode.close()
                self._bytecode = None
