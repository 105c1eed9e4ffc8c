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
import itertools
import os
import re
import secrets
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Sequence

import psutil

from . import contexts, sandbox
from .corpus import Problem
from .errors import InputError, ProverError
from .fork_server import ImageFailed, ImageProcess, PipePair
from .guard import GuardLimits, Observation, kill_tree, watch
from .hol_light_install import HolLightInstall
from .image_tree import ImageTree
from .prover import (BackendInfo, CheckLimits, CheckResult, ImageBuild, ProverBackend,
                     ProverSession)
from .sandbox import SandboxConfig
from .shards import publish
from .verdicts import Outcome, Verdict

DRIVER = Path(__file__).with_name("hol_light_driver.ml")
MODE = "bytecode-fork"
RECORD = re.compile(r"PBV1\t(?P<nonce>[0-9a-f]+)\t(?P<verdict>[A-Z]+)\t(?P<secs>[0-9.]+)\t"
                    r"(?P<peak_kb>\d+)\t(?P<reason>[^\n]*)\n\Z")
# A lone check may not start until the host has the memory it is expected to
# need; if nothing else is running to free some, waiting longer is pointless.
MEMORY_WAIT_ALONE_S = 30.0
# Resident size of Debian's bytecode HOL Light with hol.ml loaded, measured
# here at 358-400 MB (../shared/notes/hol-light.md). A check's memory counts
# its image's pages, so a limit below this stops every check at once.
MIN_IMAGE_BYTES = 350 * 2**20


def ocaml_string(text: str) -> str:
    """An OCaml string literal for a path we hand to the toplevel."""
    escaped = "".join(c if c.isprintable() and c not in '"\\' else f"\\{ord(c):03d}"
                      for c in text)
    return f'"{escaped}"'


class HolLightBackend(ProverBackend):
    def __init__(self, install: HolLightInstall, context_root: Path, *,
                 boot_timeout_s: float = 1800.0, image_timeout_s: float = 10800.0,
                 max_images: int = 8, grace_s: float = 2.0,
                 sandbox_config: SandboxConfig = SandboxConfig(), log_dir: Path | None = None,
                 image_retries: int = 2):
        """``log_dir``: where each check's own output (its first
        ``sandbox_config.log_keep_bytes``) is kept as ``<problem-id>.log``;
        not kept when None. ``image_retries``: how often a check is retried
        on a rebuilt image when its image process dies under it."""
        self.install, self.context_root = install, Path(context_root).resolve()
        self.boot_timeout_s, self.image_timeout_s = boot_timeout_s, image_timeout_s
        self.max_images, self.grace_s = max_images, grace_s
        self.sandbox_config, self.log_dir, self.image_retries = sandbox_config, log_dir, image_retries
        self.sandbox_kind = sandbox.resolve_kind(sandbox_config.kind)
        driver = hashlib.sha256(DRIVER.read_bytes()).hexdigest()[:12]
        # Image keys name what was loaded: the build, where needs/loadt resolve,
        # the driver, and (added per image) the context text.
        self.salt = f"{install.build}|{self.context_root}|driver-{driver}"
        self.info = BackendInfo(prover="hol-light", build=install.build, mode=MODE,
                                sandbox=self.sandbox_kind)

    def check_mem_limit(self, mem_bytes: int, where: str = "--mem-limit") -> None:
        """Refuse a per-check memory limit that no check can stay under."""
        if mem_bytes < MIN_IMAGE_BYTES:
            raise InputError(where, f"{mem_bytes >> 20} MiB is below the size of a loaded HOL Light "
                             f"image (at least {MIN_IMAGE_BYTES >> 20} MiB), which every check "
                             "counts, so every check would be MEMOUT",
                             "give 1G or more (the default is 8G)")

    def start(self, workdir: Path) -> "HolLightSession":
        return HolLightSession(self, Path(workdir))


class HolLightSession(ImageTree, ProverSession):
    def __init__(self, backend: HolLightBackend, workdir: Path):
        self.backend, self.info = backend, backend.info
        self.workdir = workdir
        for sub in ("fifo", "images", "checks"):
            (workdir / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(workdir / "fifo", 0o700)
        self._lock = threading.Lock()
        self._nodes: dict[str, contexts.ImageNode] = {}
        self._image_of: dict[str, str] = {}
        self._images: dict[str, ImageProcess] = {}
        self._failed: dict[str, str] = {}
        self._build_locks: dict[str, threading.Lock] = {}
        self._in_use: dict[str, int] = {}
        self._running = 0
        self._counter = itertools.count()
        self._base_proc: subprocess.Popen | None = None
        self.base_key = contexts.image_key("", backend.salt)
        self.image_build_secs: dict[str, float] = {}     # latest build of each key
        self.image_builds: list[ImageBuild] = []
        self._boot()

    # -- images --------------------------------------------------------------

    def _boot(self) -> None:
        install = self.backend.install
        pipes = PipePair.create(self.workdir / "fifo", "base")
        log = self.workdir / "images" / "base.log"
        script = "".join([
            f"#use {ocaml_string(str(DRIVER))};;\n",
            f"load_path := {ocaml_string(str(self.backend.context_root))} :: !load_path;;\n",
            f"Proofbatch_driver.serve {ocaml_string(str(pipes.cmd_path))} "
            f"{ocaml_string(str(pipes.rep_path))};;\n"])
        started = time.monotonic()
        backend = self.backend
        argv = sandbox.wrap(install.argv, backend.sandbox_kind, writable=self.workdir,
                            readable=[install.hol_dir, backend.context_root, DRIVER.parent],
                            hidden=backend.sandbox_config.hidden, chdir=backend.context_root)
        with open(log, "wb") as log_file:
            # A session of its own, so that a Ctrl-C aimed at the runner is not
            # also delivered to the provers; they follow the runner through
            # their command pipes instead.
            self._base_proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT,
                cwd=self.backend.context_root, start_new_session=True)
        assert self._base_proc.stdin is not None
        image = ImageProcess(self.base_key, self._base_proc.pid, pipes, log)
        try:
            try:
                self._base_proc.stdin.write(script.encode())
                self._base_proc.stdin.close()
            except BrokenPipeError:
                raise ImageFailed(self.base_key, "it exited before reading its input") from None
            image.attach(self.backend.boot_timeout_s)
            sandbox.limit_tree(image.pid, self.backend.sandbox_config, self.backend.sandbox_kind)
        except ImageFailed as failed:
            self.close()
            raise ProverError(f"HOL Light did not start ({failed.reason}): "
                              f"{_log_reason(log) or 'see ' + str(log)}") from None
        self._images[self.base_key] = image
        self._built(self.base_key, None, time.monotonic() - started)

    def prepare(self, problems: Sequence[Problem]) -> None:
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

    def image_key(self, problem: Problem) -> str:
        return self._image_of[problem.problem_id]

    def problems(self) -> set[str]:
        return set(self._image_of)

    def image_chain(self, problem_id: str) -> list[contexts.ImageNode]:
        """The images a problem's check depends on, from the base down."""
        chain, key = [], self._image_of[problem_id]
        while key is not None:
            chain.append(self._nodes[key])
            key = chain[-1].parent
        return chain[::-1]

    def _fork_image(self, parent: ImageProcess, node: contexts.ImageNode) -> ImageProcess:
        images = self.workdir / "images"
        segment, log = images / f"{node.key}.ml", images / f"{node.key}.log"
        segment.write_text(node.segment, encoding="utf-8")
        pipes = PipePair.create(self.workdir / "fifo", node.key)
        started = time.monotonic()
        reply = parent.request("FORK", str(pipes.cmd_path), str(pipes.rep_path), str(log),
                               str(segment))
        image = ImageProcess(node.key, int(reply.split()[1]), pipes, log)
        try:
            image.attach(self.backend.image_timeout_s)
        except ImageFailed:
            image.close()
            raise ImageFailed(node.key, _log_reason(log) or "the context did not load") from None
        self._built(node.key, node.parent, time.monotonic() - started)
        return image

    # -- checks --------------------------------------------------------------

    def check(self, problem: Problem, limits: CheckLimits) -> CheckResult:
        key = self._image_of[problem.problem_id]
        cfg = self.backend.sandbox_config
        if problem.answer is not None and len(problem.answer) > cfg.answer_max_bytes:
            return _not_run(Verdict.ERROR, f"answer is {len(problem.answer)} bytes, over the "
                            f"{cfg.answer_max_bytes} byte limit; not checked", key)
        for attempt in range(self.backend.image_retries + 1):
            try:
                image = self._acquire(key)
            except ImageFailed as failed:
                return _not_run(Verdict.ERROR, f"setup: {failed.reason}", key)
            try:
                refusal = self._wait_for_memory(limits)
                if refusal:
                    return _not_run(Verdict.ERROR, refusal, key)
                return self._run_check(image, problem, limits)
            except ProverError:
                # An image process that died (a crash, the kernel's OOM killer)
                # is rebuilt from its parent and the check runs again; a
                # verdict seen without its exit status is not trusted.
                if image.alive() or attempt == self.backend.image_retries:
                    raise
                self._forget(image)
            finally:
                self._release(key)
        raise AssertionError("unreachable")

    def _forget(self, image: ImageProcess) -> None:
        """Drop a dead image (and any dead ancestors) so _acquire rebuilds it."""
        with self._lock:
            dead = [k for k, img in self._images.items() if not img.alive()]
            for k in dead:
                self._images.pop(k).close()
            if self.base_key in dead:
                raise ProverError("the base HOL Light image died; start the sweep again to resume")

    def _wait_for_memory(self, limits: CheckLimits) -> str | None:
        waited_alone = 0.0
        while (available := psutil.virtual_memory().available) < limits.expected_mem_bytes:
            if self._running == 0:
                waited_alone += 0.2
                if waited_alone >= MEMORY_WAIT_ALONE_S:
                    return (f"not started: expected to need {limits.expected_mem_bytes >> 20} MiB, "
                            f"the host has {available >> 20} MiB available")
            time.sleep(0.2)
        return None

    def _run_check(self, image: ImageProcess, problem: Problem, limits: CheckLimits) -> CheckResult:
        """One check in ``image``. Its scratch directory is its jail; the
        answer, query and log live beside it, out of the jail's sight."""
        n = next(self._counter)
        kind, cfg = self.backend.sandbox_kind, self.backend.sandbox_config
        checks = self.workdir / "checks"
        scratch = checks / str(n)
        answer, query, log = (checks / f"{n}.{ext}" for ext in ("answer", "query", "log"))
        # 0711: the image process keeps no capability to read other uids' files,
        # but must enter the directory it jails the check in.
        scratch.mkdir(mode=0o711)
        answer.write_bytes(problem.answer or b"")
        shutil.copyfile(problem.query_path, query)
        verdict_fifo = scratch / "verdict"
        os.mkfifo(verdict_fifo, 0o600)
        uid = "-"
        if sandbox.jails(kind):
            jail = sandbox.jail_uid()
            for path in (scratch, verdict_fifo):
                os.chown(path, jail, jail)
            # Writable by the jailed check (its owner) and by the image's
            # child before it enters the jail (root without CAP_DAC_OVERRIDE),
            # which reports an answer refused before it ran.
            os.chmod(verdict_fifo, 0o622)
            uid = str(jail)
        verdict_fd = os.open(verdict_fifo, os.O_RDONLY | os.O_NONBLOCK)
        nonce = secrets.token_hex(8)
        guard = GuardLimits(time_s=limits.time_s, mem_bytes=limits.mem_bytes,
                            grace_s=self.backend.grace_s)
        pid, obs = None, None
        with self._lock:
            self._running += 1
        try:
            started = time.monotonic()
            reply = image.request("CHECK", str(verdict_fifo), str(query), str(answer),
                                  repr(float(limits.time_s)), str(log), str(scratch), nonce, uid)
            pid = int(reply.split()[1])
            if kind != "none":
                sandbox.limit_check(psutil.Process(pid), cfg, limits.time_s + guard.grace_s)
            obs = watch(pid, verdict_fd, guard, started)
            status = image.request("REAP", str(pid)).split(maxsplit=2)[2]
        except (ProverError, psutil.NoSuchProcess) as exc:
            if pid is not None and obs is None:
                _kill_orphan(pid)
            raise exc if isinstance(exc, ProverError) else ProverError(str(exc))
        finally:
            with self._lock:
                self._running -= 1
            os.close(verdict_fd)
            self._keep_log(problem, log)
            for path in (answer, query, log):
                path.unlink(missing_ok=True)
            shutil.rmtree(scratch, ignore_errors=True)
        result = _interpret(obs, status, nonce, image.key)
        return dataclasses.replace(result, sandbox=kind)

    def _keep_log(self, problem: Problem, log: Path) -> None:
        """The check's own output, truncated to a bound: kept, never parsed."""
        if self.backend.log_dir is None or not log.exists():
            return
        keep = self.backend.sandbox_config.log_keep_bytes
        with open(log, "rb") as f:
            data = f.read(keep + 1)
        if len(data) > keep:
            data = data[:keep] + f"\n[proofbatch: output truncated at {keep} bytes]\n".encode()
        target = Path(self.backend.log_dir) / f"{problem.problem_id}.log"
        target.parent.mkdir(parents=True, exist_ok=True)
        publish(target, lambda tmp: tmp.write_bytes(data))

    def close(self) -> None:
        with self._lock:
            images = list(self._images.values())
            self._images.clear()
        for image in images:
            image.close()
        if self._base_proc is not None:
            try:
                self._base_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._base_proc.kill()
                self._base_proc.wait()
            self._base_proc = None


def _kill_orphan(pid: int) -> None:
    try:
        kill_tree(pid, psutil.Process(pid))
    except psutil.Error:
        pass


def _not_run(verdict: Verdict, reason: str, key: str) -> CheckResult:
    return CheckResult(Outcome(verdict, reason), None, 0.0, None, key, "not run")


def _interpret(obs: Observation, status: str, nonce: str, key: str) -> CheckResult:
    """The verdict of a check, from what the runner saw and what it reported.

    The report is trusted only when it is exactly one well-formed record with
    this check's nonce, and the check then exited normally.
    """
    match = RECORD.match(obs.record.decode("utf-8", "replace"))
    peak = obs.peak_rss_bytes or None
    if obs.termination.outcome is not None:
        outcome, secs = obs.termination.outcome, None
    elif not obs.record:
        outcome, secs = Outcome(Verdict.ERROR, f"the check died without a verdict ({status})"), None
    elif not match or match["nonce"] != nonce or match["verdict"] not in Verdict.__members__:
        outcome, secs = Outcome(Verdict.ERROR, "garbled or forged verdict record"), None
    elif status != "exit 0":
        outcome, secs = Outcome(Verdict.ERROR, f"the check ended with {status} after its verdict"), None
    elif float(match["secs"]) > obs.wall_secs + 0.5:
        # Cross-check against the runner's own clock: a proof cannot take
        # longer than the check that ran it.
        outcome, secs = Outcome(Verdict.ERROR, "verdict record claims a proof longer than its check"), None
    else:
        secs = float(match["secs"])
        outcome = Outcome(Verdict(match["verdict"]), match["reason"])
        peak = max(peak or 0, int(match["peak_kb"]) * 1024) or None
    return CheckResult(outcome, secs, obs.wall_secs, peak, key, status)


_ERROR_LINE = re.compile(r"^(Exception:|Error:|Parse error:|.*Error: |Cannot find file)")


def _log_reason(log: Path) -> str | None:
    """The first error a toplevel printed while loading, if any."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for i, line in enumerate(lines):
        if _ERROR_LINE.match(line.lstrip("# ")):
            follow = lines[i + 1].strip() if i + 1 < len(lines) and line.rstrip().endswith(":") else ""
            return f"{line.lstrip('# ').strip()} {follow}".strip()
    return None
