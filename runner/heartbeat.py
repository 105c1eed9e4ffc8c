"""The runner's account of its sweep, for ``proofbatch status`` without a scan.

While a sweep runs, its driver (``sweep.run_sweep``, whatever the executor)
publishes ``OUT/status.json`` through ``shards.publish`` when rows arrive
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

from .publish import publish
from .prover import Mode

STATUS_FILE = "status.json"
INTERVAL = 2.0
STALE = 5          # intervals without a beat before a runner counts as dead
GAP = 0.25         # at most this often a new row republishes at once
RECENT = 256       # keys finished last: status hides their lagging board entries


class Heartbeat:
    """Counts rows as the driver receives them and publishes them with a
    heartbeat from a thread; ``with`` starts and stops it."""

    def __init__(self, out: Path, *, total: int, done: "shards.Done", skipped: int,
                 workers: int, resume: str):
        self.path = Path(out) / STATUS_FILE
        self._lock = threading.Lock()
        # shards.publish names its temp file by pid: one publisher at a time.
        self._publishing = threading.Lock()
        self._counts: Counter = done.verdict_counts()
        self._done, self._skipped, self._total = len(done), skipped, total
        self._expected: dict[tuple[str, int], float] = {}
        self._left, self._workers = None, max(1, workers)
        self._basis = "no plan: the sweep had no expected durations"
        self._recent: deque = deque(maxlen=RECENT)
        self._resume, self._started = resume, time.time()
        self._stop, self._news = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name="heartbeat")

    def plan(self, plan) -> None:
        """Expected durations of the checks still to run (runner.planner.Plan)."""
        with self._lock:
            self._expected = {(c.problem_id, c.attempt): c.expected_s for c in plan.checks}
            self._left = sum(self._expected.values())
            shape = plan.workers
            self._workers = max(1, int(shape.nodes) * int(shape.cores_per_node))
            defaults = sum(c.source == "default" for c in plan.checks)
            assumed = (f"; {defaults} of {len(plan.checks)} checks assume the planner's default "
                       f"of 1 s (no profile or map gave their durations)") if defaults else ""
            self._basis = f"expected work left / {self._workers} workers, from the plan{assumed}"

    def row(self, row) -> None:
        with self._lock:
            self._counts[row.verdict] += 1
            self._done += 1
            key = (row.problem_id, row.attempt)
            self._recent.append(key)
            if self._left is not None:
                self._left -= self._expected.pop(key, 0.0)
        self._news.set()        # status should not lag a row by a whole interval

    def skip(self, n: int) -> None:
        with self._lock:
            self._skipped += n

    def publish(self, state: str) -> None:
        with self._lock:
            data = {"state": state, "beat": time.time(), "interval": INTERVAL,
                    "host": socket.gethostname(), "pid": os.getpid(), "started": self._started,
                    "total": self._total, "done": self._done, "skipped": self._skipped,
                    "counts": dict(self._counts), "expected_left_s": self._left,
                    "workers": self._workers, "eta_basis": self._basis,
                    "recent": [list(k) for k in self._recent], "resume": self._resume}
        with self._publishing:
            publish(self.path, lambda tmp: tmp.write_text(json.dumps(data)))

    def finish(self, counts: Counter, done: int, skipped: int) -> None:
        """The merged table's account: exact, whatever the live counts said."""
        with self._lock:
            self._counts, self._done, self._skipped, self._left = Counter(counts), done, skipped, 0.0
        self._stop.set()
        self._news.set()
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
            self.publish("running")
            self._thread.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        # On success the beat goes on through the merge, until ``finish``.
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


def resume_command(manifest: dict, out: Path) -> str:
    """The `proofbatch run` that resumes the sweep (its main options)."""
    cfg = manifest.get("config", {})
    parts = ["proofbatch", "run", str(manifest.get("corpus") or cfg.get("corpus")), "--out", str(out)]
    for key, flag in (("answers", "--answers"), ("timeout_map", "--timeout-map"),
                      ("category_timeouts", "--category-timeouts"), ("context_root", "--context-root")):
        if cfg.get(key):
            parts += [flag, str(cfg[key])]
    if cfg.get("default_timeout") not in (None, 120.0):
        parts += ["--default-timeout", f"{cfg['default_timeout']:g}"]
    if int(cfg.get("workers") or 1) != 1:
        parts += ["--workers", str(cfg["workers"])]
    if cfg.get("mode") and Mode.of(cfg["mode"]) != Mode.BYTECODE:
        parts += ["--mode", str(cfg["mode"])]
    if cfg.get("stop_on_first_ok"):
        parts.append("--stop-on-first-ok")
    return " ".join(parts)
