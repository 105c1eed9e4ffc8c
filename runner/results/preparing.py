"""What a run does before its sweep starts, for ``proofbatch status``.

Before a run writes ``OUT/sweep.json`` and its heartbeat (runner/results/heartbeat.py)
it reads the corpus, builds native HOL Light, compiles contexts and plans:
17-96 s on a few s2n-bignum files, during which `status` answered "not a
sweep directory" (issue 46). From the end of the input checks to the end of
that work a run publishes ``OUT/preparing.json``: host, pid, start, the
settings status shows, the stage it is at (the ``prepare`` and ``compile``
events the screen prints) and a heartbeat every ``heartbeat.INTERVAL``.

It is removed as preparation ends, however it ends, so a refused resume
leaves OUT as it was (and a run that made OUT for it removes OUT again).
A run killed meanwhile (kill -9) leaves it behind: `status` sees that its
runner is gone, and the next run takes the directory as a sweep's
(runner/sweep_dir.SWEEP_NAMES). While another live run holds OUT
(runner/results/lock.py) nothing is published: its status stands.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

from .. import events
from . import heartbeat, lock
from .publish import publish_json

PREPARING_FILE = "preparing.json"


class Preparing:
    """``with Preparing(out, settings):`` publishes OUT/preparing.json for
    the block's length; ``settings`` (clock, nice, host_factor) are said by
    `status`."""

    def __init__(self, out: Path, **settings):
        self.out, self.path = Path(out), Path(out) / PREPARING_FILE
        self._settings = settings
        self._stage = "reading the corpus and checking the input"
        self._compiled = 0
        self._lock, self._publishing = threading.Lock(), threading.Lock()
        self._stop, self._news = threading.Event(), threading.Event()
        self._thread: threading.Thread | None = None
        self._created: Path | None = None       # the topmost directory this made
        self._unlisten = lambda: None

    def __enter__(self) -> "Preparing":
        holder = lock.read_holder(self.out)
        if holder is not None and lock.alive(holder):
            return self              # another run's sweep: its status.json speaks for it
        missing = [p for p in [self.out, *self.out.parents] if not p.exists()]
        self._created = missing[-1] if missing else None
        self.out.mkdir(parents=True, exist_ok=True)
        self._since = time.time()
        self._publish()
        self._unlisten = events.listen(self._event)
        self._thread = threading.Thread(target=self._beat, daemon=True, name="preparing")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is None:
            return
        self._unlisten()
        self._stop.set()
        self._news.set()
        self._thread.join()
        with self._publishing:
            self.path.unlink(missing_ok=True)
        if self._created is not None:
            # A run that failed before its sweep began leaves no directory it made.
            for path in [self.out, *self.out.parents]:
                try:
                    path.rmdir()
                except OSError:
                    break
                if path == self._created:
                    break

    def _event(self, e: events.Event) -> None:
        with self._lock:
            if e.kind == "prepare":
                self._stage = e.name
            elif e.kind == "compile":
                self._stage = f"compiling natively ({self._compiled} contexts compiled so far): {e.name}"
            elif e.kind == "compiled":
                self._compiled += 1
            else:
                return
        self._news.set()

    def _beat(self) -> None:
        while not self._stop.is_set():
            self._news.wait(heartbeat.INTERVAL)
            self._news.clear()
            if self._stop.is_set():
                return
            try:
                self._publish()
            except OSError:
                pass        # a full disk: the next beat tries again
            self._stop.wait(heartbeat.GAP)

    def _publish(self) -> None:
        with self._lock:
            record = {"state": "preparing", "stage": self._stage, "host": socket.gethostname(),
                      "pid": os.getpid(), "started": lock.process_started(os.getpid()),
                      "since": self._since,
                      "beat": time.time(), "interval": heartbeat.INTERVAL, **self._settings}
        with self._publishing:
            if not self._stop.is_set() or self._thread is None:
                publish_json(self.path, record, newline=False)


def read_preparing(out: Path) -> dict | None:
    """OUT/preparing.json while the run that wrote it lives; else None."""
    try:
        record = json.loads((Path(out) / PREPARING_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("state") != "preparing":
        return None
    return record if lock.alive(record) else None
