"""The one way proofbatch runs a short external command.

Each command runs in a process group of its own, killed whole when the
command is cut short (its timeout, Ctrl-C, SIGTERM, SIGHUP): ``ocamlfind``
runs ``ocamlopt`` as its child, and ``ocamlopt`` its assembler, so killing
the command alone left a compiler of 500 MB running for minutes after the
runner said it had stopped. A stop signal kills every group running, in
whatever thread (``kill_all``, from the command line's signal handler). And
inside a command that starts provers (``runner.checks.janitor.scratch_root``
sets ``watch``), a command carries the token of this process's janitor, which
kills it even when the runner dies by kill -9.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Callable

from .errors import CommandError

# The environment a command starts with, when something watches this
# process's children (runner.checks.janitor.scratch_root); None: this one's.
watch: Callable[[], dict[str, str]] | None = None

_running: set[subprocess.Popen] = set()
_lock = threading.RLock()      # RLock: kill_all runs in a signal handler of the main thread


def run(argv: list[str], *, cwd: Path | None = None, timeout: float = 60.0,
        input_text: str | None = None) -> str:
    """Run ``argv`` to completion and return its stdout.

    Raises CommandError naming the command, its exit code and its stderr, so a
    failure is never silent and never needs a second look to diagnose. Cut
    short (timeout, an exception such as KeyboardInterrupt), the command's
    whole process group is killed and reaped before this returns or raises.
    """
    env = watch() if watch is not None else None
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, text=True, start_new_session=True,
                                stdin=subprocess.DEVNULL if input_text is None else subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError as exc:
        raise CommandError(argv, 127, str(exc)) from exc
    with _lock:
        _running.add(proc)
    try:
        try:
            stdout, stderr = proc.communicate(input_text, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.communicate()
            raise CommandError(argv, -1, f"timed out after {timeout} s") from None
        except BaseException:
            _kill(proc)
            proc.wait()
            raise
    finally:
        with _lock:
            _running.discard(proc)
    if proc.returncode != 0:
        raise CommandError(argv, proc.returncode, stderr)
    return stdout


def _kill(proc: subprocess.Popen) -> None:
    """Kill ``proc``'s process group: it and every child it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass        # gone already


def kill_all() -> None:
    """Kill every command running now, with its children, in any thread: the
    runner is stopping (each ``run`` then raises or returns as it ends)."""
    with _lock:
        running = list(_running)
    for proc in running:
        _kill(proc)
