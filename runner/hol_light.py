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

from . import contexts
from .corpus import Problem
from .errors import ProverError
from .fork_server import ImageFailed, ImageProcess, PipePair
from .guard import GuardLimits, Observation, watch
from .hol_light_install import HolLightInstall
from .prover import (BackendInfo, CheckLimits, CheckResult, ImageBuild, ProverBackend,
                     ProverSession)
from .verdicts import Outcome, Verdict

DRIVER = Path(__file__).with_name("hol_light_driver.ml")
MODE = "bytecode-fork"
RECORD = re.compile(r"PBV1\t(?P<nonce>[0-9a-f]+)\t(?P<verdict>[A-Z]+)\t(?P<secs>[0-9.]+)\t"
                    r"(?P<peak_kb>\d+)\t(?P<reason>[^\n]*)\n\Z")
# A lone check may not start until the host has the memory it is expected to
# need; if nothing else is running to free some, waiting longer is pointless.
MEMORY_WAIT_ALONE_S = 30.0


def ocaml_string(text: str) -> str:
    """An OCaml string literal for a path we hand to the toplevel."""
    escaped = "".join(c if c.isprintable() and c not in '"\\' else f"\\{ord(c):03d}"
                      for c in text)
    return f'"{escaped}"'


class HolLightBackend(ProverBackend):
    def __init__(self, install: HolLightInstall, context_root: Path, *,
                 boot_timeout_s: float = 1800.0, image_timeout_s: float = 10800.0,
                 max_images: int = 8, grace_s: float = 2.0):
        self.install, self.context_root = install, Path(context_root).resolve()
        self.boot_timeout_s, self.image_timeout_s = boot_timeout_s, image_timeout_s
        self.max_images, self.grace_s = max_images, grace_s
        driver = hashlib.sha256(DRIVER.read_bytes()).hexdigest()[:12]
        # Image keys name what was loaded: the build, where needs/loadt resolve,
        # the driver, and (added per image) the context text.
        self.salt = f"{install.build}|{self.context_root}|driver-{driver}"
        self.info = BackendInfo(prover="hol-light", build=install.build, mode=MODE)

    def start(self, workdir: Path) -> "HolLightSession":
        return HolLightSession(self, Path(workdir))


class HolLightSession(ProverSession):
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
        with open(log, "wb") as log_file:
            # A session of its own, so that a Ctrl-C aimed at the runner is not
            # also delivered to the provers; they follow the runner through
            # their command pipes instead.
            self._base_proc = subprocess.Popen(
                install.argv, stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT,
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
        with self._lock:
            for key, node in tree.nodes.items():
                self._nodes.setdefault(key, node)
            self._image_of.update(tree.image_of)

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

    def _acquire(self, key: str) -> ImageProcess:
        """The live image for ``key``, held (never evicted) until _release.

        Builds the image and its ancestors as needed; a second worker that
        needs the same image waits for the first one's build.
        """
        with self._lock:
            if key in self._failed:
                raise ImageFailed(key, self._failed[key])
            if key in self._images:
                self._in_use[key] = self._in_use.get(key, 0) + 1
                return self._images[key]
            build_lock = self._build_locks.setdefault(key, threading.Lock())
            node = self._nodes[key]
        with build_lock:
            with self._lock:
                built = key in self._images or key in self._failed
            if not built:
                parent = self._acquire(node.parent)
                try:
                    self._evict_if_full()
                    image = self._fork_image(parent, node)
                except ImageFailed as failed:
                    with self._lock:
                        self._failed[key] = failed.reason
                    raise
                finally:
                    self._release(parent.key)
                with self._lock:
                    self._images[key] = image
            return self._acquire(key)

    def _release(self, key: str) -> None:
        with self._lock:
            self._in_use[key] -= 1

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

    def _built(self, key: str, parent: str | None, secs: float) -> None:
        with self._lock:
            self.image_build_secs[key] = secs
            self.image_builds.append(ImageBuild(key, parent, secs))

    def _evict_if_full(self) -> None:
        """Quit the least recently used idle images beyond ``max_images``."""
        with self._lock:
            idle = sorted((img.last_used, k) for k, img in self._images.items()
                          if k != self.base_key and not self._in_use.get(k))
            excess = len(self._images) - self.backend.max_images
            victims = [self._images.pop(k) for _, k in idle[:max(0, excess + 1)]]
        for image in victims:
            image.close()

    # -- checks --------------------------------------------------------------

    def check(self, problem: Problem, limits: CheckLimits) -> CheckResult:
        key = self._image_of[problem.problem_id]
        try:
            image = self._acquire(key)
        except ImageFailed as failed:
            return _not_run(Verdict.ERROR, f"setup: {failed.reason}", key)
        try:
            refusal = self._wait_for_memory(limits)
            if refusal:
                return _not_run(Verdict.ERROR, refusal, key)
            return self._run_check(image, problem, limits)
        finally:
            self._release(key)

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
        n = next(self._counter)
        scratch = self.workdir / "checks" / str(n)
        scratch.mkdir()
        answer, log = scratch / "answer.txt", scratch / "log.txt"
        answer.write_bytes(problem.answer or b"")
        verdict_fifo = self.workdir / "fifo" / f"v{n}"
        os.mkfifo(verdict_fifo, 0o600)
        verdict_fd = os.open(verdict_fifo, os.O_RDONLY | os.O_NONBLOCK)
        nonce = secrets.token_hex(8)
        guard = GuardLimits(time_s=limits.time_s, mem_bytes=limits.mem_bytes,
                            grace_s=self.backend.grace_s)
        with self._lock:
            self._running += 1
        try:
            started = time.monotonic()
            reply = image.request("CHECK", str(verdict_fifo), str(problem.query_path.resolve()),
                                  str(answer), repr(float(limits.time_s)), str(log),
                                  str(scratch), nonce)
            pid = int(reply.split()[1])
            obs = watch(pid, verdict_fd, guard, started)
            status = image.request("REAP", str(pid)).split(maxsplit=2)[2]
        finally:
            with self._lock:
                self._running -= 1
            os.close(verdict_fd)
            verdict_fifo.unlink(missing_ok=True)
            shutil.rmtree(scratch, ignore_errors=True)
        return _interpret(obs, status, nonce, image.key)

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
