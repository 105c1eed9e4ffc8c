"""The fixed-share baseline of benchmarks/slurm/slurm_elastic.py: Slurm array tasks
that each own a share of the sweep fixed at submission, as cluster/slurm.py
ran them before its tasks pulled from one pool (commit fb7dbc0).

``FixedShares`` is an executor: ``run_sweep`` drives it as it drives
``SlurmExecutor``, so both write the same OUT (manifest, plan, shards,
images, merge). It splits the pending checks with the planner's forecast
(``cluster.shares.planned_shares``, the split the pulling executor writes
to OUT/plan.json), submits one array task per share with submitit, and each
task runs ``LocalExecutor(workers=1)`` over exactly its share, dispatched by
the plan restricted to that share. When a task ends (cancelled, failed or
done) with checks of its share unrecorded, those checks go to one new job,
as the old driver did; nothing else moves between tasks.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq
import submitit
from submitit.slurm.slurm import SlurmJob

from cluster.base import Executor, SweepJob
from cluster.local import LocalExecutor
from cluster.shares import planned_shares
from cluster.slurm_jobs import UNFINISHED
from runner.results.done import SHARDS_DIR
from runner.results.rows import ResultRow
from runner.checks.tasks import CheckTask

BENCH_DIR = Path(__file__).resolve().parent
LEDGER = Path("fixed") / "jobs.json"
# sacct lags a few seconds behind a job's end (../shared/notes/slurm-dev-cluster.md):
# a job done with an unfinished state is given this long to settle.
SETTLE_S = 30.0


def key_of(task: CheckTask) -> tuple[str, int]:
    return task.problem.problem_id, task.attempt


class ShareJob:
    """One array task: a fresh prover session over one fixed share.

    Pickled by reference, so the task's Python imports this module: the
    sbatch script puts benchmarks/ on PYTHONPATH (``FixedShares._submit``)."""

    def __init__(self, backend, tasks: list[CheckTask], plan, out: Path, writer_prefix: str):
        self.backend, self.tasks, self.plan = backend, tasks, plan
        self.out, self.writer_prefix = Path(out), writer_prefix

    def __call__(self) -> int:
        print(f"proofbatch: fixed share of {len(self.tasks)} checks started at {time.time():.3f}",
              flush=True)
        plan = self.plan.only(key_of(t) for t in self.tasks) if self.plan is not None else None
        LocalExecutor(workers=1).execute(
            SweepJob(self.backend, self.tasks, self.out, self.writer_prefix, plan), lambda row: None)
        return len(self.tasks)


class FixedShares(Executor):
    name = "fixed-shares"

    def __init__(self, nodes: int = 2, poll_s: float = 1.0, retries: int = 2):
        self.nodes, self.poll_s, self.retries = nodes, poll_s, retries
        self.shares: list[list[tuple[str, int]]] = []    # the planner's split, for the report

    def _mem_bytes(self, job: SweepJob) -> int:
        # What SlurmExecutor requests for one worker thread: the images plus one check.
        return job.backend.allowances.image_bytes + max(t.limits.mem_bytes for t in job.tasks)

    def _submit(self, job: SweepJob, shares: list[list[CheckTask]], plan, ledger: list[dict]):
        folder = job.out / "fixed" / "submitit" / f"{job.run_id}-{uuid.uuid4().hex[:6]}"
        ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=0)
        work = max(sum(t.limits.time_s + job.backend.grace_s for t in s) for s in shares)
        ex.update_parameters(
            job_name=f"proofbatch-fixed-{uuid.uuid4().hex[:8]}", nodes=1, ntasks_per_node=1,
            cpus_per_task=1, mem=f"{self._mem_bytes(job) // 2**20}M",
            time=min(24 * 60, math.ceil((job.backend.allowances.boot_s + work) / 60)),
            array_parallelism=len(shares), stderr_to_stdout=True,
            setup=[f"export PYTHONPATH={BENCH_DIR}${{PYTHONPATH:+:$PYTHONPATH}}"])
        n = len(ledger)
        workers = [ShareJob(job.backend, s, plan, job.out, f"{job.run_id}-f{n + i}")
                   for i, s in enumerate(shares)]
        jobs = ex.submit_array(workers) if len(workers) > 1 else [ex.submit(workers[0])]
        submitted = time.time()
        for j, s in zip(jobs, shares):
            ledger.append({"job": j, "job_id": j.job_id, "keys": [key_of(t) for t in s],
                           "submitted": submitted, "state": None})
        self._save(job.out, ledger)

    @staticmethod
    def _save(out: Path, ledger: list[dict]) -> None:
        path = out / LEDGER
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([{k: v for k, v in r.items() if k != "job"} for r in ledger],
                                   indent=1) + "\n")

    def execute(self, job: SweepJob, on_row: Callable[[ResultRow], None]) -> None:
        by_key = {key_of(t): t for t in job.tasks}
        plan, _prediction, shares = planned_shares(job.tasks, job.plan, self.nodes, 1,
                                                   self._mem_bytes(job))
        self.shares = [[key_of(t) for t in s] for s in shares]
        ledger: list[dict] = []
        self._submit(job, shares, plan, ledger)
        seen_files: set[Path] = set()
        recorded: set[tuple[str, int]] = set()
        tries: dict[tuple[str, int], int] = {}
        ended: dict[str, float] = {}
        while True:
            for row in new_rows(job.out, seen_files, recorded, by_key):
                on_row(ResultRow(**row))
            if recorded >= set(by_key):
                return
            # submitit's watcher asks sacct at growing intervals (up to 10 min)
            # unless told: the pulling driver asks every poll, and so does this one.
            SlurmJob.watcher.update()
            for r in [r for r in ledger if r["state"] is None]:
                j = r["job"]
                if not j.done():
                    continue
                state = (j.state or "UNKNOWN").split()[0]
                first = ended.setdefault(r["job_id"], time.monotonic())
                if state in UNFINISHED and time.monotonic() - first < SETTLE_S:
                    continue
                for row in new_rows(job.out, seen_files, recorded, by_key):
                    on_row(ResultRow(**row))
                r["state"] = state
                left = [k for k in r["keys"] if k not in recorded]
                for k in left:
                    tries[k] = tries.get(k, 0) + 1
                if any(tries[k] > self.retries for k in left):
                    raise SystemExit(f"benchmark invalid: fixed-share job {r['job_id']} ended "
                                     f"{state}, and its checks had no tries left")
                if left:
                    # The rest of its share, to one new job: the old driver's rule.
                    self._submit(job, [[by_key[k] for k in left]], plan, ledger)
                self._save(job.out, ledger)
            time.sleep(self.poll_s)


def new_rows(out: Path, seen_files: set[Path], recorded: set, wanted) -> list[dict]:
    """Rows of ``wanted`` checks in shards not read before; each check once
    (compaction folds published shards into new files)."""
    rows = []
    shards_dir = out / SHARDS_DIR
    for path in sorted(shards_dir.glob("*.parquet")) if shards_dir.is_dir() else ():
        if path in seen_files:
            continue
        try:
            table = pq.read_table(path)
        except Exception:
            continue               # being published: read it next time
        seen_files.add(path)
        for row in table.to_pylist():
            key = (row["problem_id"], int(row["attempt"]))
            if key in wanted and key not in recorded:
                recorded.add(key)
                rows.append(row)
    return rows
