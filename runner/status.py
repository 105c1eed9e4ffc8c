"""The live status of a sweep, read from its directory alone.

Any executor's workers publish the check they are running as
``OUT/running/<writer-id>.json`` (atomically, like shards), and the rows
they finish as shards, so ``proofbatch status OUT`` works the same for local
threads, Slurm array tasks and Dask workers, from any machine that sees OUT.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import psutil

from . import shards
from .errors import InputError
from .verdicts import Verdict

RUNNING_DIR = "running"


class RunningBoard:
    """One worker's entry on the board: the check it is running, if any."""

    def __init__(self, out: Path, writer_id: str, worker: str):
        self.path = Path(out) / RUNNING_DIR / f"{writer_id}.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.worker = worker

    def start(self, problem_id: str, attempt: int, timeout_s: float) -> None:
        entry = {"problem_id": problem_id, "attempt": attempt, "timeout_s": timeout_s,
                 "started": time.time(), "worker": self.worker, "host": socket.gethostname(),
                 "pid": os.getpid()}
        shards.publish(self.path, lambda tmp: tmp.write_text(json.dumps(entry)))

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


@dataclass(frozen=True)
class RunningCheck:
    problem_id: str
    attempt: int
    worker: str
    elapsed_s: float
    timeout_s: float
    alive: bool | None     # None: its worker is on another host, so unknown from here


@dataclass(frozen=True)
class Status:
    out: Path
    total: int | None      # checks in the sweep, from its manifest
    done: int
    skipped: int           # attempts early stop settled without a check (--stop-on-first-ok)
    counts: Counter        # verdict -> checks
    running: list[RunningCheck]
    eta_s: float | None    # expected work left / workers, from the sweep's plan
    eta_basis: str


def _alive(entry: dict) -> bool | None:
    if entry.get("host") != socket.gethostname():
        return None
    return psutil.pid_exists(int(entry.get("pid", -1)))


def read_status(out: Path) -> Status:
    """What is done, what is running and how long the rest should take."""
    out = Path(out)
    manifest_path = out / "sweep.json"
    if not manifest_path.is_file():
        raise InputError(out, "not a sweep directory (no sweep.json)",
                         "pass the --out directory of a `proofbatch run`")
    manifest = json.loads(manifest_path.read_text())
    done = shards.scan(out, repair=False).done
    counts = Counter(row["verdict"] for row in done.values())
    now, running = time.time(), []
    for path in sorted((out / RUNNING_DIR).glob("*.json")) if (out / RUNNING_DIR).is_dir() else ():
        try:
            entry = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue                 # being replaced right now
        if (entry["problem_id"], entry["attempt"]) in done:
            continue                 # finished; the board lags a moment
        running.append(RunningCheck(entry["problem_id"], entry["attempt"], entry["worker"],
                                    now - entry["started"], entry["timeout_s"], _alive(entry)))
    solved = _stopped_early(manifest, done)
    eta, basis = _eta(out, manifest, done, running, solved)
    return Status(out=out, total=manifest.get("checks"), done=len(done),
                  skipped=_skipped(manifest, done, solved), counts=counts,
                  running=running, eta_s=eta, eta_basis=basis)


def _stopped_early(manifest: dict, done: dict) -> set[str]:
    """Problems whose unrecorded attempts early stop skips: those with an OK
    row, when the sweep was started with --stop-on-first-ok."""
    if not manifest.get("stop_on_first_ok"):
        return set()
    return {pid for (pid, _), row in done.items() if row["verdict"] == Verdict.OK.value}


def _skipped(manifest: dict, done: dict, solved: set[str]) -> int:
    """How many attempts early stop skipped: of each solved problem with
    several attempts (the manifest's ``attempts``), those not recorded."""
    per_problem = manifest.get("attempts") or {}
    recorded = Counter(pid for pid, _ in done)
    return sum(max(0, per_problem[pid] - recorded[pid]) for pid in solved if pid in per_problem)


def _eta(out: Path, manifest: dict, done: dict, running: list[RunningCheck],
         solved: set[str]) -> tuple[float | None, str]:
    plan_path = out / "plan.json"
    if not plan_path.is_file():
        return None, "no plan: the sweep had no expected durations"
    plan = json.loads(plan_path.read_text())
    in_flight = {(r.problem_id, r.attempt): r.elapsed_s for r in running}
    left = 0.0
    for check in plan.get("checks", []):
        key = (check["problem_id"], check["attempt"])
        if key not in done and key[0] not in solved:
            left += max(0.0, check["expected_s"] - in_flight.get(key, 0.0))
    # The plan's worker shape (nodes x cores: Slurm array tasks, Dask
    # threads) when it has one; else the local worker count of the manifest.
    shape = plan.get("workers") or {}
    workers = int(shape.get("nodes", 0)) * int(shape.get("cores_per_node", 0)) or \
        int(manifest.get("config", {}).get("workers") or 1)
    workers = max(1, workers)
    return left / workers, f"expected work left / {workers} workers, from the plan"
