"""The box around the prover tree (runner/checks/sandbox.py), tried with a small
Python program started exactly as the base image is: no HOL Light needed.

The story: inside, the network is gone, the filesystem is read-only but for
the work directory, the results and the ground truth are hidden, only the
capabilities the per-check jail needs are left, and the whole thing dies
with the runner. (The jail itself is tried with real checks in
tests/hol_light/test_hostile.py.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from runner.checks import sandbox
from runner.errors import InputError

pytestmark = pytest.mark.skipif(sandbox.resolve_kind("auto") != "bwrap",
                                reason="needs bubblewrap and root")

PROBE = textwrap.dedent("""
    import json, os, socket, sys
    out = {}
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", int(sys.argv[1]))); out["connect"] = "ok"
    except OSError as e:
        out["connect"] = e.strerror
    out["results_listing"] = sorted(os.listdir(sys.argv[3]))
    for name, path in [("work", sys.argv[2] + "/w"), ("etc", "/etc/proofbatch-probe"),
                       ("results", sys.argv[3] + "/x")]:
        try:
            open(path, "w").write("x"); out[name] = "ok"
        except OSError as e:
            out[name] = e.strerror
    out["truth"] = open(sys.argv[4]).read()
    out["tmp"] = sorted(os.listdir("/tmp"))
    out["caps"] = int(open("/proc/self/status").read().split("CapEff:")[1].split()[0], 16)
    print(json.dumps(out))
""")


def test_inside_the_box(tmp_path):
    work, results, corpus = tmp_path / "work", tmp_path / "results", tmp_path / "corpus"
    work.mkdir()
    (results / "shards").mkdir(parents=True)
    (corpus / "p1").mkdir(parents=True)
    truth = corpus / "p1" / "answer.txt"
    truth.write_text("ARITH_TAC\n")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    argv = sandbox.wrap([sys.executable, "-c", PROBE, str(port), str(work), str(results), str(truth)],
                        "bwrap", writable=work, readable=[corpus, results, os.path.dirname(sys.executable)],
                        hidden=[results, *sandbox.ground_truth([corpus / "p1"])], chdir=work)
    try:
        out = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True,
                                        timeout=30).stdout)
    finally:
        listener.close()
    assert out["connect"] in ("Connection refused", "Network is unreachable")
    assert out["work"] == "ok" and (work / "w").exists()            # the one writable place
    assert out["etc"] == "Read-only file system"
    assert out["results_listing"] == []                              # hidden: an empty tmpfs
    assert out["results"] == "ok" and not (results / "x").exists()   # ...whose writes vanish
    assert out["truth"] == ""                                        # the ground truth reads empty
    # A private /tmp: only the way to the binds in it, none of the host's files.
    # (The interpreter's directory is bound too, and a checkout may live in /tmp.)
    binds = [Path(b).resolve() for b in (work, corpus, results, os.path.dirname(sys.executable))]
    assert out["tmp"] == sorted({b.relative_to("/tmp").parts[0] for b in binds
                                 if b.is_relative_to("/tmp")})
    wanted = {"CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SYS_CHROOT": 18}
    assert out["caps"] == sum(1 << bit for bit in wanted.values())
    assert set(wanted) == set(sandbox.TREE_CAPS)


def test_the_box_dies_with_the_runner(tmp_path):
    """A runner killed by kill -9 takes the sandboxed prover with it."""
    argv = sandbox.wrap(["sleep", "300"], "bwrap", writable=tmp_path, readable=[], hidden=[],
                        chdir=tmp_path)
    runner = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); "
                               "time.sleep(300)", *argv])
    try:
        deadline = time.monotonic() + 10
        while not [p for p in psutil.Process(runner.pid).children(recursive=True)
                   if p.name() == "sleep"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        boxed = psutil.Process(runner.pid).children(recursive=True)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        _, alive = psutil.wait_procs(boxed, timeout=10)
        assert alive == []
    finally:
        if runner.poll() is None:
            runner.kill()


def test_kinds_resolve_without_starting_anything(monkeypatch):
    assert sandbox.resolve_kind("auto") == "bwrap"
    assert sandbox.resolve_kind("rlimits") == "rlimits"
    assert sandbox.wrap(["x"], "rlimits", writable="/", readable=[], hidden=[], chdir="/") == ["x"]
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert sandbox.resolve_kind("auto") == "rlimits"
    with pytest.raises(InputError, match="bwrap is not installed"):
        sandbox.resolve_kind("bwrap")
    with pytest.raises(InputError, match="not a sandbox kind"):
        sandbox.SandboxConfig(kind="docker")
