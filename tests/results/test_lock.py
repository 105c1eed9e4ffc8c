"""One runner per sweep directory (issue 24): a second `proofbatch run` on
the same --out is refused while the first lives, naming it; a dead holder
is taken over (this host: its pid is gone; another host: its heartbeat is
stale). No HOL Light: the concurrency test sweeps on the stand-in Isabelle."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from runner.results import heartbeat, lock as sweep_lock
from runner.errors import InputError
from runner.results.lock import HOLDER_FILE, SweepLock, read_holder

from ..helpers import ROOT
from ..test_sweep_dir import STANDIN, small_corpus


def write_holder(out, **fields) -> None:
    out.mkdir(parents=True, exist_ok=True)
    record = {"format": sweep_lock.FORMAT, "host": socket.gethostname(), "pid": 1, "started": None,
              "since": "2024-05-01T12:00:00+00:00", "beat": time.time(), "interval": 2.0,
              "executor": "local", **fields}
    (out / HOLDER_FILE).write_text(json.dumps(record))


def test_a_second_runner_is_refused_naming_the_holder(tmp_path):
    out = tmp_path / "out"
    with SweepLock(out, executor="local"):
        holder = read_holder(out)
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(InputError) as refused:
            SweepLock(out).acquire()
        text = str(refused.value)
        assert text.startswith(f"{out}: is in use by another proofbatch run (host {socket.gethostname()}, "
                               f"pid {os.getpid()}, since {holder['since']}, local executor)")
        assert f"stop it with `kill {os.getpid()}`" in text
    assert read_holder(out) is None                 # let go: the record goes
    with SweepLock(out) as again:
        assert again.taken_over is None


def test_the_holder_beats_while_it_holds(tmp_path):
    out = tmp_path / "out"
    with SweepLock(out, interval=0.1):
        first = read_holder(out)["beat"]
        time.sleep(0.5)
        assert read_holder(out)["beat"] > first


def test_a_dead_holder_on_this_host_is_taken_over(tmp_path):
    out = tmp_path / "out"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    write_holder(out, pid=gone.pid)
    with SweepLock(out) as lock:
        assert lock.taken_over["pid"] == gone.pid
        assert read_holder(out)["pid"] == os.getpid()


def test_a_live_holder_without_the_flock_is_still_refused(tmp_path):
    """A file system whose flock does not reach across hosts: the record decides."""
    out = tmp_path / "out"
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        import psutil
        write_holder(out, pid=alive.pid, started=psutil.Process(alive.pid).create_time())
        with pytest.raises(InputError, match=f"pid {alive.pid}"):
            SweepLock(out).acquire()
    finally:
        alive.kill()
        alive.wait()
    with SweepLock(out) as lock:            # now it is dead
        assert lock.taken_over["pid"] == alive.pid


def test_another_hosts_holder_counts_as_alive_while_its_heartbeat_is_fresh(tmp_path):
    out = tmp_path / "out"
    write_holder(out, host="node-elsewhere", pid=4242, beat=time.time())
    with pytest.raises(InputError, match=r"host node-elsewhere, pid 4242.*`kill 4242` on node-elsewhere"):
        SweepLock(out).acquire()
    write_holder(out, host="node-elsewhere", pid=4242,
                 beat=time.time() - (heartbeat.STALE + 1) * heartbeat.INTERVAL)
    with SweepLock(out) as lock:
        assert lock.taken_over["host"] == "node-elsewhere"


def test_a_local_run_does_not_take_over_a_dead_slurm_driver_with_jobs_left(tmp_path):
    out = tmp_path / "out"
    write_holder(out, host="login-1", pid=4242, executor="slurm", beat=0)
    (out / "slurm").mkdir()
    (out / "slurm" / "jobs.json").write_text(json.dumps({"jobs": [{"job_id": "77", "settled": None}]}))
    with pytest.raises(InputError, match="jobs 77 may still be running.*--cluster slurm"):
        SweepLock(out, executor="local").acquire()
    with SweepLock(out, executor="slurm") as lock:      # the driver that reattaches to them
        assert lock.taken_over["executor"] == "slurm"


def test_two_runners_started_together_on_one_out_one_proceeds(tmp_path):
    """Before the lock both ran every check; now the second exits 2 naming the first."""
    corpus = small_corpus(tmp_path, answers_in_folders=True)
    # A check that spins to its limit keeps the first runner busy for seconds.
    (corpus / "arith.add_comm" / "answer.txt").write_text("by (standin_loop)\n")
    out = tmp_path / "out"
    env = {**os.environ, "STANDIN_HEAPS": str(tmp_path / "heaps"), "ISABELLE_HOME": str(STANDIN)}
    argv = [sys.executable, "-m", "runner.cli", "run", str(corpus), "--out", str(out),
            "--default-timeout", "4"]
    runners = []
    for _ in range(2):
        runners.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True))
        time.sleep(0.3)
    results = [(r.wait(timeout=120), r.stderr.read()) for r in runners]
    for r in runners:
        r.stdout.close()
        r.stderr.close()
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, err in results if code == 2).strip().splitlines()
    assert len(refused) == 1, refused
    winner = next(r for r, (code, _) in zip(runners, results) if code == 0)
    assert refused[0].startswith(f"proofbatch: error: {out}: is in use by another proofbatch run "
                                 f"(host {socket.gethostname()}, pid {winner.pid}, since ")
    assert f"stop it with `kill {winner.pid}`" in refused[0]
    # Every check ran once: one row per problem in all the shards.
    rows = [r for p in (out / "shards").glob("*.parquet") for r in pq.read_table(p).to_pylist()]
    assert sorted(r["problem_id"] for r in rows) == ["arith.add_comm", "lists.rev_rev"]
    assert read_holder(out) is None
