"""Verdicts are data: a closed set, each with a one-line reason.

The set is s2n-bignum-bench's (OK, FAIL, CHEATING, TIMEOUT, ERROR) plus
MEMOUT. When several things end a check, the first cause wins, as in
BenchExec's ``_set_termination_reason``: a check killed at its memory limit
stays MEMOUT even if the time limit passes while it is being reaped.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass


class Verdict(str, enum.Enum):
    OK = "OK"              # prove returned the goal and axioms() is unchanged
    FAIL = "FAIL"          # the tactic raised Failure or left goals
    CHEATING = "CHEATING"  # axioms() changed during the check
    TIMEOUT = "TIMEOUT"    # the time limit passed, inside or outside the prover
    MEMOUT = "MEMOUT"      # the memory guard killed the check
    ERROR = "ERROR"        # syntax, type, setup, crash: anything else

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    reason: str

    def __post_init__(self):
        object.__setattr__(self, "reason", one_line(self.reason))


def one_line(text: str, limit: int = 300) -> str:
    """Collapse whitespace so that a reason always fits on one line."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Termination:
    """Records why the runner ended a check; the first cause wins."""

    def __init__(self):
        self._lock = threading.Lock()
        self._outcome: Outcome | None = None

    def set(self, verdict: Verdict, reason: str) -> bool:
        with self._lock:
            if self._outcome is not None:
                return False
            self._outcome = Outcome(verdict, reason)
            return True

    @property
    def outcome(self) -> Outcome | None:
        return self._outcome
