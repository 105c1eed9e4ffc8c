"""One row per check: the contract that profiles, plans, reports and every
executor read. Shards, ``results.parquet`` and ``results.csv`` all use it."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass

import pyarrow as pa

from ..settings import setting as _help
from ..verdicts import Verdict


@dataclass(frozen=True)
class ResultRow:
    problem_id: str = _help("the problem's folder name")
    attempt: int = _help("which answer of the problem this is; 0 for a single answer")
    category: str = _help("category.txt, or 'generic'")
    verdict: str = _help("OK, FAIL, CHEATING, TIMEOUT, MEMOUT or ERROR")
    reason: str = _help("one line saying why")
    prove_secs: float | None = _help("time inside prove(), measured in the prover; context load excluded")
    wall_secs: float = _help("dispatch to recorded verdict, as the runner saw it")
    peak_rss_mb: float | None = _help("peak resident memory of the check's process tree, image pages included")
    timeout_s: float = _help("the time limit the check ran under")
    timeout_source: str = _help("where the limit came from: map, category or default")
    worker: str = _help("which worker ran the check")
    host: str = _help("the machine the worker ran on")
    started_at: dt.datetime = _help("when the check was dispatched (UTC)")
    finished_at: dt.datetime = _help("when its verdict was recorded (UTC)")
    image_key: str = _help("key of the loaded context the check forked from")
    prover_build: str = _help("the prover build, e.g. Debian's hol-light package version "
                              "(hol_build in shards written before the name was the prover's)")
    mode: str = _help("how the check ran (runner.prover.Mode), e.g. bytecode")
    exit_status: str = _help("how the check process ended, as its image reaped it")
    answer_sha256: str = _help("hash of the answer text that was checked")
    run_id: str = _help("the sweep invocation that produced the row")
    dedup_of: int | None = _help("set when no check ran because an earlier attempt of the same problem "
                                 "had the same answer text: that attempt, whose verdict is reused",
                                 default=None)
    sandbox: str = _help("the box the check ran in: bwrap (namespaces, read-only files, a chroot "
                         "jail and a uid of its own), rlimits (limits only) or none; empty when "
                         "no check ran (runner/checks/sandbox.py)", default="")
    wait_secs: float | None = _help("dispatch to the check's start: waiting for its image (building "
                                    "it included) and for memory; empty when no check ran",
                                    default=None)
    answer_unwrapped: bool | None = _help("true when the answer was given in a markdown fence and, "
                                          "as s2n-bignum-bench does, the last fenced block was "
                                          "checked (answer_sha256 is still the hash of the answer "
                                          "as given); empty in rows written before this column",
                                          default=False)
    context_proofs: str = _help("HOL Light: replay (the context ran its proofs) or trust (its "
                                "top-level proofs were taken as stated, runner/checks/context_proofs.py); "
                                "empty for other provers, null in shards written before the column",
                                default="")
    infra_retries: int = _help("how often the check ran again on a fresh fork after something "
                               "outside it ended it without a verdict on its answer (the OOM "
                               "killer, an admin's kill -9, the wall-clock backstop of a starved "
                               "check, a wall-clock TIMEOUT while the runner was stopped); at most "
                               "runner.checks.guard.OUTSIDE_RETRIES, then the end is recorded "
                               "(ERROR saying why); null in shards written before the column",
                               default=0)
    cpu_secs: float | None = _help("CPU time (user + system) of the check's own process tree, "
                                   "from outside; a forked check counts none of its image's load; "
                                   "empty when no check ran", default=None)
    prove_cpu_secs: float | None = _help("CPU time of prove() alone, measured in the prover beside "
                                         "prove_secs", default=None)
    limit_clock: str = _help("what timeout_s counted: cpu (the check's CPU time) or wall "
                             "(elapsed, as s2n-bignum-bench's harness); empty in rows written "
                             "before the column, which counted wall time", default="")
    host_load: float | None = _help("the host's 1-minute load average when the check ended",
                                    default=None)
    host_cpus: int | None = _help("the host's logical CPUs, beside host_load", default=None)
    cpu_model: str = _help("the host's CPU model (/proc/cpuinfo's model name, else the platform's "
                           "name for it): a profile tells nodes of different speed apart by it; "
                           "empty in rows written before the column", default="")
    problem_sha256: str = _help("hash of what the verdict depends on besides the answer: the "
                                "problem's setup and query and the files its setup loads, as its "
                                "prover resolves them (ProverBackend.problem_inputs); a resume "
                                "checks again a problem whose hash changed. Empty in rows written "
                                "before the column: those stand unless their answer changed",
                                default="")
    fallback: str = _help("why the check ran in another mode than the sweep asked for (HOL Light: "
                          "its context cannot be compiled natively, so it ran in bytecode, as "
                          "`mode` says); empty when it ran as asked, and in rows written before "
                          "the column", default="")
    mem_limit_mb: float | None = _help("the memory guard the check ran under (MEMOUT above it); "
                                       "empty in rows written before the column", default=None)
    host_factor: float | None = _help("the factor the map's limits were scaled by for the host "
                                      "that ran the check (--host-factor); empty without a map "
                                      "and in rows written before the column", default=None)
    runtime: str = _help("HOL Light: the OCaml runtime setting the check ran under "
                         "(runner/provers/hol_light/runtime.py): default, or e.g. s=4M,o=120; empty "
                         "for other provers and in rows written before the column", default="")
    gc: str = _help("HOL Light: the OCaml garbage collector's counters over prove(), a JSON object "
                    "(Gc.quick_stat before and after: minor and major collections, compactions, "
                    "minor, promoted and major words, the major heap and its peak in words before "
                    "and after; runner/provers/hol_light/session/verdict_record.py); empty when "
                    "none was reported and in rows written before the column", default="")
    node_drift: float | None = _help("the speed of the node that ran the check against its own "
                                     "at the sweep's start, by its canary (runner/maps/canary.py): "
                                     "its latest canary's time over its first, 2.0 for a node "
                                     "running at half speed; a node past --canary-drift is named "
                                     "by the report; empty without a canary and in rows written "
                                     "before the column", default=None)
    confirmed: str = _help("set on the row of a check run again at the end of its sweep to "
                           "confirm a TIMEOUT given on a drifting node (runner/maps/"
                           "drift_confirm.py): what that first run gave, where and at which "
                           "drift; this row's verdict is the confirming run's. Empty otherwise "
                           "and in rows written before the column", default="")
    mem_source: str = _help("where that guard came from (runner/maps/mem_needs.py): --mem-limit, "
                            "the map's profile, an estimate for the problem's time class, or the "
                            "default share; empty in rows written before the column", default="")

    def __post_init__(self):
        Verdict(self.verdict)  # a closed set: anything else is a bug

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


_TS = pa.timestamp("us", tz="UTC")
_ARROW_TYPES = {
    "attempt": pa.int32(),
    "dedup_of": pa.int32(),
    "infra_retries": pa.int32(),
    "host_cpus": pa.int32(),
    "cpu_secs": pa.float64(),
    "prove_cpu_secs": pa.float64(),
    "host_load": pa.float64(),
    "answer_unwrapped": pa.bool_(),
    "prove_secs": pa.float64(),
    "wall_secs": pa.float64(),
    "peak_rss_mb": pa.float64(),
    "mem_limit_mb": pa.float64(),
    "host_factor": pa.float64(),
    "node_drift": pa.float64(),
    "timeout_s": pa.float64(),
    "wait_secs": pa.float64(),
    "started_at": _TS,
    "finished_at": _TS,
}

COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ResultRow))
SCHEMA = pa.schema([pa.field(name, _ARROW_TYPES.get(name, pa.string())) for name in COLUMNS])
KEY = ("problem_id", "attempt")
# Columns added after shards were first written: older shards lack them, and
# reading fills them with nulls.
# Columns renamed since shards were first written: today's name -> the name
# older shards have. Readers take either (runner.results.done.read_shard).
RENAMED: dict[str, str] = {"prover_build": "hol_build"}
OPTIONAL_COLUMNS: tuple[str, ...] = ("dedup_of", "sandbox", "wait_secs", "answer_unwrapped",
                                     "context_proofs", "infra_retries", "cpu_secs", "prove_cpu_secs",
                                     "limit_clock", "host_load", "host_cpus", "problem_sha256",
                                     "cpu_model", "fallback", "mem_limit_mb", "mem_source", "runtime",
                                     "host_factor", "gc", "node_drift", "confirmed")


def rows_to_table(rows: list[ResultRow]) -> pa.Table:
    return pa.Table.from_pylist([r.as_dict() for r in rows], schema=SCHEMA)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)
