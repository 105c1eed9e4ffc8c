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
key (multiprocessing's HMAC handshake) before anything is unpickled. A
server holds DIR (an flock on DIR/lock, which names its pid) from before
HOL Light boots until it ends: a second server on DIR is refused at once.

A check may take hours, so a runner cannot bound how long a reply takes;
it bounds the silence instead. While a request runs, the server sends a
beat every BEAT_EVERY_S seconds; a runner that hears nothing for
``--server-timeout`` seconds (a stopped or hung server: kill -STOP stops
every thread of it) stops with one line naming the server, never a verdict.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import secrets
import socket
import struct
import threading
from multiprocessing.connection import Connection, Listener, answer_challenge, deliver_challenge
from pathlib import Path
from typing import Sequence

from ..corpus import Problem
from ..errors import InputError, ProverError
from ..prover import CheckLimits, CheckResult, ProverSession
from ..settings import setting

SOCKET, KEY, LOCK = "socket", "key", "lock"
BEAT = ("beat", None)       # "still working on your request"
BEAT_EVERY_S = 1.0
# A timeout must span a few beats: a beat late by a busy host is no silence.
MIN_TIMEOUT_S = 3 * BEAT_EVERY_S


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    server_timeout: float = setting(
        "with --server: seconds the image server may stay silent (no reply and no beat; it beats "
        "every second while it works) before the run stops with exit 1, naming the server; a "
        "stopped (kill -STOP) or hung server is reported, never recorded as a verdict",
        default=60.0)


def hold(directory: Path) -> int:
    """Make DIR (0700) and hold it for this process's server: an flock on
    DIR/lock, which the kernel drops when the process dies (kill -9 too),
    so a folder left by a dead server is free. Returns the lock's fd.
    Raises InputError naming the holder's pid when another process holds it."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    fd = os.open(d / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = holder(d) or "unknown"
        os.close(fd)
        raise InputError(d, f"an image server (pid {pid}) holds this folder already", "use it "
                         f"with `proofbatch run --server {d}`, stop it first (kill {pid}), or "
                         "serve another folder") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def holder(directory: Path) -> str | None:
    """The pid written in DIR/lock by the server that holds (or held) it."""
    try:
        return (Path(directory) / LOCK).read_text().strip() or None
    except OSError:
        return None


class ImageServer:
    """Serves ``session`` on DIR/socket until ``close``. One thread per client."""

    def __init__(self, session: ProverSession, directory: Path, clock: str | None = None,
                 held: bool = False):
        # The clock its checks' limits count on (runner.prover.LimitClock):
        # a runner on another clock is refused (runner/commands/run.py).
        self.session, self.dir, self.clock = session, Path(directory), clock
        # ``held``: the caller holds DIR (``hold``, taken before the session
        # booted, as `proofbatch serve` does, and released by it); else taken here.
        self._hold = -1 if held else hold(self.dir)
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
        sending, busy, done = threading.Lock(), [False], threading.Event()

        def beat() -> None:
            while not done.wait(BEAT_EVERY_S):
                with sending:
                    if busy[0]:
                        try:
                            conn.send(BEAT)
                        except (OSError, EOFError):
                            return

        threading.Thread(target=beat, daemon=True, name="image-client-beat").start()
        with conn:
            try:
                self._requests(conn, sending, busy)
            finally:
                done.set()

    def _requests(self, conn: Connection, sending: threading.Lock, busy: list[bool]) -> None:
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                return
            op = request[0]
            with sending:
                busy[0] = True
            try:
                reply = self._answer(request)
            finally:
                with sending:
                    busy[0] = False
            try:
                with sending:
                    conn.send(reply)
            except (OSError, EOFError):
                with self._count_lock:
                    self.dropped += op == "check"
                return
            with self._count_lock:
                self.served += op == "check"

    def _answer(self, request) -> tuple:
        op = request[0]
        try:
            if op == "info":
                return ("ok", self.session.info)
            if op == "clock":
                return ("ok", self.clock)
            if op == "context_root":
                backend = self.session.backend        # None: a session no backend here started
                root = None if backend is None else backend.context_root
                return ("ok", None if root is None else str(root))
            if op == "prepare":
                self.session.prepare(request[1])
                return ("ok", None)
            if op == "image_key":
                return ("ok", self.session.image_key(request[1]))
            if op == "check":
                return ("ok", self.session.check(request[1], request[2]))
            return ("error", f"unknown request {op!r}")
        except Exception as exc:      # reported to the client, which raises it
            return ("error", f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        (self.dir / KEY).unlink(missing_ok=True)
        if self._hold >= 0:
            os.close(self._hold)        # the folder is free (DIR/lock stays: unlinking it races)
            self._hold = -1


class RemoteSession(ProverSession):
    """A session whose checks run in an ImageServer. Thread-safe: each
    thread has its own connection, so workers check in parallel."""

    def __init__(self, directory: Path, timeout: float = ServerSettings.server_timeout):
        self.dir, self.timeout = Path(directory), float(timeout)
        if not self.timeout >= MIN_TIMEOUT_S:       # NaN too
            raise InputError("--server-timeout", f"{timeout:g} s is shorter than the server's beat "
                             f"allows (it beats every {BEAT_EVERY_S:g} s)",
                             f"give at least {MIN_TIMEOUT_S:g} s")
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

    def _connect(self) -> Connection:
        """multiprocessing's Client, with every read and write of the socket
        bounded: the kernel's SO_RCVTIMEO/SO_SNDTIMEO fail a read or write
        (connect and the key handshake included) that waits longer with
        EAGAIN, where Client would wait for ever on a stopped server."""
        key = (self.dir / KEY).read_bytes()
        secs = int(self.timeout)
        wait = struct.pack("ll", secs, int((self.timeout - secs) * 1e6))
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, wait)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, wait)
            s.connect(str(self.dir / SOCKET))
            conn = Connection(s.detach())
        try:
            answer_challenge(conn, key)
            deliver_challenge(conn, key)
        except BaseException:
            conn.close()
            raise
        return conn

    def _conn(self) -> Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = self._connect()
            except BlockingIOError as exc:
                raise self._silent("the connection's handshake") from exc
            except OSError as exc:
                raise ProverError(f"cannot reach the image server in {self.dir}: {exc}") from exc
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _silent(self, what: str) -> ProverError:
        pid = holder(self.dir)
        who = f" (pid {pid})" if pid else ""
        cont = f"continue it (kill -CONT {pid})" if pid else "continue it"
        return ProverError(
            f"the image server in {self.dir}{who} did not answer {what} within {self.timeout:g} s "
            f"(no reply, no beat): it is stopped (kill -STOP) or hung, and nothing was recorded for "
            f"it; {cont} or restart it (`proofbatch serve {self.dir}`), then run the same command "
            "again to resume (--server-timeout sets the wait)")

    def _call(self, *request):
        conn = self._conn()
        try:
            conn.send(request)
            status, value = conn.recv()
            while (status, value) == BEAT:       # the server still works on it
                status, value = conn.recv()
        except BlockingIOError as exc:
            # A message cut off mid-way leaves the connection unusable.
            self._local.conn = None
            raise self._silent(_what(request)) from exc
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

    def context_root(self) -> Path | None:
        """Where the server's images resolve needs/loadt; None: it does not
        say (a server from before it was asked, or a prover without one)."""
        try:
            root = self._call("context_root")
        except ProverError as exc:
            if "unknown request" in str(exc):
                return None
            raise
        return None if root is None else Path(root)

    def close(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()


def _absolute(p: Problem) -> Problem:
    """The server has its own working directory: send absolute paths."""
    return dataclasses.replace(p, directory=p.directory.resolve(), setup_path=p.setup_path.resolve(),
                               query_path=p.query_path.resolve())


def _what(request: tuple) -> str:
    """A request as the line about a silent server names it."""
    op = request[0]
    if op == "check":
        return f"the check of {request[1].problem_id}"
    if op == "prepare":
        return f"preparing the images of {len(request[1])} problems"
    if op == "image_key":
        return f"the image key of {request[1].problem_id}"
    return f"its {op} request"
