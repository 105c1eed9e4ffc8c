"""A sweep: resolve the input once, skip what is already recorded, run the
rest on an executor, merge the shards.

Everything that can be wrong with the input is found before anything is
written, so bad input costs nothing and loses nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import secrets
import socket
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import psutil
import pyarrow as pa
import pyarrow.compute as pc

from cluster.base import SweepJob

from . import attempts, heartbeat, map_provenance, shards, status, sweep_lock, timeout_map
from . import provers as backends
from .context_proofs import ContextProofs
from .corpus import Problem, corpus_fingerprint, corpus_notes, select_problems
from .errors import InputError
from .planner import PLAN_FILE, PlanConfig, Workers, write_plan
from .planner_inputs import plan_sweep
from .prover import CheckLimits, Mode, Prover, ProverBackend
from .results import ResultRow
from .settings import setting as _help
from .simulate import predict
from .sizes import beyond_ram, format_size, size_flag
from .timeouts import TimeoutPolicy, load_category_timeouts, resolve_limits
from .worker import CheckTask

MANIFEST = "sweep.json"


def default_mem_limit(workers: int) -> int:
    """8 GiB, or an even share of 80% of this machine's memory if smaller."""
    return int(min(8 * 2**30, 0.8 * psutil.virtual_memory().total / max(1, workers)))


@dataclass(frozen=True)
class SweepConfig:
    corpus: Path = _help("CORPUS/<problem-id>/{setup.ml,query.txt[,category.txt,answer.txt]}")
    out: Path = _help("sweep directory: shards, results.parquet, results.csv, verdicts.csv; rerun "
                      "to resume")
    answers: Path | None = _help("answers DIR/<id>/answer.txt or FILE.csv (problem_id,answer); default: "
                                 "answer.txt in each problem folder. Several attempts: "
                                 "DIR/<id>/answer_<k>.txt or answers.jsonl, or an attempt column",
                                 default=None)
    workers: int = _help("checks run at once on this machine", default=1)
    timeout_map: Path | None = _help("s2n-bignum-bench timeout-map.json: per-problem limits", default=None)
    map_mode: str | None = _help("the mode a timeout map without a sidecar was measured in: native "
                                 "or bytecode (required for HOL Light: s2n-bignum-bench's map is "
                                 "native); limits of another mode than a check runs in are "
                                 "converted, with a warning (runner/map_provenance.py)", default=None)
    map_build: str | None = _help("the HOL Light build a timeout map without a sidecar was measured "
                                  "with (warned about when it is not this sweep's)", default=None)
    category_timeouts: Path | None = _help("s2n-bignum-bench timeouts.json: per-category limits", default=None)
    default_timeout: float = _help("limit for problems in neither file, in seconds", default=120.0)
    mem_limit: int | None = _help("memory limit per check in bytes, e.g. 4G; default: 8G or an even "
                                  "share of 80% of RAM per worker, whichever is smaller "
                                  "(default_mem_limit)", default=None)
    expected_mem: int = _help("memory a check is expected to need before it may start",
                              default=512 * 2**20)
    hol_light: Path | None = _help("a HOL Light checkout built with make (has hol.sh); default: "
                                   "Debian's package", default=None)
    prover: str | None = _help("hol-light or isabelle; default: from the corpus layout "
                               "(isabelle.toml means Isabelle; runner/provers/__init__.py)", default=None)
    isabelle: Path | None = _help("an Isabelle installation (ISABELLE_HOME); default: "
                                  "$ISABELLE_HOME, or isabelle on PATH", default=None)
    context_root: Path | None = _help("where needs/loadt in setup.ml resolve; default: the current "
                                      "directory", default=None)
    grace: float = _help("seconds past the limit before the outside kill", default=2.0)
    max_images: int = _help("loaded contexts kept alive at once on a host", default=8)
    only: tuple[str, ...] | None = _help("check only these problem ids (all when None)", default=None)
    problems: tuple[str, ...] | None = _help(
        "check only the problems matching these: ids, shell-style globs (arith.*) or @FILE (one id "
        "or glob a line, # comments), separated by commas, the flag repeatable; a pattern matching "
        "none is refused; a resume may select others (runner/corpus.py select_problems); all when "
        "None", default=None)
    policy: str = _help("dispatch order: planned (longest first, context affinity), naive "
                        "(corpus order) or shuffle (seeded random)", default="planned")
    seed: int = _help("seed of the shuffle policy and of tie-breaking", default=0)
    sandbox: str = _help("the box checks run in: auto (bwrap when installed and root, else "
                         "rlimits), bwrap, rlimits or none; see runner/sandbox.py", default="auto")
    allow_missing_answers: bool = _help("on resume, accept that answers recorded before are gone "
                                        "(--answers dropped, an answer.txt deleted): those problems "
                                        "are checked again as given now, ERROR 'no answer given' "
                                        "when they have none; refused otherwise", default=False)
    stop_on_first_ok: bool = _help("skip a problem's remaining attempts once one is OK; skipped "
                                   "attempts get no result row and are listed in skipped.csv",
                                   default=False)
    mode: str = _help("HOL Light execution: bytecode (the toplevel fork server), native (compiled "
                      "with `proofbatch build-native`), or auto (native for checks expected above "
                      "0.35 s of bytecode time); see runner/provers/hol_light/native_auto.py", default="bytecode")
    context_proofs: str = _help("HOL Light: replay (a context runs its proofs as written) or trust "
                                "(while a context loads, its top-level prove returns the stated "
                                "theorem unproved; answers still prove for real); part of every image "
                                "key, recorded in rows and sweep.json; runner/context_proofs.py",
                                default=str(ContextProofs.REPLAY))
    no_fallback: bool = _help("with --mode native or auto: a check whose context cannot be "
                              "compiled natively (a toplevel directive, a computed load, a compile "
                              "error) is ERROR with the reason, instead of running in bytecode 4-7x "
                              "slower under a converted limit; the other checks still run. Recorded "
                              "in sweep.json; a resume must keep it when such checks exist",
                              default=False)


FALLBACK_MARK = "[ran in bytecode: "
REFUSED_MARK = "context cannot run natively (--no-fallback): "


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

    def _rows(self) -> pa.Table:
        table = self.table
        if self.problem_ids is not None:
            table = table.filter(pc.is_in(table["problem_id"],
                                          value_set=pa.array(list(self.problem_ids), pa.string())))
        return table

    def fallbacks(self) -> str | None:
        """The line saying how many checks ran in bytecode because their
        context cannot be compiled natively (or, with --no-fallback, got
        ERROR for it), with the most common reason; None when none did."""
        reasons = [r for r in self._rows()["reason"].to_pylist() if r]
        fell = [r.split(FALLBACK_MARK, 1)[1].rstrip("]") for r in reasons if FALLBACK_MARK in r]
        refused = [r.split(REFUSED_MARK, 1)[1] for r in reasons if REFUSED_MARK in r]
        lines = []
        if fell:
            why, n = _common(fell)
            also = "" if n == len(fell) else f"; {len(fell) - n} for other reasons"
            lines.append(f"{len(fell)} checks fell back to bytecode ({why}{also})")
        if refused:
            why, n = _common(refused)
            also = "" if n == len(refused) else f"; {len(refused) - n} for other reasons"
            lines.append(f"{len(refused)} checks got ERROR: their context cannot run natively and "
                         f"--no-fallback keeps them out of bytecode ({why}{also})")
        return "; ".join(lines) or None

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
        first = [rs[0].split(" " + FALLBACK_MARK, 1)[0] for rs in contexts.values()]
        cause, _ = _common(first)
        return f"every context failed to load ({len(contexts)} of {len(contexts)}): {cause}"


@dataclass(frozen=True)
class PreparedSweep:
    config: SweepConfig
    problems: list[Problem]
    tasks: list[CheckTask]          # every problem, planned order
    backend: ProverBackend
    warnings: tuple[str, ...] = ()  # said before the sweep starts, e.g. a map of another mode
    plan: object = None             # runner.planner.Plan of the tasks; None: dispatch in task order
    corpus_fingerprint: str | None = None   # of the corpus --problems selected from; None: of problems


def prepare(config: SweepConfig) -> PreparedSweep:
    """Resolve and validate all input; raises InputError, writes nothing."""
    if config.workers < 1:
        raise InputError("--workers", f"{config.workers} is not a worker count", "pass 1 or more")
    if str(config.context_proofs) not in {str(c) for c in ContextProofs}:
        raise InputError("--context-proofs", f"{config.context_proofs!r} is not a choice",
                         f"pass one of {', '.join(str(c) for c in ContextProofs)}")
    if config.no_fallback and str(config.mode) not in (Mode.NATIVE, Mode.AUTO):
        raise InputError("--no-fallback", f"applies to --mode native or auto, not {config.mode}",
                         "drop --no-fallback, or pass --mode native")
    if not 0 <= config.grace < 3600:
        raise InputError("--grace", f"{config.grace} is not a grace period in seconds",
                         "pass a number from 0 to 3600")
    check_out_dir(config)
    # What the resumed sweep ran with, before anything is built (a native build takes minutes).
    check_resume_settings(config)
    selected = backends.select(config)      # HOL Light or Isabelle: runner/provers/__init__.py
    problems = selected.load(config.corpus, config.answers)
    # Said once: hidden problem folders skipped, setup.ml symlinks followed out of the corpus.
    notes = corpus_notes(config.corpus, problems)
    require_answers(config, problems)
    if config.only is not None:
        wanted = set(config.only)
        problems = [p for p in problems if p.problem_id in wanted]
    # --problems picks checks of the sweep, not another corpus: its fingerprint is the whole one's.
    fingerprint = corpus_fingerprint(problems) if config.problems else None
    if config.problems:
        problems = select_problems(problems, config.problems)
    # The map is read once, here; a map that cannot say what measured it
    # must be declared before anything is built (runner/map_provenance.py).
    loaded = map_provenance.load(config.timeout_map, config.map_mode, config.map_build) \
        if config.timeout_map else None
    covered: tuple[str, ...] = ()
    if loaded is not None:
        map_provenance.require_mode(loaded, selected.prover)
        covered = map_provenance.coverage(loaded, [p.problem_id for p in problems])
    policy = TimeoutPolicy(
        by_problem=loaded.limits() if loaded else {},
        by_category=load_category_timeouts(config.category_timeouts) if config.category_timeouts else None,
        default=config.default_timeout, map_path=config.timeout_map,
        category_path=config.category_timeouts)
    limits = resolve_limits(problems, policy)
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
    map_use = timeout_map.use_map(loaded, info.prover, info.build, info.mode)
    backend.use_map(loaded)
    # A backend that compiles contexts before it can say which mode a check
    # runs in (native HOL Light: a context that cannot be compiled runs in
    # bytecode, under a bytecode limit) compiles them now, before any limit.
    classify = getattr(backend, "classify", None)
    if classify is not None:
        classify(problems)

    def limits_of(p: Problem) -> CheckLimits:
        guard, expected = map_use.memory(p.problem_id, mem, min(config.expected_mem, mem))
        return backend.limits_for(p, CheckLimits(
            time_s=limits[p.problem_id].seconds, time_source=limits[p.problem_id].source,
            mem_bytes=guard, expected_mem_bytes=expected))

    # One task per attempt of each problem (runner/attempts.py).
    tasks = [task for p in problems
             for task in attempts.tasks_for(p, limits_of(p), stop_on_first_ok=config.stop_on_first_ok)]
    # Whatever the order of problems, a problem's attempts must stay one
    # contiguous run in attempt order: a worker drains the run against one
    # loaded context, stopping early and reusing duplicates as it goes.
    ordered, plan = order(tasks, backend, config, loaded)
    return PreparedSweep(config, problems, attempts.contiguous(ordered), backend,
                         warnings=notes + covered + map_use.warnings + backend.warnings(), plan=plan,
                         corpus_fingerprint=fingerprint)


# What a run leaves in --out before it writes sweep.json (the lock, and the
# logs folder a backend makes): a run stopped there left a sweep directory.
# Anything else without sweep.json is someone's files, results.csv included.
SWEEP_NAMES = frozenset({"logs", sweep_lock.LOCK_FILE, sweep_lock.HOLDER_FILE})


def read_manifest(out: Path) -> dict | None:
    """OUT/sweep.json, or None when there is none or it cannot be read."""
    try:
        old = json.loads((Path(out) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return old if isinstance(old, dict) else None


def resolved_mem_limit(config: SweepConfig) -> int:
    """The memory limit per check a sweep of ``config`` runs under."""
    return config.mem_limit or default_mem_limit(config.workers)


def _recorded_mem_limit(old: dict) -> int | None:
    """The memory limit per check the sweep of manifest ``old`` ran under:
    manifests before this one recorded None for the default."""
    if old.get("mem_limit") is not None:
        return int(old["mem_limit"])
    workers = (old.get("config") or {}).get("workers") or 1
    return default_mem_limit(int(workers))


def _mode_refusal(path: Path, was, now) -> InputError:
    return InputError(path, f"this sweep was run with --mode {was}, not {now}; mixing them would "
                      "make results incomparable", f"use a new --out, or pass --mode {was}")


def _mem_refusal(path: Path, was: int, now: int) -> InputError:
    return InputError(path, f"this sweep was run with --mem-limit {format_size(was)}, not "
                      f"{format_size(now)}; its verdicts would mix both",
                      f"use a new --out, or pass --mem-limit {size_flag(was)}")


def check_resume_settings(config: SweepConfig) -> None:
    """A resume under another --mode or memory limit than its sweep ran
    with is refused here, from the config alone, before any work: values
    are compared resolved (the default --mem-limit is a size too)."""
    old = read_manifest(config.out)
    if old is None:
        return
    path = Path(config.out) / MANIFEST
    was = Mode.of(old.get("mode"))
    if old.get("prover", Prover.HOL_LIGHT) == Prover.HOL_LIGHT \
            and was in (Mode.BYTECODE, Mode.NATIVE, Mode.AUTO) and str(was) != str(config.mode):
        raise _mode_refusal(path, was, config.mode)
    if "mem_limit" in old:      # manifests written before it was recorded say nothing
        before, now = _recorded_mem_limit(old), resolved_mem_limit(config)
        if before != now:
            raise _mem_refusal(path, before, now)


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


def check_out_dir(config: SweepConfig) -> None:
    """--out must be a directory we can write, holding no other corpus's
    results and nothing that is not a sweep's."""
    out = Path(config.out)
    existing = next(p for p in [out, *out.parents] if p.exists())
    if not existing.is_dir():
        raise InputError(existing, "is not a directory, so --out cannot be made there",
                         "pass a directory path for --out")
    corpus = Path(config.corpus).resolve()
    if out.resolve() == corpus or corpus in out.resolve().parents:
        raise InputError(out, f"is inside the corpus {corpus}, where every folder is read as "
                         "a problem", "pass an --out outside the corpus folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(existing, "is not writable (read-only file system or permissions)",
                         "pass an --out on a writable disk")
    if out.is_dir() and not (out / MANIFEST).exists():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in SWEEP_NAMES
                         and not (p.name.startswith(".") and p.name.endswith(".tmp")))
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise InputError(out, f"is not a proofbatch sweep directory: it holds {shown} and no "
                             f"{MANIFEST}", "pass a new or empty --out (results would mix with "
                             "these files), or the folder of an earlier sweep to resume it")
    try:
        old = json.loads((out / MANIFEST).read_text()).get("corpus")
    except (OSError, ValueError, AttributeError):
        return      # no manifest: check_manifest reports an unreadable one
    if old is not None and old != str(Path(config.corpus).resolve()):
        raise InputError(out, f"holds the results of another corpus ({old})",
                         "use a new --out for this corpus, or pass the corpus it was run on")


def order(tasks: list[CheckTask], backend: ProverBackend, config: SweepConfig, loaded=None):
    """The planner's order of the tasks and the plan (runner/planner.py):
    longest expected first with context affinity and memory packing
    (``planned``), corpus order (``naive``) or seeded random (``shuffle``),
    for one node of ``config.workers`` cores and 80% of this machine's memory."""
    workers = Workers(1, config.workers, int(0.8 * psutil.virtual_memory().total),
                      images_per_node=config.max_images)
    plan = plan_sweep(tasks, backend, workers=workers,
                      config=PlanConfig(policy=config.policy, seed=config.seed),
                      timeout_map=loaded, out=config.out)
    by_key = {(t.problem.problem_id, t.attempt): t for t in tasks}
    return [by_key[(c.problem_id, c.attempt)] for c in plan.checks], plan


def run_counts(prepared: PreparedSweep) -> dict:
    """The manifest's account of what a run plans: ``checks``, ``attempts``
    (problem -> attempt count, for problems with more than one) and
    ``stop_on_first_ok``."""
    per_problem = Counter(t.problem.problem_id for t in prepared.tasks)
    return {"checks": len(prepared.tasks),
            "attempts": {pid: n for pid, n in sorted(per_problem.items()) if n > 1},
            "stop_on_first_ok": prepared.config.stop_on_first_ok}


def changed_limits(prepared: PreparedSweep, done: shards.Done | None) -> str | None:
    """How the time limits of this run differ from those its recorded rows
    were checked under, or None: a verdict depends on its limit, so a sweep
    never mixes rows of two limits for one problem. Joined in Arrow: a
    resume of a million rows pays no pass over them in Python."""
    if done is None or done.table.num_rows == 0:
        return None
    tasks = pa.table({"problem_id": [t.problem.problem_id for t in prepared.tasks],
                      "attempt": pa.array([t.attempt for t in prepared.tasks], pa.int32()),
                      "limit_s": [float(t.limits.time_s) for t in prepared.tasks],
                      "limit_source": [t.limits.time_source for t in prepared.tasks]})
    recorded = done.table.select(["problem_id", "attempt", "timeout_s"])
    both = tasks.join(recorded, ["problem_id", "attempt"], join_type="inner")
    changed = both.filter(pc.greater(pc.abs(pc.subtract(both["limit_s"], both["timeout_s"])), 1e-6))
    if changed.num_rows == 0:
        return None
    first = changed.slice(0, 1).to_pylist()[0]
    return (f"{changed.num_rows} recorded checks ran under other time limits than this run gives "
            f"them (e.g. {first['problem_id']}: {first['timeout_s']:g} s, now {first['limit_s']:g} s "
            f"from {first['limit_source']})")


def check_manifest(prepared: PreparedSweep, done: shards.Done | None = None, *,
                   write: bool = True) -> dict:
    """Write OUT/sweep.json, or check that a resumed sweep matches it: the
    prover build, mode, sandbox, memory limit and the time limits of every
    recorded check (``done``: the rows on disk) decide verdicts, and must
    not change on resume; answers recorded must not be gone unless
    ``allow_missing_answers``. Raises InputError before anything is
    written; with ``write`` False, only checks."""
    cfg, info = prepared.config, prepared.backend.info
    path = cfg.out / MANIFEST
    manifest = {
        "prover": info.prover, "prover_build": info.build, "mode": str(info.mode),
        "sandbox": info.sandbox,
        "mem_limit": resolved_mem_limit(cfg),      # resolved: resumes compare sizes, not flags
        "context_proofs": info.context_proofs,
        # Decides the verdicts of checks whose context cannot run natively.
        "no_fallback": cfg.no_fallback,
        "corpus": str(cfg.corpus.resolve()),
        "corpus_fingerprint": prepared.corpus_fingerprint or corpus_fingerprint(prepared.problems),
        "context_root": str(prepared.backend.context_root),
        # What this run plans, for `proofbatch status` (runner/status.py): its
        # checks, the problems with several attempts, and whether it stops early.
        **run_counts(prepared),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "python": platform.python_version(),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        "cwd": os.getcwd(),      # what relative paths in config are relative to (status's resume)
    }
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(path, f"unreadable sweep manifest ({exc})",
                             "restore it or use a new --out") from None
        # Manifests written before today's names say hol_build, and
        # bytecode-fork or native-fork (runner.prover.Mode reads them).
        old = {**old, "prover_build": old.get("prover_build", old.get("hol_build")),
               "mode": Mode.of(old.get("mode"))}
        if old.get("mode") != manifest["mode"]:
            raise _mode_refusal(path, old.get("mode"), manifest["mode"])
        if old.get("prover_build") != manifest["prover_build"]:
            raise InputError(path, f"this sweep was run with prover_build '{old.get('prover_build')}', "
                             f"not '{manifest['prover_build']}'; mixing them would make results "
                             "incomparable", "use a new --out, or the same HOL Light")
        # Manifests written before these were recorded say nothing of them.
        if "sandbox" in old and old["sandbox"] != manifest["sandbox"]:
            raise InputError(path, f"this sweep was run with --sandbox {old['sandbox']}, not "
                             f"{manifest['sandbox']}; its verdicts would mix both",
                             f"use a new --out, or pass --sandbox {old['sandbox']}")
        if "mem_limit" in old and _recorded_mem_limit(old) != manifest["mem_limit"]:
            raise _mem_refusal(path, _recorded_mem_limit(old), manifest["mem_limit"])
        if changed := changed_limits(prepared, done):
            raise InputError(path, f"{changed}; its verdicts would mix both",
                             "use a new --out, or the limits it was run with "
                             "(--timeout-map, --category-timeouts, --default-timeout)")
        # A manifest from before the choice existed was a replay sweep.
        was = old.get("context_proofs", str(ContextProofs.REPLAY) if old.get("prover") == Prover.HOL_LIGHT
                      else "")
        if was != manifest["context_proofs"]:
            raise InputError(path, f"this sweep was run with --context-proofs {was or 'none'}, not "
                             f"{manifest['context_proofs']}; its contexts loaded otherwise, so results "
                             "would mix", f"use a new --out, or pass --context-proofs {was}")
        # Before the flag existed, checks fell back. It changes verdicts only
        # of checks whose context cannot run natively.
        if bool(old.get("no_fallback", False)) != cfg.no_fallback \
                and getattr(prepared.backend, "not_native", None):
            flag = "pass --no-fallback" if old.get("no_fallback") else "drop --no-fallback"
            raise InputError(path, f"this sweep was run {'with' if old.get('no_fallback') else 'without'} "
                             f"--no-fallback, and {len(prepared.backend.not_native)} problems' contexts "
                             "cannot run natively: their verdicts would mix both",
                             f"use a new --out, or {flag}")
        if not cfg.allow_missing_answers:
            missing_answers(prepared, old, done)
        if not write:
            return old
        counts = {**run_counts(prepared), "config": json.loads(json.dumps(manifest["config"])),
                  "cwd": manifest["cwd"]}
        if any(old.get(k) != v for k, v in counts.items()):
            # A resumed run may select other problems (--problems) or stop
            # early: the manifest, and the resume command `proofbatch status`
            # prints from it, describe the sweep as last started.
            old.update(counts)
            shards.publish(path, lambda tmp: tmp.write_text(json.dumps(old, indent=2) + "\n"))
        return old
    if not write:
        return manifest
    cfg.out.mkdir(parents=True, exist_ok=True)
    shards.publish(path, lambda tmp: tmp.write_text(json.dumps(manifest, indent=2) + "\n"))
    return manifest


def _answers_flag(answers) -> str:
    return f"--answers {answers}" if answers else "the answer files in the problem folders"


def missing_answers(prepared: PreparedSweep, old: dict, done: shards.Done | None) -> None:
    """Refuse a resume whose answers lost some the recorded rows checked
    (--answers dropped, an answer.txt deleted, fewer attempts): resumed, the
    sweep would keep verdicts of answers nobody gives any more."""
    ids = {p.problem_id for p in prepared.problems}
    gone = attempts.compare(prepared.tasks, done, ids).gone if done is not None else []
    if not gone:
        return
    pid, k = gone[0]
    was = (old.get("config") or {}).get("answers")
    now = prepared.config.answers
    differ = str(was or "") != str(now or "")
    source = (f"; this run reads {_answers_flag(now)}, the sweep was run with {_answers_flag(was)}"
              if differ else f" in {_answers_flag(now)}")
    raise InputError(prepared.config.out / MANIFEST,
                     f"{len(gone)} answers its rows checked are gone (e.g. {pid} attempt {k}"
                     f"{source.replace('; ', ': ')})",
                     f"pass the answers it was run with ({_answers_flag(was)}), or "
                     "--allow-missing-answers to check those problems as given now (ERROR "
                     "'no answer given' where there is none)")


def _of(table: pa.Table, wanted: pa.Array) -> shards.Done:
    return shards.Done(table.filter(pc.is_in(table["problem_id"], value_set=wanted)))


def _say(text: str) -> None:
    from . import progress      # the console the command line prints on
    progress.console.print(text)


def run_sweep(prepared: PreparedSweep, executor, on_row: Callable[[ResultRow], None] = lambda r: None,
              on_start: Callable[[int, int], None] = lambda total, done: None,
              on_skip: Callable[[int], None] = lambda n: None,
              on_note: Callable[[str], None] = _say) -> SweepSummary:
    """Run what is not yet recorded under OUT, then merge. Resumable at any point.

    ``on_start(total, settled)`` is called once, ``on_row`` with each row,
    ``on_skip(n)`` when a row settles n more attempts (early stop), and
    ``on_note`` with what a resume does besides (answers checked again).

    The run holds OUT's lock (runner/sweep_lock.py): another live run on
    OUT is refused, naming it. A refused resume is refused before it takes
    the lock, reading only: it touches nothing. An executor that joins a
    sweep another driver runs (Slurm ``--add-tasks``) takes no lock."""
    cfg = prepared.config
    check_manifest(prepared, shards.scan(cfg.out, repair=False, columns=shards.LIGHT).done, write=False)
    if getattr(executor, "joins_running_sweep", False):
        return _run_sweep(prepared, executor, on_row, on_start, on_skip, on_note)
    with sweep_lock.SweepLock(cfg.out, executor=getattr(executor, "name", None) or "local"):
        return _run_sweep(prepared, executor, on_row, on_start, on_skip, on_note)


def _run_sweep(prepared: PreparedSweep, executor, on_row, on_start, on_skip, on_note) -> SweepSummary:
    cfg = prepared.config
    scan = shards.scan(cfg.out, columns=shards.LIGHT)
    manifest = check_manifest(prepared, scan.done)
    # Not yet recorded, less the attempts early stop skips (runner/attempts.py).
    # A row settles its check only for the answer it checked: changed ones run again.
    pending, skipped_before = attempts.pending(prepared.tasks, scan.done)
    changes = attempts.compare(prepared.tasks, scan.done, {p.problem_id for p in prepared.problems})
    if changes.changed:
        on_note(f"{len(changes.changed)} answers changed since the last run: checking them again")
    if changes.gone:
        on_note(f"{len(changes.gone)} answers recorded before are gone (--allow-missing-answers): "
                "checking those problems as given now")
    on_start(len(prepared.tasks), len(prepared.tasks) - len(pending))
    stops = attempts.EarlyStops.of(pending)
    # OUT/status.json: what `proofbatch status` reads instead of the shards.
    # Rows of problems this run does not select (--problems) are not its to count.
    wanted = pa.array(sorted({p.problem_id for p in prepared.problems}), pa.string())
    current = scan.done.matching(*attempts.task_hashes(prepared.tasks))     # less changed answers
    beat = heartbeat.Heartbeat(cfg.out, total=len(prepared.tasks), done=_of(current.table, wanted),
                               skipped=len(skipped_before), workers=cfg.workers,
                               resume=status.resume_command(manifest, cfg.out))

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
            beat.plan(plan)
        with beat:
            executor.execute(SweepJob(prepared.backend, pending, cfg.out, run_id, plan=plan), row_in)
    with beat:
        table = shards.merge(cfg.out)
        skipped = attempts.record_skipped(cfg.out, prepared.tasks, table)
    selected = _of(table, wanted)
    beat.finish(selected.verdict_counts(), len(selected), skipped)
    verdicts = selected.verdict_counts()
    skipped_now = skipped - len(skipped_before)
    return SweepSummary(problem_ids=tuple(p.problem_id for p in prepared.problems),
                        out=cfg.out, counts=verdicts, total=len(prepared.tasks),
                        ran_now=len(pending) - skipped_now,
                        resumed=len(prepared.tasks) - len(pending) - len(skipped_before),
                        quarantined=scan.quarantined, table=table, skipped=skipped,
                        rechecked=len(changes.changed) + len(changes.gone))
