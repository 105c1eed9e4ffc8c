"""The Slurm executor: a sweep as submitit job arrays.

Each array task is one worker on one node (``PullWorker``,
cluster/slurm_worker.py). It starts ONE prover session
(HOL Light costs 70-90 s of CPU to load) and pulls problems from the
sweep's plan as it goes, claiming each on the shared filesystem
(cluster/claims.py), in the plan's order and preferring the images it holds,
as the local dispatcher does. It checks them with the local executor's
threads, publishing shards to OUT. Never one job per check, and never a
share fixed at submission: when a prediction is off, or a task is
preempted, the other tasks take what is left.

The driver only submits, watches and merges:
- job ids go to ``OUT/slurm/jobs.json`` (cluster/slurm_jobs.py, with what
  the driver asks Slurm), so a driver stopped and started
  again on the same OUT reattaches to the jobs still queued or running
  instead of submitting twice;
- a preempted or timed-out task is requeued by submitit (``Checkpointable``)
  and resumes from the shards and its own claims: finished checks are never
  redone;
- when a job ends for good (cancelled, killed for memory, node failure), its
  unfinished claims go back to the pool at once and a new task replaces it,
  pulling from all that is left; a check is tried by up to ``retries`` such
  jobs, after that it is recorded as ERROR with the reason. A task that dies
  while no driver watches loses its claims when its lease runs out;
- ``add_tasks``: more array tasks for a sweep already running. They pull
  from the same pool; this driver watches them (and everyone's rows) until
  the sweep is done.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import submitit

from runner.checks import attempts
from runner.results import shards
from runner.results.done import SHARDS_DIR, row_version, settles
from runner.results.shard_reads import read_shards
from runner.errors import InputError, ProverError
from runner.planning.planner import PLAN_FILE, write_plan
from runner.results.rows import ResultRow
from runner.settings import setting as _help
from runner.verdicts import Verdict
from runner.checks.tasks import CheckTask
from runner.checks.worker import lost_row

from .base import Executor, SweepJob
from .claims import Pool
from .shares import planned_shares
from .slurm_jobs import (LEDGER, JobRecord, Ledger, end_reason, final_state, max_array_size,
                         queued_names, reattach, task_key)
from .slurm_worker import PullWorker


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = _help("Slurm partition; default: the cluster's default", default=None)
    nodes: int = _help("array tasks that pull the sweep's checks, one worker (node) each", default=2)
    cpus_per_task: int = _help("checks each array task runs at once (threads sharing its session)",
                               default=1)
    mem_per_node: int | None = _help("bytes requested per array task, e.g. 8G; default: 1 GiB for "
                                     "the images plus cpus-per-task x --mem-limit", default=None)
    array_parallelism: int | None = _help("array tasks running at once; default: nodes", default=None)
    extra: tuple[tuple[str, str], ...] = _help("further sbatch options as (name, value), e.g. "
                                               "qos=high (repeatable)", default=())
    retries: int = _help("new jobs for the checks of a job that ended for good", default=2)
    add_tasks: int = _help("array tasks to add to this sweep while another driver runs it; "
                           "0: this driver runs the sweep", default=0)
    max_walltime_min: int = _help("walltime cap per job; a task that runs out is requeued and keeps its "
                                  "claims", default=24 * 60)
    poll_s: float = _help("seconds between looks at the jobs and the shards", default=2.0)
    max_array_size: int | None = _help("largest array to submit; default: the site's "
                                       "MaxArraySize (scontrol show config)", default=None)

    def __post_init__(self):
        for name in ("nodes", "cpus_per_task"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')}", f"{getattr(self, name)} is not a count",
                                 "pass 1 or more")
        if self.add_tasks < 0:
            raise InputError("--add-tasks", f"{self.add_tasks} is negative", "pass 1 or more")
        if self.retries < 0:
            raise InputError("--slurm-retries", f"{self.retries} is negative", "pass 0 or more")


@dataclass
class _Sweep:
    """What the driver tracks of the sweep it runs, from ``execute``'s
    start to its end."""
    job: SweepJob
    on_row: Callable[[ResultRow], None]
    ledger: Ledger
    pool: Pool
    by_key: dict[tuple[str, int], CheckTask]
    wanted: dict[tuple[str, int], str]            # each check's answer hash
    by_problem: dict[str, list[tuple[str, int]]]
    watched: set[str] = field(default_factory=set)   # ids of the jobs this driver watches
    failed_writer: shards.ShardWriter | None = None  # the ERROR rows of checks out of tries


class SlurmExecutor(Executor):
    name = "slurm"

    def __init__(self, options: SlurmOptions | None = None):
        self.options = options or SlurmOptions()
        # A driver of --add-tasks joins a sweep another driver runs and holds
        # the lock of (runner/results/lock.py): it takes none itself.
        self.joins_running_sweep = bool(self.options.add_tasks)
        self._seen_shards: set[Path] = set()
        self._reported: set[tuple[str, int]] = set()
        self._solved: set[str] = set()      # problems with an OK row (early stop)
        self._cuts: dict = {}               # check -> the recorded row it runs again to replace

    # -- requests ------------------------------------------------------------

    def _mem_request(self, tasks: list[CheckTask]) -> str:
        o = self.options
        if o.mem_per_node is not None:
            return f"{max(1, o.mem_per_node // 2**20)}M"
        per_check = max(t.limits.mem_bytes for t in tasks)
        return f"{(self._allowances.image_bytes + o.cpus_per_task * per_check) // 2**20}M"

    def _walltime_min(self, tasks: list[CheckTask], grace_s: float, tasks_pulling: int) -> int:
        # Each task expects its part of the pool; pulling evens the parts out
        # only as far as the longest check allows, hence twice that. A task
        # that runs out of time is requeued and keeps its claims.
        work = sum(t.limits.time_s + grace_s for t in tasks) / self.options.cpus_per_task
        part = 2 * work / tasks_pulling + max(t.limits.time_s + grace_s for t in tasks)
        return max(5, min(self.options.max_walltime_min,
                          math.ceil((self._allowances.boot_s + part) / 60)))

    def _write_plan(self, job: SweepJob, tasks: list[CheckTask], nodes: int):
        """The plan with this executor's worker shape, to OUT/plan.json for
        ``proofbatch status``; what the array tasks dispatch by."""
        if job.plan is None:
            return None
        mem = int(self._mem_request(tasks)[:-1]) * 2**20
        plan, prediction, _ = planned_shares(tasks, job.plan, nodes, self.options.cpus_per_task, mem)
        write_plan(job.out / PLAN_FILE, plan, prediction, run_id=job.run_id)
        return plan

    def _submit(self, job: SweepJob, ledger: Ledger, tasks: list[CheckTask], count: int,
                round_: int) -> None:
        """``count`` array tasks pulling from ``tasks`` (in the planned order)."""
        o = self.options
        folder = job.out / "slurm" / "submitit" / f"{job.run_id}-{uuid.uuid4().hex[:6]}"
        chunk = max(1, o.max_array_size or max_array_size())
        plan = self._write_plan(job, tasks, count)
        mem = self._mem_request(tasks)
        minutes = self._walltime_min(tasks, job.backend.grace_s, count)
        pool = f"{job.run_id}-{uuid.uuid4().hex[:8]}"
        ledger.write_pool(pool, [task_key(t) for t in tasks])
        # Sites cap array sizes (MaxArraySize): larger sets go in chunks.
        for start in range(0, count, chunk):
            size = min(chunk, count - start)
            name = f"proofbatch-{uuid.uuid4().hex[:8]}"
            ex = submitit.SlurmExecutor(folder=folder,
                                        max_num_timeout=2 + math.ceil(
                                            sum(t.limits.time_s for t in tasks) / size
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
            workers = [PullWorker(job.backend, list(tasks), plan, job.out, f"{job.run_id}-s{n + i}",
                                  o.cpus_per_task, job.node_factor) for i in range(size)]
            try:
                jobs = ex.submit_array(workers) if size > 1 else [ex.submit(workers[0])]
            except Exception as exc:
                raise ProverError(f"Slurm refused the sweep's jobs: {exc}") from exc
            submitted = time.time()
            for j in jobs:
                ledger.records.append(JobRecord(j.job_id, name, str(folder), [], round_, mem,
                                                submitted, pool=pool))
            ledger.save()

    # -- watching ------------------------------------------------------------

    def _new_rows(self, out: Path, wanted: dict[tuple[str, int], str]) -> list[dict]:
        rows = []
        shards_dir = out / SHARDS_DIR
        new = [path for path in sorted(shards_dir.glob("*.parquet")) if path not in self._seen_shards] \
            if shards_dir.is_dir() else []
        # All at once, in today's columns (runner/results/shard_reads.py): a
        # driver restarted on 20,000 shards read them one by one, and an
        # older shard's row (hol_build) was no ResultRow. One unreadable or
        # gone since listed is being published or compacted: next time.
        found = read_shards(new)
        self._seen_shards.update(found.read)
        if found.table is not None:
            for row in found.table.to_pylist():
                key = (row["problem_id"], int(row["attempt"]))
                # ``wanted`` maps each check to its answer's hash: a row of an
                # answer changed since settles nothing (runner/checks/attempts.py).
                if key in wanted and key not in self._reported \
                        and settles(row_version(row), wanted[key]) \
                        and not self._rechecked(key, row):
                    self._reported.add(key)
                    rows.append(row)
                    if row["verdict"] == Verdict.OK.value:
                        self._solved.add(key[0])
        return rows

    def _rechecked(self, key: tuple[str, int], row: dict) -> bool:
        """Whether ``row`` is one its check runs again to replace (`run
        --recheck`, a drifting node's TIMEOUT confirmed: CheckTask.recheck_after):
        only a row finished after it settles the check."""
        cut = self._cuts.get(key)
        return cut is not None and row["finished_at"] <= cut

    def _unsettled(self, keys, by_key: dict) -> list[tuple[str, int]]:
        """Of ``keys``, the checks of this sweep with no row yet, less the
        attempts early stop skips: a skipped attempt gets no row, and is not
        a check its job failed to finish (runner/checks/attempts.py)."""
        return [k for k in keys if k in by_key and k not in self._reported
                and not (by_key[k].skip_if_solved and k[0] in self._solved)]

    # -- a sweep, step by step -----------------------------------------------

    def execute(self, job: SweepJob, on_row: Callable[[ResultRow], None]) -> None:
        """Take up where an earlier driver left (its jobs and their ends),
        submit what no live job pulls, then watch until every check has a row."""
        sweep = self._open(job, on_row)
        try:
            # Resuming may already record checks out of tries (ERROR rows):
            # their writer is closed, so published, whatever happens next.
            self._resume(sweep)
            while not self._look(sweep):
                time.sleep(self.options.poll_s)
        finally:
            if sweep.failed_writer is not None:
                sweep.failed_writer.close()

    def _open(self, job: SweepJob, on_row: Callable[[ResultRow], None]) -> _Sweep:
        """The sweep's ledger, pool and checks; the rows already in its shards
        reported, and the jobs of an earlier driver still queued reattached."""
        o = self.options
        self._allowances = job.backend.allowances
        # Tasks added to a running sweep keep their own ledger: the driver
        # that started the sweep owns jobs.json.
        name = LEDGER if not o.add_tasks else f"added-{job.run_id}.json"
        ledger = Ledger(job.out / "slurm" / name)
        pool = Pool(job.out / "slurm", holder="driver")
        by_key = {task_key(t): t for t in job.tasks}
        wanted = dict(zip(*attempts.task_hashes(job.tasks)))
        # Each execute is a job of its own (a sweep's drifting TIMEOUTs are
        # confirmed by a second one, runner/maps/drift_confirm.py): the rows
        # an earlier one reported settle nothing of this one by themselves.
        self._seen_shards, self._reported, self._solved = set(), set(), set()
        self._cuts = {k: t.recheck_after for k, t in by_key.items() if t.recheck_after is not None}
        by_problem: dict[str, list[tuple[str, int]]] = {}
        for k in by_key:
            by_problem.setdefault(k[0], []).append(k)
        sweep = _Sweep(job, on_row, ledger, pool, by_key, wanted, by_problem)
        self._report_new_rows(sweep)
        sweep.watched = reattach(ledger)
        return sweep

    def _resume(self, sweep: _Sweep) -> None:
        """Release the claims of jobs that ended while no driver watched, then
        submit tasks for what no live job pulls: their checks with tries left,
        the checks no job had (``add_tasks``: tasks for the whole sweep)."""
        o, job, ledger = self.options, sweep.job, sweep.ledger
        retry: list[CheckTask] = []
        for r in ledger.records:
            if r.settled is not None and r.job_id not in sweep.watched:
                retry += self._release(sweep, r, r.settled)
        covered = {k for r in ledger.records if r.job_id in sweep.watched for k in ledger.keys_of(r)}
        fresh = [t for t in job.tasks if task_key(t) not in covered]
        if o.add_tasks:
            self._submit(job, ledger, list(job.tasks), o.add_tasks, 0)
        elif retry:
            # Claims of jobs that ended while no driver watched. Jobs still
            # alive keep their nodes; new ones make up the rest.
            self._submit(job, ledger, self._replacing(sweep, retry),
                         max(1, o.nodes - len(sweep.watched)),
                         max(ledger.tries.get(task_key(t), 0) for t in retry))
        elif fresh:
            # Jobs still alive keep their nodes: the rest goes to the new ones.
            self._submit(job, ledger, fresh, max(1, o.nodes - len(sweep.watched)),
                         max((ledger.tries.get(task_key(t), 0) for t in fresh), default=0))
        sweep.watched |= {r.job_id for r in ledger.records if r.settled is None}
        ledger.save()

    def _look(self, sweep: _Sweep) -> bool:
        """One look at the shards and the jobs: report new rows, settle the
        jobs that ended, and submit a task for checks left without one; True
        when every check of the sweep has a row."""
        self._report_new_rows(sweep)
        retry = self._settle_ended(sweep)
        ledger = sweep.ledger
        if all(r.settled is not None for r in ledger.records if r.job_id in sweep.watched):
            self._report_new_rows(sweep)
            missing = self._unsettled(sweep.wanted, sweep.by_key)
            if not missing:
                return True
            # Tasks of another driver (``add_tasks``) may hold them.
            if not any(sweep.pool.held_alive(k[0]) for k in missing) and not retry:
                last = max((r for r in ledger.records if r.settled is not None),
                           key=lambda r: r.submitted)
                retry = self._give_up(sweep, missing, end_reason(last, last.settled), last.settled)
        if retry:
            self._submit(sweep.job, ledger, self._replacing(sweep, retry), 1,
                         max(ledger.tries.get(task_key(t), 0) for t in retry))
            sweep.watched |= {nr.job_id for nr in ledger.records if nr.settled is None}
            ledger.save()
        return False

    def _settle_ended(self, sweep: _Sweep) -> list[CheckTask]:
        """Record how each watched job that left the queue ended and release
        its claims; the checks to run again."""
        retry: list[CheckTask] = []
        watching = [r for r in sweep.ledger.records if r.settled is None and r.job_id in sweep.watched]
        # Slurm's queue, not submitit's done(), says whether a job ended:
        # done() is True once the job's result file exists, and a task
        # requeued (preemption, scontrol requeue) after an incarnation
        # that wrote one runs again under the same id with that file
        # still there. Taking it for ended released the live task's
        # claims and submitted a job for them (tests/cluster/test_slurm_arrays.py).
        queued = queued_names([r.job_id for r in watching])
        for r in watching:
            if queued.get(r.job_id) == r.name:
                continue
            # Rows the task published just before it ended.
            self._report_new_rows(sweep)
            # From accounting, which waits out sacct's lag behind the queue.
            state = r.settled = final_state(r, just_left=True)
            # Its unfinished claims go back to the pool now, not when
            # its lease runs out, and a new task comes for them.
            retry += self._release(sweep, r, state)
            sweep.ledger.save()
        return retry

    def _report_new_rows(self, sweep: _Sweep) -> None:
        for row in self._new_rows(sweep.job.out, sweep.wanted):
            sweep.on_row(ResultRow(**row))

    def _release(self, sweep: _Sweep, record: JobRecord, state: str) -> list[CheckTask]:
        """Return the claims of ``record``'s job, ended ``state``, to the
        pool, and count a try for their unfinished checks (``_give_up``)."""
        retry: list[CheckTask] = []
        for pid in sweep.pool.release_holder(record.job_id, keep=lambda p: self._finished(sweep, p)):
            retry += self._give_up(sweep, self._unsettled(sweep.by_problem.get(pid, ()), sweep.by_key),
                                   end_reason(record, state), state)
        return retry

    def _finished(self, sweep: _Sweep, problem_id: str) -> bool:
        return not self._unsettled(sweep.by_problem.get(problem_id, ()), sweep.by_key)

    def _give_up(self, sweep: _Sweep, keys, reason: str, state: str) -> list[CheckTask]:
        """Count a try for each of ``keys``; those with tries left come
        back to be run again, the others are recorded as ERROR."""
        job, ledger = sweep.job, sweep.ledger
        retry = []
        for k in keys:
            ledger.tries[k] = ledger.tries.get(k, 0) + 1
            if ledger.tries[k] <= self.options.retries:
                retry.append(sweep.by_key[k])
                continue
            sweep.failed_writer = sweep.failed_writer or shards.ShardWriter(
                job.out, f"{job.run_id}-slurm-driver")
            row = lost_row(sweep.by_key[k], f"{reason}; {ledger.tries[k]} Slurm jobs ran this check "
                           "and none finished it", f"slurm {state}", info=job.backend.info,
                           worker="slurm-driver", run_id=job.run_id)
            sweep.failed_writer.add(row)
            self._reported.add(k)
            sweep.on_row(row)
        return retry

    def _replacing(self, sweep: _Sweep, retry: list[CheckTask]) -> list[CheckTask]:
        """What a task replacing ended jobs pulls from: every check still
        unsettled, in the plan's order, not only the ended jobs' claims. The
        survivors take those claims while the new task boots (65-80 s for
        HOL Light), so a task held to them would boot for nothing; measured
        in benchmarks/slurm/slurm_elastic.py. Claims keep any check from running
        twice; ``retry`` alone counted a try."""
        left = set(self._unsettled(sweep.wanted, sweep.by_key)) | {task_key(t) for t in retry}
        return [t for t in sweep.job.tasks if task_key(t) in left]


def from_args(args, workers: int) -> SlurmExecutor:
    return SlurmExecutor(SlurmOptions(
        partition=args.partition, nodes=args.nodes, cpus_per_task=args.cpus_per_task,
        mem_per_node=args.mem_per_node, array_parallelism=args.array_parallelism,
        extra=tuple(args.slurm_extra), retries=args.slurm_retries,
        add_tasks=args.add_tasks))
