"""Checks cut short without a verdict, and the compute they cost: ``OUT/lost/``.

A check whose runner dies (Ctrl-C, SIGTERM, SIGHUP, a Slurm preemption or
requeue, a ``kill -9``) leaves no row, and a resume runs it again from its
start: a heavy check lost an hour into its run costs that hour twice. So
does a check killed from outside and run again on a fresh fork
(runner/checks/worker.py, ``check_retrying``). Each such loss is published
here, one JSON file each, atomically like a shard, with its cause and the
CPU and wall time it had used, and `report` adds them up by cause.

Where the dying runner could still say it (a stop the runner handles), its
worker records the loss: the wall time from the check's start in its image,
and the CPU time its guard measured (a check killed by the stop itself: the
CPU time its guard last published, at most
``runner.checks.guard.PROGRESS_EVERY_S`` old, so a lower bound). A runner
killed without a word leaves its running board entry
(runner/results/running.py) behind: the next runner of the sweep, which
holds the sweep's lock, so that no board entry it finds is a live one,
retires each such entry here (``running.retire_boards``), its wall time
counted up to the dead runner's last heartbeat.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .publish import publish_json

LOST_DIR = "lost"

# Causes, as `report` groups them.
STOPPED = {"KeyboardInterrupt": "Ctrl-C", "Terminated": "SIGTERM", "HungUp": "SIGHUP",
           "SystemExit": "Slurm preemption, timeout or requeue (submitit's checkpoint)",
           # cluster/slurm_worker.py: a task's stop on the SIGTERM Slurm sends first.
           "SlurmTerminated": "Slurm's SIGTERM (a preemption, scancel or requeue)"}
RETRIED = "killed from outside, run again on a fresh fork"
SILENT = "its runner was killed without a word (kill -9, the OOM killer, a lost node or job)"
REQUEUED = "its Slurm task was requeued, preempted or cancelled and killed without a word"


@dataclass(frozen=True)
class Loss:
    problem_id: str
    attempt: int
    cause: str
    cpu_s: float            # CPU time the lost run had used (at least)
    wall_s: float           # wall time from its start in its image to its end (at least)
    host: str
    worker: str
    at: float               # when it was lost (epoch seconds)


def stop_cause(exc: BaseException | None) -> str:
    """What a runner's stop is called, from the exception that stopped it."""
    if exc is None:
        return "the sweep was stopped"
    return STOPPED.get(type(exc).__name__, f"the sweep was stopped ({type(exc).__name__})")


def record(out: Path, loss: Loss, writer_id: str) -> Path:
    path = Path(out) / LOST_DIR / f"{writer_id}-{loss.problem_id}-{loss.attempt}-{loss.at:.3f}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    publish_json(path, asdict(loss), newline=False)
    return path


def read(out: Path) -> list[Loss]:
    found = []
    folder = Path(out) / LOST_DIR
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            found.append(Loss(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue                        # being published right now, or not ours
    return found


def by_cause(losses: list[Loss]) -> dict[str, dict]:
    """cause -> {checks, cpu_core_hours, wall_hours}, the costliest first."""
    out: dict[str, dict] = {}
    for loss in losses:
        c = out.setdefault(loss.cause, {"checks": 0, "cpu_core_hours": 0.0, "wall_hours": 0.0})
        c["checks"] += 1
        c["cpu_core_hours"] += loss.cpu_s / 3600
        c["wall_hours"] += loss.wall_s / 3600
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["cpu_core_hours"]))


def now_loss(problem_id: str, attempt: int, cause: str, cpu_s: float | None, wall_s: float,
             worker: str) -> Loss:
    return Loss(problem_id, attempt, cause, float(cpu_s or 0.0), wall_s, socket.gethostname(),
                worker, time.time())
