"""The Slurm executor: a sweep as submitit job arrays.

Each array task is one worker on one node. It starts ONE prover session
(HOL Light costs 70-90 s of CPU to load) and pulls problems from the
sweep's plan as it goes, claiming each on the shared filesystem
(cluster/claims.py), in the plan's order and preferring the images it holds,
as the local dispatcher does. It checks them with the local executor's
threads, publishing shards to OUT. Never one job per check, and never a
share fixed at submission: when a prediction is off, or a task is
preempted, the other tasks take what is left.

The driver only submits, watches and merges:
- job ids go to ``OUT/slurm/jobs.json``, so a driver stopped and started
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
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import submitit
from submitit.helpers import Checkpointable
from submitit.slurm.slurm import SlurmJob

from runner.checks import attempts
from runner.results import shards
from runner.results.done import LIGHT, SHARDS_DIR, row_version, settles
from runner.results.shard_reads import read_shards
from runner.errors import InputError, ProverError
from runner.planning.planner import PLAN_FILE, write_plan
from runner.results.rows import ResultRow
from runner.settings import setting as _help
from runner.verdicts import Verdict
from runner.checks.tasks import CheckTask
from runner.checks.worker import lost_row

from .base import Executor, SweepJob
from .claims import Claimer, Pool, holder_name
from .local import LocalExecutor
from .shares import planned_shares
from .slurm_jobs import LEDGER, JobRecord, Ledger, final_state, max_array_size, queued_names

MEMORY_KILL = re.compile(r"exceeded memory limit|oom-kill|out of memory|OUT_OF_MEMORY", re.I)


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


def task_key(task: CheckTask) -> tuple[str, int]:
    return task.problem.problem_id, task.attempt


class PullWorker(Checkpointable):
    """One array task: a prover session pulling problems from the pool.

    submitit's ``Checkpointable``: on preemption or timeout the same task is
    requeued under the same job id, so it finds its lease and claims again,
    and rerunning skips every check already in a shard.
    """

    def __init__(self, backend, tasks: list[CheckTask], plan, out: Path, writer_prefix: str,
                 threads: int):
        self.backend, self.tasks, self.plan, self.out = backend, tasks, plan, Path(out)
        self.writer_prefix, self.threads = writer_prefix, threads

    def __call__(self) -> int:
        done = shards.scan(self.out, repair=False, columns=LIGHT).done
        # Less what is recorded and what early stop skips; a repeated answer
        # whose original is recorded reuses its verdict (runner/checks/attempts.py).
        todo, _skipped = attempts.pending(self.tasks, done)
        pool = Pool(self.out / "slurm", holder_name())
        pool.start_lease()
        try:
            # Booting the prover is the dearest thing a task does: not for
            # a pool others have already taken.
            if not any(pool.claimable(t.problem.problem_id) for t in todo):
                return 0
            # For the log, and for benchmarks/slurm_overhead.py (start cost of a task).
            print(f"proofbatch: pulling from {len(todo)} checks, started at {time.time():.3f}",
                  flush=True)
            # Slurm sets SLURM_RESTART_COUNT on a requeued job: a fresh writer id
            # per incarnation keeps its image record apart from the earlier one's.
            prefix = f"{self.writer_prefix}-r{os.environ.get('SLURM_RESTART_COUNT', '0')}"
            self._prefix, self._finished = prefix, []
            plan = self.plan.only({task_key(t) for t in todo}) if self.plan is not None else None
            runs = {}
            for t in todo:
                runs.setdefault(t.problem.problem_id, []).append(t)

            def recorded(problem_id: str) -> bool:
                done = shards.scan(self.out, repair=False, columns=LIGHT).done
                left, _skipped = attempts.pending(runs[problem_id], done)
                return not left

            # The local executor starts the session (its scratch under the node's
            # TMPDIR, not the shared OUT) and publishes shards and boards to OUT.
            try:
                LocalExecutor(workers=self.threads, claim=Claimer(pool, recorded)).execute(
                    SweepJob(self.backend, todo, self.out, prefix, plan), self._finished.append)
            finally:
                self._finished = []
            return len(todo)
        finally:
            pool.stop_lease()

    def checkpoint(self, *args, **kwargs):
        """submitit calls this on preemption or timeout, right before it
        requeues the job, and the requeue kills the task at once: rows still
        buffered in the shard writers would be lost and their checks redone.
        Publish every finished row not yet in a shard first."""
        finished, self._finished = list(getattr(self, "_finished", [])), []
        if finished:
            on_disk = shards.scan(self.out, repair=False, columns=LIGHT).done
            # A row on disk settles a check only for the answer it checked.
            rows = [r for r in finished
                    if not on_disk.current([(r.problem_id, r.attempt)], [row_version(r)])[0]]
            if rows:
                with shards.ShardWriter(self.out, f"{self._prefix}-checkpoint") as writer:
                    for row in rows:
                        writer.add(row)
        return super().checkpoint(*args, **kwargs)


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
                                  o.cpus_per_task) for i in range(size)]
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
                        and settles(row_version(row), wanted[key]):
                    self._reported.add(key)
                    rows.append(row)
                    if row["verdict"] == Verdict.OK.value:
                        self._solved.add(key[0])
        return rows

    def _unsettled(self, keys, by_key: dict) -> list[tuple[str, int]]:
        """Of ``keys``, the checks of this sweep with no row yet, less the
        attempts early stop skips: a skipped attempt gets no row, and is not
        a check its job failed to finish (runner/checks/attempts.py)."""
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

    def _reattach(self, ledger: Ledger) -> set[str]:
        """Ids of jobs of an earlier driver that Slurm still has, under the
        name we gave them (ids restart at 1 when Slurm's state is wiped)."""
        open_records = [r for r in ledger.records if r.settled is None]
        queued = queued_names([r.job_id for r in open_records])
        live: set[str] = set()
        for r in open_records:
            if queued.get(r.job_id) == r.name:
                live.add(r.job_id)
            else:
                # It ended while no driver watched: its claims go back below.
                r.settled = final_state(r)
        return live

    def execute(self, job: SweepJob, on_row: Callable[[ResultRow], None]) -> None:
        o = self.options
        self._allowances = job.backend.allowances
        # Tasks added to a running sweep keep their own ledger: the driver
        # that started the sweep owns jobs.json.
        name = LEDGER if not o.add_tasks else f"added-{job.run_id}.json"
        ledger = Ledger(job.out / "slurm" / name)
        pool = Pool(job.out / "slurm", holder="driver")
        by_key = {task_key(t): t for t in job.tasks}
        wanted = dict(zip(*attempts.task_hashes(job.tasks)))
        by_problem: dict[str, list[tuple[str, int]]] = {}
        for k in by_key:
            by_problem.setdefault(k[0], []).append(k)
        for row in self._new_rows(job.out, wanted):
            on_row(ResultRow(**row))
        watched = self._reattach(ledger)

        def finished(problem_id: str) -> bool:
            return not self._unsettled(by_problem.get(problem_id, ()), by_key)

        failed_writer = None

        def give_up(keys, reason: str, state: str) -> list[CheckTask]:
            """Count a try for each of ``keys``; those with tries left come
            back to be run again, the others are recorded as ERROR."""
            nonlocal failed_writer
            retry = []
            for k in keys:
                ledger.tries[k] = ledger.tries.get(k, 0) + 1
                if ledger.tries[k] <= o.retries:
                    retry.append(by_key[k])
                    continue
                failed_writer = failed_writer or shards.ShardWriter(job.out, f"{job.run_id}-slurm-driver")
                row = lost_row(by_key[k], f"{reason}; {ledger.tries[k]} Slurm jobs ran this check "
                               "and none finished it", f"slurm {state}", info=job.backend.info,
                               worker="slurm-driver", run_id=job.run_id)
                failed_writer.add(row)
                self._reported.add(k)
                on_row(row)
            return retry

        def replacing(retry: list[CheckTask]) -> list[CheckTask]:
            """What a task replacing ended jobs pulls from: every check still
            unsettled, in the plan's order, not only the ended jobs' claims. The
            survivors take those claims while the new task boots (65-80 s for
            HOL Light), so a task held to them would boot for nothing; measured
            in benchmarks/slurm_elastic.py. Claims keep any check from running
            twice; ``retry`` alone counted a try."""
            left = set(self._unsettled(wanted, by_key)) | {task_key(t) for t in retry}
            return [t for t in job.tasks if task_key(t) in left]

        retry: list[CheckTask] = []
        for r in ledger.records:
            if r.settled is not None and r.job_id not in watched:
                for pid in pool.release_holder(r.job_id, keep=finished):
                    retry += give_up(self._unsettled(by_problem.get(pid, ()), by_key),
                                     self._end_reason(r, r.settled), r.settled)
        covered = {k for r in ledger.records if r.job_id in watched for k in ledger.keys_of(r)}
        fresh = [t for t in job.tasks if task_key(t) not in covered]
        if o.add_tasks:
            self._submit(job, ledger, list(job.tasks), o.add_tasks, 0)
        elif retry:
            # Claims of jobs that ended while no driver watched. Jobs still
            # alive keep their nodes; new ones make up the rest.
            self._submit(job, ledger, replacing(retry), max(1, o.nodes - len(watched)),
                         max(ledger.tries.get(task_key(t), 0) for t in retry))
        elif fresh:
            # Jobs still alive keep their nodes: the rest goes to the new ones.
            self._submit(job, ledger, fresh, max(1, o.nodes - len(watched)),
                         max((ledger.tries.get(task_key(t), 0) for t in fresh), default=0))
        watched |= {r.job_id for r in ledger.records if r.settled is None}
        ledger.save()

        try:
            while True:
                for row in self._new_rows(job.out, wanted):
                    on_row(ResultRow(**row))
                retry = []
                watching = [r for r in ledger.records if r.settled is None and r.job_id in watched]
                # Slurm's queue, not submitit's done(), says whether a job ended:
                # done() is True once the job's result file exists, and a task
                # requeued (preemption, scontrol requeue) after an incarnation
                # that wrote one runs again under the same id with that file
                # still there. Taking it for ended released the live task's
                # claims and submitted a job for them (tests/cluster/test_slurm.py).
                queued = queued_names([r.job_id for r in watching])
                for r in watching:
                    if queued.get(r.job_id) == r.name:
                        continue
                    # Rows the task published just before it ended.
                    for row in self._new_rows(job.out, wanted):
                        on_row(ResultRow(**row))
                    # From accounting, which waits out sacct's lag behind the queue.
                    state = r.settled = final_state(r, just_left=True)
                    # Its unfinished claims go back to the pool now, not when
                    # its lease runs out, and a new task comes for them.
                    for pid in pool.release_holder(r.job_id, keep=finished):
                        retry += give_up(self._unsettled(by_problem.get(pid, ()), by_key),
                                         self._end_reason(r, state), state)
                    ledger.save()
                if all(r.settled is not None for r in ledger.records if r.job_id in watched):
                    for row in self._new_rows(job.out, wanted):
                        on_row(ResultRow(**row))
                    missing = self._unsettled(wanted, by_key)
                    if not missing:
                        return
                    # Tasks of another driver (``add_tasks``) may hold them.
                    if not any(pool.held_alive(k[0]) for k in missing) and not retry:
                        last = max((r for r in ledger.records if r.settled is not None),
                                   key=lambda r: r.submitted)
                        retry = give_up(missing, self._end_reason(last, last.settled), last.settled)
                if retry:
                    self._submit(job, ledger, replacing(retry), 1,
                                 max(ledger.tries.get(task_key(t), 0) for t in retry))
                    watched |= {nr.job_id for nr in ledger.records if nr.settled is None}
                    ledger.save()
                time.sleep(o.poll_s)
        finally:
            if failed_writer is not None:
                failed_writer.close()


def from_args(args, workers: int) -> SlurmExecutor:
    return SlurmExecutor(SlurmOptions(
        partition=args.partition, nodes=args.nodes, cpus_per_task=args.cpus_per_task,
        mem_per_node=args.mem_per_node, array_parallelism=args.array_parallelism,
        extra=tuple(args.slurm_extra), retries=args.slurm_retries,
        add_tasks=args.add_tasks))
