"""Talking to a loaded prover image over a pair of named pipes.

An image is a prover process that has loaded a context and serves one-line
commands (see hol_check.ml): FORK a child image, fork a CHECK, REAP a
finished check, QUIT. The runner writes commands on ``<name>.cmd`` and reads
replies on ``<name>.rep``.

Named pipes rather than the process's stdin and stdout, because a child image
is forked by its parent image, not by us, and still needs its own channel;
and because a toplevel's stdout carries whatever the loaded code prints.
When the runner dies, even by kill -9, the kernel closes its end of every
command pipe; each image then reads end-of-file, kills its running checks and
exits, so nothing outlives a killed sweep.
"""

from __future__ import annotations

import os
import select
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ....errors import ProverError


@dataclass
class PipePair:
    """The two named pipes of one image; the reply end is opened at once."""

    cmd_path: Path
    rep_path: Path
    rep_fd: int = -1

    @classmethod
    def create(cls, directory: Path, name: str) -> "PipePair":
        cmd, rep = directory / f"{name}.cmd", directory / f"{name}.rep"
        for path in (cmd, rep):
            path.unlink(missing_ok=True)
            os.mkfifo(path, 0o600)
        pair = cls(cmd, rep)
        # Opening the read end without blocking lets the image open its write
        # end at any time; Linux reports no hang-up on a pipe that never had a
        # writer, so polling it simply waits for the image.
        pair.rep_fd = os.open(rep, os.O_RDONLY | os.O_NONBLOCK)
        return pair


class LineReader:
    """Reads newline-terminated replies from a non-blocking pipe."""

    def __init__(self, fd: int):
        self.fd, self._buffer = fd, b""

    def readline(self, timeout: float, alive=lambda: True) -> str | None:
        """One line, or None at end-of-file; raises ProverError on timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ProverError(f"no reply within {timeout:.0f} s")
            ready, _, _ = select.select([self.fd], [], [], min(remaining, 0.5))
            if not ready:
                if not alive():
                    return None
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                if not alive():
                    return None
                time.sleep(0.01)   # a writer closed; another may come
                continue
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode("utf-8", "replace")


@dataclass
class ImageProcess:
    """A live image serving commands. One command at a time (a lock)."""

    key: str
    pid: int
    pipes: PipePair
    log_path: Path
    cmd_fd: int = -1
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _reader: LineReader | None = None
    _process: psutil.Process | None = None
    last_used: float = field(default_factory=time.monotonic)

    def attach(self, ready_timeout: float) -> None:
        """Wait for the image's READY line, then open its command pipe."""
        self._reader = LineReader(self.pipes.rep_fd)
        try:
            self._process = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            self._process = None
        line = self._reader.readline(ready_timeout, self.alive)
        if line is None or not line.startswith("READY"):
            raise ImageFailed(self.key, line or "the image exited while loading")
        self.pid = int(line.split()[1])
        self._process = psutil.Process(self.pid)
        # Blocks until the image opens its read end, which it does right
        # after writing READY.
        self.cmd_fd = os.open(self.pipes.cmd_path, os.O_WRONLY)

    def alive(self) -> bool:
        proc = self._process
        try:
            return proc is not None and proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def request(self, *fields: str, timeout: float = 60.0) -> str:
        """Send one command and return the image's one-line reply."""
        if any("\t" in f or "\n" in f for f in fields):
            raise ValueError(f"command fields may not contain tabs or newlines: {fields!r}")
        with self._lock:
            self.last_used = time.monotonic()
            try:
                os.write(self.cmd_fd, ("\t".join(fields) + "\n").encode())
            except OSError as exc:
                # EPIPE: nothing reads its command pipe any more.
                raise ProverError(
                    f"image {self.key} is gone: its process was killed or crashed ({fields[0]} "
                    f"could not be sent: {exc.strerror or exc}); its log is {self.log_path}. Run "
                    "the same command again to resume: images are loaded afresh") from exc
            assert self._reader is not None
            line = self._reader.readline(timeout, self.alive)
            if line is None:
                raise ProverError(f"image {self.key} died; see {self.log_path}")
            if line.startswith("BAD"):
                raise ProverError(f"image {self.key} refused {fields[0]}: {line}")
            return line

    def close(self) -> None:
        """Ask the image to quit; closing the command pipe would do as well."""
        for fd in (self.cmd_fd, self.pipes.rep_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.cmd_fd = self.pipes.rep_fd = -1
        for path in (self.pipes.cmd_path, self.pipes.rep_path):
            path.unlink(missing_ok=True)


class ImageFailed(ProverError):
    """An image could not load its context; the reason comes from its log."""

    def __init__(self, key: str, reason: str):
        self.key, self.reason = key, reason
        super().__init__(f"image {key} failed: {reason}")
