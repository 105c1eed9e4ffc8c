"""A check to run: one attempt of one problem, with its limits."""

from __future__ import annotations

from dataclasses import dataclass

from ..corpus import Problem
from ..prover import CheckLimits, CheckResult


@dataclass(frozen=True)
class CheckTask:
    problem: Problem
    limits: CheckLimits
    attempt: int = 0
    # Attempts (runner/checks/attempts.py): an earlier attempt of the problem with
    # the same answer text, whose verdict this one reuses without a check;
    # that attempt's result when an earlier run recorded it; and whether to
    # skip this attempt once the worker saw the problem solved
    # (--stop-on-first-ok).
    dedup_of: int | None = None
    reuse: CheckResult | None = None
    skip_if_solved: bool = False
    # The hash of what the verdict depends on besides the answer (the
    # problem's setup, query and the files its setup loads;
    # runner/checks/problem_hash.py), recorded in its row: a resume checks
    # the problem again when it changes. "" when unknown.
    problem_sha256: str = ""
    # runner.checks.attempts.answer_sha256 of ``problem``, computed once when
    # the task is made (a resume compares it several times); None: not yet.
    answer_sha256: str | None = None
    # `run --recheck`: the finished_at of the recorded row this task checks
    # again; only a row finished after it settles the task
    # (runner/checks/attempts.py). None: any row of its version does.
    recheck_after: object = None
    # A node's canary (runner/maps/canary.py): its speed when this check
    # started, its latest canary's time over its first; recorded in the row
    # (node_drift). None: no canary ran.
    node_drift: float | None = None
    # runner.maps.drift_confirm.Confirmation: this check runs again to
    # confirm a TIMEOUT a drifting node gave it; None: a check as any.
    confirms: object = None
