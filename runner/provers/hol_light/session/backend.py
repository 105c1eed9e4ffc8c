"""HOL Light backend: a tree of loaded images, and checks forked from them.

Loading HOL Light takes about 70-90 s of CPU in Debian's bytecode toplevel,
and a check must not pay that. The session loads HOL Light and the driver
once (the base image), then builds one image per context by forking its
parent image and loading only the missing part of setup.ml, so problems
whose setups share a prefix load that prefix once. Each check is a child
forked from its image: nothing it does (new_axiom, definitions, changed
references) reaches the image or the next check.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Sequence


from .. import contexts
from ....checks import sandbox
from ....checks.context_proofs import ContextProofs
from ....corpus import Problem
from ....errors import InputError, ProverError
from ....checks.guard import admit
from .fork_server import ImageFailed, ImageProcess, PipePair
from ..install import HolLightInstall
from ..runtime import DEFAULT as DEFAULT_RUNTIME, Runtime
from ..costs.map_modes import BYTECODE_MODE, MapModes, converted_warning
from ..costs.plans import ALLOWANCES, image_plan
from .fork_session import ContextFailed, ForkSession
from .verdict_record import not_run
from ..load_graph import DROPPED_LOADS, LoadGraph
from ....prover import BackendInfo, CheckLimits, CheckResult, ImagePlan, Prover, ProverBackend
from ....checks.sandbox import SandboxConfig
from ....verdicts import Verdict

DRIVER = Path(__file__).parents[1] / "ml" / "hol_light_driver.ml"
# The modules the driver uses, in load order; the native server compiles
# the same files in (native_build.py).
DRIVER_MODULES = tuple(DRIVER.with_name(name) for name in ("hol_text.ml", "hol_screen.ml",
                                                           "hol_trust.ml", "hol_check.ml"))
MODE = BYTECODE_MODE
# Resident size of Debian's bytecode HOL Light with hol.ml loaded, measured
# here at 358-400 MB (../shared/notes/hol-light.md). A check's memory counts
# its image's pages, so a limit below this stops every check at once.
MIN_IMAGE_BYTES = 350 * 2**20


def ocaml_string(text: str) -> str:
    """An OCaml string literal for a path we hand to the toplevel."""
    escaped = "".join(c if c.isprintable() and c not in '"\\' else f"\\{ord(c):03d}"
                      for c in text)
    return f'"{escaped}"'




def ocaml_list(items: Sequence[str]) -> str:
    return "[" + "; ".join(ocaml_string(item) for item in items) + "]"


def rebinding_phrases(choice: ContextProofs) -> list[str]:
    """The boot script's phrases that bind ``loads`` to one that skips
    DROPPED_LOADS and, under trust, ``prove`` to the switchable prove
    (hol_trust.ml), for every later phrase of the toplevel: contexts, the
    files they ``needs`` or ``loads``, answers. The driver binds both again
    after every top-level ``open`` or ``include`` of every file the toplevel
    reads (Proofbatch_driver.install_rebinding): a module-built HOL Light's
    bench setup begins ``open Hol_lib;; open Hol_loader;;``, which binds HOL
    Light's own again. The trust flag stays set in the images, and each check
    clears it before reading its answer. The toplevel resolves a name at the
    phrase that uses it, so a function a context defines keeps this prove;
    HOL Light's own functions (ARITH_RULE, define, ...) were typed before it
    and keep the kernel's."""
    trust = choice is not ContextProofs.REPLAY
    return [f"Proofbatch_driver.install_rebinding ~trust:{'true' if trust else 'false'} "
            f"~dropped:{ocaml_list(DROPPED_LOADS)};;\n",
            # A directive, not a function call: a phrase's own bindings are
            # the only ones the toplevel keeps from it.
            "#proofbatch_rebind;;\n",
            *(["Hol_trust.trusting := true;;\n"] if trust else [])]


class HolLightBackend(ProverBackend):
    allowances = ALLOWANCES

    def __init__(self, install: HolLightInstall, context_root: Path, *,
                 boot_timeout_s: float = 1800.0, image_timeout_s: float = 10800.0,
                 max_images: int = 8, grace_s: float = 2.0,
                 sandbox_config: SandboxConfig = SandboxConfig(), log_dir: Path | None = None,
                 image_retries: int = 2, context_proofs: ContextProofs = ContextProofs.REPLAY,
                 runtime: Runtime = DEFAULT_RUNTIME):
        """``log_dir``: where each check's own output (its first
        ``sandbox_config.log_keep_bytes``) is kept as ``<problem-id>.log``;
        not kept when None. ``image_retries``: how often a check is retried
        on a rebuilt image when its image process dies under it.
        ``context_proofs``: whether contexts replay their proofs or trust
        them (runner/checks/context_proofs.py, hol_trust.ml). ``runtime``:
        the OCaml runtime setting its image processes start with (runtime.py)."""
        self.install, self.context_root = install, Path(context_root).resolve()
        self.boot_timeout_s, self.image_timeout_s = boot_timeout_s, image_timeout_s
        self.max_images, self.grace_s = max_images, grace_s
        self.sandbox_config, self.log_dir, self.image_retries = sandbox_config, log_dir, image_retries
        self.sandbox_kind = sandbox.resolve_kind(sandbox_config.kind)
        self.context_proofs = ContextProofs(context_proofs)
        self.runtime = runtime
        driver = hashlib.sha256(b"".join(
            hashlib.sha256(path.name.encode() + b"\0" + path.read_bytes()).digest()
            for path in (*DRIVER_MODULES, DRIVER))).hexdigest()[:12]
        # Image keys name what was loaded: the build, where needs/loadt resolve,
        # the driver, whether context proofs were trusted, and (added per
        # image) the context text. Replay keeps the keys it always had.
        trust = "" if self.context_proofs is ContextProofs.REPLAY else f"|proofs-{self.context_proofs}"
        self.salt = f"{install.build}|{self.context_root}|driver-{driver}{trust}"
        self.info = BackendInfo(prover=Prover.HOL_LIGHT, build=install.build, mode=MODE,
                                sandbox=self.sandbox_kind, context_proofs=str(self.context_proofs),
                                runtime=runtime.key)
        self._maps, self._converted = MapModes(None), []

    def image_plan(self, problems: Sequence[Problem], prove_secs) -> ImagePlan:
        return image_plan(problems, prove_secs, self.salt, self.context_proofs, mode=BYTECODE_MODE,
                          context_root=self.context_root, hol_dir=self.install.hol_dir)

    def use_map(self, loaded) -> None:
        self._maps = MapModes(loaded)

    def problem_inputs(self, problems: Sequence[Problem]):
        """Setup, query and every file the setup loads (context_inputs.py)."""
        from .context_inputs import context_inputs

        return context_inputs(problems, self.context_root, self.install.hol_dir)

    def limits_for(self, problem: Problem, limits: CheckLimits) -> CheckLimits:
        """A native map's limits, converted for bytecode (runner/provers/hol_light/costs/map_modes.py)."""
        adjusted = self._maps.convert(limits, MODE)
        if adjusted is not limits:
            self._converted.append(problem.problem_id)
        return dataclasses.replace(adjusted, runtime=self.runtime.key)

    def expected_in_mode(self, problems: Sequence[Problem], prove_secs) -> dict[str, float]:
        """A native map's expected times moved to bytecode (map_modes.RATIO_CENTRAL)."""
        return {pid: self._maps.expected_in(secs, MODE) for pid, secs in prove_secs.items()}

    def warnings(self) -> tuple[str, ...]:
        return converted_warning(self._maps, len(self._converted))

    def check_mem_limit(self, mem_bytes: int, where: str = "--mem-limit") -> None:
        """Refuse a per-check memory limit that no check can stay under."""
        if mem_bytes < MIN_IMAGE_BYTES:
            raise InputError(where, f"{mem_bytes >> 20} MiB is below the size of a loaded HOL Light "
                             f"image (at least {MIN_IMAGE_BYTES >> 20} MiB), which every check "
                             "counts, so every check would be MEMOUT",
                             "give 1G or more (the default is 8G)")

    def start(self, workdir: Path) -> "HolLightSession":
        return HolLightSession(self, Path(workdir))


class HolLightSession(ForkSession):
    def __init__(self, backend: HolLightBackend, workdir: Path):
        super().__init__(backend, workdir)
        self._loaded_files: dict[Path, str] = {}    # files contexts load -> sha256 when last prepared
        self._boot()

    # -- images --------------------------------------------------------------

    def _boot(self) -> None:
        install, backend = self.backend.install, self.backend
        pipes = PipePair.create(self.workdir / "fifo", "base")
        # The driver is plain OCaml: HOL Light's lexer, which reads all-caps
        # identifiers as values and backquotes as quotations, is off while it
        # loads and on again for the contexts and answers it reads.
        script = "".join([
            '#load "unix.cma";;\n',
            "unset_jrh_lexer;;\n",
            *(f"#mod_use {ocaml_string(str(path))};;\n" for path in DRIVER_MODULES),
            f"#use {ocaml_string(str(DRIVER))};;\n",
            *rebinding_phrases(backend.context_proofs),
            "set_jrh_lexer;;\n",
            f"load_path := {ocaml_string(str(backend.context_root))} :: !load_path;;\n",
            # Loads of contexts: refused outside these, and a failing one fails the context.
            f"Proofbatch_driver.confine_loads {ocaml_list([str(backend.context_root), str(install.hol_dir)])};;\n",
            f"Proofbatch_driver.serve {ocaml_string(str(pipes.cmd_path))} "
            f"{ocaml_string(str(pipes.rep_path))};;\n"])
        argv = sandbox.wrap(install.argv, backend.sandbox_kind, writable=self.workdir,
                            readable=[install.hol_dir, backend.context_root, DRIVER.parent],
                            hidden=backend.sandbox_config.hidden, chdir=backend.context_root)
        self._start_base(argv, pipes, "HOL Light", script.encode())

    def prepare(self, problems: Sequence[Problem]) -> None:
        self._reload_changed_files(problems)
        setups = {p.problem_id: p.setup_path.read_text(encoding="utf-8", errors="replace")
                  for p in problems}
        tree = contexts.build_context_tree(setups, self.backend.salt)
        # Checks never fork from the base image itself: in the sandbox, bwrap
        # kills the base the moment the runner dies, before it can stop its
        # checks, while every other image outlives it long enough to read
        # end-of-file on its command pipe and stop its own. Problems with an
        # empty context fork from an image that loaded nothing on top.
        bare = f"{self.base_key}-checks"
        image_of = {pid: bare if key == self.base_key else key for pid, key in tree.image_of.items()}
        with self._lock:
            for key, node in tree.nodes.items():
                self._nodes.setdefault(key, node)
            self._nodes.setdefault(bare, contexts.ImageNode(bare, self.base_key, "", 1, ()))
            self._image_of.update(image_of)
        # Checks of unanswered problems never run (runner/checks/worker.py).
        self._expect(p.problem_id for p in problems if p.answer is not None)

    def problems(self) -> set[str]:
        return set(self._image_of)

    def _reload_changed_files(self, problems: Sequence[Problem]) -> None:
        """An image is keyed by its context's text, not by the files that
        text loads or the object files it reads (context_inputs.py): when
        one of those changed since this session last looked (a session
        lives across runs in `proofbatch serve`, or in tests), its images
        loaded the old file. Then every idle context image goes,
        to be built again as needed, and no context is held as failed."""
        from ....checks.problem_hash import FileHashes
        from .context_inputs import context_inputs

        hashes = FileHashes()
        now = {path: hashes(path) for inputs in context_inputs(
            problems, self.backend.context_root, self.backend.install.hol_dir).values()
            for name, path in inputs if name.startswith(("load:", "read:"))}
        changed = [p for p, digest in now.items() if self._loaded_files.get(p, digest) != digest]
        self._loaded_files.update(now)
        if not changed:
            return
        with self._lock:
            victims = [self._images.pop(k) for k in list(self._images)
                       if k != self.base_key and not self._in_use.get(k)]
            self._failed.clear()
        for image in victims:
            image.close()

    def _fork_image(self, parent: ImageProcess, node: contexts.ImageNode) -> ImageProcess:
        segment = self.workdir / "images" / f"{node.key}.ml"
        segment.write_text(node.segment, encoding="utf-8")
        try:
            return self._fork_loading(parent, node, [str(segment)])
        except ContextFailed as failed:
            missing = self._missing_load(segment)
            if missing is None:
                raise
            raise ContextFailed(failed.key, missing, failed.log, failed.last_output) from None

    def _missing_load(self, segment: Path) -> str | None:
        """The first load of ``segment`` (or of what it loads) that finds no
        file, said with where it was looked for; None when every one finds
        one. HOL Light's own loader says only `Exception: Not_found.`"""
        graph = LoadGraph(self.backend.context_root, self.backend.install.hol_dir)
        missing = graph.missing([segment])
        if not missing:
            return None
        first = missing[0]
        where = " and ".join(str(d) for d in graph.search(first.kind))
        return (f"{graph.describe(first, 'setup.ml')} finds no file (looked in {where}); "
                "fix the path, or pass the --context-root it is relative to")

    # -- checks --------------------------------------------------------------

    def _check(self, problem: Problem, limits: CheckLimits) -> CheckResult:
        key = self._image_of[problem.problem_id]
        cfg = self.backend.sandbox_config
        if problem.answer is not None and len(problem.answer) > cfg.answer_max_bytes:
            return not_run(Verdict.ERROR, f"answer is {len(problem.answer)} bytes, over the "
                           f"{cfg.answer_max_bytes} byte limit; not checked", key)
        for attempt in range(self.backend.image_retries + 1):
            try:
                image = self._acquire(key)
            except ImageFailed as failed:
                return not_run(Verdict.ERROR, f"setup: {failed.reason}", key)
            try:
                refusal = admit(limits.expected_mem_bytes, lambda: self._running)
                if refusal:
                    return not_run(Verdict.ERROR, refusal, key)
                return self._run_check(image, problem, limits)
            except ProverError as exc:
                if image.alive():
                    raise
                if not getattr(exc, "check_started", True) and attempt < self.backend.image_retries:
                    # It died while idle: nothing of this check ran; it runs
                    # on the image rebuilt from its parent.
                    self._forget(image)
                    continue
                # It died under the check (a kill, the kernel's OOM killer): a
                # fault of the machine. The worker runs the check again on the
                # rebuilt image and counts the retry; a verdict seen without
                # its exit status is not trusted.
                return self._image_lost(image, exc)
            finally:
                self._release(key)
        raise AssertionError("unreachable")

    def _run_check(self, image: ImageProcess, problem: Problem, limits: CheckLimits) -> CheckResult:
        """One check in ``image``: the answer's text goes beside its jail."""
        def answer_fields(path: Path) -> list[str]:
            path.write_bytes(problem.answer or b"")
            return [str(path)]
        return self._jailed_check(image, problem, limits, answer_fields, self.backend.log_dir)
