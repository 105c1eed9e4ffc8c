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
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

ENV = "PROOFBATCH_SESSION"
# How long the janitor keeps looking for stragglers: a process forked just
# as it looked carries the token too, and is found on a later pass.
SWEEP_S = 10.0


class Janitor:
    """The runner's end of one session's janitor."""

    def __init__(self, workdir: Path):
        self.token = secrets.token_hex(12)
        # A session of its own: a Ctrl-C at the terminal must not stop it
        # before the runner has stopped.
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "runner.janitor", str(workdir), self.token],
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
    shutil.rmtree(workdir, ignore_errors=True)
    return killed


def main(argv: list[str]) -> int:
    workdir, token = Path(argv[0]), argv[1]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):
        pass
    sweep_up(workdir, token)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
