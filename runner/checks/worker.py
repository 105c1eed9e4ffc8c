"""A worker: takes checks one at a time, runs them in a prover session and
publishes each verdict as a result row in its own shard stream.

Every executor runs this same loop: threads on one machine, Slurm array
tasks, Dask workers. Only where the loop runs differs.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import platform
import socket
import threading
from typing import Callable, Iterator

from .. import events
from .. import prover_registry as provers
from .attempts import Drain
from .guard import BACKSTOP, OUTSIDE_RETRIES, outside_death
from .tasks import CheckTask
from ..errors import ProverError, not_utf8
from ..prover import BackendInfo, CheckResult, ProverSession
from ..results.rows import ResultRow, utcnow
from ..results.shards import ShardWriter
from ..results import lost as lost_checks
from ..results.running import RunningBoard
from ..verdicts import Outcome, Verdict


def result_row(task: CheckTask, result: CheckResult, *, info: BackendInfo, worker: str,
               run_id: str, started_at, finished_at, dedup_of: int | None = None,
               infra_retries: int = 0) -> ResultRow:
    p = task.problem
    return ResultRow(
        problem_id=p.problem_id, attempt=task.attempt, category=p.category,
        verdict=result.outcome.verdict.value, reason=result.outcome.reason,
        prove_secs=result.prove_secs, wall_secs=result.wall_secs,
        peak_rss_mb=None if result.peak_rss_bytes is None else result.peak_rss_bytes / 2**20,
        timeout_s=task.limits.time_s, timeout_source=task.limits.time_source,
        worker=worker, host=node_host(), started_at=started_at, finished_at=finished_at,
        image_key=result.image_key, prover_build=info.build, mode=str(result.mode or info.mode),
        exit_status=result.exit_status,
        # The hash of the answer as given, fenced or not: it names the
        # submission (a row of the user's CSV or JSONL), and the checked text
        # follows from it (attempts.unwrap_fence).
        answer_sha256=(hashlib.sha256(p.answer if p.answer_given is None else p.answer_given)
                       .hexdigest() if p.answer is not None else ""),
        run_id=run_id, dedup_of=dedup_of, sandbox=result.sandbox,
        wait_secs=None if result.forked_at is None
        else max(0.0, result.forked_at - started_at.timestamp()),
        answer_unwrapped=p.answer_given is not None,
        context_proofs=info.context_proofs, infra_retries=infra_retries,
        cpu_secs=result.cpu_secs, prove_cpu_secs=result.prove_cpu_secs,
        limit_clock=str(task.limits.clock), host_load=_load(), host_cpus=os.cpu_count(),
        problem_sha256=task.problem_sha256, cpu_model=cpu_model(), fallback=result.fallback,
        mem_limit_mb=task.limits.mem_bytes / 2**20, mem_source=task.limits.mem_source,
        runtime=task.limits.runtime or info.runtime, host_factor=task.limits.host_factor, gc=result.gc,
        node_drift=task.node_drift,
        confirmed="" if task.confirms is None else task.confirms.note)


# A node's name: the host's, unless this variable names it (a site whose
# nodes share one host name in containers; a test giving two Dask workers of
# one machine the calibrations of two nodes, runner/maps/node_factor.py).
NODE_HOST_ENV = "PROOFBATCH_NODE_HOST"


def node_host() -> str:
    return os.environ.get(NODE_HOST_ENV) or socket.gethostname()


@functools.cache
def cpu_model() -> str:
    """This host's CPU model: /proc/cpuinfo's "model name" (x86; many ARM
    kernels print none), else what the platform calls its processor."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def killed_from_outside(result: CheckResult) -> str | None:
    """The signal (SIGKILL, SIGTERM) of a check that something outside it
    killed before its verdict (the OOM killer, an admin's kill -9), or None.
    Our own guards' kills say TIMEOUT, MEMOUT or their reason instead."""
    return outside_death(result.outcome.verdict.value, result.outcome.reason, result.exit_status)


KILLED = "the check was killed by"      # how a death recorded after its retries begins
# How the cause of a fault of the machine begins (a CheckResult's
# ``interrupted``): no temporary file, an image killed under its check, the
# prover's own files unreadable. Retried; never recorded as the answer's.
INFRA = "infra: "


def retry_cause(result: CheckResult) -> str | None:
    """Why ``result`` says nothing of its answer and the check runs again:
    killed from outside (the signal), ended by the wall-clock backstop
    (``backstop``), a wall-clock TIMEOUT while the runner was stopped
    (``paused``), or a fault of the machine (``infra: ...``); None for a
    verdict on the answer."""
    return killed_from_outside(result) or result.interrupted or None


def _given_up(result: CheckResult, cause: str, retries: int) -> CheckResult:
    """The result recorded once a check's retries are spent. A fault of the
    machine every time is no verdict at all: it stops the run (ProverError,
    exit 1, one line naming it), and a rerun checks it again."""
    tries = retries + 1
    if cause == "paused":
        return result       # it timed out every time: the TIMEOUT stands
    if cause.startswith(INFRA):
        raise ProverError(f"{cause[len(INFRA):]}; {tries} times, {retries} of them run again: a "
                          "fault of this machine, not of the answer, and nothing was recorded for "
                          "it; fix it and run the same command again to resume")
    if cause == "backstop":
        load = _load()
        host = f"load {load:.1f} on {os.cpu_count()} CPUs" if load is not None else "load unknown"
        reason = (f"{result.outcome.reason}; {tries} times ({host} at the last), {retries} of them run "
                  "again: give the host fewer workers, or raise the backstop (--backstop-factor)")
        return dataclasses.replace(result, outcome=Outcome(Verdict.ERROR, reason))
    reason = (f"{KILLED} {cause} from outside (the OOM killer, or a kill) "
              f"{tries} times without a verdict ({result.exit_status}), "
              f"{retries} of them retried on a fresh fork; check the host's memory "
              "(dmesg) and who kills its processes, then run it again")
    return dataclasses.replace(result, outcome=Outcome(Verdict.ERROR, reason))


class Stop(threading.Event):
    """A worker's stop, and why: a check it cuts short is a loss with that
    cause (runner/results/lost.py)."""

    cause = lost_checks.stop_cause(None)

    def stop(self, cause: str) -> None:
        self.cause = cause
        self.set()


def check_retrying(session: ProverSession, task: CheckTask, stop: threading.Event,
                   on_retry: Callable[[CheckResult], None] = lambda r: None) -> tuple[CheckResult, int]:
    """Check ``task``; a check ended by something that is not its answer's
    doing (``retry_cause``) runs again on a fresh fork, up to
    OUTSIDE_RETRIES times, and only then is its end recorded, with the
    retries said. Returns the result and how often it was retried. A sweep
    being stopped retries nothing (its checks were killed by us)."""
    result = session.check(task.problem, task.limits)
    retries = 0
    while (cause := retry_cause(result)) is not None and not stop.is_set():
        if retries == OUTSIDE_RETRIES:
            result = _given_up(result, cause, retries)
            break
        retries += 1
        on_retry(result)            # its run is lost: the check runs again from its start
        result = session.check(task.problem, task.limits)
    return result, retries


def outside_deaths(table) -> str | None:
    """What `proofbatch run` says of the checks of a results table that were
    killed from outside (retried, or recorded after their retries); None
    when there were none."""
    import pyarrow.compute as pc

    if "infra_retries" not in table.column_names or table.num_rows == 0:
        return None
    retries = table["infra_retries"].fill_null(0)
    retried = pc.sum(pc.greater(retries, 0)).as_py() or 0
    reasons = table["reason"].fill_null("")
    given_up = pc.or_(pc.starts_with(reasons, KILLED), pc.starts_with(reasons, BACKSTOP))
    recorded = pc.sum(pc.and_(pc.equal(table["verdict"], "ERROR"), given_up)).as_py() or 0
    deaths = (pc.sum(retries).as_py() or 0) + recorded
    if deaths == 0:
        return None
    return (f"{deaths} deaths of checks ended from outside without a verdict (the OOM killer, a "
            f"kill, or the wall-clock backstop of a starved check): {retried} checks ran again on "
            f"a fresh fork, {recorded} of them recorded as ERROR after {OUTSIDE_RETRIES} retries "
            "(their reason says so); check the host's memory (dmesg), its load, and who kills "
            "its processes")


def lost_row(task: CheckTask, reason: str, exit_status: str, *, info: BackendInfo, worker: str,
             run_id: str) -> ResultRow:
    """The ERROR row of a check an executor lost (its job or worker died and
    no retry finished it): recorded, with the reason, never dropped."""
    now = utcnow()
    return result_row(task, CheckResult(Outcome(Verdict.ERROR, reason), None, 0.0, None, "", exit_status),
                      info=info, worker=worker, run_id=run_id, started_at=now, finished_at=now)


def unanswered(task: CheckTask) -> CheckResult:
    """A problem without an answer still gets its one verdict, without a check."""
    return CheckResult(Outcome(Verdict.ERROR, "no answer given for this problem"),
                       None, 0.0, None, "", "not run")


def unreadable(task: CheckTask, prover: str) -> CheckResult | None:
    """An answer no prover can read gets ERROR saying why, without a check:
    one that is not UTF-8 text (the bench reads answers as UTF-8, and what
    OCaml's parser would say of the bytes never mentions it), an empty one
    or one with a NUL byte (runner/answers.refusal), or one that is empty in
    ``prover``'s language (its descriptor's ``refuses``)."""
    answer = task.problem.answer or b""
    try:
        answer.decode("utf-8")
    except UnicodeDecodeError as exc:
        return CheckResult(Outcome(Verdict.ERROR, f"answer is not UTF-8 text "
                                   f"({not_utf8(answer, exc)}); save answers as UTF-8"),
                           None, 0.0, None, "", "not run")
    reason = provers.answer_refusal(prover, answer)
    if reason is None:
        return None
    return CheckResult(Outcome(Verdict.ERROR, reason), None, 0.0, None, "", "not run")


def work(session: ProverSession, tasks: Iterator[CheckTask], writer: ShardWriter, *,
         worker: str, run_id: str, on_row: Callable[[ResultRow], None] = lambda row: None,
         stop: threading.Event | None = None, board: RunningBoard | None = None) -> None:
    """Check tasks until the iterator is exhausted or ``stop`` is set.

    A check cut short by ``stop`` is not recorded: it never reached a verdict
    and a resumed sweep runs it again. ``board``, when given, shows the
    running check to ``proofbatch status``.
    """
    stop = stop or threading.Event()
    drain = Drain()
    for task in tasks:
        if stop.is_set():
            return
        if drain.skips(task):
            if task.problem.answer is not None:
                session.withdraw(task.problem)
            continue        # not a check: no row (runner/checks/attempts.py)
        started_at = utcnow()
        retries = 0
        reused = drain.reused(task)
        if reused is not None:
            result = reused
            if task.problem.answer is not None:
                session.withdraw(task.problem)
        elif task.problem.answer is None:
            result = unanswered(task)
        elif (refused := unreadable(task, session.info.prover)) is not None:
            result = refused
            session.withdraw(task.problem)      # no check: its image is not needed for it
        else:
            if board:
                board.start(task.problem.problem_id, task.attempt, task.limits.time_s,
                            task.limits.host_factor)
            key = f"{task.problem.problem_id}/{task.attempt}"
            events.say("check", key=key, name=task.problem.problem_id, worker=worker,
                       limit_s=task.limits.time_s)
            # The session says when the check starts in its loaded image, in
            # this thread; until then it waits for the image, not its limit.
            me = threading.get_ident()
            clock = str(task.limits.clock)

            def show(e: events.Event) -> None:
                if not board or threading.get_ident() != me:
                    return
                if e.kind == "forked":
                    board.started()
                elif e.kind == "progress":
                    board.progress(e.cpu_s, e.rss_bytes, clock)
            unlisten = events.listen(show)
            try:
                result, retries = check_retrying(
                    session, task, stop, lambda r: board and board.lost(
                        lost_checks.RETRIED, r.cpu_secs, r.wall_secs))
            except BaseException:
                # A stop closes the session under its checks, and a check in
                # a context image may then raise instead of returning: HOL
                # Light's ForkSession finds the base image dead (ProverError).
                # It is still a check cut short, and its cost so far a loss.
                if stop.is_set() and board:
                    board.lost(stop.cause if isinstance(stop, Stop) else lost_checks.stop_cause(None))
                raise
            finally:
                unlisten()
                events.say("checked", key=key, name=task.problem.problem_id, worker=worker)
            if stop.is_set() and board:       # cut short: it runs again on resume
                board.lost(stop.cause if isinstance(stop, Stop) else lost_checks.stop_cause(None),
                           result.cpu_secs, result.wall_secs)
        if stop.is_set():
            return
        row = result_row(task, result, info=session.info, worker=worker, run_id=run_id,
                         started_at=started_at, finished_at=utcnow(),
                         dedup_of=task.dedup_of if reused is not None else None,
                         infra_retries=retries)
        writer.add(row)
        drain.remember(task, result)
        on_row(row)
    if board:
        board.clear()
