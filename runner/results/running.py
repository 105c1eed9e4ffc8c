"""The running board: ``OUT/running/<writer-id>.json``, one entry per worker.

Any executor's worker (local thread, Slurm array task, Dask worker) publishes
the check it is running there, atomically like a shard, so that
``proofbatch status`` (runner/reporting/status.py) can say what runs now from
the sweep directory alone, on any machine that sees it.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import psutil

from . import lost as lost_checks
from .publish import publish_json

RUNNING_DIR = "running"


class RunningBoard:
    """One worker's entry on the board: the check it is running, if any."""

    def __init__(self, out: Path, writer_id: str, worker: str):
        self.out, self.writer_id = Path(out), writer_id
        self.path = self.out / RUNNING_DIR / f"{writer_id}.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.worker = worker
        self._entry: dict = {}

    def start(self, problem_id: str, attempt: int, timeout_s: float,
              host_factor: float | None = None) -> None:
        """The worker took the check; it starts once its image is loaded.
        ``host_factor``: what its limit was scaled by for this node."""
        self._entry = {"problem_id": problem_id, "attempt": attempt, "timeout_s": timeout_s,
                       "host_factor": host_factor,
                       "dispatched": time.time(), "started": None, "worker": self.worker,
                       "host": socket.gethostname(), "pid": os.getpid()}
        self._publish()

    def started(self) -> None:
        """The check runs now, in its loaded image: its time counts from here."""
        self._entry = {**self._entry, "started": time.time()}
        self._publish()

    def progress(self, cpu_s: float, rss_bytes: int, clock: str) -> None:
        """How far the running check got: its CPU time, its peak memory and the
        clock its limit counts (cpu or wall), for status's "412 s of 1,639 s CPU"."""
        self._entry = {**self._entry, "cpu_s": round(cpu_s, 1), "peak_rss_mb": rss_bytes >> 20,
                       "clock": clock, "progress_at": time.time()}
        self._publish()

    def lost(self, cause: str, cpu_s: float | None = None, wall_s: float | None = None) -> None:
        """The running check ends without a verdict and will run again: its
        cost goes to OUT/lost/ (runner/results/lost.py) under ``cause``. A
        check killed by the runner's own stop has no measured end: its wall
        time runs from its start in its image, its CPU time is the last its
        guard published (a lower bound), unless given."""
        if not self._entry:
            return
        started = self._entry.get("started")
        if started is None and not cpu_s and not wall_s:
            return                  # still waiting for its image: no check of it ran
        if not wall_s and started is not None:
            wall_s = time.time() - float(started)
        cpu_s = max(float(cpu_s or 0.0), float(self._entry.get("cpu_s") or 0.0))
        lost_checks.record(self.out, lost_checks.now_loss(
            self._entry["problem_id"], self._entry["attempt"], cause, cpu_s, wall_s or 0.0,
            self.worker), self.writer_id)

    def _publish(self) -> None:
        publish_json(self.path, self._entry, newline=False)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def entries(out: Path) -> list[dict]:
    """The board's entries now; one being replaced is left out."""
    board = Path(out) / RUNNING_DIR
    found = []
    for path in sorted(board.glob("*.json")) if board.is_dir() else ():
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict):
            found.append(entry)
    return found


def retire_boards(out: Path, prefix: str = "", cause: str = lost_checks.SILENT,
                  alive_until: float | None = None) -> list[lost_checks.Loss]:
    """Retire the running board's entries (of writers whose ids start with
    ``prefix``) as losses of runners killed without a word. Only a runner
    that knows no live worker writes them calls this: the sweep's lock
    holder before its workers start, or a requeued Slurm task for its own
    earlier incarnation. ``alive_until``: when the dead runner was last
    known alive (its last heartbeat), so a check it left counts the wall
    time it ran at least; else its last progress."""
    board = Path(out) / RUNNING_DIR
    found = []
    for path in sorted(board.glob(f"{prefix}*.json")) if board.is_dir() else ():
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _alive(entry):
            continue            # a Slurm task or Dask worker outlives a restarted driver
        started = entry.get("started")
        if started is not None:             # a check that only waited for its image lost nothing
            last = max(float(entry.get("progress_at") or started), float(alive_until or 0.0))
            loss = lost_checks.Loss(entry["problem_id"], int(entry["attempt"]), cause,
                                    float(entry.get("cpu_s") or 0.0), max(0.0, last - float(started)),
                                    entry.get("host", ""), entry.get("worker", ""), last)
            lost_checks.record(out, loss, path.stem)
            found.append(loss)
        path.unlink(missing_ok=True)
    return found


# A running check republishes its entry every PROGRESS_EVERY_S (10 s,
# runner/checks/guard.py): one on another host silent for this long is gone.
STALE_S = 60.0


def worker_alive(entry: dict) -> bool | None:
    """Whether the worker of a board entry still runs, when this host can
    tell (its process is here); None for a worker on another host."""
    if entry.get("host") != socket.gethostname():
        return None
    return psutil.pid_exists(int(entry.get("pid", -1)))


def _alive(entry: dict) -> bool:
    """Whether the worker of a board entry may still run: on this host, its
    process exists; elsewhere, it published within STALE_S."""
    here = worker_alive(entry)
    if here is not None:
        return here
    last = max(float(entry.get(k) or 0.0) for k in ("progress_at", "started", "dispatched"))
    return time.time() - last < STALE_S
