"""`proofbatch profile --cluster slurm` on the real Slurm (slurm/start-dev-cluster.sh):
three runs of three light demo problems, each run a sweep of one array task.

CPU is the budget: each array task boots HOL Light, and this profile starts
four of them one after another (three runs and a replacement). So they run
natively (the session's build, through PROOFBATCH_CACHE): a native task
starts in about 14 s, a bytecode one in 70-90 s of CPU (docs/native.md), and
nothing asserted here depends on the mode. One profile carries the bad day:
while run 2's task is checking, it is scancelled and the driver is stopped
(Ctrl-C); the same command started again resumes the profile, and the driver
replaces the cancelled task. Each check busies itself a second or two before
its proof, so that the cancel lands between checks.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.slurm import Ledger
from runner.checks.worker import cpu_model
from runner.results import shards

from ..helpers import LIGHT, ROOT
from ..test_stopping import SIGNALS_AT_DEFAULT
from .profile_checks import RUN_2, assert_seeded_runs_on_this_host, assert_three_times_each
from .profile_checks import busy_corpus, profile_args, start_driver, stopped_then_resumed
from .test_slurm import claimed_by, done_keys, running_jobs, wait_for

pytestmark = [pytest.mark.hol, pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

# A second or two of native code before the proof (3e9 turns of this loop
# took 2.2 s of CPU compiled by ocamlopt here): long enough for a cancel to
# land between checks, short enough for three runs of three problems.
BUSY = "(fun g -> let r = ref 0 in for i = 1 to 3000000000 do r := !r + i done; ALL_TAC g) THEN "


def ledgers(out: Path) -> list[Path]:
    return sorted(out.glob("runs/*/slurm/jobs.json"))


@pytest.fixture(scope="module")
def cancelled_profile(native_build, tmp_path_factory):
    """Run 2's array task scancelled while it has checks left, the driver
    stopped with Ctrl-C, then the same command again."""
    root = tmp_path_factory.mktemp("slurm-profile")
    corpus, out = busy_corpus(root, BUSY), root / "profile"
    run2 = out / RUN_2
    # Stopped with Ctrl-C: SIGINT at its default whatever the launcher's.
    argv = [*SIGNALS_AT_DEFAULT, sys.executable, "-m", "runner.cli", *profile_args(corpus, out),
            "--cluster", "slurm", "--nodes", "1", "--mode", "native"]

    def task_checking():
        path = run2 / "slurm" / "jobs.json"
        if not path.exists():
            return None
        records = Ledger(path).records
        states = running_jobs()
        live = [r for r in records if states.get(r.job_id) == "RUNNING" and claimed_by(run2, r.job_id)]
        return live and len(done_keys(run2)) < len(LIGHT) and live[0]

    def mid_run_2(first) -> dict:
        victim = wait_for(task_checking, 1500, "run 2's array task checking, with checks left")
        subprocess.run(["scancel", victim.job_id], check=True)
        wait_for(lambda: victim.job_id not in running_jobs(), 60, f"Slurm to end task {victim.job_id}")
        return {"victim": victim.job_id, "done_at_cancel": done_keys(run2)}
    try:
        with stopped_then_resumed(lambda: start_driver(argv, ROOT), mid_run_2, signal.SIGINT,
                                  resume_s=2400) as story:
            yield {**story, "out": out, "run2": run2}
    finally:
        ids = [r.job_id for path in ledgers(out) for r in Ledger(path).records]
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True)


def test_a_profile_on_slurm_resumes_after_a_cancelled_task_with_three_times_each(cancelled_profile):
    story = cancelled_profile
    assert story["first_exit"] == 130, story["first_output"]
    assert story["second_exit"] == 0, story["second_output"]
    assert len(story["done_at_cancel"]) < len(LIGHT)
    assert_three_times_each(story["out"])      # the cancelled task's rows included
    # The cancelled task was replaced by a new job of run 2.
    records = Ledger(story["run2"] / "slurm" / "jobs.json").records
    victim = next(r for r in records if r.job_id == story["victim"])
    assert victim.settled == "CANCELLED"
    assert any(r.settled == "COMPLETED" and r.submitted > victim.submitted for r in records)


def test_each_profiled_run_records_its_node_and_one_check_per_core(cancelled_profile):
    out = cancelled_profile["out"]
    generation = assert_seeded_runs_on_this_host(out, "slurm")
    host = socket.gethostname()
    summary = json.loads((out / "summary.json").read_text())
    # One array task of one CPU per run: never two checks at once.
    assert {run: seen[host]["most_at_once"] for run, seen in summary["at_once"].items()} == \
        {run["dir"]: 1 for run in generation["runs"]}
    assert summary["nodes"]["reference"] == host and not summary["nodes"]["differ"]
    rows = shards.read_results(out / generation["runs"][0]["dir"]).to_pylist()
    assert {(row["host"], row["cpu_model"]) for row in rows} == {(host, cpu_model())}
    assert {row["mode"] for row in rows} == {"native"}
