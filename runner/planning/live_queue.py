"""The dispatcher as an executor that runs real checks drives it: from
threads, waiting while a node's memory is full (runner.planning.dispatch)."""

from __future__ import annotations

import threading
from typing import Mapping

from .dispatch import WAIT, Dispatcher
from .planner import Plan


class LiveQueue:
    """The dispatcher for an executor that runs real checks: thread-safe, and
    a worker whose node has no memory free for any remaining problem blocks
    until a check of that node ends. ``units`` maps each problem id of the
    plan to what the executor runs for it (its pending attempts)."""

    def __init__(self, plan: Plan, units: Mapping[str, object]):
        self._dispatcher = Dispatcher(plan)
        self._units = units
        self._cond = threading.Condition()
        self._held: dict[int, int] = {}

    def next(self, worker: int, stop: threading.Event | None = None):
        """The next unit for ``worker``, or None when none is left (or ``stop`` is set)."""
        with self._cond:
            while not (stop is not None and stop.is_set()):
                take = self._dispatcher.take(worker)
                if take is None:
                    return None
                if take is WAIT:
                    self._cond.wait(timeout=0.5)
                    continue
                self._held[worker] = take.index
                return self._units[take.checks[0].problem_id]
            return None

    def done(self, worker: int) -> None:
        """``worker`` finished its unit: the memory it held is free."""
        with self._cond:
            index = self._held.pop(worker, None)
            if index is not None:
                self._dispatcher.finish(worker, index)
                self._cond.notify_all()
