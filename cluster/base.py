"""The executor interface. Each cluster backend is one module that subclasses
Executor: local threads, Slurm job arrays, Dask workers.

An executor receives a resolved, picklable SweepJob and must make sure that
every task ends as a row in a shard under ``job.out`` (a worker that dies
leaves its tasks unrecorded, and they run again on resume). It reports rows
to the driver as they are published, for the progress display.
"""

from __future__ import annotations

import abc
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar, Sequence

from runner.results.publish import publish_json
from runner.prover import ImageBuild, ProverBackend
from runner.results.rows import ResultRow
from runner.checks.tasks import CheckTask


@dataclass(frozen=True)
class SweepJob:
    backend: ProverBackend
    tasks: Sequence[CheckTask]     # pending checks, in the planned order
    out: Path                      # the sweep directory; shards go to out/shards
    run_id: str                    # names this invocation's shards
    plan: object = None            # runner.planning.planner.Plan of the tasks: dispatch by it (LiveQueue)
    # runner.maps.node_factor.NodeFactorSpec: each node scales the tasks' map
    # limits by its own host factor before its first check; None: as they are.
    node_factor: object = None


class Executor(abc.ABC):
    name: ClassVar[str]
    # True for an executor that adds workers to a sweep another runner
    # drives (Slurm's --add-tasks): it runs without the sweep's lock.
    joins_running_sweep: bool = False
    # True while a profile drives it: its checks are timed, so at most one
    # runs per CPU of a host. Local workers and Slurm tasks already run one
    # check per CPU they hold; an executor that may run more (Dask: a
    # worker runs as many checks as it has threads) honours it.
    one_check_per_core: bool = False

    @abc.abstractmethod
    def execute(self, job: SweepJob, on_row: Callable[[ResultRow], None]) -> None:
        """Run every task of ``job``; return when all are recorded.

        Raises ProverError when the prover itself fails; rows published so far
        stay, and running the sweep again resumes.
        """


def record_image_builds(job: SweepJob, builds: Sequence[ImageBuild]) -> None:
    """Publish OUT/images/<run_id>.json: the images this run built and what
    they cost, so that reports count image builds as the work they are."""
    data = {"format": "proofbatch-images/1", "run_id": job.run_id, "host": socket.gethostname(),
            "builds": [{"key": b.key, "parent": b.parent, "secs": b.secs,
                        "finished_at": b.finished_at} for b in builds]}
    path = job.out / "images" / f"{job.run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    publish_json(path, data, indent=1)
