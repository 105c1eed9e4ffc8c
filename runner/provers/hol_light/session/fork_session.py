"""The runner's side of the HOL Light fork servers, bytecode and native alike.

Both modes run the same server loop, jail and verdict record inside the
prover (runner/provers/hol_light/ml/hol_check.ml); what differs is what an image loads (source
text or compiled plugins) and what a CHECK names for its answer. So the
sessions (backend.py, native_session.py) share this: starting the base image,
forking a context image, one check in its scratch directory under the
outside guards (its files and run in jailed_check.py), reading its verdict
record (verdict_record.py), and stopping.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import secrets
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

from .. import contexts
from .... import events
from .. import runtime
from ..runtime import Runtime
from ....checks import sandbox
from ....corpus import Problem
from ....errors import ProverError
from . import jailed_check
from .fork_server import ImageFailed, ImageProcess, PipePair
from ....checks.guard import GuardLimits
from .image_logs import failure_reason, keep_log, last_output, log_reason, tail_bytes
from .image_tree import ImageTree
from ....checks.janitor import Janitor
from ....prover import CheckLimits, CheckResult, ImageBuild, ProverSession
from ....results.publish import publish
from ....verdicts import Outcome, Verdict
from .verdict_record import INFRA, interpret


class ContextFailed(ImageFailed):
    """An image that did not load its context. ``log``: where its log was
    kept (see ForkSession.keep_image_log), None when the session keeps no
    logs; ``last_output``: the last meaningful line(s) of that log, as the
    reason quotes them."""

    def __init__(self, key: str, reason: str, log: Path | None, last_output: str | None):
        super().__init__(key, reason)
        self.log, self.last_output = log, last_output


class ForkSession(ImageTree, ProverSession):
    """A HOL Light session's images and checks. The session's ``backend``
    has ``info``, ``salt``, ``context_root``, ``boot_timeout_s``,
    ``image_timeout_s``, ``grace_s``, ``sandbox_config`` and
    ``sandbox_kind``, and ``log_dir`` when it keeps logs (OUT/logs in a
    sweep); the session says how an image is forked (``_fork_image``) and
    starts its base image with ``_start_base``."""

    def __init__(self, backend, workdir: Path):
        self.backend, self.info = backend, backend.info
        self.workdir = workdir
        for sub in ("fifo", "images", "checks", "tmp"):
            (workdir / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(workdir / "fifo", 0o700)
        self._lock = threading.Lock()
        self._nodes: dict[str, contexts.ImageNode] = {}
        self._image_of: dict[str, str] = {}         # problem id -> its context's image
        self._images: dict[str, ImageProcess] = {}
        self._failed: dict[str, str] = {}           # the context failed to load: ERROR setup
        self._build_locks: dict[str, threading.Lock] = {}
        self._in_use: dict[str, int] = {}
        self._pending: dict[str, int] = {}          # problem id -> checks prepared, not yet done
        self._running = 0                           # checks running now, under _lock
        self._counter = itertools.count()
        self._pipe_names = itertools.count()        # one pair of pipes per image started
        self._base_proc: subprocess.Popen | None = None
        self._loading: dict[str, ImageProcess] = {}    # images forked, not yet serving
        self._janitor = Janitor(workdir)
        self.base_key = contexts.image_key("", backend.salt)
        self.image_build_secs: dict[str, float] = {}     # latest build of each key
        self.image_builds: list[ImageBuild] = []

    def image_key(self, problem: Problem) -> str:
        return self._image_of[problem.problem_id]

    def check(self, problem: Problem, limits: CheckLimits) -> CheckResult:
        result = self._check(problem, limits)
        # Once per check, after its retries: the images it needed may go now.
        # A fault of the machine is run again (runner/checks/worker.py).
        if not result.interrupted.startswith(INFRA):
            self._settled(problem.problem_id)
        return result

    def _check(self, problem: Problem, limits: CheckLimits) -> CheckResult:
        raise NotImplementedError

    def image_chain(self, problem_id: str) -> list[contexts.ImageNode]:
        """The images a problem's check depends on, from the base down."""
        chain, key = [], self._image_of[problem_id]
        while key is not None:
            chain.append(self._nodes[key])
            key = chain[-1].parent
        return chain[::-1]

    def _start_base(self, argv: Sequence[str], pipes: PipePair, what: str,
                    script: bytes | None = None) -> None:
        """Start the base image (``script`` on its stdin) and wait until it
        serves; raises ProverError naming ``what`` and the log's first error."""
        backend = self.backend
        log = self.workdir / "images" / "base.log"
        started = time.monotonic()
        events.say("boot", key=self.base_key, name=what)
        with open(log, "wb") as log_file:
            # A session of its own, so that a Ctrl-C aimed at the runner is not
            # also delivered to the provers; they follow the runner through
            # their command pipes instead.
            self._base_proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL if script is None else subprocess.PIPE,
                stdout=log_file, stderr=subprocess.STDOUT, cwd=backend.context_root,
                start_new_session=True, env=self._environment())
        image = ImageProcess(self.base_key, self._base_proc.pid, pipes, log)
        try:
            if script is not None:
                assert self._base_proc.stdin is not None
                try:
                    self._base_proc.stdin.write(script)
                    self._base_proc.stdin.close()
                except BrokenPipeError:
                    raise ImageFailed(self.base_key, "it exited before reading its input") from None
            image.attach(backend.boot_timeout_s)
            sandbox.limit_tree(image.pid, backend.sandbox_config, backend.sandbox_kind)
        except ImageFailed as failed:
            self.close()
            raise ProverError(f"{what} did not start ({failed.reason}): "
                              f"{log_reason(log) or 'see ' + str(log)}") from None
        except BaseException:
            # Interrupted while it boots: a base that never served is killed,
            # not waited for.
            self.close()
            raise
        self._images[self.base_key] = image
        self._built(self.base_key, None, time.monotonic() - started)
        events.say("booted", key=self.base_key, name=what)

    def _environment(self) -> dict[str, str]:
        """The prover tree's environment: the janitor's token, a TMPDIR of
        the session's own (writable in the sandbox, and removed with the
        session), whatever TMPDIR the runner was given, and the OCaml runtime
        setting its images start with (runtime.py), whatever OCAMLRUNPARAM
        the runner was given."""
        return self.backend.runtime.environment(
            {**self._janitor.environment(), "TMPDIR": str(self.workdir / "tmp")})

    def _image_lost(self, image: ImageProcess, exc: ProverError) -> CheckResult:
        """The result of a check whose image died under it (a kill, the OOM
        killer): a fault of the machine, not the answer's. The image is
        dropped, so the worker's retry (runner/checks/worker.py) builds it
        again from its parent and counts an infrastructure retry; a dead
        base image stops the sweep (ProverError)."""
        self._forget(image)
        cause = f"{INFRA}the image of its context ({image.key}) died under the check ({exc})"
        return CheckResult(Outcome(Verdict.ERROR, cause), None, 0.0, None, image.key,
                           "image died", interrupted=cause)

    def _forget(self, image: ImageProcess) -> None:
        """Drop a dead image (and any dead ancestors) so _acquire rebuilds it."""
        with self._lock:
            dead = [k for k, img in self._images.items() if not img.alive()]
            for k in dead:
                self._images.pop(k).close()
            if self.base_key in dead:
                raise ProverError("the base HOL Light image died; start the sweep again to resume")

    def _fork_loading(self, parent: ImageProcess, node: contexts.ImageNode,
                      load: Sequence[str]) -> ImageProcess:
        """Fork ``node``'s image from ``parent``; it loads ``load`` (its
        segment's file, or its plugins). Raises ImageFailed with the reason."""
        log = self.workdir / "images" / f"{node.key}.log"
        # Pipes of its own, not named by the key alone: an evicted image of
        # the same key is closed outside the session's lock, and its close
        # unlinks its pipes' paths. Had they been this image's, the image
        # would find no reply pipe to open, exit while loading, and its
        # context would be recorded as failed for the rest of the session.
        pipes = PipePair.create(self.workdir / "fifo", f"{node.key}.{next(self._pipe_names)}")
        started = time.monotonic()
        name = contexts.context_name(node)
        events.say("image", key=node.key, name=name)
        loaded = False
        reply = parent.request("FORK", str(pipes.cmd_path), str(pipes.rep_path), str(log), *load)
        image = ImageProcess(node.key, int(reply.split()[1]), pipes, log)
        with self._lock:
            self._loading[node.key] = image
        try:
            image.attach(self.backend.image_timeout_s)
            loaded = True
        except ImageFailed:
            image.close()
            # The image is its parent's child, not ours: only the parent
            # knows how it ended.
            status = _image_status(parent, image.pid)
            reason = log_reason(log)
            # Slurm's scancel, a preemption or the OOM killer signal every
            # process of the job at once: the image loading a context dies
            # with its parent. That says nothing of the context; the session
            # is gone and its checks must run elsewhere, not be recorded.
            if not reason and not status.startswith("exit") and _dies_within(parent, 0.5):
                raise ProverError(f"image {parent.key} was killed while {node.key} loaded from "
                                  "it, by a signal from outside") from None
            # The work directory goes with the session (the local executor
            # deletes it): the log that says why goes where the sweep's logs go.
            last = last_output(log)
            raise ContextFailed(node.key, failure_reason(reason, status, last),
                                self.keep_image_log(node.key, log), last) from None
        finally:
            with self._lock:
                self._loading.pop(node.key, None)
            events.say("imaged", key=node.key, name=name, ok=loaded)
        self._built(node.key, node.parent, time.monotonic() - started)
        return image

    def keep_image_log(self, key: str, log: Path) -> Path | None:
        """Keep the log of an image that did not load as
        ``<log_dir>/images/<key>.log`` (OUT/logs/images in a sweep): its last
        ``log_keep_bytes``, where a crash shows. None when the backend keeps
        no logs."""
        log_dir = self.backend.log_dir
        if log_dir is None or not log.exists():
            return None
        keep = self.backend.sandbox_config.log_keep_bytes
        data, omitted = tail_bytes(log, keep)
        if omitted:
            data = f"[proofbatch: the first {omitted} bytes of this log omitted]\n".encode() + data
        target = Path(log_dir) / "images" / f"{key}.log"
        target.parent.mkdir(parents=True, exist_ok=True)
        publish(target, lambda tmp: tmp.write_bytes(data))
        return target

    def _runtime_of(self, limits: CheckLimits) -> Runtime:
        """The OCaml runtime setting a check runs under: the one its limits
        name (its runner's, when this session serves `run --server`), else
        this session's. Its s, o and i the check sets itself; its settle is
        the image's, done before the image served (hol_check.ml), so a
        setting that asks for another cannot be honoured here."""
        own = self.backend.runtime
        asked = runtime.parse(limits.runtime, "a check's runtime") if limits.runtime else own
        if asked.settle != own.settle:
            raise ProverError(f"a check asks for --runtime {asked.key}, but its images settled with "
                              f"settle={own.settle} (--runtime {own.key}) before they served")
        return asked

    def _jailed_check(self, image: ImageProcess, problem: Problem, limits: CheckLimits,
                      answer_fields: Callable[[Path], Sequence[str]],
                      log_dir: Path | None = None) -> CheckResult:
        """One check in ``image`` (jailed_check.py). Its scratch directory is
        its jail; the query and the log live beside it, out of the jail's
        sight, and so does the file ``answer_fields`` is given, where it may
        write the answer; it returns the CHECK fields that name the answer.
        The check's log is kept in ``log_dir`` when given (see keep_log)."""
        kind, cfg = self.backend.sandbox_kind, self.backend.sandbox_config
        files = jailed_check.CheckFiles(self.workdir / "checks", next(self._counter))
        fields, uid, verdict_fd = jailed_check.prepare(files, problem, answer_fields, kind)
        nonce = secrets.token_hex(8)
        guard = GuardLimits(time_s=limits.time_s, mem_bytes=limits.mem_bytes,
                            grace_s=self.backend.grace_s, clock=limits.clock,
                            backstop_s=limits.backstop_s, nice=limits.nice)
        with self._lock:
            self._running += 1
        try:
            obs, status, forked_at = jailed_check.run(image, problem, limits, files, fields, uid,
                                                      verdict_fd, nonce, guard, kind, cfg,
                                                      gc=self._runtime_of(limits).check_gc)
        finally:
            with self._lock:
                self._running -= 1
            os.close(verdict_fd)
            if log_dir is not None:
                keep_log(log_dir, cfg.log_keep_bytes, problem, files.log)
            files.remove()
        result = interpret(obs, status, nonce, image.key, limits.clock)
        return dataclasses.replace(result, sandbox=kind, forked_at=forked_at)

    def close(self) -> None:
        """Stop every image and check of the session; prompt even while an
        image loads or the base boots (they read no command until done)."""
        with self._lock:
            images = list(self._images.values())
            loading = list(self._loading.values())
            booted = self.base_key in self._images
            self._images.clear()
        for image in loading:
            jailed_check.kill_orphan(image.pid)
        for image in images:
            image.close()
        if self._base_proc is not None:
            try:
                self._base_proc.wait(timeout=10 if booted else 0)
            except subprocess.TimeoutExpired:
                self._base_proc.kill()
                self._base_proc.wait()
            self._base_proc = None
        self._janitor.close()


def _image_status(parent: ImageProcess, pid: int) -> str:
    """How ``parent``'s child image ``pid`` ended, as hol_check.ml's STATUS
    says ("exit 3", "signal SIGSEGV", ...); "unknown" when the parent
    cannot say (it is gone too)."""
    try:
        reply = parent.request("STATUS", str(pid), timeout=30.0)
    except ProverError:
        return "unknown"
    words = reply.split(maxsplit=2)
    return words[2] if len(words) == 3 and words[0] == "STATUS" else "unknown"


def _dies_within(image: ImageProcess, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while image.alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
