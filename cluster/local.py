"""The local executor: worker threads on this machine sharing one prover
session, so that every worker forks from the same loaded images.

This is the embedded default: no daemon, no server, no cluster.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from runner.checks.attempts import problem_runs
from runner.planning.live_queue import LiveQueue
from runner.prover import ProverSession
from runner.results.rows import ResultRow
from runner.results.shards import ShardWriter
from runner.results import lost
from runner.results.running import RunningBoard
from runner.checks.tasks import CheckTask
from runner.checks.worker import Stop, work

from .base import Executor, SweepJob, record_image_builds

# How long a stopped sweep waits for its workers to notice.
STOP_WAIT_S = 5.0


class LocalExecutor(Executor):
    name = "local"

    def __init__(self, workers: int = 1, session: ProverSession | None = None,
                 claim: Callable[[str], bool] | None = None):
        """``session``: an already started session to reuse (its images stay
        loaded after the sweep); by default one is started and closed here.
        ``claim``: when given, a problem's checks run here only if
        ``claim(problem_id)`` is True; others pull from the same tasks
        (cluster/claims.py, Slurm array tasks)."""
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers, self.session, self.claim = workers, session, claim

    def execute(self, job: SweepJob, on_row: Callable[[ResultRow], None]) -> None:
        own = self.session is None
        # Named pipes and scratch files want a local disk, not the shared one.
        workdir = Path(tempfile.mkdtemp(prefix="proofbatch-"))
        try:
            # A session started here boots its base image for this run (a
            # Ctrl-C during the boot stops it there): record that build too.
            session = self.session or job.backend.start(workdir)
            # A session handed over has builds of earlier sweeps; a mode
            # session's list joins its native and bytecode sessions' lists
            # (the bytecode one maybe shared), so new builds are told by
            # identity, not by position.
            known = set() if own else {id(b) for b in session.image_builds}
            try:
                session.prepare([t.problem for t in job.tasks])
                canary = None
                if job.node_factor is not None:
                    job, canary = _on_this_node(job, session)
                self._run_threads(session, job, on_row, canary)
            finally:
                record_image_builds(job, [b for b in session.image_builds if id(b) not in known])
                if own:
                    session.close()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _run_threads(self, session: ProverSession, job: SweepJob,
                     on_row: Callable[[ResultRow], None], canary=None) -> None:
        # A worker takes all attempts of a problem at once and drains them:
        # early stop and reuse of duplicate answers are per worker.
        runs = problem_runs(job.tasks)
        queue = iter(runs)
        take = threading.Lock()
        stop = Stop()
        errors: list[BaseException] = []
        planned = _planned_queue(job, runs, self.workers)
        # Problems another task held when this one came to them: asked once
        # more at the end, when a task that died may have given them back.
        passed: list[list[CheckTask]] = []

        def next_run(i: int) -> list[CheckTask] | None:
            if planned is not None:
                return planned.next(i, stop)
            with take:
                return next(queue, None)

        def tasks(i: int):
            while (attempts := next_run(i)) is not None:
                if self.claim is None or self.claim(attempts[0].problem.problem_id):
                    yield from attempts
                else:
                    with take:
                        passed.append(attempts)
                    for task in attempts:
                        session.withdraw(task.problem)
                if planned is not None:
                    planned.done(i)
            while not stop.is_set():
                with take:
                    if not passed:
                        return
                    attempts = passed.pop(0)
                if self.claim(attempts[0].problem.problem_id):
                    yield from attempts

        def run(i: int) -> None:
            name, writer_id = f"{socket.gethostname()}/{os.getpid()}/w{i}", f"{job.run_id}-w{i}"
            board = RunningBoard(job.out, writer_id, name)
            try:
                with ShardWriter(job.out, writer_id) as writer:
                    # A node's canary between its checks (runner/maps/canary.py).
                    work(session, canary.between(tasks(i)) if canary else tasks(i), writer, worker=name, run_id=job.run_id,
                         on_row=on_row, stop=stop, board=board)
            except BaseException as exc:   # recorded, then re-raised by the driver
                errors.append(exc)
                stop.set()
            finally:
                board.clear()

        threads = [threading.Thread(target=run, args=(i,), name=f"worker-{i}", daemon=True)
                   for i in range(self.workers)]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(timeout=0.5)
        except (KeyboardInterrupt, SystemExit) as exc:
            # Closing the session kills the running checks; their workers see
            # stop and record no row for them, only their loss and its cause.
            # SystemExit: submitit's handler of Slurm's preemption signal
            # exits the main thread this way.
            stop.stop(lost.stop_cause(exc))
            session.close()
            # Workers waiting on a killed image or check return at once; a
            # Ctrl-C never waits longer than this for them (they are daemons).
            deadline = time.monotonic() + STOP_WAIT_S
            for t in threads:
                t.join(timeout=max(0.0, deadline - time.monotonic()))
            raise
        if errors:
            raise errors[0]


def _on_this_node(job: SweepJob, session: ProverSession):
    """The job with its map limits scaled by this node's own host factor
    (a Slurm array task: runner/maps/node_factor.py), resolved before its
    first check, and the node's canary, its baseline checked
    (runner/maps/canary.py; None without one). A local sweep's job has no
    node spec: its one factor was applied when it was prepared."""
    from runner.maps import node_factor
    from runner.maps.canary import NodeCanary

    spec = job.node_factor
    found = node_factor.resolve(spec, session, job.out)
    canary = None
    if spec.canary is not None:
        canary = NodeCanary(spec.canary, session, job.out)
        canary.start()
    return (dataclasses.replace(job, tasks=node_factor.scale_tasks(job.tasks, found.factor, spec)),
            canary)


def _planned_queue(job: SweepJob, runs: list[list[CheckTask]], workers: int):
    """The plan's dispatcher (runner/planning/planner.py) over the job's problem runs,
    on one node of ``workers`` cores; None when the job has no plan."""
    if job.plan is None:
        return None
    plan = job.plan
    if plan.workers.nodes != 1 or plan.workers.count != workers:
        plan = plan.with_workers(dataclasses.replace(plan.workers, nodes=1,
                                                     cores_per_node=workers))
    units = {run[0].problem.problem_id: run for run in runs}
    if {c.problem_id for c in plan.checks} != set(units):
        return None               # not this job's plan: dispatch in task order
    return LiveQueue(plan, units)
