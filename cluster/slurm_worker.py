"""One array task of the Slurm executor (cluster/slurm.py), as it runs on its
node: a prover session pulling the sweep's checks from the pool, claiming
each on the shared filesystem (cluster/claims.py), and the rows it still
buffers published when Slurm preempts or times it out."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from submitit.helpers import Checkpointable

from runner.checks import attempts
from runner.checks.tasks import CheckTask
from runner.results import lost, shards
from runner.results.done import LIGHT, row_version
from runner.results.running import retire_boards

from .base import SweepJob
from .claims import Claimer, Pool, holder_name
from .local import LocalExecutor
from .slurm_jobs import task_key


# After Slurm's SIGTERM, how long a task waits for what follows it: the
# SIGKILL of a scancel or preemption (KillWait, 30 s by default) or, for a
# task submitit requeues, its USR2. A task still alive then fails, and the
# driver gives its claims to another.
SIGTERM_WAIT_S = 180.0


class SlurmTerminated(KeyboardInterrupt):
    """Slurm's SIGTERM to the task: a preemption, a scancel or a requeue.
    Slurm signals every process of the job step, the prover's among them,
    and may follow with submitit's USR2 (a requeue) or a SIGKILL; the task
    stops as on Ctrl-C (its running checks recorded as lost, with this
    cause) and waits for that instead of failing on its killed prover."""


class PullWorker(Checkpointable):
    """One array task: a prover session pulling problems from the pool.

    submitit's ``Checkpointable``: on preemption or timeout the same task is
    requeued under the same job id, so it finds its lease and claims again,
    and rerunning skips every check already in a shard.
    """

    def __init__(self, backend, tasks: list[CheckTask], plan, out: Path, writer_prefix: str,
                 threads: int, node_factor=None):
        self.backend, self.tasks, self.plan, self.out = backend, tasks, plan, Path(out)
        self.writer_prefix, self.threads = writer_prefix, threads
        # runner.maps.node_factor.NodeFactorSpec: this task resolves its node's
        # own host factor before its first check; None: the limits as they are.
        self.node_factor = node_factor

    def __call__(self) -> int:
        # submitit bypasses SIGTERM (it acts on USR2 alone); ours stops the
        # checks that Slurm's SIGTERM killed under us as a stop, not an error.
        if threading.current_thread() is threading.main_thread():
            bypass = signal.signal(signal.SIGTERM, _terminated)
            try:
                return self._pull()
            except SlurmTerminated:
                signal.signal(signal.SIGTERM, bypass)       # Slurm may send it again
                deadline = time.monotonic() + SIGTERM_WAIT_S
                while time.monotonic() < deadline:      # submitit's USR2 exits from here
                    time.sleep(1.0)
                raise
            finally:
                signal.signal(signal.SIGTERM, bypass)
        return self._pull()

    def _pull(self) -> int:
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
            # For the log, and for benchmarks/slurm/slurm_overhead.py (start cost of a task).
            print(f"proofbatch: pulling from {len(todo)} checks, started at {time.time():.3f}",
                  flush=True)
            # Slurm sets SLURM_RESTART_COUNT on a requeued job: a fresh writer id
            # per incarnation keeps its image record apart from the earlier one's.
            restart = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
            prefix = f"{self.writer_prefix}-r{restart}"
            # An earlier incarnation killed outright left its running checks on
            # the board: they run again, and their cost is counted as lost.
            for earlier in range(restart):
                retire_boards(self.out, f"{self.writer_prefix}-r{earlier}-", lost.REQUEUED)
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
                    SweepJob(self.backend, todo, self.out, prefix, plan,
                             node_factor=self.node_factor), self._finished.append)
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


def _terminated(signum, frame):
    raise SlurmTerminated()
