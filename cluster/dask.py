"""The Dask executors: ``dask`` (a running scheduler) and ``dask-slurm``
(workers started as Slurm jobs by dask-jobqueue).

Each problem is one Dask task holding all its attempts (pass@k), so workers
pull work dynamically and the worker that loaded a problem's context drains
its attempts: it forks them from one image, reuses the verdict of a repeated
answer and stops early after an OK one (runner/checks/attempts.py).
- heavy problems first: a task's Dask priority is its rank in the plan;
- context affinity: each image group is hinted to one worker (loose
  restrictions, so an idle worker still steals it), and every worker keeps
  its prover session and images in a worker plugin, across checks and across
  sweeps on the same scheduler;
- memory: a check's guard is at most the worker's Dask memory limit, and the
  Dask nanny still enforces that limit on the worker process.

Workers publish their rows as shards under OUT (shared filesystem). A task
whose worker died is retried by Dask on another worker up to
``distributed.scheduler.allowed-failures`` times, and drains the problem
again: of a check the dead worker had published too, the earliest row is
kept (runner/results/shards.scan). Past those retries the driver records each
attempt left unsettled as ERROR with the reason.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# dask_jobqueue's runner module, imported by its package, sets SIGINT to
# `sys.exit()` (allowed in the main thread only: import it here, never from a
# sweep's thread). Ctrl-C would then raise SystemExit, which skips every
# `except KeyboardInterrupt` that stops children and prints the resume line,
# in this process and every later one that imports us: put Python's back.
_sigint = signal.getsignal(signal.SIGINT)
from dask_jobqueue import SLURMCluster  # noqa: E402
signal.signal(signal.SIGINT, _sigint)
from distributed import Client, as_completed, get_worker
from distributed.scheduler import KilledWorker

from runner import settings
from runner.checks import attempts
from runner.results import shards
from runner.results.done import LIGHT, row_version
from runner.errors import InputError, ProverError
from runner.prover import JobAllowances
from runner.results.rows import ResultRow
from runner.results.running import RunningBoard
from runner.checks.tasks import CheckTask
from runner.checks.worker import lost_row, work

from . import cpu_slots, dask_placement
from .base import Executor, SweepJob
from .dask_plugin import PLUGIN, ProverPlugin

def check_on_worker(run: list[CheckTask], context: tuple, out: str, run_id: str,
                    one_per_cpu: bool = False) -> list[dict]:
    """Drain one problem's attempts in this worker's session, through the
    worker loop every executor runs; the rows are published to this worker's
    shard stream and returned (none for attempts early stop skipped).
    ``one_per_cpu`` (a profile): first wait for a CPU of this host that no
    other check holds (cluster/cpu_slots.py)."""
    backend, problems, spec = context
    worker = get_worker()
    plugin: ProverPlugin = worker.plugins[PLUGIN]
    limit = worker.memory_manager.memory_limit
    if limit:
        run = [dataclasses.replace(task, limits=dataclasses.replace(
            task.limits, mem_bytes=min(task.limits.mem_bytes, int(limit)),
            expected_mem_bytes=min(task.limits.expected_mem_bytes, int(limit)))) for task in run]

    def stopped() -> bool:
        return (out, run_id) in plugin.closed

    with cpu_slots.one_per_cpu(stopped) if one_per_cpu else contextlib.nullcontext():
        return _check(plugin, worker, run, backend, problems, out, run_id, stopped, spec)


def _check(plugin, worker, run, backend, problems, out: str, run_id: str, stopped,
           spec=None) -> list[dict]:
    session = plugin.session(backend, run_id, problems)
    canary = None
    if spec is not None:
        # This worker's own factor, resolved by its first check of the sweep,
        # and its canary between checks (runner/maps/canary.py).
        run, canary = plugin.on_this_node(spec, session, out, run_id, run)
    thread = threading.get_ident()
    board = RunningBoard(Path(out), f"{run_id}-dask-{plugin.safe_name}-t{thread}",
                         f"{worker.name}/t{thread}")
    rows: list[ResultRow] = []
    # No new check once the run's driver has gone: a resumed driver checks it.
    tasks = (task for task in run if not stopped())
    if canary is not None:
        tasks = canary.between(tasks)
    work(session, tasks, plugin.writer(out, run_id), worker=f"{worker.name}/t{thread}",
         run_id=run_id, on_row=rows.append, board=board)
    board.clear()
    return [row.as_dict() for row in rows]


def _context(backend, problems, spec=None) -> tuple:
    return backend, problems, spec


def _close_run(out: str, run_id: str, dask_worker=None) -> None:
    plugin = dask_worker.plugins.get(PLUGIN)
    if plugin is not None:
        plugin.close_run(out, run_id)


def _absolute(job: SweepJob) -> SweepJob:
    """The job with its sweep directory and problems' files as absolute paths.

    A Dask worker was started in its own working directory, not the
    driver's: ``proofbatch run examples/x --out out/x`` named files the
    worker read (setup.ml) and wrote (shards) under its own directory.
    """
    def absolute(problem):
        # Not shared by id: each attempt's copy holds its own answer.
        return dataclasses.replace(problem, directory=Path(problem.directory).absolute(),
                                   setup_path=Path(problem.setup_path).absolute(),
                                   query_path=Path(problem.query_path).absolute())

    return dataclasses.replace(job, out=Path(job.out).absolute(), tasks=[
        dataclasses.replace(task, problem=absolute(task.problem)) for task in job.tasks])


class DaskExecutor(Executor):
    name = "dask"
    expect_workers = 1

    def __init__(self, scheduler_address: str | None = None, *, client_factory=None):
        """``scheduler_address`` of a running scheduler, or ``client_factory``:
        a callable returning (client, closer) for a cluster started here."""
        if not scheduler_address and client_factory is None:
            raise InputError("--scheduler-address", "--cluster dask needs a scheduler address",
                             "pass --scheduler-address tcp://HOST:PORT, or use --cluster dask-slurm")
        if scheduler_address:
            try:
                scheduler_address = settings.scheduler_address(scheduler_address)
            except argparse.ArgumentTypeError as exc:
                problem, fix = str(exc).split("; ", 1)
                raise InputError("--scheduler-address", problem, fix) from None
        self.scheduler_address, self.client_factory = scheduler_address, client_factory

    def _connect(self):
        if self.client_factory is not None:
            return self.client_factory()
        try:
            client = Client(self.scheduler_address, timeout="30s")
        except OSError as exc:
            raise InputError("--scheduler-address", f"no Dask scheduler answers at "
                             f"{self.scheduler_address} ({exc})", "start one or fix the address") from None
        return client, client.close

    def execute(self, job: SweepJob, on_row: Callable[[ResultRow], None]) -> None:
        client, close = self._connect()
        try:
            self._run(client, job, on_row)
        finally:
            close()

    def _run(self, client: Client, job: SweepJob, on_row: Callable[[ResultRow], None]) -> None:
        job = _absolute(job)
        client.register_plugin(ProverPlugin(), name=PLUGIN)
        try:
            # Workers started for this sweep (dask-slurm) come up one by one:
            # wait a while for all of them, so affinity hints spread over them.
            client.wait_for_workers(self.expect_workers, timeout=120)
        except TimeoutError:
            client.wait_for_workers(1, timeout=600)
        out = str(job.out)
        problems = sorted({t.problem.problem_id: t.problem for t in job.tasks}.values(),
                          key=lambda p: p.problem_id)
        # A task's result, not scattered data: Dask computes it again when
        # every worker holding it died (scattered data lost with its last
        # worker cancels every task that needs it: a one-worker sweep whose
        # worker was killed and restarted by its nanny failed "already forgotten").
        context = client.submit(_context, job.backend, problems, job.node_factor,
                                key=f"context-{job.run_id}", pure=False)
        # Asked of the scheduler: scheduler_info() is the client's cache,
        # which may not list the workers waited for above yet.
        threads = client.ncores()
        workers = sorted(threads)
        # Each worker's node and known factor: the heaviest checks to the
        # fastest nodes, confirmations away from a drifting one.
        nodes = client.run(dask_placement.node_of, job.node_factor, out) \
            if job.node_factor is not None else {}
        fastest = dask_placement.by_speed(workers, threads, nodes) if nodes else []
        image_of = job.backend.image_plan(problems, {}).image_of
        group_of: dict[str, int] = {}
        futures = {}
        # Problems come in the planner's order, heaviest first (runner/planning/planner.py:
        # expected time with image builds; without a plan, the longest limits
        # first): that order is their Dask priority, and they are submitted in
        # it, so the first to reach an idle worker are the heaviest too.
        runs = attempts.problem_runs(job.tasks)
        for rank, run in enumerate(runs):
            problem = run[0].problem
            group = group_of.setdefault(image_of[problem.problem_id], len(group_of))
            hinted, loose = dask_placement.hint(run, rank, fastest, workers, nodes,
                                                workers[group % len(workers)])
            fut = client.submit(check_on_worker, run, context, out, job.run_id, self.one_check_per_core,
                                key=f"problem-{job.run_id}-{problem.problem_id}",
                                priority=len(runs) - rank, pure=False,
                                workers=hinted, allow_other_workers=loose)
            futures[fut] = run
        received: dict[tuple[str, int], dict] = {}
        lost: list[tuple[list[CheckTask], str]] = []
        try:
            for fut in as_completed(futures):
                run = futures.pop(fut)
                try:
                    rows = fut.result()
                except KilledWorker as exc:
                    lost.append((run, f"Dask workers died running this problem's checks ({exc})"))
                    continue
                except ProverError:
                    raise
                finally:
                    # Read: let Dask forget it. A result Dask still holds for
                    # us it computes again when its worker dies, which checked
                    # a finished problem twice.
                    fut.release()
                for row in rows:
                    received[(row["problem_id"], row["attempt"])] = row
                    on_row(ResultRow(**row))
        except BaseException:
            client.cancel(list(futures))
            raise
        finally:
            client.run(_close_run, out, job.run_id)
        self._record_leftovers(job, received, lost, on_row)

    def _record_leftovers(self, job: SweepJob, received: dict, lost: list, on_row) -> None:
        """Rows a worker returned but did not publish (it died within its flush
        interval), and ERROR rows for the attempts of problems whose workers
        kept dying, less those already recorded (for the answer as it is now,
        as on every executor) or skipped by early stop."""
        done = shards.scan(job.out, repair=False, columns=LIGHT).done
        # A row on disk settles a check only for the answer it checked
        # (runner/results/done.py): one of an answer changed since is no reason to
        # drop the row this run's worker returned for the answer as it is.
        keys = list(received)
        settled = done.current(keys, [row_version(received[k]) for k in keys])
        rows = [ResultRow(**received[k]) for k, on_disk in zip(keys, settled) if not on_disk]
        done = done | received
        for run, reason in lost:
            unsettled, _skipped = attempts.pending(run, done)
            for task in unsettled:
                row = lost_row(task, reason, "dask worker lost", info=job.backend.info,
                               worker="dask-driver", run_id=job.run_id)
                rows.append(row)
                on_row(row)
        if rows:
            with shards.ShardWriter(job.out, f"{job.run_id}-dask-driver") as writer:
                for row in rows:
                    writer.add(row)


@dataclass(frozen=True)
class DaskSlurmOptions:
    partition: str | None = field(default=None, metadata={"help": "Slurm partition of the workers"})
    jobs: int = field(default=2, metadata={"help": "worker jobs, one Dask worker each"})
    cores: int = field(default=1, metadata={"help": "threads (checks at once) per worker"})
    memory: int | None = field(default=None, metadata={
        "help": "bytes per worker job; default: 1 GiB for the images + cores x the check limit"})
    interface: str | None = field(default=None, metadata={
        "help": "network interface the workers listen on (lo on a one-node dev cluster)"})
    extra: tuple[tuple[str, str], ...] = field(default=(), metadata={"help": "further sbatch options"})
    walltime: str = field(default="24:00:00", metadata={"help": "walltime of each worker job"})


def slurm_client_factory(options: DaskSlurmOptions, job_out: Path, mem_limit: int,
                         allowances: JobAllowances):
    """A callable starting a dask-jobqueue SLURMCluster and a client on it."""

    def start():
        memory = options.memory or allowances.image_bytes + options.cores * mem_limit
        cluster = SLURMCluster(
            queue=options.partition, cores=options.cores, processes=1, memory=f"{memory // 2**20}MiB",
            walltime=options.walltime, interface=options.interface, python=sys.executable,
            job_name="proofbatch-dask", log_directory=str(job_out / "dask-slurm" / "logs"),
            job_extra_directives=[f"--{k}={v}" for k, v in options.extra],
            local_directory=tempfile.gettempdir(),
            # Any free port: a fixed one clashes with other sweeps on the host.
            scheduler_options={"dashboard_address": ":0"})
        cluster.scale(jobs=options.jobs)
        client = Client(cluster)

        def close():
            client.close()
            cluster.close()
        return client, close
    return start


class DaskSlurmExecutor(DaskExecutor):
    name = "dask-slurm"

    def __init__(self, options: DaskSlurmOptions | None = None):
        self.options = options or DaskSlurmOptions()
        self.expect_workers = self.options.jobs
        super().__init__(client_factory=lambda: None)

    def execute(self, job: SweepJob, on_row: Callable[[ResultRow], None]) -> None:
        mem_limit = max(t.limits.mem_bytes for t in job.tasks)
        self.client_factory = slurm_client_factory(self.options, job.out, mem_limit, job.backend.allowances)
        super().execute(job, on_row)


def from_args(args, workers: int) -> DaskExecutor:
    return DaskExecutor(args.scheduler_address)


def slurm_from_args(args, workers: int) -> DaskSlurmExecutor:
    return DaskSlurmExecutor(DaskSlurmOptions(
        partition=args.partition, jobs=args.nodes, cores=args.cpus_per_task,
        memory=args.mem_per_node, interface=args.interface, extra=tuple(args.slurm_extra)))
