"""What a sweep is doing now, for whoever shows it.

Prover sessions say when the prover boots and when an image starts and ends
loading; workers say when a check starts and ends. The progress display
(runner/reporting/progress.py) listens, in the runner's own process: Slurm array
tasks and Dask workers tell it nothing this way (their rows and
``proofbatch status`` do). Display only: nothing is decided from it, and a
listener that fails is dropped rather than allowed to stop a sweep.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Event:
    kind: str            # boot, booted, image, imaged, check, forked, progress, checked
    at: float = field(default_factory=time.monotonic)
    key: str = ""        # the image, or problem_id/attempt of a check
    name: str = ""       # what a person calls it: the prover, a context, a problem
    worker: str = ""
    limit_s: float = 0.0
    ok: bool = True
    cpu_s: float = 0.0   # progress: the check's CPU time so far
    rss_bytes: int = 0   # progress: its tree's peak resident memory so far


_lock = threading.Lock()
_listeners: list[Callable[[Event], None]] = []


def listen(listener: Callable[[Event], None]) -> Callable[[], None]:
    """Call ``listener`` with every event from now on; returns the way to stop."""
    with _lock:
        _listeners.append(listener)

    def stop() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)
    return stop


def say(kind: str, **fields) -> None:
    event = Event(kind, **fields)
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(event)
        except Exception:           # a display must never stop a sweep
            with _lock:
                if listener in _listeners:
                    _listeners.remove(listener)
