"""A HOL Light check's verdict as the runner reads it: the record the check
writes on its verdict pipe (``RECORD``, hol_check.ml), judged against what
the runner saw (``interpret``); faults of the machine, not of the answer
(``INFRA``, ``machine_fault``); and the result of a check that did not run
(``not_run``). Shared by the bytecode and native sessions and the fork
session they build on (fork_session.py).
"""

from __future__ import annotations

import json
import re

from ....checks.guard import Observation, death_reason, signal_name
from ....prover import CheckResult, LimitClock
from ....verdicts import Outcome, Verdict

RECORD = re.compile(r"PBV2\t(?P<nonce>[0-9a-f]+)\t(?P<verdict>[A-Z]+)\t(?P<secs>[0-9.]+)\t"
                    r"(?P<cpu>[0-9.]+)\t(?P<peak_kb>\d+)\t(?:gc=(?P<gc>[0-9,]*)\t)?"
                    r"(?P<reason>[^\n]*)\n\Z")
# The garbage collector's counters over prove(), in the order hol_check.ml's
# gc_fields writes them: during the proof, then the major heap (words) before
# and after it, and its peak before and after (a forked check starts from its
# image's heap, so the "_before" figures are the image's, settled).
GC_FIELDS = ("minor_collections", "major_collections", "compactions", "minor_words",
             "promoted_words", "major_words", "heap_words_before", "heap_words",
             "top_heap_words_before", "top_heap_words")


def gc_counters(text: str | None) -> str:
    """A record's ``gc=`` field as the row's ``gc`` column: a JSON object of
    GC_FIELDS, or "" when the check wrote none (it never reached prove)."""
    values = (text or "").split(",")
    if len(values) != len(GC_FIELDS) or not all(values):
        return ""
    return json.dumps(dict(zip(GC_FIELDS, map(int, values))), separators=(",", ":"))


def interpret(obs: Observation, status: str, nonce: str, key: str,
              clock: str = LimitClock.CPU) -> CheckResult:
    """The verdict of a check, from what the runner saw and what it reported.

    The report is trusted only when it is exactly one well-formed record with
    this check's nonce, and the check then exited normally.
    """
    match = RECORD.match(obs.record.decode("utf-8", "replace"))
    peak = obs.peak_rss_bytes or None
    secs = cpu = None
    gc = ""
    interrupted = obs.interrupted
    if obs.termination.outcome is not None:
        outcome = obs.termination.outcome
    elif not obs.record and signal_name(status) == "SIGXCPU":
        outcome = Outcome(Verdict.TIMEOUT, "CPU time limit passed (RLIMIT_CPU, SIGXCPU) without a "
                          f"verdict ({status})")
    elif not obs.record:
        outcome = Outcome(Verdict.ERROR, death_reason(status))
    elif not match or match["nonce"] != nonce or match["verdict"] not in Verdict.__members__:
        outcome = Outcome(Verdict.ERROR, "garbled or forged verdict record")
    elif status != "exit 0":
        outcome = Outcome(Verdict.ERROR, f"the check ended with {status} after its verdict")
    elif float(match["secs"]) > obs.wall_secs + 0.5:
        # Cross-check against the runner's own clock: a proof cannot take
        # longer than the check that ran it.
        outcome = Outcome(Verdict.ERROR, "verdict record claims a proof longer than its check")
    else:
        secs, cpu = float(match["secs"]), float(match["cpu"])
        gc = gc_counters(match["gc"])
        outcome = Outcome(Verdict(match["verdict"]), match["reason"])
        peak = max(peak or 0, int(match["peak_kb"]) * 1024) or None
    if outcome.verdict is Verdict.ERROR and not interrupted:
        # The prover says the machine failed it (a temporary file, its own
        # input files): no verdict on the answer; the worker runs it again.
        interrupted = machine_fault(outcome.reason)
    if outcome.verdict is Verdict.TIMEOUT and str(clock) == LimitClock.WALL \
            and obs.paused_secs > 0 and not interrupted:
        # The runner was stopped while the check ran: a wall-clock alarm in
        # the prover counted that time too, and the TIMEOUT may be the stop's.
        # (CPU time does not pass while a process is stopped.)
        interrupted = "paused"
    return CheckResult(outcome, secs, obs.wall_secs, peak, key, status, cpu_secs=obs.cpu_secs,
                       prove_cpu_secs=cpu, interrupted=interrupted, gc=gc)


INFRA = "infra: "      # how a fault of the machine begins (runner.checks.worker.INFRA)


def machine_fault(reason: str) -> str:
    """The cause when an ERROR's ``reason`` is a fault of the machine, not of
    the answer: the prover's own "infra:" (hol_light_driver.ml, hol_check.ml:
    no temporary file, its input files unreadable), an exception of the
    driver itself, or of the native front end reading its files; else ""."""
    if reason.startswith(INFRA):
        return reason
    if reason.startswith(("driver: ", "front end: Sys_error")):
        return INFRA + reason
    return ""


def not_run(verdict: Verdict, reason: str, key: str, mode: str = "") -> CheckResult:
    return CheckResult(Outcome(verdict, reason), None, 0.0, None, key, "not run", mode=mode)
