"""The janitor: however the runner stops, nothing of its session outlives it.

A session's prover processes (the base image, the images forked from it and
their checks) carry a token in their environment: fork keeps it, and bwrap
passes the environment on. The janitor is a small process of its own,
started with the session, that reads a pipe from the runner until it ends.
The runner closes its end after a clean stop; the kernel closes it when the
runner dies, even by kill -9. The janitor then kills every process that
carries the token and removes the session's work directory.

Images follow the runner by themselves (they read end-of-file on their
command pipes), but an image still loading its context reads no pipe until
it is done, which can take hours; and the checks of an image that was
killed are nobody's children any more.

A command that starts provers also keeps every temporary folder it makes
(the executor's work directory, a native session's folder beside its
bytecode one, the scratch of a run with --server, which has no session of
its own) in one folder of its process, ``scratch_root``, watched by a
janitor of its own: after a kill -9 nothing of it is left in TMPDIR.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import psutil

from .. import subproc

ENV = "PROOFBATCH_SESSION"
# How long the janitor keeps looking for stragglers: a process forked just
# as it looked carries the token too, and is found on a later pass.
SWEEP_S = 10.0


class Janitor:
    """The runner's end of one session's janitor."""

    def __init__(self, workdir: Path, scratch: bool = False):
        if not scratch:
            watch_scratch()         # the folder the session's work directory is in
        self.token = secrets.token_hex(12)
        # A session of its own: a Ctrl-C at the terminal must not stop it
        # before the runner has stopped.
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "runner.checks.janitor", str(workdir), self.token],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True)

    def environment(self) -> dict[str, str]:
        """The environment to start the session's prover processes with."""
        return {**os.environ, ENV: self.token}

    def close(self, wait_s: float = 30.0) -> None:
        """After a clean stop: let the janitor check and tidy, and wait for it."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            pass


def carriers(token: str) -> list[psutil.Process]:
    """The live processes whose environment carries ``token``."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(ENV) == token and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue          # gone, or not ours to read
    return found


def sweep_up(workdir: Path, token: str) -> int:
    """Kill every carrier of ``token``, then remove ``workdir``; the number killed."""
    killed = 0
    deadline = time.monotonic() + SWEEP_S
    while time.monotonic() < deadline:
        found = carriers(token)
        if not found:
            break
        for proc in found:
            try:
                proc.kill()
                killed += 1
            except psutil.Error:
                pass
        psutil.wait_procs(found, timeout=1)
    # A process dying as the folder goes may still add to it: until it is
    # gone, or the sweep's time is up.
    while True:
        shutil.rmtree(workdir, ignore_errors=True)
        if not os.path.lexists(workdir) or time.monotonic() >= deadline:
            return killed
        time.sleep(0.2)


_scratch: dict = {"root": None, "keeper": None}
_scratch_lock = threading.Lock()


def usable_tmpdir() -> None:
    """A TMPDIR that names no writable folder is replaced, in this process's
    environment and so in every process it starts (HOL Light, OCaml's
    compilers read it too), by the folder Python's tempfile falls back to:
    TEMP, TMP, /tmp, /var/tmp, /usr/tmp, then the working directory. None
    usable is a fault of the machine: ProverError, one line."""
    from ..errors import ProverError

    given = os.environ.get("TMPDIR")
    if given is None or (os.path.isdir(given) and os.access(given, os.W_OK | os.X_OK)):
        return
    tempfile.tempdir = None             # look again, past the TMPDIR given
    try:
        found = tempfile.gettempdir()
    except OSError as exc:
        raise ProverError(f"no usable temporary folder: TMPDIR={given} is no writable folder, "
                          f"and neither is any other ({exc}); point TMPDIR at one") from None
    os.environ["TMPDIR"] = found


@contextlib.contextmanager
def scratch_root(prefix: str = "proofbatch-") -> Iterator[Path]:
    """While inside, every temporary folder or file this process makes with
    ``tempfile`` lives in one new folder of TMPDIR. Once the process starts
    provers (``watch_scratch``: a session's janitor, or a connection to an
    image server), a janitor removes that folder when the process ends,
    however it ends (kill -9 included). Validating input starts no process."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    before = tempfile.tempdir
    tempfile.tempdir = str(root)
    _scratch.update(root=root, keeper=None)
    # External commands (a native build's compilers) carry the keeper's token:
    # it kills them however this process ends.
    subproc.watch = _watched_environment
    try:
        yield root
    finally:
        subproc.watch = None
        tempfile.tempdir = before
        with _scratch_lock:
            keeper = _scratch["keeper"]
            _scratch.update(root=None, keeper=None)
        if keeper is not None:
            keeper.close()
        shutil.rmtree(root, ignore_errors=True)


def _watched_environment() -> dict[str, str]:
    """The environment of an external command inside ``scratch_root``: with
    the token of the janitor watching this process (started now if none is)."""
    watch_scratch()
    keeper = _scratch["keeper"]
    return keeper.environment() if keeper is not None else dict(os.environ)


def watch_scratch() -> None:
    """Have a janitor remove this process's scratch folder (``scratch_root``)
    however the process ends; once, and only inside one."""
    with _scratch_lock:
        if _scratch["root"] is not None and _scratch["keeper"] is None:
            _scratch["keeper"] = Janitor(_scratch["root"], scratch=True)


def main(argv: list[str]) -> int:
    workdir, token = Path(argv[0]), argv[1]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):
        pass
    sweep_up(workdir, token)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
