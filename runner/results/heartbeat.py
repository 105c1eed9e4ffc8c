"""The runner's account of its sweep, for ``proofbatch status`` without a scan.

While a sweep runs, its driver (``sweep.run_sweep``, whatever the executor)
publishes ``OUT/status.json`` through ``publish`` when rows arrive
(at most every ``GAP`` seconds) and every ``INTERVAL`` seconds: counts per
verdict, checks done and skipped, the expected seconds of work left from the plan, and a heartbeat (time, host,
pid). Reading it costs the same at ten rows or a million, where reading the
shards costs seconds. A heartbeat older than ``STALE`` intervals, or a pid
gone from this host, means the runner died: status says so, with the
command that resumes, and gives no ETA. The file ends with state
``finished`` (counts from the merged table) or ``stopped`` (the runner
raised, e.g. Ctrl-C).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections import Counter, deque
from pathlib import Path
from typing import TYPE_CHECKING

from .. import events
from . import running
from .publish import publish_json

if TYPE_CHECKING:      # imported where used: pyarrow stays out of a heartbeat's start
    from .done import Done


STATUS_FILE = "status.json"
INTERVAL = 2.0
STALE = 5          # intervals without a beat before a runner counts as dead
GAP = 0.25         # at most this often a new row republishes at once
RECENT = 256       # keys finished last: status hides their lagging board entries


class Heartbeat:
    """Counts rows as the driver receives them and publishes them with a
    heartbeat from a thread; ``with`` starts and stops it."""

    def __init__(self, out: Path, *, total: int, done: "Done", skipped: int,
                 workers: int, resume: str):
        self.path = Path(out) / STATUS_FILE
        self._lock = threading.Lock()
        # publish names its temp file by pid: one publisher at a time.
        self._publishing = threading.Lock()
        self._counts: Counter = done.verdict_counts()
        self._done, self._skipped, self._total = len(done), skipped, total
        self._work = None              # the plan's work left, once there is a plan
        self._workers = max(1, workers)
        self._basis = "no plan: the sweep had no expected durations"
        self._recent: deque = deque(maxlen=RECENT)
        self._resume, self._started = resume, time.time()
        self._stop, self._news = threading.Event(), threading.Event()
        self._finished = False
        self._unlisten = lambda: None
        self._thread = threading.Thread(target=self._beat, daemon=True, name="heartbeat")

    def plan(self, plan, work) -> None:
        """The plan of the checks still to run (runner.planning.planner.Plan)
        and its work left (runner.planning.work_left.WorkLeft), which counts
        them, the images they need and the boot. The driver makes both:
        results read no plan of their own."""
        with self._lock:
            self._work = work
            shape = plan.workers
            self._workers = max(1, int(shape.nodes) * int(shape.cores_per_node))
            defaults = sum(c.source == "default" for c in plan.checks)
            assumed = (f"; {defaults} of {len(plan.checks)} checks assume the planner's default "
                       f"of 1 s (no profile or map gave their durations)") if defaults else ""
            self._basis = (f"the boot, then the checks and image builds left / {self._workers} "
                           f"workers{assumed}")

    def event(self, e: events.Event) -> None:
        """The runner's own sessions tell when the boot and builds end."""
        work = self._work
        if work is None:
            return
        if e.kind == "boot":
            work.booting()
        elif e.kind == "booted":
            work.booted()
        elif e.kind == "image":
            work.building(e.key, e.at)
        elif e.kind == "imaged" and e.ok:
            work.built(e.key, e.at)

    def row(self, row) -> None:
        with self._lock:
            self._counts[row.verdict] += 1
            self._done += 1
            key = (row.problem_id, row.attempt)
            self._recent.append(key)
            if self._work is not None:
                self._work.finished(*key)
        self._news.set()        # status should not lag a row by a whole interval

    def skip(self, n: int) -> None:
        with self._lock:
            self._skipped += n

    def publish(self, state: str) -> None:
        with self._lock:
            work, finished = self._work, self._finished
            left = 0.0 if finished else work.work_s() if work is not None else None
            boot_left = 0.0 if finished or work is None else work.boot_left_s()
            data = {"state": state, "beat": time.time(), "interval": INTERVAL,
                    "host": socket.gethostname(), "pid": os.getpid(), "started": self._started,
                    "total": self._total, "done": self._done, "skipped": self._skipped,
                    "counts": dict(self._counts), "expected_left_s": left,
                    "boot_left_s": boot_left, "workers": self._workers,
                    # An estimate from the plan, its builds corrected by those measured so far.
                    "eta_basis": self._basis if work is None else f"{work.basis()}: {self._basis}",
                    "recent": [list(k) for k in self._recent], "resume": self._resume}
        # The plan's seconds of each check on the board: status credits a
        # running check with its elapsed time up to these, not beyond (a check
        # past its expected time gave an ETA of 0 s with 4 checks still to run).
        if work is not None and not finished:
            data["running_expected"] = [
                [e["problem_id"], e["attempt"], cost] for e in running.entries(self.path.parent)
                if "problem_id" in e and (cost := work.cost_of(e["problem_id"], e.get("attempt", 0)))
                is not None]
        with self._publishing:
            publish_json(self.path, data, newline=False)

    def finish(self, counts: Counter, done: int, skipped: int) -> None:
        """The merged table's account: exact, whatever the live counts said."""
        with self._lock:
            self._counts, self._done, self._skipped = Counter(counts), done, skipped
            self._finished = True
        self._stop.set()
        self._news.set()
        self._unlisten()
        if self._thread.is_alive():
            self._thread.join()
        self.publish("finished")

    def _beat(self) -> None:
        while not self._stop.is_set():
            self._news.wait(INTERVAL)
            self._news.clear()
            if self._stop.is_set():
                return
            try:
                self.publish("running")
            except OSError:
                pass        # a full disk: the next beat tries again; status sees it stale
            self._stop.wait(GAP)

    def __enter__(self) -> "Heartbeat":
        # Entered around the checks and again around the merge: one thread.
        if not self._thread.is_alive() and not self._stop.is_set():
            self._unlisten = events.listen(self.event)
            self.publish("running")
            self._thread.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        # On success the beat goes on through the merge, until ``finish``.
        if exc_type is not None or self._stop.is_set():
            self._unlisten()
        if exc_type is not None and not self._stop.is_set():
            self._stop.set()
            self._news.set()
            self._thread.join()
            try:
                self.publish("stopped")
            except OSError:
                pass        # the error being raised says more


def read(out: Path) -> dict | None:
    try:
        return json.loads((Path(out) / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return None


def retire_dead_runners_checks(out: Path) -> list:
    """For the runner that now holds the sweep's lock, before its workers
    start: the checks a runner killed without a word left on the running
    board, retired as lost (runner/results/lost.py), their wall time counted
    up to that runner's last beat. A list of runner.results.lost.Loss."""
    last = read(out) or {}
    return running.retire_boards(out, alive_until=last.get("beat"))
