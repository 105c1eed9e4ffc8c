"""The Slurm executor: a sweep as submitit job arrays.

Each array task is one worker on one node. It starts ONE prover session
(HOL Light costs 70-90 s of CPU to load), builds the images its share needs
once, and checks its share of the plan with the local executor's threads,
publishing shards to OUT on the shared filesystem. Never one job per check.

The driver only submits, watches and merges:
- job ids go to ``OUT/slurm/jobs.json``, so a driver stopped and started
  again on the same OUT reattaches to the jobs still queued or running
  instead of submitting twice;
- a preempted or timed-out task is requeued by submitit (``Checkpointable``)
  and resumes from the shards: finished checks are never redone;
- when a job ends for good with checks of its share unrecorded (cancelled,
  killed for memory, node failure), those checks go to a new job, up to
  ``retries`` times; after that each is recorded as ERROR with the reason.
"""

from __future__ import annotations

import math
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq
import submitit
from submitit.helpers import Checkpointable
from submitit.slurm.slurm import SlurmJob

from runner import attempts, shards
from runner.errors import InputError, ProverError
from runner.prover import CheckResult
from runner.results import ResultRow, utcnow
from runner.settings import setting as _help
from runner.verdicts import Outcome, Verdict
from runner.worker import CheckTask, result_row

from .base import Executor, SweepJob
from .local import LocalExecutor
from .shares import planned_shares, split_shares
from .slurm_jobs import LEDGER, UNFINISHED, JobRecord, Ledger, final_state, max_array_size, queued_names

# A task holds the base image and its contexts besides the checks; forked
# checks share the image's pages, but Slurm's jobacct_gather adds up the RSS
# of every process, so the request counts them again.
IMAGE_ALLOWANCE = 2**30
# Loading HOL Light cold: 70-90 s of CPU, several times that on a busy node.
BOOT_ALLOWANCE_S = 600.0
MEMORY_KILL = re.compile(r"exceeded memory limit|oom-kill|out of memory|OUT_OF_MEMORY", re.I)


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = _help("Slurm partition; default: the cluster's default", default=None)
    nodes: int = _help("array tasks the sweep is split into, one worker (node) each", default=2)
    cpus_per_task: int = _help("checks each array task runs at once (threads sharing its session)",
                               default=1)
    mem_per_node: int | None = _help("bytes requested per array task, e.g. 8G; default: 1 GiB for "
                                     "the images plus cpus-per-task x --mem-limit", default=None)
    array_parallelism: int | None = _help("array tasks running at once; default: nodes", default=None)
    extra: tuple[tuple[str, str], ...] = _help("further sbatch options as (name, value), e.g. "
                                               "qos=high (repeatable)", default=())
    retries: int = _help("new jobs for the checks of a job that ended for good", default=2)
    max_walltime_min: int = _help("walltime cap per job; a longer share is requeued from its "
                                  "shards when it times out", default=24 * 60)
    poll_s: float = _help("seconds between looks at the jobs and the shards", default=2.0)
    max_array_size: int | None = _help("largest array to submit; default: the site's "
                                       "MaxArraySize (scontrol show config)", default=None)

    def __post_init__(self):
        for name in ("nodes", "cpus_per_task"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')}", f"{getattr(self, name)} is not a count",
                                 "pass 1 or more")
        if self.retries < 0:
            raise InputError("--slurm-retries", f"{self.retries} is negative", "pass 0 or more")


def task_key(task: CheckTask) -> tuple[str, int]:
    return task.problem.problem_id, task.attempt


class ShareWorker(Checkpointable):
    """One array task: a prover session and a share of the plan.

    submitit's ``Checkpointable``: on preemption or timeout the same share is
    requeued, and rerunning it skips every check already in a shard.
    """

    def __init__(self, backend, tasks: list[CheckTask], out: Path, writer_prefix: str, threads: int):
        self.backend, self.tasks, self.out = backend, tasks, Path(out)
        self.writer_prefix, self.threads = writer_prefix, threads

    def __call__(self) -> int:
        done = shards.scan(self.out, repair=False, columns=shards.LIGHT).done
        # Less what is recorded and what early stop skips; a repeated answer
        # whose original is recorded reuses its verdict (runner/attempts.py).
        todo, _skipped = attempts.pending(self.tasks, done)
        if not todo:
            return 0
        # For the log, and for benchmarks/slurm_overhead.py (start cost of a task).
        print(f"proofbatch: share of {len(todo)} checks started at {time.time():.3f}", flush=True)
        # Slurm sets SLURM_RESTART_COUNT on a requeued job: a fresh writer id
        # per incarnation keeps its image record apart from the earlier one's.
        prefix = f"{self.writer_prefix}-r{os.environ.get('SLURM_RESTART_COUNT', '0')}"
        self._prefix, self._finished = prefix, []
        # The local executor starts the session (its scratch under the node's
        # TMPDIR, not the shared OUT) and publishes shards and boards to OUT.
        try:
            LocalExecutor(workers=self.threads).execute(
                SweepJob(self.backend, todo, self.out, prefix), self._finished.append)
        finally:
            self._finished = []
        return len(todo)

    def checkpoint(self, *args, **kwargs):
        """submitit calls this on preemption or timeout, right before it
        requeues the job, and the requeue kills the task at once: rows still
        buffered in the shard writers would be lost and their checks redone.
        Publish every finished row not yet in a shard first."""
        finished, self._finished = list(getattr(self, "_finished", [])), []
        if finished:
            on_disk = shards.scan(self.out, repair=False, columns=shards.LIGHT).done
            rows = [r for r in finished if (r.problem_id, r.attempt) not in on_disk]
            if rows:
                with shards.ShardWriter(self.out, f"{self._prefix}-checkpoint") as writer:
                    for row in rows:
                        writer.add(row)
        return super().checkpoint(*args, **kwargs)


class SlurmExecutor(Executor):
    name = "slurm"

    def __init__(self, options: SlurmOptions | None = None):
        self.options = options or SlurmOptions()
        self._seen_shards: set[Path] = set()
        self._reported: set[tuple[str, int]] = set()
        self._solved: set[str] = set()      # problems with an OK row (early stop)

    # -- requests ------------------------------------------------------------

    def _mem_request(self, tasks: list[CheckTask]) -> str:
        o = self.options
        if o.mem_per_node is not None:
            return f"{max(1, o.mem_per_node // 2**20)}M"
        per_check = max(t.limits.mem_bytes for t in tasks)
        return f"{(IMAGE_ALLOWANCE + o.cpus_per_task * per_check) // 2**20}M"

    def _walltime_min(self, tasks: list[CheckTask], grace_s: float) -> int:
        work = sum(t.limits.time_s + grace_s for t in tasks) / self.options.cpus_per_task
        return max(5, min(self.options.max_walltime_min, math.ceil((BOOT_ALLOWANCE_S + work) / 60)))

    def _shares(self, job: SweepJob, tasks: list[CheckTask], keyer,
                nodes: int) -> list[list[CheckTask]]:
        """The planner's split when the sweep has a plan; else image groups
        dealt round-robin. The plan, with this executor's worker shape, goes
        to OUT/plan.json for ``proofbatch status``."""
        o = self.options
        if getattr(job, "plan", None) is None:
            return split_shares(tasks, nodes, keyer)
        from runner.planner import PLAN_FILE, write_plan

        mem = int(self._mem_request(tasks)[:-1]) * 2**20
        plan, prediction, shares = planned_shares(tasks, job.plan, nodes, o.cpus_per_task, mem)
        write_plan(job.out / PLAN_FILE, plan, prediction, run_id=job.run_id)
        return shares

    def _submit(self, job: SweepJob, ledger: Ledger, shares: list[list[CheckTask]], round_: int) -> None:
        o = self.options
        folder = job.out / "slurm" / "submitit" / f"{job.run_id}-{uuid.uuid4().hex[:6]}"
        chunk = max(1, o.max_array_size or max_array_size())
        grace = getattr(job.backend, "grace_s", 2.0)
        # One array per chunk: every task asks for what its largest share needs.
        # Sites cap array sizes (MaxArraySize); larger sets go in chunks.
        for start in range(0, len(shares), chunk):
            part = shares[start:start + chunk]
            mem = max((self._mem_request(s) for s in part), key=lambda m: int(m[:-1]))
            minutes = max(self._walltime_min(s, grace) for s in part)
            name = f"proofbatch-{uuid.uuid4().hex[:8]}"
            ex = submitit.SlurmExecutor(folder=folder,
                                        max_num_timeout=2 + math.ceil(
                                            sum(t.limits.time_s for s in part for t in s)
                                            / 60 / o.max_walltime_min))
            params = dict(job_name=name, time=minutes, mem=mem, cpus_per_task=o.cpus_per_task,
                          nodes=1, ntasks_per_node=1,
                          array_parallelism=o.array_parallelism or o.nodes,
                          signal_delay_s=min(90, minutes * 15), stderr_to_stdout=True)
            if o.partition:
                params["partition"] = o.partition
            if o.extra:
                params["additional_parameters"] = dict(o.extra)
            ex.update_parameters(**params)
            n = len(ledger.records)
            workers = [ShareWorker(job.backend, share, job.out, f"{job.run_id}-s{n + i}",
                                   o.cpus_per_task) for i, share in enumerate(part)]
            try:
                jobs = ex.submit_array(workers) if len(workers) > 1 else [ex.submit(workers[0])]
            except Exception as exc:
                raise ProverError(f"Slurm refused the sweep's jobs: {exc}") from exc
            submitted = time.time()
            for j, share in zip(jobs, part):
                ledger.records.append(JobRecord(j.job_id, name, str(folder),
                                                [task_key(t) for t in share], round_, mem,
                                                submitted))
            ledger.save()

    # -- watching ------------------------------------------------------------

    def _new_rows(self, out: Path, wanted: set[tuple[str, int]]) -> list[dict]:
        rows = []
        shards_dir = out / shards.SHARDS_DIR
        for path in sorted(shards_dir.glob("*.parquet")) if shards_dir.is_dir() else ():
            if path in self._seen_shards:
                continue
            try:
                table = pq.read_table(path)
            except Exception:
                continue           # being published: read it next time
            self._seen_shards.add(path)
            for row in table.to_pylist():
                key = (row["problem_id"], int(row["attempt"]))
                if key in wanted and key not in self._reported:
                    self._reported.add(key)
                    rows.append(row)
                    if row["verdict"] == Verdict.OK.value:
                        self._solved.add(key[0])
        return rows

    def _unsettled(self, keys, by_key: dict) -> list[tuple[str, int]]:
        """Of ``keys``, the checks of this sweep with no row yet, less the
        attempts early stop skips: a skipped attempt gets no row, and is not
        a check its job failed to finish (runner/attempts.py)."""
        return [k for k in keys if k in by_key and k not in self._reported
                and not (by_key[k].skip_if_solved and k[0] in self._solved)]

    def _end_reason(self, record: JobRecord, state: str) -> str:
        log = ""
        try:
            log = SlurmJob(record.folder, record.job_id).paths.stdout.read_text(errors="replace")
        except OSError:
            pass
        if MEMORY_KILL.search(log) or "OUT_OF_MEMORY" in state:
            return f"Slurm job {record.job_id} exceeded its memory request (--mem={record.mem}) and was killed"
        return f"Slurm job {record.job_id} ended {state} before checking it"

    def execute(self, job: SweepJob, on_row: Callable[[ResultRow], None]) -> None:
        o = self.options
        ledger = Ledger(job.out / "slurm" / LEDGER)
        by_key = {task_key(t): t for t in job.tasks}
        wanted = set(by_key)
        # Reattach: jobs of an earlier driver that Slurm still has, under the
        # name we gave them (ids restart at 1 when Slurm's state is wiped).
        open_records = [r for r in ledger.records if r.settled is None]
        queued = queued_names([r.job_id for r in open_records])
        handles: dict[str, SlurmJob] = {}
        for r in open_records:
            if queued.get(r.job_id) == r.name:
                handles[r.job_id] = SlurmJob(r.folder, r.job_id)
            else:
                # It ended while no driver watched; its misses are retried below.
                r.settled = final_state(r)
        tries: dict[tuple[str, int], int] = {}
        for r in ledger.records:
            if r.settled is not None:
                for k in r.keys:
                    tries[k] = tries.get(k, 0) + 1
        covered = {k for r in ledger.records if r.job_id in handles for k in r.keys}
        fresh = [t for t in job.tasks if task_key(t) not in covered]
        if fresh:
            salt = getattr(job.backend, "salt", "")
            from runner.provers.hol_light import contexts
            keyer = lambda t: contexts.image_key(
                t.problem.setup_path.read_text(encoding="utf-8", errors="replace"), salt)
            # Checks that earlier jobs failed to finish count their tries.
            retry_round = max((tries.get(task_key(t), 0) for t in fresh), default=0)
            # Jobs still alive keep their nodes: the rest goes to the others.
            nodes = max(1, o.nodes - len(handles))
            self._submit(job, ledger, self._shares(job, fresh, keyer, nodes), retry_round)
            for r in ledger.records:
                if r.settled is None and r.job_id not in handles:
                    handles[r.job_id] = SlurmJob(r.folder, r.job_id)
        ledger.save()

        failed_writer = None
        ended: dict[str, float] = {}
        try:
            while True:
                for row in self._new_rows(job.out, wanted):
                    on_row(ResultRow(**row))
                SlurmJob.watcher.update()
                for r in ledger.records:
                    if r.settled is not None or r.job_id not in handles:
                        continue
                    handle = handles[r.job_id]
                    if not handle.done():
                        continue
                    state = (handle.state or "UNKNOWN").split()[0]
                    # Its result file can appear before accounting has the final
                    # state (sacct lags): give accounting a moment.
                    first = ended.setdefault(r.job_id, time.monotonic())
                    if state in UNFINISHED and time.monotonic() - first < 30:
                        continue
                    # Rows the task published just before it ended.
                    for row in self._new_rows(job.out, wanted):
                        on_row(ResultRow(**row))
                    missing = self._unsettled(r.keys, by_key)
                    r.settled = state
                    retry = []
                    for k in missing:
                        tries[k] = tries.get(k, 0) + 1
                        if tries[k] <= o.retries:
                            retry.append(by_key[k])
                        else:
                            failed_writer = failed_writer or shards.ShardWriter(
                                job.out, f"{job.run_id}-slurm-driver")
                            reason = (f"{self._end_reason(r, state)}; "
                                      f"{tries[k]} Slurm jobs ran this check and none finished it")
                            now = utcnow()
                            row = result_row(
                                by_key[k],
                                CheckResult(Outcome(Verdict.ERROR, reason), None, 0.0, None, "",
                                            f"slurm {state}"),
                                info=job.backend.info, worker="slurm-driver", run_id=job.run_id,
                                started_at=now, finished_at=now)
                            failed_writer.add(row)
                            self._reported.add(k)
                            on_row(row)
                    if retry:
                        self._submit(job, ledger, [retry], r.round + 1)
                        for nr in ledger.records:
                            if nr.settled is None and nr.job_id not in handles:
                                handles[nr.job_id] = SlurmJob(nr.folder, nr.job_id)
                    ledger.save()
                if all(r.settled is not None for r in ledger.records if r.job_id in handles):
                    if not self._unsettled(wanted, by_key):
                        return
                    for row in self._new_rows(job.out, wanted):
                        on_row(ResultRow(**row))
                    if missing := self._unsettled(wanted, by_key):
                        raise ProverError(f"Slurm jobs ended with {len(missing)} "
                                          "checks unrecorded; run the sweep again to resume")
                time.sleep(o.poll_s)
        finally:
            if failed_writer is not None:
                failed_writer.close()


def from_args(args, workers: int) -> SlurmExecutor:
    return SlurmExecutor(SlurmOptions(
        partition=args.partition, nodes=args.nodes, cpus_per_task=args.cpus_per_task,
        mem_per_node=args.mem_per_node, array_parallelism=args.array_parallelism,
        extra=tuple(args.slurm_extra), retries=args.slurm_retries))
