"""Slurm array tasks one at a time, on a real Slurm (slurm/start-dev-cluster.sh):
a task over its memory request is reported, not lost; arrays larger than the
site allows are submitted in chunks; attempts an early stop skipped are
neither lost nor rerun; a task added to a running sweep pulls from its pool;
a task requeued after its result file exists is watched, not replaced. The
whole example corpus's bad day on the cluster is in test_slurm.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from submitit.slurm.slurm import SlurmJob

from cluster.base import SweepJob
from cluster.claims import Pool
from cluster.slurm import Ledger, SlurmExecutor, SlurmOptions
from runner.results import shards
from runner.results.done import SHARDS_DIR
from runner.prover import CheckResult
from runner.results.rows import utcnow
from runner.sweep import prepare, run_sweep
from runner.verdicts import Outcome, Verdict
from runner.checks.worker import result_row

from ..helpers import demo_config, make_corpus, ROOT, TEST_MEM_LIMIT
from ..helpers import attempts_config, kept_by_early_stop
from ..helpers import LIGHT, SPIN, tiny_corpus
from ..test_stopping import SIGNALS_AT_DEFAULT
from .test_slurm import all_shard_keys, claimed_by, running_jobs, wait_for

pytestmark = [pytest.mark.hol, pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]


def test_a_task_over_its_slurm_memory_is_reported_not_lost(tmp_path):
    """HOL Light's base image alone needs about 350 MB: a 150 MB request is
    killed by Slurm while the task loads it. The checks are retried in a new
    job once, then recorded as ERROR with the reason."""
    corpus, timeouts = tiny_corpus(tmp_path, spin_limit=15)
    out = tmp_path / "out"
    prepared = prepare(demo_config(out, corpus=corpus, category_timeouts=timeouts, workers=1))
    executor = SlurmExecutor(SlurmOptions(nodes=1, mem_per_node=150 * 2**20, retries=1, poll_s=1.0))
    summary = run_sweep(prepared, executor)
    assert summary.counts == {"ERROR": len(LIGHT) + 1}
    for row in summary.table.to_pylist():
        assert "exceeded its memory request (--mem=150M)" in row["reason"], row["reason"]
        assert "2 Slurm jobs ran this check" in row["reason"]
        assert row["exit_status"].startswith("slurm ")
    records = Ledger(out / "slurm" / "jobs.json").records
    assert [r.round for r in records] == [0, 1]
    assert all(r.settled not in (None, "COMPLETED") for r in records)


def test_arrays_larger_than_the_site_allows_are_submitted_in_chunks(tmp_path):
    """Three array tasks with arrays capped at two: two arrays. Every check is
    already recorded, so each task only rescans the shards and exits: no
    HOL Light load."""
    corpus, timeouts = tiny_corpus(tmp_path, spin_limit=15)
    for i, problem in enumerate(sorted(corpus.iterdir())):    # four contexts: four image groups
        (problem / "setup.ml").write_text(f"let pb_chunk_{i} = {i};;\n")
    out = tmp_path / "out"
    prepared = prepare(demo_config(out, corpus=corpus, category_timeouts=timeouts, workers=1))
    now = utcnow()
    with shards.ShardWriter(out, "earlier-run") as writer:
        for task in prepared.tasks:
            writer.add(result_row(task, CheckResult(Outcome(Verdict.OK, "recorded earlier"), 0.0, 0.0,
                                                    None, "", "exited 0"),
                                  info=prepared.backend.info, worker="earlier", run_id="earlier",
                                  started_at=now, finished_at=now))
    executor = SlurmExecutor(SlurmOptions(nodes=3, max_array_size=2, poll_s=1.0))
    executor.execute(SweepJob(prepared.backend, prepared.tasks, out, "chunks"), lambda row: None)
    records = Ledger(out / "slurm" / "jobs.json").records
    arrays = {r.job_id.split("_")[0]: [] for r in records}
    for r in records:
        arrays[r.job_id.split("_")[0]].append(r)
    assert sorted(len(a) for a in arrays.values()) == [1, 2]
    assert all(r.settled == "COMPLETED" for r in records)
    # Every task pulls from the same pool: all of the sweep's checks.
    for r in records:
        assert sorted(Ledger(out / "slurm" / "jobs.json").keys_of(r)) == sorted(
            (t.problem.problem_id, t.attempt) for t in prepared.tasks)


def test_attempts_skipped_by_early_stop_are_neither_lost_nor_rerun(tmp_path):
    """--stop-on-first-ok on Slurm: the attempts after a problem's OK one get
    no row. The driver must not take them for checks its job lost (retry,
    then ERROR), nor a task run them. As in the chunk test, every attempt up
    to each first OK is recorded already, so the task only rescans the
    shards: no HOL Light load."""
    out = tmp_path / "out"
    prepared = prepare(attempts_config(out, stop_on_first_ok=True, workers=1))
    kept = kept_by_early_stop()
    now = utcnow()
    with shards.ShardWriter(out, "earlier-run") as writer:
        for task in prepared.tasks:
            key = (task.problem.problem_id, task.attempt)
            if key in kept:
                writer.add(result_row(task, CheckResult(Outcome(Verdict(kept[key][0]), "recorded earlier"),
                                                        0.0, 0.0, None, "", "exited 0"),
                                      info=prepared.backend.info, worker="earlier", run_id="earlier",
                                      started_at=now, finished_at=now))
    assert len(kept) < len(prepared.tasks)
    rows = []
    executor = SlurmExecutor(SlurmOptions(nodes=1, retries=1, poll_s=1.0))
    executor.execute(SweepJob(prepared.backend, prepared.tasks, out, "early"), rows.append)
    records = Ledger(out / "slurm" / "jobs.json").records
    assert [(r.round, r.settled) for r in records] == [(0, "COMPLETED")], "a skipped attempt was retried"
    assert sorted((r.problem_id, r.attempt) for r in rows) == sorted(kept)
    assert {r.reason for r in rows} == {"recorded earlier"}
    assert sorted(p.name for p in (out / SHARDS_DIR).glob("*.parquet")) == \
        sorted(p.name for p in (out / SHARDS_DIR).glob("earlier-run*.parquet")), \
        "the array task ran checks"


def test_a_task_added_to_a_running_sweep_pulls_from_its_pool(native_build, tmp_path):
    """A sweep on one array task; while it runs, a second `proofbatch run`
    of the same sweep with `--add-tasks 1` adds another. Both pull from one
    pool: the added task checks some of it, and no check runs twice. Native
    HOL Light (the session's build, through PROOFBATCH_CACHE): each task
    starts in about 14 s, not a bytecode load's 70-90."""
    corpus = make_corpus(tmp_path / "corpus", {f"slow.spin{i}": ("", "`F`\n", SPIN + "\n")
                                                for i in range(4)}, category="slow")
    timeouts = tmp_path / "timeouts.json"
    # Each spin runs to its CPU limit: alone, the first task would take 4 x 10 s
    # after its boot; the added task is submitted while that task boots.
    timeouts.write_text(json.dumps({"slow": 10}))
    out = tmp_path / "out"

    def driver(*extra):
        return subprocess.Popen(
            [sys.executable, "-m", "runner.cli", "run", str(corpus), "--out", str(out),
             "--cluster", "slurm", "--nodes", "1", "--category-timeouts", str(timeouts), "--mode", "native",
             "--mem-limit", f"{TEST_MEM_LIMIT // 2**20}M", *extra],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)

    first = driver()
    added = None
    try:
        wait_for(lambda: (out / "slurm" / "jobs.json").exists(), 120, "the sweep's first job")
        added = driver("--add-tasks", "1")
        assert first.wait(timeout=600) == 0, first.communicate()[0]
        assert added.wait(timeout=600) == 0, added.communicate()[0]
    finally:
        for proc in (first, added):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        ids = [r.job_id for name in ("jobs.json", *[p.name for p in (out / "slurm").glob("added-*.json")])
               for r in Ledger(out / "slurm" / name).records]
        subprocess.run(["scancel", *ids], capture_output=True)
    [own] = Ledger(out / "slurm" / "jobs.json").records
    [extra] = [r for p in (out / "slurm").glob("added-*.json") for r in Ledger(p).records]
    assert claimed_by(out, extra.job_id), "the added task took no work"
    assert claimed_by(out, own.job_id), "the sweep's own task took no work"
    keys = all_shard_keys(out)
    assert sorted(keys) == sorted(set(keys)) == [(f"slow.spin{i}", 0) for i in range(4)]
    rows = shards.read_results(out).to_pylist()
    assert {r["verdict"] for r in rows} == {"TIMEOUT"} and {r["mode"] for r in rows} == {"native"}


def test_a_task_requeued_after_its_result_file_is_watched_not_replaced(native_build, tmp_path):
    """A task that ended with submitit's result file written, then requeued,
    runs again under the same id with that file still there (the natively-run
    bad day's ledger showed the preempted task settled 'RUNNING' so; likely
    its image died of the preemption's SIGTERM, as the scancelled task's
    does, and its error was written before SIGUSR2 requeued it). The driver started again meanwhile must watch the
    running task, not take it for ended: the old driver did after 30 s,
    released its live claims, counted them a try and submitted a job for
    them. Here the first incarnation ends at once (a live holder has every
    claim, so it boots nothing); `scontrol requeue` runs it again, natively,
    for four spins of 10 s."""
    spins = [f"slow.spin{i}" for i in range(4)]
    corpus = make_corpus(tmp_path / "corpus", {p: ("", "`F`\n", SPIN + "\n") for p in spins},
                         category="slow")
    timeouts = tmp_path / "timeouts.json"
    timeouts.write_text(json.dumps({"slow": 10}))
    out = tmp_path / "out"

    def driver(*extra):
        # Stopped with Ctrl-C below: SIGINT at its default whatever the launcher's.
        return subprocess.Popen(
            [*SIGNALS_AT_DEFAULT, sys.executable, "-m", "runner.cli", "run", str(corpus), "--out", str(out),
             "--cluster", "slurm", "--nodes", "1", "--category-timeouts", str(timeouts), "--mode", "native",
             "--mem-limit", f"{TEST_MEM_LIMIT // 2**20}M", *extra],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)

    ledger_path = out / "slurm" / "jobs.json"
    # Held until the first driver is stopped: the task cannot start before.
    first = driver("--slurm-extra", "begin=now+600")
    second = None
    try:
        def submitted():
            assert first.poll() is None, first.communicate()[0]
            return ledger_path.exists() and Ledger(ledger_path).records
        [job] = wait_for(submitted, 300, "the sweep's job")
        holder = Pool(out / "slurm", "observer")
        holder.start_lease()
        assert [holder.claim(p) for p in spins] == ["new"] * 4
        os.killpg(first.pid, signal.SIGINT)
        assert first.wait(timeout=60) == 130, first.communicate()[0]
        assert running_jobs().get(job.job_id) == "PENDING"
        subprocess.run(["scontrol", "update", f"JobId={job.job_id}", "StartTime=now"], check=True)
        result_file = SlurmJob(job.folder, job.job_id).paths.result_pickle
        wait_for(lambda: result_file.exists() and job.job_id not in running_jobs(), 120,
                 "the first incarnation to end with its result file")
        holder.release_holder("observer", keep=lambda _problem: False)
        holder.stop_lease()
        subprocess.run(["scontrol", "requeue", job.job_id], check=True)
        assert result_file.exists() and job.job_id in running_jobs()
        second = driver()
        assert second.wait(timeout=600) == 0, second.communicate()[0]
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        if ledger_path.exists():
            subprocess.run(["scancel", *[r.job_id for r in Ledger(ledger_path).records]],
                           capture_output=True)
    ledger = Ledger(ledger_path)
    # No second job, no try counted: the requeued task checked everything.
    assert [(r.job_id, r.settled) for r in ledger.records] == [(job.job_id, "COMPLETED")]
    assert ledger.tries == {}
    keys = all_shard_keys(out)
    assert sorted(keys) == sorted(set(keys)) == [(p, 0) for p in spins]
    rows = shards.read_results(out).to_pylist()
    assert {r["run_id"].rsplit("-", 1)[1] for r in rows} == {"r1"}
    assert {r["verdict"] for r in rows} == {"TIMEOUT"}
