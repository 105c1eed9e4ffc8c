"""`proofbatch profile --cluster dask`, the installed CLI on a real Dask: a
scheduler and one worker started with distributed's own commands, as a user
starts them on their machines, in a folder of their own (not the driver's).

CPU is the budget: the worker boots bytecode HOL Light once (about 90 s of
CPU) and keeps its session for every run and for the resumed driver, so the
whole profile costs one boot. The worker has two threads but may run on one
CPU only (its affinity, as `taskset -c` sets it): a profile must still time
one check at a time there. One profile carries the bad day: while run 2 is
checking, the driver is stopped with SIGTERM; the same command started again
resumes. Each check busies itself a second or two before its proof, so that
the stop lands between checks and two checks at once would overlap.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time

import pytest

from cluster import cpu_slots
from runner.checks.worker import cpu_model
from runner.results import shards

from ..helpers import LIGHT, PROOFBATCH
from .dask_cluster import scheduler_and_worker
from .profile_checks import RUN_2, assert_seeded_runs_on_this_host, assert_three_times_each
from .profile_checks import busy_corpus, profile_args, start_driver, stopped_then_resumed
from .test_slurm import done_keys, wait_for

# Seconds of bytecode before the proof (5e7 turns of this loop took 1-2 s
# in Debian's toplevel on a loaded host, under 1 s on a quiet one). Each
# check must outlast a writer's heavy_secs (1 s), so that its row is
# published at once and run 2 is seen with a check done and checks left: on
# a quiet CI host, 5e7 turns let run 2's rows land together and the first
# driver finish before it could be stopped.
BUSY = "(fun g -> let r = ref 0 in for i = 1 to 200000000 do r := !r + i done; ALL_TAC g) THEN "
# Copied too, but left out by --problems.
UNSELECTED = "sets.union_comm"


def one_cpu() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """A Dask scheduler and one worker (two threads, one CPU), started in
    a folder of their own."""
    d = tmp_path_factory.mktemp("dask-profile")
    with scheduler_and_worker(d, memory="4GiB", cwd=d, worker_setup=one_cpu, stop_s=60) as address:
        yield address


@pytest.fixture(scope="module")
def stopped_profile(scheduler, tmp_path_factory):
    """The driver stopped with SIGTERM once run 2 has a check done and
    checks left, then the same command again."""
    root = tmp_path_factory.mktemp("profile")
    busy_corpus(root, BUSY, (*LIGHT, UNSELECTED))
    run2 = root / "profile" / RUN_2
    # Paths relative to the driver's folder, which is not the worker's.
    argv = ["env", "--default-signal=TERM", str(PROOFBATCH), *profile_args("corpus", "profile"),
            "--problems", ",".join(LIGHT), "--map", "map.json",
            "--cluster", "dask", "--scheduler-address", scheduler]

    def mid_run_2(first) -> dict:
        wait_for(lambda: (run2 / "shards").is_dir() and 0 < len(done_keys(run2)) < len(LIGHT)
                 or first.poll() is not None, 1500, "run 2 with a check done and checks left")
        return {"done_at_stop": done_keys(run2)}
    with stopped_then_resumed(lambda: start_driver(argv, root), mid_run_2, signal.SIGTERM,
                              resume_s=1200) as story:
        yield {**story, "out": root / "profile", "root": root}


@pytest.mark.hol
def test_a_dask_profile_stopped_in_run_2_resumes_with_three_times_each(stopped_profile):
    story = stopped_profile
    assert story["first_exit"] == 143, story["first_output"]
    assert story["second_exit"] == 0, story["second_output"]
    assert 0 < len(story["done_at_stop"]) < len(LIGHT), story["done_at_stop"]
    # Each check is seconds of busy loop before its proof; nothing twice,
    # nothing lost, whichever driver's run wrote it.
    assert_three_times_each(story["out"], min_prove_s=0.1)
    derived = json.loads((story["root"] / "map.json").read_text())
    assert sorted(e["problem_id"] for e in derived) == sorted(LIGHT)


@pytest.mark.hol
def test_each_dask_profiled_run_records_its_node_and_one_check_per_cpu(stopped_profile):
    out = stopped_profile["out"]
    generation = assert_seeded_runs_on_this_host(out, "dask")
    host = socket.gethostname()
    for run in generation["runs"]:
        rows = shards.read_results(out / run["dir"]).to_pylist()
        assert {(row["host"], row["cpu_model"]) for row in rows} == {(host, cpu_model())}
        assert {row["worker"].split("/")[0] for row in rows} == {"w0"}
    # Two threads on one CPU: still one check at a time, in every run.
    summary = json.loads((out / "summary.json").read_text())
    assert {run: seen[host]["most_at_once"] for run, seen in summary["at_once"].items()} == \
        {run["dir"]: 1 for run in generation["runs"]}


def test_a_check_waits_for_a_free_cpu_and_gives_up_when_told_to_stop(tmp_path):
    """cluster/cpu_slots.py without a prover: with every CPU of this process
    held, one more holder waits until one is let go, and gives up on stop."""
    cpus = cpu_slots.cpus()
    release, held = threading.Event(), []

    def hold():
        with cpu_slots.one_per_cpu(directory=tmp_path) as cpu:
            held.append(cpu)
            release.wait(30)
    threads = [threading.Thread(target=hold) for _ in cpus]
    for t in threads:
        t.start()
    wait_for(lambda: len(held) == len(cpus), 10, "every CPU held")
    assert sorted(held) == cpus
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    with pytest.raises(cpu_slots.Stopped):
        with cpu_slots.one_per_cpu(stop.is_set, directory=tmp_path):
            pass
    threading.Timer(0.5, release.set).start()
    started = time.monotonic()
    with cpu_slots.one_per_cpu(directory=tmp_path) as cpu:
        assert cpu in cpus and time.monotonic() - started >= 0.4
    for t in threads:
        t.join()
