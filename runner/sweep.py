"""A sweep: resolve the input once, skip what is already recorded, run the
rest on an executor, merge the shards.

Everything that can be wrong with the input is found before anything is
written, so bad input costs nothing and loses nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import secrets
import socket
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import psutil
import pyarrow as pa
import pyarrow.compute as pc

from cluster.base import SweepJob

from . import events, sweep_dir
from . import prover_registry as backends
from .checks import attempts, problem_hash
from .checks.context_proofs import ContextProofs
from .checks.priority import nice_refusal, resolve_nice
from .checks.tasks import CheckTask
from .corpus import Problem, corpus_fingerprint, corpus_notes, select_problems
from .errors import InputError
from .maps import (calibration_corpus, canary, drift_confirm, host_factor, node_factor, sweep_map,
                   timeout_map)
from .maps.sweep_limits import SweepLimits
from .maps.timeouts import TimeoutPolicy, load_category_timeouts, resolve_limits
from .planning.inputs import plan_sweep
from .planning.planner import PLAN_FILE, PlanConfig, Workers, write_plan
from .planning.simulate import predict
from .planning.sweep_config import PreparedSweep, SweepConfig, default_mem_limit
from .planning.work_left import WorkLeft
from .prover import LimitClock, Mode, ProverBackend
from .results import heartbeat, shards, lock as sweep_lock
from .results.preparing import Preparing
from .results.done import LIGHT, Done
from .results.rows import ResultRow
from .settings import beyond_ram, format_size
from .sweep_dir import check_manifest, check_out_dir, check_resume_settings


def _common(reasons: list[str]) -> tuple[str, int]:
    """The most frequent of ``reasons`` (the first of equals) and its count."""
    top = Counter(reasons).most_common(1)
    return top[0] if top else ("", 0)


@dataclass
class SweepSummary:
    out: Path
    counts: Counter
    total: int
    ran_now: int
    resumed: int
    quarantined: list[Path]
    table: pa.Table
    skipped: int = 0        # attempts early stop skipped (no row; OUT/skipped.csv)
    rechecked: int = 0      # recorded checks run again: their answers changed, or are gone
    problem_ids: tuple[str, ...] | None = None   # this run's problems; None: every row's
    # Problem id -> why its checks cannot run in the mode asked for
    # (PreparedSweep.not_native), and whether they were refused for it.
    not_native: Mapping[str, str] = field(default_factory=dict)
    no_fallback: bool = False

    def _rows(self) -> pa.Table:
        table = self.table
        if self.problem_ids is not None:
            table = table.filter(pc.is_in(table["problem_id"],
                                          value_set=pa.array(list(self.problem_ids), pa.string())))
        return table

    def fallbacks(self) -> str | None:
        """The line saying how many checks ran in bytecode because their
        context cannot be compiled natively (or, with --no-fallback, got
        ERROR for it), with the most common reason; None when none did.
        Read off the problems the backend classified (``not_native``), not
        off the rows' reasons: those are for people."""
        rows = self._rows()
        why = [self.not_native[pid] for pid, key in zip(rows["problem_id"].to_pylist(),
                                                         rows["image_key"].to_pylist())
               if key and pid in self.not_native]      # no key: no check was due (no answer)
        if not why:
            return None
        common, n = _common(why)
        also = "" if n == len(why) else f"; {len(why) - n} for other reasons"
        if self.no_fallback:
            return (f"{len(why)} checks got ERROR: their context cannot run natively and "
                    f"--no-fallback keeps them out of bytecode ({common}{also})")
        return f"{len(why)} checks fell back to bytecode ({common}{also})"

    def every_context_failed(self) -> str | None:
        """When every context the sweep's checks needed failed to load: one
        line naming how many and the most common cause; else None. Rows
        without a context to load (no answer given) do not count."""
        rows = self._rows()
        keys, reasons = rows["image_key"].to_pylist(), rows["reason"].to_pylist()
        contexts: dict[str, list[str]] = {}
        for key, reason in zip(keys, reasons):
            if key:
                contexts.setdefault(key, []).append(reason or "")
        if not contexts or not all(r.startswith("setup:") for rs in contexts.values() for r in rs):
            return None
        cause, _ = _common([rs[0] for rs in contexts.values()])
        return f"every context failed to load ({len(contexts)} of {len(contexts)}): {cause}"


# Reading, splitting and keying contexts takes about half a second per MB of
# setup.ml here (a 50 MB setup.ml gave 25 s of silence): past this, say so.
LOUD_CONTEXTS_BYTES = 8 * 2**20


def _say_reading(problems: list[Problem]) -> None:
    """Tell the screen (runner/reporting/progress.PrepareLog) that big contexts are being read."""
    size = sum(p.setup_path.stat().st_size for p in problems if p.setup_path.is_file())
    if size >= LOUD_CONTEXTS_BYTES:
        events.say("prepare", name=f"reading the contexts of {len(problems)} problems "
                                   f"({format_size(size)} of setup files) to plan their images")


def require_answers(config: SweepConfig, problems: list[Problem]) -> None:
    """An --answers folder that answers no problem of the corpus (empty, or
    holding other things) is refused, as a timeout map naming none is:
    every problem would be recorded as ERROR "no answer given"."""
    if config.answers is None or not Path(config.answers).is_dir():
        return
    if any(attempts.answers_of(p) for p in problems):
        return
    folder = Path(config.answers)
    inside = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    holds = (f"it holds {', '.join(inside[:3])}{', ...' if len(inside) > 3 else ''}" if inside
             else "it is empty")
    example = problems[0].problem_id if problems else "<problem-id>"
    raise InputError(folder, f"answers folder gives no answer to any of the corpus's {len(problems)} "
                     f"problems ({holds})", f"pass the folder that holds <problem-id>/answer.txt "
                     f"(e.g. {example}/answer.txt) or a .csv, or drop --answers")


def _check_flags(config: SweepConfig) -> None:
    """Each flag of ``config`` that is out of its range, one InputError
    naming it; nothing is read or built yet."""
    if config.workers < 1:
        raise InputError("--workers", f"{config.workers} is not a worker count", "pass 1 or more")
    if str(config.context_proofs) not in {str(c) for c in ContextProofs}:
        raise InputError("--context-proofs", f"{config.context_proofs!r} is not a choice",
                         f"pass one of {', '.join(str(c) for c in ContextProofs)}")
    if config.no_fallback and str(config.mode) not in (Mode.NATIVE, Mode.AUTO):
        raise InputError("--no-fallback", f"applies to --mode native or auto, not {config.mode}",
                         "drop --no-fallback, or pass --mode native")
    if str(config.limit_clock) not in {str(c) for c in LimitClock}:
        raise InputError("--limit-clock", f"{config.limit_clock!r} is not a clock",
                         f"pass one of {', '.join(str(c) for c in LimitClock)}")
    if config.nice is not None and (refusal := nice_refusal(config.nice)) is not None:
        raise InputError("--nice", *refusal)
    if not 1 <= config.backstop_factor <= 1000:
        raise InputError("--backstop-factor", f"{config.backstop_factor} is not a factor of the limit",
                         "pass a number from 1 to 1000 (default 3)")
    if not 0 <= config.backstop_extra <= 7 * 86400:
        raise InputError("--backstop-extra", f"{config.backstop_extra} is not a number of seconds",
                         "pass seconds from 0 to a week (default 300)")
    if not 0 <= config.limit_slack <= 3600:
        raise InputError("--limit-slack", f"{config.limit_slack} is not a number of seconds",
                         "pass seconds from 0 to 3600 (30 is s2n-bignum-bench's)")
    if config.host_factor is not None and config.timeout_map is None:
        raise InputError("--host-factor", "scales a timeout map's limits, and no --timeout-map is given",
                         "pass --timeout-map MAP, or drop --host-factor")
    host_factor.parse(config.host_factor)
    if not 0 <= config.calibration_budget <= 1:
        raise InputError("--calibration-budget", f"{config.calibration_budget} is not a share of the "
                         "sweep's expected core-hours", "pass a share from 0 to 1 (default 0.02)")
    canary.check_flags(config)
    if config.calibration_corpus is not None and config.timeout_map is None:
        raise InputError("--calibration-corpus", "draws ground truths by their times in the timeout "
                         "map, and no --timeout-map is given",
                         "pass --timeout-map MAP, or drop --calibration-corpus")
    if not 0 <= config.grace < 3600:
        raise InputError("--grace", f"{config.grace} is not a grace period in seconds",
                         "pass a number from 0 to 3600")


def prepare(config: SweepConfig, *, per_node: bool = False) -> PreparedSweep:
    """Resolve and validate all input; raises InputError. Writes nothing
    but OUT/preparing.json while it reads, builds and compiles, which it
    removes as it ends (runner/results/preparing.py). ``per_node``: the
    sweep runs on a cluster's nodes, each resolving --host-factor auto for
    itself (runner/maps/node_factor.py)."""
    _check_flags(config)
    nice = resolve_nice(config.nice, config.limit_clock)
    check_out_dir(config)
    # What the resumed sweep ran with, before anything is built (a native build takes minutes).
    check_resume_settings(config)
    # Minutes may pass before sweep.json and status.json exist: `status` says what happens.
    with Preparing(config.out, limit_clock=str(config.limit_clock), nice=nice,
                   host_factor=config.host_factor):
        return _prepare(config, nice, per_node)


def _prepare(config: SweepConfig, nice: int, per_node: bool = False) -> PreparedSweep:
    selected = backends.select(config)      # HOL Light or Isabelle: runner/prover_registry.py
    problems = selected.load(config.corpus, config.answers)
    # Said once: hidden problem folders skipped, setup.ml symlinks followed out of the corpus.
    notes = corpus_notes(config.corpus, problems)
    require_answers(config, problems)
    if config.only is not None:
        wanted = set(config.only)
        problems = [p for p in problems if p.problem_id in wanted]
    # --problems picks checks of the sweep, not another corpus: its fingerprint is the whole one's.
    fingerprint, corpus_size = corpus_fingerprint(problems), len(problems)
    # A resume from another corpus path: the same corpus moved or copied is
    # fine, another one is refused (before anything is built).
    notes += sweep_dir.check_corpus(config, fingerprint)
    if config.problems:
        problems = select_problems(problems, config.problems)
    swept_map = sweep_map.load(config, selected.prover, [p.problem_id for p in problems],
                               sweep_dir.recorded_host_factor(config.out), per_node)
    loaded, notes = swept_map.loaded, notes + swept_map.said
    # Read before anything is built: a bad DIR costs nothing.
    calibration = (calibration_corpus.load(config, selected.load, problems, loaded)
                   if swept_map.per_node else None)
    # Each node sets its own factor on its checks (None until it does).
    factor = None if loaded is None or swept_map.per_node else loaded.host_factor
    policy = TimeoutPolicy(
        by_problem=loaded.limits() if loaded else {},
        by_category=load_category_timeouts(config.category_timeouts) if config.category_timeouts else None,
        default=config.default_timeout, map_path=config.timeout_map,
        category_path=config.category_timeouts)
    resolve_limits(problems, policy)    # an unknown category refused before anything is built
    mem = config.mem_limit or default_mem_limit(config.workers)
    if config.mem_limit and (beyond := beyond_ram(config.mem_limit)):
        notes += (beyond,)      # warned, not refused: a cluster node may have more
    backend = selected.build(config)
    try:
        backend.check_mem_limit(mem)
    except InputError as exc:
        if config.mem_limit is not None:
            raise
        # The limit was derived from --workers: that is the flag to change.
        raise InputError("--workers", f"{config.workers} workers share this machine's memory: "
                         f"{exc.problem}",
                         "pass fewer --workers, or a --mem-limit (e.g. 2G)") from None
    info = backend.info
    # A map's sidecar gives each problem its profiled memory need and guard;
    # the backend turns its limits into those of the mode a check runs in.
    map_use = timeout_map.use_map(loaded, info.prover, info.build, info.mode, info.runtime,
                                  backends.descriptor(selected.prover).map_runtime_holds)
    backend.use_map(loaded)
    _say_reading(problems)
    # A backend that compiles contexts before it can say which mode a check
    # runs in (native HOL Light: a context that cannot be compiled runs in
    # bytecode, under a bytecode limit) compiles them now, before any limit.
    # With the few ground truths of --calibration-corpus a node may check: timed in their mode.
    chosen = calibration_corpus.candidates(calibration, backend, config)
    ids = {p.problem_id for p in problems}
    not_native = {pid: why for pid, why in backend.classify(problems + chosen).items() if pid in ids}
    # What each problem's verdicts depend on besides the answer, hashed into
    # its rows: a resume checks again the problems whose hash changed.
    inputs = problem_hash.digests(problems, backend.problem_inputs(problems))

    limits_in = SweepLimits(config, policy, loaded, map_use.mem, backend, mem, nice, factor).of
    by_problem, said = limits_in(problems)
    notes += said
    # One task per attempt of each problem (runner/checks/attempts.py).
    tasks = [task for p in problems
             for task in attempts.tasks_for(p, by_problem[p.problem_id],
                                            stop_on_first_ok=config.stop_on_first_ok,
                                            problem_sha256=inputs[p.problem_id])]
    # Whatever the order of problems, a problem's attempts must stay one
    # contiguous run in attempt order: a worker drains the run against one
    # loaded context, stopping early and reusing duplicates as it goes.
    ordered, plan = order(tasks, backend, config, loaded)
    converted = backend.warnings()      # of the sweep's limits, not of the calibration corpus's
    spec = None
    if swept_map.per_node:
        spec, said = node_factor.for_sweep(tasks, problems, loaded, backend, config, plan,
                                           calibration_corpus.truths(calibration, chosen, limits_in))
        notes += (said,)
    return PreparedSweep(config, problems, attempts.contiguous(ordered), backend,
                         warnings=notes + map_use.warnings + converted, plan=plan,
                         corpus_fingerprint=fingerprint, corpus_size=corpus_size, not_native=not_native,
                         host_factor=factor, nice=nice, node_factor=spec)


def order(tasks: list[CheckTask], backend: ProverBackend, config: SweepConfig, loaded=None):
    """The planner's order of the tasks and the plan (runner/planning/planner.py):
    longest expected first with context affinity and memory packing
    (``planned``), corpus order (``naive``) or seeded random (``shuffle``),
    for one node of ``config.workers`` cores and 80% of this machine's memory."""
    workers = Workers(1, config.workers, int(0.8 * psutil.virtual_memory().total),
                      images_per_node=config.max_images)
    plan = plan_sweep(tasks, backend, workers=workers,
                      config=PlanConfig(policy=config.policy, seed=config.seed),
                      timeout_map=loaded, out=config.out, costs_from=config.costs_from or ())
    by_key = {(t.problem.problem_id, t.attempt): t for t in tasks}
    return [by_key[(c.problem_id, c.attempt)] for c in plan.checks], plan


def _of(table: pa.Table, wanted: pa.Array) -> Done:
    return Done(table.filter(pc.is_in(table["problem_id"], value_set=wanted)))


def _say(text: str) -> None:
    from .reporting import progress  # the console the command line prints on
    progress.console.print(text)


def run_sweep(prepared: PreparedSweep, executor, on_row: Callable[[ResultRow], None] = lambda r: None,
              on_start: Callable[[int, int], None] = lambda total, done: None,
              on_skip: Callable[[int], None] = lambda n: None,
              on_note: Callable[[str], None] = _say) -> SweepSummary:
    """Run what is not yet recorded under OUT, then merge. Resumable at any point.

    ``on_start(total, settled)`` is called once, ``on_row`` with each row,
    ``on_skip(n)`` when a row settles n more attempts (early stop), and
    ``on_note`` with what a resume does besides (answers checked again).

    The run holds OUT's lock (runner/results/lock.py): another live run on
    OUT is refused, naming it. A refused resume is refused before it takes
    the lock, reading only: it touches nothing. An executor that joins a
    sweep another driver runs (Slurm ``--add-tasks``) takes no lock."""
    cfg = prepared.config
    check_manifest(prepared, shards.scan(cfg.out, repair=False, columns=LIGHT).done, write=False)
    if executor.joins_running_sweep:
        return _run_sweep(prepared, executor, on_row, on_start, on_skip, on_note)
    with sweep_lock.SweepLock(cfg.out, executor=executor.name):
        return _run_sweep(prepared, executor, on_row, on_start, on_skip, on_note)


def _run_sweep(prepared: PreparedSweep, executor, on_row, on_start, on_skip, on_note) -> SweepSummary:
    cfg = prepared.config
    scan = shards.scan(cfg.out, columns=LIGHT)
    manifest = check_manifest(prepared, scan.done)
    # --recheck: the current rows with those verdicts settle nothing now.
    tasks, rechecks = attempts.mark_rechecks(prepared.tasks, scan.done, cfg.recheck,
                                             {p.problem_id for p in prepared.problems})
    prepared = dataclasses.replace(prepared, tasks=tasks)
    if cfg.recheck:
        on_note(attempts.recheck_note(cfg.recheck, rechecks))
    # Not yet recorded, less the attempts early stop skips (runner/checks/attempts.py).
    # A row settles its check only for the answer it checked: changed ones run again.
    pending, skipped_before = attempts.pending(prepared.tasks, scan.done)
    changes = attempts.compare(prepared.tasks, scan.done, {p.problem_id for p in prepared.problems})
    for note in changes.notes():
        on_note(note)
    if not executor.joins_running_sweep:
        # This runner holds the lock: a check still on the running board was
        # cut short by a runner killed without a word, and runs again now.
        if retired := heartbeat.retire_dead_runners_checks(cfg.out):
            cpu_h = sum(r.cpu_s for r in retired) / 3600
            on_note(f"{len(retired)} checks were cut short when the last runner was killed without "
                    f"a word: they run again ({cpu_h:.2f} core-hours of CPU lost at least; "
                    "`proofbatch report` counts them)")
    on_start(len(prepared.tasks), len(prepared.tasks) - len(pending))
    stops = attempts.EarlyStops.of(pending)
    # OUT/status.json: what `proofbatch status` reads instead of the shards.
    # Rows of problems this run does not select (--problems) are not its to count.
    wanted = pa.array(sorted({p.problem_id for p in prepared.problems}), pa.string())
    current = attempts.unsuperseded(prepared.tasks, scan.done).matching(
        *attempts.task_hashes(prepared.tasks))     # less changed answers and rechecks
    beat = heartbeat.Heartbeat(cfg.out, total=len(prepared.tasks), done=_of(current.table, wanted),
                               skipped=len(skipped_before), workers=cfg.workers,
                               resume=sweep_dir.resume_command(manifest, cfg.out))

    def row_in(row: ResultRow) -> None:
        on_row(row)
        beat.row(row)
        if skipped := stops.row(row.problem_id, row.verdict):
            beat.skip(skipped)
            on_skip(skipped)

    # Unique even for two runs one process starts within a second: Dask
    # workers prepare each run's contexts once, by run id.
    stamp = f"{dt.datetime.now():%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"
    run_id = f"{socket.gethostname()}-{os.getpid()}-{stamp}"
    if pending:
        plan = None
        if prepared.plan is not None:
            plan = prepared.plan.only((t.problem.problem_id, t.attempt) for t in pending)
            write_plan(cfg.out / PLAN_FILE, plan, predict(plan), run_id=run_id)
            beat.plan(plan, WorkLeft(plan))
        with beat:
            executor.execute(SweepJob(prepared.backend, pending, cfg.out, run_id, plan=plan,
                                      node_factor=prepared.node_factor), row_in)
    if prepared.node_factor is not None:      # factors and canaries kept; drifting TIMEOUTs confirmed
        drift_confirm.after_sweep(prepared, lambda tasks, on: executor.execute(SweepJob(
            prepared.backend, tasks, cfg.out, f"{run_id}-confirm", node_factor=prepared.node_factor), on),
            on_note)
    with beat:
        table = shards.merge(cfg.out, ((t.problem.problem_id, t.attempt) for t in prepared.tasks))
        skipped = attempts.record_skipped(cfg.out, prepared.tasks, table)
    selected = _of(table, wanted)
    beat.finish(selected.verdict_counts(), len(selected), skipped)
    verdicts = selected.verdict_counts()
    skipped_now = skipped - len(skipped_before)
    return SweepSummary(problem_ids=tuple(p.problem_id for p in prepared.problems),
                        not_native=prepared.not_native, no_fallback=cfg.no_fallback,
                        out=cfg.out, counts=verdicts, total=len(prepared.tasks),
                        ran_now=len(pending) - skipped_now,
                        resumed=len(prepared.tasks) - len(pending) - len(skipped_before),
                        quarantined=scan.quarantined, table=table, skipped=skipped,
                        rechecked=len(changes.changed) + len(changes.gone) + len(changes.problems)
                        + rechecks)
