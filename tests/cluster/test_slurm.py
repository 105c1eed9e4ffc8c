"""Sweeps on a real Slurm (slurm/start-dev-cluster.sh), through submitit job
arrays: each array task loads HOL Light once and checks its share.

CPU is the budget here: every array task pays a cold HOL Light load (70-90 s
of CPU in bytecode, about 14 s natively: docs/native.md). So one sweep of the
whole example corpus carries a whole bad day on the cluster (the driver
stopped, one array task scancelled, the other preempted, the driver started
again), and several tests assert on it; its four task starts run natively,
on the session's build (PROOFBATCH_CACHE), and its verdicts are compared
with the local bytecode sweep's. The memory test uses a tiny corpus and
never finishes loading HOL Light.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from submitit.slurm.slurm import SlurmJob

from cluster.base import SweepJob
from cluster.claims import Pool
from cluster.slurm import Ledger, SlurmExecutor, SlurmOptions
from runner.results import shards
from runner.results.done import SHARDS_DIR
from runner.prover import CheckResult
from runner.results.rows import utcnow
from runner.reporting.status import read_status
from runner.sweep import prepare, run_sweep
from runner.verdicts import Outcome, Verdict
from runner.checks.worker import result_row

from ..helpers import DEMO, demo_config, expected_verdicts, make_corpus, ROOT, sacct, TEST_MEM_LIMIT
from ..helpers import attempts_config, kept_by_early_stop
from ..helpers import LIGHT, SPIN, tiny_corpus
from ..test_stopping import SIGNALS_AT_DEFAULT

pytestmark = [pytest.mark.hol, pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]



def wait_for(predicate, timeout: float, what: str, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def all_shard_keys(out: Path) -> list[tuple[str, int]]:
    """One key per check that ran, from every row of every shard: a redone
    check shows twice. (The same run published twice, by a preempted task's
    checkpoint and its writer, is one run: same worker, same start.)"""
    runs = set()
    for path in sorted((out / "shards").glob("*.parquet")):
        runs |= {(r["problem_id"], r["attempt"], r["worker"], r["started_at"]) for r in
                 shards.pq.read_table(path, columns=["problem_id", "attempt", "worker",
                                                     "started_at"]).to_pylist()}
    return [(p, a) for p, a, _w, _s in runs]


def done_keys(out: Path) -> set[tuple[str, int]]:
    return set(shards.scan(out, repair=False).done)


def cli_driver_argv(out: Path, *cluster: str) -> list[str]:
    # The same sweep settings for the stray local run, so that only the lock refuses it.
    return [sys.executable, "-m", "runner.cli", "run", str(DEMO), "--out", str(out), *cluster,
            "--category-timeouts", str(DEMO / "timeouts.json"), "--mode", "native",
            "--mem-limit", f"{TEST_MEM_LIMIT // 2**20}M", "--context-root", str(DEMO)]


def cli_driver(out: Path) -> subprocess.Popen:
    # Stopped with Ctrl-C below: SIGINT at its default whatever the launcher's.
    return subprocess.Popen(
        [*SIGNALS_AT_DEFAULT, *cli_driver_argv(out, "--cluster", "slurm")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, env={**os.environ, "COLUMNS": "120"})


def claimed_by(out: Path, job_id: str) -> set[tuple[str, int]]:
    """The checks an array task claimed from the pool at some time (the
    demo's problems have one attempt each)."""
    return {(pid, 0) for pid in Pool(out / "slurm", "observer").ever_held_by(job_id)}


def pooled(out: Path, records) -> list[tuple[str, int]]:
    """The checks the given jobs were submitted to pull from."""
    ledger = Ledger(out / "slurm" / "jobs.json")
    return [k for r in records for k in ledger.keys_of(r)]


def running_jobs() -> dict[str, str]:
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T"], capture_output=True, text=True).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def run_bad_day(tmp_path_factory, holder: dict) -> dict:
    """The example corpus through `proofbatch run --cluster slurm` with the
    defaults (2 array tasks pulling from one pool). Once both tasks run and
    have claimed checks, one is scancelled; once the other has recorded
    verdicts with checks left, it is preempted (submitit's ``_interrupt``: the signals Slurm
    sends) and the driver is stopped (Ctrl-C); then the driver is started
    again on the same OUT."""
    out = holder["out"] = tmp_path_factory.mktemp("slurm-demo") / "out"
    story: dict = {"out": out, "statuses": []}
    ledger_path = out / "slurm" / "jobs.json"
    first = holder["first"] = cli_driver(out)
    story["first_pid"] = first.pid
    try:
        def both_running():
            if not ledger_path.exists():
                return None
            ledger = Ledger(ledger_path).records
            states = running_jobs()
            return len(ledger) == 2 and all(states.get(r.job_id) == "RUNNING" for r in ledger) \
                and all(claimed_by(out, r.job_id) for r in ledger) and ledger
        ledger = wait_for(both_running, 300, "both array tasks running and pulling")
        # A stray local run beside the Slurm driver: the sweep's lock refuses it.
        stray = subprocess.run(cli_driver_argv(out), cwd=ROOT, capture_output=True,
                               text=True, timeout=300, env={**os.environ, "COLUMNS": "120"})
        story["stray"] = (stray.returncode, stray.stdout + stray.stderr)
        victim, preempted = ledger
        subprocess.run(["scancel", victim.job_id], check=True)
        # It may publish rows until Slurm has it killed (KillWait after SIGTERM).
        wait_for(lambda: victim.job_id not in running_jobs(), 60,
                 f"Slurm to end the scancelled task {victim.job_id}")
        story["victim_missing"] = claimed_by(out, victim.job_id) - done_keys(out)

        def preempted_has_some_and_more_to_do():
            story["statuses"].append(read_status(out))
            done = done_keys(out)
            assert len(done) < len(expected_verdicts()), "the sweep finished before a preemption"
            return bool(claimed_by(out, preempted.job_id) & done)
        wait_for(preempted_has_some_and_more_to_do, 900, "a verdict from the other array task",
                 poll=0.5)
        SlurmJob(preempted.folder, preempted.job_id)._interrupt()     # preemption, as Slurm signals it
    finally:
        os.killpg(first.pid, signal.SIGINT)
        story["first_output"] = first.communicate(timeout=60)[0]
        story["first_exit"] = first.returncode
    story["ledger_before"] = ledger
    story["victim"], story["preempted"] = victim, preempted
    second = holder["second"] = cli_driver(out)
    deadline = time.monotonic() + 900
    while second.poll() is None and time.monotonic() < deadline:
        story["statuses"].append(read_status(out))
        time.sleep(0.5)
    story["second_output"] = second.communicate(timeout=60)[0]
    story["second_exit"] = second.returncode
    story["ledger_after"] = Ledger(out / "slurm" / "jobs.json").records
    return story


@pytest.fixture(scope="module")
def bad_day(native_build, tmp_path_factory):
    """The story above; whatever happens, no job of it outlives the tests."""
    holder: dict = {}
    try:
        yield run_bad_day(tmp_path_factory, holder)
    finally:
        for driver in (holder.get("first"), holder.get("second")):
            if driver is not None and driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait()
        ledger = holder.get("out") and holder["out"] / "slurm" / "jobs.json"
        if ledger and ledger.exists():
            ids = [r.job_id for r in Ledger(ledger).records]
            subprocess.run(["scancel", *ids], capture_output=True)


def test_the_example_corpus_gives_the_expected_verdicts_on_slurm(bad_day, demo_rows):
    assert bad_day["first_exit"] == 130, bad_day["first_output"]
    assert bad_day["second_exit"] == 0, bad_day["second_output"]
    with open(bad_day["out"] / "verdicts.csv") as f:
        got = dict(line.strip().split(",") for line in list(f)[1:])
    assert got == expected_verdicts()
    # Identical to the local executor's verdicts.
    table = shards.read_results(bad_day["out"]).to_pylist()
    assert {r["problem_id"]: r["verdict"] for r in table} == \
        {p: r["verdict"] for p, r in demo_rows.items()}
    assert {r["mode"] for r in table} == {"native"}


def test_a_local_run_beside_the_slurm_driver_is_refused_by_the_lock(bad_day):
    """Issue 24: one runner per sweep directory, whatever its executor. The
    local run, started while both array tasks pulled, exits 2 naming the
    Slurm driver, and the sweep's verdicts are the driver's alone."""
    code, said = bad_day["stray"]
    assert code == 2, said
    line = " ".join(said.split())
    assert "is in use by another proofbatch run" in line and "slurm" in line, line
    assert f"pid {bad_day['first_pid']}," in line, line


def test_a_restarted_driver_reattaches_instead_of_submitting_twice(bad_day):
    before, after = bad_day["ledger_before"], bad_day["ledger_after"]
    assert len(before) == 2, "the defaults run two array tasks"
    # The first two jobs are still the ones in the ledger; the only new job
    # replaces the scancelled task: one, not one per node.
    assert [r.job_id for r in after[:2]] == [r.job_id for r in before]
    assert len(after) == 3
    assert all(r.settled is not None for r in after)


def test_a_scancelled_array_task_is_finished_elsewhere_with_one_verdict_per_check(bad_day):
    after = bad_day["ledger_after"]
    victim = next(r for r in after if r.job_id == bad_day["victim"].job_id)
    assert victim.settled == "CANCELLED"      # from accounting: it ended while no driver watched
    retries = after[2:]
    assert retries and all(r.round == 1 for r in retries)
    assert bad_day["victim_missing"], "the cancel landed when the task held no unfinished claim"
    # Its replacement pulls from all that is left, the cancelled task's
    # unfinished claims among it; only those count a try.
    assert set(pooled(bad_day["out"], retries)) >= bad_day["victim_missing"]
    tries = Ledger(bad_day["out"] / "slurm" / "jobs.json").tries
    assert tries == {k: 1 for k in bad_day["victim_missing"]}
    # Each check ran once.
    keys = all_shard_keys(bad_day["out"])
    assert len(keys) == len(set(keys)) == len(expected_verdicts())


def test_status_shows_slurm_workers_while_the_sweep_runs(bad_day):
    statuses = bad_day["statuses"]
    assert statuses and {s.total for s in statuses} == {len(expected_verdicts())}
    done = [s.done for s in statuses]
    assert done == sorted(done), "a recorded check disappeared from the status"
    running = [r for s in statuses for r in s.running]
    assert running, "no array task showed a running check on the board"
    # Each with the limit it runs under (the demo's category limits). A board
    # left by the task killed at preemption shows as "worker gone".
    limits = json.loads((DEMO / "timeouts.json").read_text())
    for r in running:
        category = (DEMO / r.problem_id / "category.txt").read_text().strip()
        assert r.timeout_s == limits[category], r
    final = read_status(bad_day["out"])
    assert final.done == final.total and final.running == []


def test_a_preempted_task_is_requeued_and_resumes_from_its_shards(bad_day):
    out, preempted = bad_day["out"], bad_day["preempted"]
    [record] = [r for r in bad_day["ledger_after"] if r.job_id == preempted.job_id]
    # submitit requeued the same job (the driver submitted nothing for it),
    # and the requeued incarnation (SLURM_RESTART_COUNT=1) went on pulling.
    assert record.settled == "COMPLETED"
    rows = [r for r in shards.read_results(out).to_pylist()
            if (r["problem_id"], r["attempt"]) in claimed_by(out, preempted.job_id)]
    incarnations = {r["run_id"].rsplit("-", 1)[1] for r in rows}
    assert incarnations == {"r0", "r1"}, incarnations
    # Finished checks were never redone: each key once across every shard.
    keys = all_shard_keys(out)
    assert len(keys) == len(set(keys))
    states = [row[1] for row in sacct(record.job_id)]
    assert "REQUEUED" in states or "PREEMPTED" in states, states


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
