"""Sweeps on a real Slurm (slurm/start-dev-cluster.sh), through submitit job
arrays: each array task loads HOL Light once and checks its share.

CPU is the budget here: every array task pays a cold HOL Light load (70-90 s
of CPU in bytecode, about 14 s natively: docs/native.md). So one sweep of the
whole example corpus carries a whole bad day on the cluster (the driver
stopped, one array task scancelled, the other preempted, the driver started
again), and several tests assert on it; its four task starts run natively,
on the session's build (PROOFBATCH_CACHE), and its verdicts are compared
with the local bytecode sweep's. Tests of one task at a time (memory,
array chunks, early stop, tasks added or requeued) are in
test_slurm_arrays.py.
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
from submitit.slurm.slurm import SlurmJobEnvironment

from cluster.claims import Pool
from cluster.slurm import Ledger
from runner.results import shards
from runner.reporting.status import read_status

from ..helpers import DEMO, expected_verdicts, ROOT, sacct, TEST_MEM_LIMIT
from ..test_stopping import SIGNALS_AT_DEFAULT

pytestmark = [pytest.mark.hol, pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

# Seconds between a preemption's SIGTERM and submitit's USR2: enough for the
# task's checks to find their prover killed.
PREEMPT_GAP_S = 3.0



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
        # The victim: a task whose claim stayed unfinished over one poll, so
        # that the cancel lands inside a check (the demo's light checks end in
        # milliseconds; on a loaded host the stray run above takes seconds).
        seen: dict[str, set] = {}

        def inside_a_lasting_check():
            done = done_keys(out)
            held = {r.job_id: claimed_by(out, r.job_id) - done for r in ledger}
            lasting = [r for r in ledger if held[r.job_id] & seen.get(r.job_id, set())]
            seen.update(held)
            return lasting and lasting[0]
        victim = wait_for(inside_a_lasting_check, 300, "an array task inside a check that lasts")
        preempted = next(r for r in ledger if r.job_id != victim.job_id)
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
        # A preemption as Slurm signals it: SIGTERM to every process of the
        # task, its prover's included, then submitit's USR2. submitit's
        # _interrupt sends both within milliseconds; seconds apart, the
        # task failed on its killed prover before the USR2 came (CI, stop 51).
        subprocess.run(["scancel", "--signal", "TERM", preempted.job_id], check=True)
        time.sleep(PREEMPT_GAP_S)
        subprocess.run(["scancel", "--signal", SlurmJobEnvironment.USR_SIG, preempted.job_id],
                       check=True)
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
    assert bad_day["victim_missing"], "the cancel landed when the task held no unfinished claim"
    retries = after[2:]
    assert retries and all(r.round == 1 for r in retries)
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
