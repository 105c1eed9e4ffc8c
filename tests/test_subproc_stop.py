"""Every child of every stage ends with the runner (issue 33, point 3).

A SIGTERM or Ctrl-C while `build-native` compiled the core said "stopped
cleanly" and left `ocamlopt` running: `ocamlfind` runs it as its child, and
only `ocamlfind` was killed. External commands (runner/subproc.py) now run in
a process group of their own, killed whole when cut short; a stop signal
kills every group running, in any thread.

The commands here are shell scripts standing in for the compilers: each
starts a grandchild that sleeps, as ocamlfind starts ocamlopt. No OCaml.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from runner import subproc
from runner.errors import CommandError

from .helpers import ROOT
from .test_stopping import SIGNALS_AT_DEFAULT


def parent_of_a_sleeper(pid_file: Path) -> list[str]:
    """A command whose child sleeps 300 s, its pid in ``pid_file``."""
    return ["sh", "-c", f'sleep 300 & echo $! > "{pid_file}"; exec sleep 300']


def wait_for(pid_file: Path, within: float = 20.0) -> int:
    deadline = time.monotonic() + within
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, f"{pid_file} never written"
        time.sleep(0.05)
    return int(pid_file.read_text())


def gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def reaped():
    """Kill whatever a failing test left asleep."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_a_command_past_its_timeout_takes_its_children_with_it(tmp_path, reaped):
    pid_file = tmp_path / "pid"
    with pytest.raises(CommandError, match="timed out"):
        subproc.run(parent_of_a_sleeper(pid_file), timeout=1.0)
    reaped.append(wait_for(pid_file))
    assert gone(reaped[-1]), "the command's child outlived its timeout"


def test_ctrl_c_during_a_command_takes_its_children_with_it(tmp_path, reaped):
    pid_file = tmp_path / "pid"

    def interrupt():
        wait_for(pid_file)
        # A real SIGINT to the main thread, as a terminal's Ctrl-C sends:
        # it breaks the wait in poll(2). (`_thread.interrupt_main` only sets
        # a flag, seen when the wait ends by itself, 60 s later.)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    # Python's own handler, as at a terminal: a suite started as a
    # background job (`... &`) inherits SIGINT ignored, and then has none.
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            subproc.run(parent_of_a_sleeper(pid_file), timeout=60.0)
    finally:
        signal.signal(signal.SIGINT, saved)
    reaped.append(wait_for(pid_file))
    assert gone(reaped[-1]), "the command's child outlived the Ctrl-C"


def test_a_stop_kills_commands_running_in_other_threads(tmp_path, reaped):
    pid_file = tmp_path / "pid"
    raised: list[BaseException] = []

    def work():
        try:
            subproc.run(parent_of_a_sleeper(pid_file), timeout=60.0)
        except BaseException as exc:       # noqa: BLE001 (what the thread saw)
            raised.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    reaped.append(wait_for(pid_file))
    subproc.kill_all()
    thread.join(10)
    assert not thread.is_alive() and isinstance(raised[0], CommandError)
    assert gone(reaped[-1])


FAKE_OCAMLFIND = """#!/bin/sh
case "$*" in
  "ocamlopt -version") echo 4.13.1; exit 0;;
esac
sleep 300 &
echo $! > "{pid_file}"
exec sleep 300
"""


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stopped_native_build_leaves_no_compiler_running(tmp_path, reaped, signum, code):
    """`proofbatch build-native` stopped while it compiles: exit 143 or 130,
    and neither the compiler (ocamlfind's stand-in) nor its child is left."""
    bin_dir, pid_file = tmp_path / "bin", tmp_path / "compiler.pid"
    bin_dir.mkdir()
    for name, text in (("ocamlfind", FAKE_OCAMLFIND.format(pid_file=pid_file)),
                       ("camlp5o", "#!/bin/sh\necho 8.00\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    checkout = tmp_path / "hol-light"
    checkout.mkdir()
    (checkout / "hol.sh").write_text("#!/bin/sh\nexit 1\n")
    (checkout / "hol.sh").chmod(0o755)
    (checkout / "pa_j.cmo").write_bytes(b"")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(tmp_path)}
    # SIGINT at its default whatever the launcher's (tests/test_stopping.py).
    runner = subprocess.Popen([*SIGNALS_AT_DEFAULT, sys.executable, "-m", "runner.cli", "build-native",
                               "--hol-light",
                               str(checkout), "--cache", str(tmp_path / "cache")],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        child = wait_for(pid_file, within=60)
        reaped.append(child)
        compiler = [p for p in psutil.Process(runner.pid).children(recursive=True)
                    if p.name() == "sleep"]
        reaped.extend(p.pid for p in compiler)
        runner.send_signal(signum)
        _, err = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.returncode == code, err
    assert "stopped cleanly" in err
    assert gone(child), "the compiler's child outlived the runner"
    assert all(gone(p) for p in reaped), "the compiler outlived the runner"
