"""Native HOL Light backend: a natively compiled server, contexts and answers
compiled into plugins, checks forked from loaded images.

The server (runner/provers/hol_light/native/native_build.py) starts with HOL Light already loaded, in
about a fifth of the bytecode toplevel's time, and runs proofs 2.5-5 times
faster. It speaks the bytecode driver's protocol, so images, the outside
guards and the verdict channel are the bytecode backend's own
(fork_session.py, and hol_check.ml inside the prover). What differs is that
code is compiled before it is loaded: each context segment into a module that its
image Dynlink-loads, and answers in batches into plugins that each check
loads. A context that cannot be compiled (a toplevel directive, a computed
load path, a compile error) runs in a bytecode session instead, and its
checks' results say why (``CheckResult.fallback``, and their reason); with
``no_fallback`` they are ERROR instead.

A sweep compiles its contexts before it gives its checks their limits
(``NativeHolLightBackend.classify``: a check's limit must belong to the mode
it runs in), and its sessions take over what that compiled (the context
tree, the scopes, the refusals) instead of compiling again. Every compile is
announced (events ``compile``/``compiled``) and recorded among the
session's image builds, keyed ``native-compile:...`` (runner/reporting/report.py
counts them apart from image loads).

This module holds the backend; its sessions are native_session.py's.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Sequence

from .. import contexts
from ....checks import sandbox
from ....checks.context_proofs import ContextProofs
from ....corpus import Problem
from .backend import HolLightBackend
from ..install import HolLightInstall
from ..runtime import DEFAULT as DEFAULT_RUNTIME, Runtime
from ..costs.load_model import ANSWER_BATCH
from ..native.native_compile import NativeCompiler, Scope
from .native_contexts import compile_tree, preloaded
from .native_session import MODE, NativeSession
from ..native.native_build import NativeBuild
from ..costs.plans import ALLOWANCES, image_plan
from ....prover import BackendInfo, ImageBuild, ImagePlan, Prover, ProverBackend
from ....checks.sandbox import SandboxConfig


class NativeHolLightBackend(ProverBackend):
    def __init__(self, install: HolLightInstall, build: NativeBuild, context_root: Path, *,
                 batch_size: int = ANSWER_BATCH, preload: Sequence[Path] = (), boot_timeout_s: float = 600.0,
                 image_timeout_s: float = 10800.0, max_images: int = 8, grace_s: float = 2.0,
                 sandbox_config: SandboxConfig = SandboxConfig(), log_dir: Path | None = None,
                 context_proofs: ContextProofs = ContextProofs.REPLAY, no_fallback: bool = False,
                 runtime: Runtime = DEFAULT_RUNTIME):
        """``batch_size``: answers compiled into one plugin (1 = unbatched).
        ``preload``: library files (e.g. Library/words.ml) the server loads at
        start, so that images needing them only open them. ``sandbox_config``:
        as for the bytecode backend (runner/checks/sandbox.py); the server tree runs
        in the same box and each check in the same jail. ``log_dir``: where
        the bytecode fallback keeps its per-check logs, a context image
        that dies its log, and a context that does not compile its compiler
        output and source (``native-compile/``; native checks keep none).
        ``context_proofs``: replay or trust a context's proofs
        (runner/checks/context_proofs.py); the fallback uses the same.
        ``no_fallback``: a check whose context cannot run natively is ERROR
        with the reason, instead of running in bytecode."""
        self.install, self.build = install, build
        self.context_proofs = ContextProofs(context_proofs)
        self.runtime = runtime          # the OCaml runtime setting (runtime.py), the fallback's too
        self.context_root = Path(context_root).resolve()
        self.batch_size, self.preload = max(1, batch_size), tuple(Path(p) for p in preload)
        self.boot_timeout_s, self.image_timeout_s = boot_timeout_s, image_timeout_s
        self.max_images, self.grace_s = max_images, grace_s
        self.sandbox_config = sandbox_config
        self.sandbox_kind = sandbox.resolve_kind(sandbox_config.kind)
        # A context image that dies keeps its log here (fork_session.keep_image_log).
        self.log_dir = log_dir
        trust = "" if self.context_proofs is ContextProofs.REPLAY else f"|proofs-{self.context_proofs}"
        self.salt = f"{install.build}|{self.context_root}|native-{build.key}{trust}"
        self.info = BackendInfo(prover=Prover.HOL_LIGHT, build=install.build, mode=MODE,
                                sandbox=self.sandbox_kind, context_proofs=str(self.context_proofs),
                                runtime=runtime.key)
        self.fallback = HolLightBackend(install, context_root, grace_s=grace_s, max_images=max_images,
                                        sandbox_config=sandbox_config, log_dir=log_dir,
                                        context_proofs=self.context_proofs, runtime=runtime)
        self.no_fallback = no_fallback
        # What classify() compiled, for this process's sessions to take over:
        # the context tree, the scopes of the images (their plugins under
        # compiled_dir), the images that cannot run natively (key -> why),
        # the problems whose context is one of those (id -> why), the compiles.
        self.tree: contexts.ContextTree | None = None
        self.compiled_dir: Path | None = None
        self.scopes: dict[str, Scope] = {}
        self.refused: dict[str, str] = {}
        self.not_native: dict[str, str] = {}
        self.weak_settled: list[tuple[str, tuple[str, ...]]] = []
        self.weak_cuts = 0
        self._compiles: list[ImageBuild] = []

    def __getstate__(self):
        # Another host (a Slurm task, a Dask worker) cannot read this host's
        # compiled_dir: its sessions compile again, in the same tree.
        state = dict(self.__dict__)
        state.update(compiled_dir=None, scopes={}, _compiles=[])
        return state

    def classify(self, problems: Sequence[Problem]) -> dict[str, str]:
        """Compile the contexts of ``problems`` (announced, and recorded for
        the first session to report), before the sweep gives its checks
        their limits; returns and keeps the problems whose context cannot
        run natively, with the reason."""
        setups = {p.problem_id: p.setup_path.read_text(encoding="utf-8", errors="replace")
                  for p in problems}
        tree = contexts.build_context_tree(setups, self.salt)
        if self.compiled_dir is None:
            self.compiled_dir = Path(tempfile.mkdtemp(prefix="proofbatch-native-contexts-"))
            weakref.finalize(self, shutil.rmtree, str(self.compiled_dir), True)
        compiler = NativeCompiler(self.build, self.install, self.context_root, self.compiled_dir,
                                  self.context_proofs, log_dir=self.log_dir)
        base, _ = preloaded(compiler, self.preload)
        scopes, compiles = compile_tree(compiler, tree, base, self.refused)
        self._compiles += compiles
        self.tree = tree
        # Units that left weak values for the next to bind again, and cuts
        # (native_weak.py): what benchmarks/native/native_tree.py reports.
        self.weak_settled, self.weak_cuts = list(compiler.settled), compiler.cuts
        self.scopes.update(scopes)
        self.not_native = {pid: self.refused[key] for pid, key in tree.image_of.items()
                           if key in self.refused}
        return self.not_native

    def problem_inputs(self, problems: Sequence[Problem]):
        """Setup, query and every file the setup loads (context_inputs.py)."""
        from .context_inputs import context_inputs

        return context_inputs(problems, self.context_root, self.install.hol_dir)

    def take_compiles(self) -> list[ImageBuild]:
        """What classify() compiled, once: the session that reports it."""
        taken, self._compiles = self._compiles, []
        return taken

    allowances = ALLOWANCES

    def image_plan(self, problems: Sequence[Problem], prove_secs) -> ImagePlan:
        return image_plan(problems, prove_secs, self.salt, self.context_proofs, mode="native",
                          context_root=self.context_root, hol_dir=self.install.hol_dir)

    def start(self, workdir: Path) -> "NativeSession":
        return NativeSession(self, Path(workdir))
