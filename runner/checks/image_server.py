"""A per-host image server: loaded HOL Light images that outlive a runner.

Loading HOL Light costs 70-90 s of CPU, so a runner that owns its session
pays that again every time it is killed and resumed. ``proofbatch serve``
keeps one session (the base image and its context images) alive and serves
checks to runners over a Unix socket; ``proofbatch run --server DIR`` uses
it instead of starting its own. A runner killed by kill -9 only closes its
connections: the server finishes the check it was running for it, drops the
result (the runner never recorded it, so a resumed run checks it again) and
keeps its images for the next runner.

The socket and its key live in DIR (mode 0700); a client must present the
key (multiprocessing's HMAC handshake) before anything is unpickled.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import threading
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Sequence

from ..corpus import Problem
from ..errors import InputError, ProverError
from ..prover import CheckLimits, CheckResult, ProverSession

SOCKET, KEY = "socket", "key"


class ImageServer:
    """Serves ``session`` on DIR/socket until ``close``. One thread per client."""

    def __init__(self, session: ProverSession, directory: Path, clock: str | None = None):
        # The clock its checks' limits count on (runner.prover.LimitClock):
        # a runner on another clock is refused (runner/commands/run.py).
        self.session, self.dir, self.clock = session, Path(directory), clock
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        key = secrets.token_bytes(32)
        (self.dir / SOCKET).unlink(missing_ok=True)
        fd = os.open(self.dir / KEY, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        self._listener = Listener(str(self.dir / SOCKET), family="AF_UNIX", authkey=key)
        self._closed = threading.Event()
        self.served = 0      # checks whose result reached a client
        self.dropped = 0     # checks finished for a client that had gone
        self._count_lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="image-server", daemon=True)

    def start(self) -> "ImageServer":
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._accept()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn = self._listener.accept()
            except (OSError, EOFError):
                if self._closed.is_set():
                    return
                continue    # a client that failed the handshake
            except Exception:   # multiprocessing.AuthenticationError
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name="image-client").start()

    def _serve(self, conn: Connection) -> None:
        with conn:
            while True:
                try:
                    request = conn.recv()
                except (EOFError, OSError):
                    return
                op = request[0]
                try:
                    if op == "info":
                        reply = ("ok", self.session.info)
                    elif op == "clock":
                        reply = ("ok", self.clock)
                    elif op == "prepare":
                        self.session.prepare(request[1])
                        reply = ("ok", None)
                    elif op == "image_key":
                        reply = ("ok", self.session.image_key(request[1]))
                    elif op == "check":
                        reply = ("ok", self.session.check(request[1], request[2]))
                    else:
                        reply = ("error", f"unknown request {op!r}")
                except Exception as exc:      # reported to the client, which raises it
                    reply = ("error", f"{type(exc).__name__}: {exc}")
                try:
                    conn.send(reply)
                except (OSError, EOFError):
                    with self._count_lock:
                        self.dropped += op == "check"
                    return
                with self._count_lock:
                    self.served += op == "check"

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        (self.dir / KEY).unlink(missing_ok=True)


class RemoteSession(ProverSession):
    """A session whose checks run in an ImageServer. Thread-safe: each
    thread has its own connection, so workers check in parallel."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        if not (self.dir / SOCKET).exists() or not (self.dir / KEY).is_file():
            raise InputError(self.dir, "no image server is serving here",
                             "start one with `proofbatch serve DIR`, or drop --server")
        # No session here, so no session's janitor: this process's scratch
        # folder (the executor's work directory) needs one of its own.
        from .janitor import watch_scratch

        watch_scratch()
        self._local = threading.local()
        self._conns: list[Connection] = []
        self._lock = threading.Lock()
        self.image_builds = []      # the server's builds are not this run's work
        try:
            self.info = self._call("info")
        except ProverError as exc:
            # A server that stopped leaves its socket file behind: nothing
            # listens on it, so connecting is refused.
            if isinstance(exc.__cause__, ConnectionRefusedError):
                raise InputError(self.dir, "no image server answers here (the socket is left "
                                 "from one that stopped)", "start one with `proofbatch serve "
                                 f"{self.dir}`, or drop --server") from None
            raise

    def _conn(self) -> Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            key = (self.dir / KEY).read_bytes()
            try:
                conn = Client(str(self.dir / SOCKET), family="AF_UNIX", authkey=key)
            except OSError as exc:
                raise ProverError(f"cannot reach the image server in {self.dir}: {exc}") from exc
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _call(self, *request):
        conn = self._conn()
        try:
            conn.send(request)
            status, value = conn.recv()
        except (OSError, EOFError) as exc:
            # EOFError says nothing (str() is empty): say what it means.
            how = ("it closed the connection" if isinstance(exc, EOFError)
                   else f"{type(exc).__name__}: {exc.strerror or exc}")
            raise ProverError(f"the image server in {self.dir} went away ({how}): it was "
                              "stopped or killed; start it again with `proofbatch serve "
                              f"{self.dir}` and run the same command again to resume, or drop "
                              "--server") from exc
        if status != "ok":
            raise ProverError(f"the image server in {self.dir} failed: {value} (if it does not "
                              f"recover, stop it, start `proofbatch serve {self.dir}` again and "
                              "run the same command again to resume)")
        return value

    def prepare(self, problems: Sequence[Problem]) -> None:
        self._call("prepare", [_absolute(p) for p in problems])

    def image_key(self, problem: Problem) -> str:
        return self._call("image_key", _absolute(problem))

    def check(self, problem: Problem, limits: CheckLimits) -> CheckResult:
        return self._call("check", _absolute(problem), limits)

    def clock(self) -> str | None:
        """The limit clock the server was started for; None: any."""
        return self._call("clock")

    def close(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()


def _absolute(p: Problem) -> Problem:
    """The server has its own working directory: send absolute paths."""
    return dataclasses.replace(p, directory=p.directory.resolve(), setup_path=p.setup_path.resolve(),
                               query_path=p.query_path.resolve())
