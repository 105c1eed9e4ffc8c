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

from ..errors import InputError
from ..results import heartbeat
from ..results.preparing import read_preparing
from ..results.running import RUNNING_DIR, worker_alive
from ..results.sweep_manifest import read_sweep_manifest

if TYPE_CHECKING:      # imported where used: pyarrow stays out of `status`'s start
    from ..results.done import Done


@dataclass(frozen=True)
class RunningCheck:
    problem_id: str
    attempt: int
    worker: str
    elapsed_s: float       # since the check started in its image; 0 while it waits for it
    timeout_s: float
    alive: bool | None     # None: its worker is on another host, so unknown from here
    waiting_s: float = 0.0  # how long it has waited for its image (or memory) so far
    # Published by its guard every few seconds (RunningBoard.progress): the
    # check's CPU time so far, its peak memory and what its limit counts.
    cpu_s: float | None = None
    peak_rss_mb: float | None = None
    clock: str | None = None
    host: str = ""
    host_factor: float | None = None    # what its limit was scaled by on its node
    started: bool = True    # False: it waits for its image (or memory); no time of its limit ran

    @property
    def used_s(self) -> float:
        """What its limit has counted so far: CPU time under the cpu clock
        (wall time, while its guard has said nothing yet), else wall time."""
        return self.cpu_s if self.clock == "cpu" and self.cpu_s is not None else self.elapsed_s

    def against_limit(self) -> str:
        """``412 s of 1,639 s CPU``: what a heavy check has used of its limit."""
        if not self.started:
            # An image build of a heavy context takes minutes: "0 s of 1,639 s
            # wall" read as a check that had started and stood still.
            return f"waiting {self.waiting_s:,.0f} s for its image; limit {self.timeout_s:,.0f} s"
        if self.clock == "cpu" and self.cpu_s is not None:
            return f"{self.cpu_s:,.0f} s of {self.timeout_s:,.0f} s CPU"
        return f"{self.elapsed_s:,.0f} s of {self.timeout_s:,.0f} s wall"


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
    # heartbeat: killed), stalled (no heartbeat, but its process is there:
    # SIGSTOP, a suspended job), or unknown (a sweep from before heartbeats).
    state: str = "unknown"
    resume: str | None = None      # the command that resumes a stopped or dead sweep
    beat_age_s: float | None = None
    holder: str | None = None      # a stalled runner: "pid P on host H"
    holder_pid: int | None = None
    unselected: int = 0            # problems of the corpus this run did not select (--problems)
    corpus_problems: int | None = None
    selection: str = ""            # the --problems patterns of the run
    # What its limits count and how checks run (sweep.json): the clock,
    # the checks' niceness and the map's host factor (None: no map).
    clock: str | None = None
    nice: int | None = None
    host_factor: float | str | None = None
    stage: str | None = None       # a run still preparing: what it does (runner/results/preparing.py)


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
                                          elapsed, entry["timeout_s"], worker_alive(entry), waited,
                                          cpu_s=entry.get("cpu_s"), peak_rss_mb=entry.get("peak_rss_mb"),
                                          clock=entry.get("clock"), host=entry.get("host", ""),
                                          host_factor=entry.get("host_factor"),
                                          started=started is not None)))
    return found


def _state(beat: dict) -> tuple[str, float]:
    age = time.time() - float(beat.get("beat", 0))
    state = beat.get("state", "running")
    if state == "running":
        here = beat.get("host") == socket.gethostname()
        gone = here and not psutil.pid_exists(int(beat.get("pid", -1)))
        if gone:
            state = "dead"
        elif age > heartbeat.STALE * float(beat.get("interval", heartbeat.INTERVAL)):
            # A runner stopped by SIGSTOP (or a suspended job) beats no more
            # but still holds the sweep: a resume is refused while it lives.
            state = "stalled" if here else "dead"
    return state, age


def _eta_of_beat(beat: dict, running: list[RunningCheck]) -> tuple[float | None, str]:
    """Seconds left from the runner's account: the boot still to come, then
    the work left (pending checks, their images, and the running checks,
    each credited with what its limit counted so far, CPU time under the
    cpu clock, up to its plan's seconds, never beyond) shared by the
    workers. A heavy check's hours are its own: a running check that will
    still take longer than the rest shared out sets the ETA."""
    left = beat.get("expected_left_s")
    if left is None:
        return None, beat.get("eta_basis", "no plan")
    expected = {(pid, int(att)): float(cost) for pid, att, cost in beat.get("running_expected") or []}
    credit, past, longest = 0.0, [], 0.0
    for r in running:
        cost = expected.get((r.problem_id, r.attempt))
        if cost is None:
            continue              # a status.json from before: no credit rather than too much
        credit += min(r.used_s, cost)
        longest = max(longest, cost - r.used_s)
        if r.used_s > cost:
            past.append(r)
    boot = float(beat.get("boot_left_s") or 0.0)
    eta = boot + max(max(0.0, float(left) - credit) / max(1, int(beat.get("workers", 1))), longest)
    basis = beat.get("eta_basis", "")
    if past:
        most = max(r.timeout_s - r.used_s for r in past)
        basis += (f"; {len(past)} running {'check is' if len(past) == 1 else 'checks are'} past "
                  f"the plan's time and may run up to {max(0.0, most):.0f} s more")
    return eta, basis


def read_status(out: Path, resume_of: Callable[[dict, Path], str] | None = None) -> Status:
    """What is done, what is running, whether the runner lives and how long
    the rest should take. Reads the runner's ``status.json`` (runner/results/heartbeat.py),
    never the shards, unless the sweep predates it."""
    out = Path(out)
    if (preparing := read_preparing(out)) is not None:
        return _preparing(out, preparing)
    manifest = read_sweep_manifest(out)
    beat = heartbeat.read(out)
    if beat is None:
        return _from_shards(out, manifest)
    if not isinstance(beat, dict) or not isinstance(beat.get("done"), int):
        raise InputError(out / heartbeat.STATUS_FILE, "is not a runner's status (it needs an "
                         "object with a whole number done)", "delete it: status then counts the "
                         "shards, and a running runner writes it again within seconds")
    state, age = _state(beat)
    recent = {tuple(k) for k in beat.get("recent", [])}
    running = [r for _, r in _board(out) if (r.problem_id, r.attempt) not in recent]
    if state == "finished":
        running = []
    # A heartbeat records the command that resumes its sweep; ``resume_of``
    # (the CLI's runner.sweep_dir.resume_command) spells it for one that does not.
    resume = resume_here(beat.get("resume"), out) or (resume_of(manifest, out) if resume_of else None)
    holder = f"pid {beat.get('pid')} on host {beat.get('host')}"
    if state in ("dead", "stopped"):
        how = "died (no heartbeat for %.0f s)" % age if state == "dead" else "was stopped"
        eta, basis = None, f"the runner {how}; resume with: {resume}"
    elif state == "stalled":
        eta, basis = None, f"the runner ({holder}) has not beaten for {age:.0f} s"
    elif state == "finished":
        eta, basis = 0.0, "the sweep has finished"
    else:
        eta, basis = _eta_of_beat(beat, running)
    return Status(out=out, total=manifest.get("checks", beat.get("total")), done=int(beat["done"]),
                  skipped=int(beat.get("skipped", 0)), counts=Counter(beat.get("counts", {})),
                  running=running, eta_s=eta, eta_basis=basis, state=state,
                  resume=resume if state in ("dead", "stopped") else None, beat_age_s=age,
                  holder=holder if state == "stalled" else None,
                  holder_pid=_int(beat.get("pid")) if state == "stalled" else None,
                  **_selection(manifest), **_settings(manifest))


def _settings(manifest: dict) -> dict:
    """The clock, niceness and host factor a sweep.json records. Sweeps
    from before the clock was chosen counted wall time; niceness and factor
    unrecorded are unknown (None)."""
    factor = manifest.get("host_factor")
    return {"clock": str(manifest.get("limit_clock") or "wall"), "nice": _int(manifest.get("nice")),
            "host_factor": float(factor) if isinstance(factor, (int, float))
            and not isinstance(factor, bool) else None}


def _preparing(out: Path, record: dict) -> Status:
    """A run that has not started its sweep yet: what it is doing, and the
    settings it was given (a resumed sweep's counts from its sweep.json)."""
    try:
        manifest = read_sweep_manifest(out)
    except InputError:
        manifest = {}       # a new sweep: no sweep.json yet
    beat = heartbeat.read(out) if manifest else None
    done = beat.get("done") if isinstance(beat, dict) else None
    factor = record.get("host_factor")
    return Status(out=out, total=manifest.get("checks"), done=done if isinstance(done, int) else 0,
                  skipped=0, counts=Counter(beat.get("counts") or {}) if isinstance(beat, dict) else
                  Counter(), running=[], eta_s=None, state="preparing",
                  eta_basis="no checks run until the run has prepared its sweep",
                  beat_age_s=time.time() - float(record.get("since") or time.time()),
                  holder=f"pid {record.get('pid')} on host {record.get('host')}",
                  stage=str(record.get("stage") or "preparing"),
                  clock=str(record.get("limit_clock") or "") or None, nice=_int(record.get("nice")),
                  host_factor=factor if isinstance(factor, (int, float, str)) else None)


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _selection(manifest: dict) -> dict:
    """How many problems of the corpus the run left out (--problems)."""
    corpus, chosen = manifest.get("corpus_problems"), manifest.get("problems")
    if not isinstance(corpus, int) or not isinstance(chosen, int) or chosen >= corpus:
        return {}
    patterns = (manifest.get("config") or {}).get("problems") or ()
    return {"unselected": corpus - chosen, "corpus_problems": corpus,
            "selection": ",".join(map(str, patterns))}


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
    from ..results.done import LIGHT

    done = shards.scan(out, repair=False, columns=LIGHT).done
    board = _board(out)
    recorded = done.has([(r.problem_id, r.attempt) for _, r in board])
    running = [r for (_, r), seen in zip(board, recorded) if not seen]
    solved = done.solved() if manifest.get("stop_on_first_ok") else set()
    eta, basis = _eta(out, manifest, done, running, solved)
    return Status(out=out, total=manifest.get("checks"), done=len(done),
                  skipped=_skipped(manifest, done, solved), counts=done.verdict_counts(),
                  running=running, eta_s=eta, eta_basis=basis,
                  state="running" if any(r.alive for r in running) else "unknown",
                  **_selection(manifest), **_settings(manifest))


def _read_plan(path: Path) -> dict:
    """OUT/plan.json as the ETA reads it; InputError naming it otherwise."""
    fix = "delete it (the ETA is then unknown) or run the sweep again to write a new one"
    try:
        plan = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(path, f"unreadable plan ({exc})", fix) from None
    checks = plan.get("checks", []) if isinstance(plan, dict) else None
    if not isinstance(checks, list) or not all(
            isinstance(c, dict) and isinstance(c.get("problem_id"), str)
            and isinstance(c.get("attempt"), int) and isinstance(c.get("expected_s"), (int, float))
            for c in checks):
        raise InputError(path, "is not a sweep's plan (it needs an object whose checks each have "
                         "problem_id, attempt and expected_s)", fix)
    if not isinstance(plan.get("workers") or {}, dict):
        raise InputError(path, "is not a sweep's plan (its workers is no object)", fix)
    return plan


def _skipped(manifest: dict, done: "Done", solved: set[str]) -> int:
    """How many attempts early stop skipped: of each solved problem with
    several attempts (the manifest's ``attempts``), those not recorded."""
    per_problem = manifest.get("attempts") or {}
    if not solved:
        return 0
    recorded = done.rows_per_problem()
    return sum(max(0, per_problem[pid] - recorded[pid]) for pid in solved if pid in per_problem)


def _eta(out: Path, manifest: dict, done: "Done", running: list[RunningCheck],
         solved: set[str]) -> tuple[float | None, str]:
    plan_path = out / "plan.json"
    if not plan_path.is_file():
        return None, "no plan: the sweep had no expected durations"
    plan = _read_plan(plan_path)
    in_flight = {(r.problem_id, r.attempt): r.elapsed_s for r in running}
    checks = plan["checks"]
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
