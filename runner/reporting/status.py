"""The live status of a sweep, read from its directory alone.

Any executor's workers publish the check they are running as
``OUT/running/<writer-id>.json`` (atomically, like shards), and the sweep's
driver publishes its counts and a heartbeat as ``OUT/status.json``
(runner/results/heartbeat.py), so ``proofbatch status OUT`` works the same for local
threads, Slurm array tasks and Dask workers, from any machine that sees OUT,
and answers as fast at a million rows as at ten.
"""

from __future__ import annotations

import json
import shlex
import socket
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import psutil

from ..results import heartbeat
from ..results.running import RUNNING_DIR
from ..results.sweep_manifest import read_sweep_manifest

if TYPE_CHECKING:      # imported where used: pyarrow stays out of `status`'s start
    from ..results import shards


@dataclass(frozen=True)
class RunningCheck:
    problem_id: str
    attempt: int
    worker: str
    elapsed_s: float       # since the check started in its image; 0 while it waits for it
    timeout_s: float
    alive: bool | None     # None: its worker is on another host, so unknown from here
    waiting_s: float = 0.0  # how long it has waited for its image (or memory) so far


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
    # running, finished, stopped (the runner raised, e.g. Ctrl-C), dead (no
    # heartbeat: killed), or unknown (a sweep from before heartbeats).
    state: str = "unknown"
    resume: str | None = None      # the command that resumes a stopped or dead sweep
    beat_age_s: float | None = None


def _alive(entry: dict) -> bool | None:
    if entry.get("host") != socket.gethostname():
        return None
    return psutil.pid_exists(int(entry.get("pid", -1)))


def _board(out: Path) -> list[tuple[dict, RunningCheck]]:
    now, found = time.time(), []
    for path in sorted((out / RUNNING_DIR).glob("*.json")) if (out / RUNNING_DIR).is_dir() else ():
        try:
            entry = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue                 # being replaced right now
        # Boards from before "dispatched" have only "started", set at dispatch.
        dispatched, started = entry.get("dispatched", entry["started"]), entry["started"]
        elapsed = 0.0 if started is None else now - started
        waited = (now if started is None else started) - dispatched
        found.append((entry, RunningCheck(entry["problem_id"], entry["attempt"], entry["worker"],
                                          elapsed, entry["timeout_s"], _alive(entry), waited)))
    return found


def _state(beat: dict) -> tuple[str, float]:
    age = time.time() - float(beat.get("beat", 0))
    state = beat.get("state", "running")
    if state == "running":
        gone = beat.get("host") == socket.gethostname() and not psutil.pid_exists(int(beat.get("pid", -1)))
        if gone or age > heartbeat.STALE * float(beat.get("interval", heartbeat.INTERVAL)):
            state = "dead"
    return state, age


def read_status(out: Path, resume_of: Callable[[dict, Path], str] | None = None) -> Status:
    """What is done, what is running, whether the runner lives and how long
    the rest should take. Reads the runner's ``status.json`` (runner/results/heartbeat.py),
    never the shards, unless the sweep predates it."""
    out = Path(out)
    manifest = read_sweep_manifest(out)
    beat = heartbeat.read(out)
    if beat is None:
        return _from_shards(out, manifest)
    state, age = _state(beat)
    recent = {tuple(k) for k in beat.get("recent", [])}
    running = [r for _, r in _board(out) if (r.problem_id, r.attempt) not in recent]
    if state == "finished":
        running = []
    left = beat.get("expected_left_s")
    # A heartbeat records the command that resumes its sweep; ``resume_of``
    # (the CLI's runner.sweep_dir.resume_command) spells it for one that does not.
    resume = resume_here(beat.get("resume"), out) or (resume_of(manifest, out) if resume_of else None)
    if state in ("dead", "stopped"):
        how = "died (no heartbeat for %.0f s)" % age if state == "dead" else "was stopped"
        eta, basis = None, f"the runner {how}; resume with: {resume}"
    elif state == "finished":
        eta, basis = 0.0, "the sweep has finished"
    elif left is None:
        eta, basis = None, beat.get("eta_basis", "no plan")
    else:
        # Work under way counts as partly done, at most its expected share.
        in_flight = sum(min(r.elapsed_s, r.timeout_s) for r in running)
        eta = float(beat.get("boot_left_s") or 0.0) + \
            max(0.0, left - in_flight) / max(1, int(beat.get("workers", 1)))
        basis = beat["eta_basis"]
    return Status(out=out, total=manifest.get("checks", beat.get("total")), done=int(beat["done"]),
                  skipped=int(beat.get("skipped", 0)), counts=Counter(beat.get("counts", {})),
                  running=running, eta_s=eta, eta_basis=basis, state=state,
                  resume=resume if state in ("dead", "stopped") else None, beat_age_s=age)


def resume_here(command: str | None, out: Path) -> str | None:
    """``command`` (a heartbeat's resume command) with its ``--out`` naming
    ``out`` as it is now: a sweep directory moved or copied resumes where it
    is, not where its runner wrote the command."""
    if not command:
        return command
    try:
        parts = shlex.split(command)
    except ValueError:
        return command
    if "--out" in parts[:-1]:
        parts[parts.index("--out") + 1] = str(Path(out).resolve())
    return shlex.join(parts)


def _from_shards(out: Path, manifest: dict) -> Status:
    """A sweep without status.json (run before heartbeats): read the shards."""
    from ..results import shards  # pyarrow: only for a sweep older than status.json

    done = shards.scan(out, repair=False, columns=shards.LIGHT).done
    board = _board(out)
    recorded = done.has([(r.problem_id, r.attempt) for _, r in board])
    running = [r for (_, r), seen in zip(board, recorded) if not seen]
    solved = done.solved() if manifest.get("stop_on_first_ok") else set()
    eta, basis = _eta(out, manifest, done, running, solved)
    return Status(out=out, total=manifest.get("checks"), done=len(done),
                  skipped=_skipped(manifest, done, solved), counts=done.verdict_counts(),
                  running=running, eta_s=eta, eta_basis=basis,
                  state="running" if any(r.alive for r in running) else "unknown")


def _skipped(manifest: dict, done: "shards.Done", solved: set[str]) -> int:
    """How many attempts early stop skipped: of each solved problem with
    several attempts (the manifest's ``attempts``), those not recorded."""
    per_problem = manifest.get("attempts") or {}
    if not solved:
        return 0
    recorded = done.rows_per_problem()
    return sum(max(0, per_problem[pid] - recorded[pid]) for pid in solved if pid in per_problem)


def _eta(out: Path, manifest: dict, done: "shards.Done", running: list[RunningCheck],
         solved: set[str]) -> tuple[float | None, str]:
    plan_path = out / "plan.json"
    if not plan_path.is_file():
        return None, "no plan: the sweep had no expected durations"
    plan = json.loads(plan_path.read_text())
    in_flight = {(r.problem_id, r.attempt): r.elapsed_s for r in running}
    checks = plan.get("checks", [])
    recorded = done.has([(c["problem_id"], c["attempt"]) for c in checks])
    left = 0.0
    for check, seen in zip(checks, recorded):
        key = (check["problem_id"], check["attempt"])
        if not seen and key[0] not in solved:
            left += max(0.0, check["expected_s"] - in_flight.get(key, 0.0))
    # The plan's worker shape (nodes x cores: Slurm array tasks, Dask
    # threads) when it has one; else the local worker count of the manifest.
    shape = plan.get("workers") or {}
    workers = int(shape.get("nodes", 0)) * int(shape.get("cores_per_node", 0)) or \
        int(manifest.get("config", {}).get("workers") or 1)
    workers = max(1, workers)
    return left / workers, f"expected work left / {workers} workers, from the plan"
