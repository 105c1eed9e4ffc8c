"""Profiling: run the ground-truth proofs several times and keep what they cost.

A profile is the measured basis of a timeout map (s2n-bignum-bench, appendix
A.6): each ground-truth proof is checked ``runs`` times through the same
check path as a normal sweep, with time limits lifted to a ceiling, each run
in its own seeded random order so that scheduling effects vary between runs.

``PROFILE/`` describes itself:

- ``profile.json``: provenance (corpus and per-problem content hashes, the
  command, the machine, dates, HOL Light build and execution mode) and the
  *generations*: the first profiles every problem; an ``--incremental`` one
  profiles only problems that are new or changed.
- ``runs/g<G>-r<R>/``: each run is an ordinary sweep directory, so an
  interrupted profile resumes from its shards.
- ``summary.json`` and ``summary.csv``: per problem min, median, max and
  spread of prove_secs, and the *defects*: ground truths that did not
  verify. A defect is listed, never timed: it drops out of later runs and
  out of every statistic.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import prover_registry as backends
from .corpus import Problem, select_problems
from .errors import InputError
from .planning.planner import Policy
from .maps import provenance
# The profile's files and their reader live in profile_data, which the
# planner reads without the sweep; load_profile is this module's API too.
from .maps.profile_data import (PROVENANCE, SUMMARY, SUMMARY_FORMAT, Profile, _now,
                                _read_json, _write_json, load_profile)
from .settings import flag_of, setting as _help
from .planning.sweep_config import PreparedSweep, SweepConfig
from .sweep import SweepSummary, prepare, run_sweep
from . import sweep_dir
from .maps.profile_summary import _other_choice, write_summary
# Planning generations is profile_plan's; its names are this module's API too.
from .maps.profile_plan import (DEFAULT_RUNS, _plan_generation, _with_runs_asked, machine,  # noqa: F401
                                record_path, recorded_path)


# Each run checks every ground truth once more, one run after another; the
# statistics a profile keeps (min, median, max, spread) settle within a
# handful (s2n-bignum-bench takes 3), so more than 100 is a slip of the
# keyboard: a billion planned a billion runs in memory (4 GB in 12 s) before
# any check ran. 100 also keeps a generation's seeds (seed + 1000 (g - 1) +
# r - 1) from meeting the next generation's.
MAX_RUNS = 100


@dataclass(frozen=True, kw_only=True)
class ProfileConfig:
    # Fields in the order of `profile --help`; a setting `run` has too is
    # spelled as run's (flag_of), with profile's own help.
    corpus: Path = _help("CORPUS/<problem-id>/{setup.ml,query.txt}",
                         flag=flag_of(SweepConfig, "corpus"))
    answers: Path | None = _help("ground-truth answers, resolved as `proofbatch run` does",
                                 default=None, flag=flag_of(SweepConfig, "answers"))
    out: Path = _help("profile directory, e.g. profiles/NAME; rerun to resume",
                      flag=flag_of(SweepConfig, "out"))
    runs: int | None = _help(f"times each ground truth is checked, 1 to {MAX_RUNS}; a finished "
                             "profile takes more (only the new runs run), never fewer (default: "
                             f"the count the profile was taken with, {DEFAULT_RUNS} for a new one)",
                             default=None, flag="--runs", type=int)
    ceiling_s: float = _help("time limit of every profiled check: the map's cap, so that no "
                             "correct proof is cut short below it", default=10800.0,
                             flag="--ceiling", type=float, metavar="CEILING")
    seed: int = _help("seed of run 1's order; run R uses seed + R - 1", default=0,
                      flag=flag_of(SweepConfig, "seed"))
    workers: int = _help("checks at once; parallel checks share cores and skew each other's "
                         "times", default=1, flag=flag_of(SweepConfig, "workers"))
    mem_limit: int | None = _help("memory limit per check, e.g. 8G (a plain number is MiB); "
                                  "default as for `run`", default=None,
                                  flag=flag_of(SweepConfig, "mem_limit"))
    hol_light: Path | None = _help("a HOL Light checkout built with make (has hol.sh); default: "
                                   "Debian's", default=None, flag=flag_of(SweepConfig, "hol_light"))
    context_root: Path | None = _help("where needs/loadt in setup.ml resolve; default: cwd",
                                      default=None, flag=flag_of(SweepConfig, "context_root"))
    mode: str = _help("bytecode or native (docs/profiles-and-timeout-maps.md): a profile, and the map "
                      "derived from it, is valid for this mode only", default="bytecode",
                      flag=flag_of(SweepConfig, "mode"), choices=("bytecode", "native"))
    context_proofs: str = _help("replay or trust: how the profiled runs load contexts "
                                "(docs/trust.md); recorded in provenance", default="replay",
                                flag=flag_of(SweepConfig, "context_proofs"))
    limit_clock: str = _help("what the ceiling counts, cpu or wall (as for `run`); every run "
                             "records both a proof's wall and CPU time, and `timeout-map` derives "
                             "limits from either", default="cpu",
                             flag=flag_of(SweepConfig, "limit_clock"))
    nice: int | None = _help("niceness of every profiled check, or auto (the default), as for "
                             "`run`: a check sharing its core with other busy work needs more CPU "
                             "time, and a profile keeps those times", default=None,
                             flag=flag_of(SweepConfig, "nice"))
    runtime: str | None = _help("HOL Light: the OCaml runtime setting the profiled checks run "
                                "under, as for `run`; recorded in provenance and in the map derived "
                                "from it, whose times hold under it (default: as for `run`: "
                                "s=16M,o=200 natively, s=4M,o=200 in bytecode)", default=None,
                                flag=flag_of(SweepConfig, "runtime"))
    verify_trust: bool = _help("after the runs, check every ground truth once more under the other "
                               "choice of context_proofs; a verdict that differs is a defect",
                               default=False, flag="--verify-trust", action="store_true")
    incremental: bool = _help("profile only problems that are new or whose setup, query or ground "
                              "truth changed since the last generation", default=False,
                              flag="--incremental", action="store_true")
    problems: tuple[str, ...] | None = _help(
        "profile only these problems: ids, globs or @FILE, as `run --problems`; a later, wider "
        "selection is new problems (--incremental profiles just those)", default=None,
        flag=flag_of(SweepConfig, "problems"))
    # Set by the command from what it was given, not by a flag of their own.
    command: tuple[str, ...] = _help("the command line, recorded as provenance", default=())
    executor: str = _help("the executor the runs go to (local, slurm, dask, dask-slurm; `run "
                         "--cluster`), recorded in each generation", default="local")


def content_hash(problem: Problem) -> str:
    """What a problem's profile depends on: its setup, query and ground truth."""
    h = hashlib.sha256()
    for part in (problem.setup_path.read_bytes(), problem.query_path.read_bytes(),
                 problem.answer or b""):
        h.update(len(part).to_bytes(8, "big") + part)
    return h.hexdigest()


def _sweep_config(cfg: ProfileConfig, out: Path, only, seed: int,
                  context_proofs: str | None = None) -> SweepConfig:
    return SweepConfig(corpus=cfg.corpus, out=out, answers=cfg.answers, workers=cfg.workers,
                       default_timeout=cfg.ceiling_s, mem_limit=cfg.mem_limit, hol_light=cfg.hol_light,
                       context_root=cfg.context_root, only=tuple(sorted(only)), policy=Policy.SHUFFLE,
                       seed=seed, mode=cfg.mode, context_proofs=context_proofs or cfg.context_proofs,
                       limit_clock=cfg.limit_clock, nice=cfg.nice, runtime=cfg.runtime)



def profile(cfg: ProfileConfig, executor_for: Callable[[PreparedSweep], object],
            on_run: Callable[[int, int, str], None] = lambda r, n, d: None,
            on_row=lambda row: None, on_start=lambda total, done: None) -> Profile:
    """Run (or resume) the profile described by ``cfg`` and return it.

    ``executor_for(prepared)`` makes the executor of each run, from its
    PreparedSweep (its config, and the backend a session starts from: a
    native backend has compiled every context as it prepared). Raises
    InputError on bad input before anything is written.
    """
    if cfg.runs is not None and not 1 <= cfg.runs <= MAX_RUNS:
        # Before anything is read or planned (MAX_RUNS).
        raise InputError("--runs", f"{cfg.runs} is not a number of runs a profile takes (1 to "
                         f"{MAX_RUNS}: each run checks every ground truth once more)",
                         f"pass {DEFAULT_RUNS} (usual) to 10")
    if cfg.executor == "local" and cfg.workers > (os.cpu_count() or 1):
        # Two checks on one core each take about twice as long: the profile
        # would time the sharing, not the proofs.
        raise InputError("--workers", f"{cfg.workers} checks at once on {os.cpu_count()} cores",
                         f"pass --workers {os.cpu_count()} or fewer: one check per core")
    if not 0 < cfg.ceiling_s <= 7 * 86400:
        raise InputError("--ceiling", f"{cfg.ceiling_s} s is not a usable time limit",
                         "pass seconds, from 1 up to a week")
    sweep_dir.check_profile_out(cfg.out, cfg.corpus)       # as `run` checks its --out
    loaded = backends.load_problems(cfg.corpus, cfg.answers)
    problems = {p.problem_id: p for p in (select_problems(loaded, cfg.problems) if cfg.problems
                                          else loaded)}
    hashes = {pid: content_hash(p) for pid, p in problems.items()}
    prov_path, summary_path = cfg.out / PROVENANCE, cfg.out / SUMMARY
    provenance = _read_json(prov_path, "profile provenance") if prov_path.exists() else None
    summary = _read_json(summary_path, "profile summary") if summary_path.exists() else None
    _check_resumable(prov_path, provenance, summary_path, summary)
    if provenance and recorded_path(provenance, "corpus", cfg.out) != cfg.corpus.resolve():
        raise InputError(prov_path, f"this profile is of {provenance.get('corpus')}, not {cfg.corpus}",
                         "use a new --out for another corpus")
    # Profiles written before the clock was chosen limited wall time.
    _same_choices(prov_path, provenance, context_proofs=cfg.context_proofs,
                  limit_clock=cfg.limit_clock)
    resumed = provenance is not None
    provenance, generation = _plan_generation(cfg, provenance, hashes, summary)
    if generation is not None:
        # Validate everything (HOL Light, context root...) before writing anything.
        first = prepare(_sweep_config(cfg, cfg.out / generation["runs"][0]["dir"],
                                      generation["problems"], generation["runs"][0]["seed"]))
        # Its key as the backend records it; a profile that predates the
        # record ran under OCaml's defaults.
        _same_choices(prov_path, provenance if resumed else None,
                      runtime=first.backend.info.runtime or None)
        cfg.out.mkdir(parents=True, exist_ok=True)
        provenance.update(prover_build=first.backend.info.build, mode=str(first.backend.info.mode),
                          prover=first.backend.info.prover,
                          context_root=record_path(first.backend.context_root, cfg.out),
                          hol_light=record_path(cfg.hol_light, cfg.out),
                          context_proofs=cfg.context_proofs, limit_clock=cfg.limit_clock,
                          # The OCaml runtime its times were measured under (hol_light/runtime.py);
                          # the map derived from it records it too.
                          runtime=first.backend.info.runtime or None)
        if cfg.verify_trust:
            generation.setdefault("verify", {"dir": f"runs/{generation['id']}-verify",
                                             "context_proofs": _other_choice(cfg.context_proofs)})
        _write_json(prov_path, provenance)
        _run_generation(cfg, generation, executor_for, on_run, on_row, on_start, first)
        generation["finished"] = _now()
        _write_json(prov_path, provenance)
    # A selection (--problems) profiles some problems; those profiled before
    # stay in the profile while the corpus holds them unchanged.
    kept = _still_profiled(provenance, loaded, hashes) if cfg.problems else {}
    provenance["problems"] = dict(sorted({
        **kept, **{pid: {"content_sha256": h, "category": problems[pid].category}
                   for pid, h in hashes.items()}}.items()))
    hashes = {**hashes, **{pid: e["content_sha256"] for pid, e in kept.items()}}
    _write_json(prov_path, provenance)
    write_summary(cfg.out, provenance, set(hashes))
    return load_profile(cfg.out)


def _still_profiled(provenance: dict, corpus: list[Problem], selected: dict[str, str]) -> dict:
    """The problems an earlier profile recorded, outside ``selected``, that
    the corpus still holds with the same content: provenance entries."""
    before = {pid: e for pid, e in (provenance.get("problems") or {}).items() if pid not in selected}
    return {p.problem_id: before[p.problem_id] for p in corpus if p.problem_id in before
            and before[p.problem_id].get("content_sha256") == content_hash(p)}


# What a profile was taken under, as profiles written before a choice was
# recorded took it: contexts replayed, wall time limited, OCaml's defaults.
_BEFORE_RECORDED = {"context_proofs": "replay", "limit_clock": "wall", "runtime": "default"}


def _same_choices(prov_path: Path, provenance: dict | None, **now) -> None:
    """A resume (or a new generation) keeps what the profile's times were
    measured under; another choice is refused, naming the one it has."""
    for key, value in now.items():
        was = (provenance or {}).get(key) or _BEFORE_RECORDED[key]
        if provenance and value is not None and was != value:
            flag = "--" + key.replace("_", "-")
            raise InputError(prov_path, f"this profile was taken with {flag} {was}, not {value}",
                             "use a new --out, or pass the choice it was taken with")


def _check_resumable(prov_path: Path, provenance, summary_path: Path, summary) -> None:
    """A resume reads profile.json's generations and summary.json's entries:
    one that cannot be read is refused in one line, as `timeout-map` refuses
    it (runner/maps/summary_checks.py), not a traceback."""
    from .maps.summary_checks import FIX, check_profile

    if provenance is not None and not (isinstance(provenance, dict) and isinstance(
            provenance.get("generations"), list) and all(isinstance(g, dict) for g in
                                                         provenance["generations"])):
        raise InputError(prov_path, "is not a profile's provenance (it needs an object with a list "
                         "of generations)", FIX.replace("summary.json", "profile.json"))
    if summary is None:
        return
    check_profile(prov_path, provenance or {}, summary_path, summary, SUMMARY_FORMAT)
    if summary.get("format") != SUMMARY_FORMAT:
        raise InputError(summary_path, f"unknown profile summary format {summary.get('format')!r}",
                         f"profile again into a new --out ({SUMMARY_FORMAT})")
    for name in ("problems", "defects"):
        bad = next((i for i, e in enumerate(summary[name]) if "content_sha256" not in e), None)
        if bad is not None:
            raise InputError(summary_path, f"its {name} entry {bad} has no content_sha256", FIX)


def _run_generation(cfg, generation, executor_for, on_run, on_row, on_start, first) -> None:
    """Every run of ``generation``; ``first``: run 1 prepared already (a
    native backend compiles every context as it prepares: minutes)."""
    defects: set[str] = set()
    for r, run in enumerate(generation["runs"], start=1):
        out = cfg.out / run["dir"]
        only = [pid for pid in generation["problems"] if pid not in defects]
        on_run(r, len(generation["runs"]), str(out))
        config = _sweep_config(cfg, out, only, run["seed"])
        prepared = first if r == 1 else prepare(config)
        summary: SweepSummary = run_sweep(prepared, _timing(executor_for(prepared)),
                                          on_row=on_row, on_start=on_start)
        defects |= {row["problem_id"] for row in summary.table.to_pylist()
                    if row["problem_id"] in set(only) and row["verdict"] != "OK"}
    if "verify" in generation:
        # Every ground truth of the generation once more, contexts loaded the
        # other way: write_summary compares its verdicts with run 1's.
        verify = generation["verify"]
        on_run(len(generation["runs"]) + 1, len(generation["runs"]) + 1,
               f"{cfg.out / verify['dir']} (--context-proofs {verify['context_proofs']})")
        config = _sweep_config(cfg, cfg.out / verify["dir"], generation["problems"],
                               generation["runs"][0]["seed"], verify["context_proofs"])
        prepared = prepare(config)
        run_sweep(prepared, _timing(executor_for(prepared)), on_row=on_row, on_start=on_start)


def _timing(executor):
    """The executor, told that its checks are timed: one at a time per CPU of
    a host. A Dask worker runs as many checks as it has threads, and a host
    may run several workers (cluster/cpu_slots.py). Locally, `profile`
    refuses more --workers than cores; a Slurm task runs --cpus-per-task
    checks on as many CPUs."""
    executor.one_check_per_core = True
    return executor


# Validating a timeout map: does every ground truth fit in its limit? Two
# checks. On paper: each problem's largest profiled prove_secs against its
# timeout. In practice: the ground truths run once more under the map, and the
# acceptance criterion is zero TIMEOUT.

@dataclass(frozen=True)
class Headroom:
    problem_id: str
    max_prove_secs: float
    timeout_sec: float | None      # None: the map has no entry for it

    @property
    def ratio(self) -> float | None:
        return None if self.timeout_sec is None else self.max_prove_secs / self.timeout_sec


@dataclass(frozen=True)
class Validation:
    map_path: Path
    out: Path                       # the validation sweep's directory
    headroom: list[Headroom]        # worst first
    summary: SweepSummary
    false_timeouts: list[str]       # ground truths that timed out under the map

    @property
    def passed(self) -> bool:
        return not self.false_timeouts and all(h.timeout_sec is not None for h in self.headroom)


def headroom(profile: Profile, timeouts: dict[str, float]) -> list[Headroom]:
    """max prove_secs / timeout per profiled problem, the tightest first."""
    rows = [Headroom(r.problem_id, max(r.prove_secs), timeouts.get(r.problem_id)) for r in profile.runs]
    return sorted(rows, key=lambda h: (-(h.ratio if h.ratio is not None else float("inf")), h.problem_id))


def validate(profile: Profile, map_path: Path, executor_for: Callable[[PreparedSweep], object], *,
             workers: int = 1, mem_limit: int | None = None, hol_light: Path | None = None,
             context_root: Path | None = None, on_row=lambda row: None,
             on_start=lambda total, done: None) -> Validation:
    """Rerun the profiled ground truths once under the map at ``map_path``.

    The sweep goes to ``PROFILE/validations/<map>-<hash>/`` and resumes like
    any sweep. Defects of the profile are left out: they never verified.
    """
    loaded = provenance.load(map_path)
    out = profile.path / "validations" / f"{Path(map_path).stem}-{loaded.digest[:10]}"
    prov = profile.provenance
    # Validate under the profile's own prover and contexts unless told otherwise.
    hol_light = hol_light or recorded_path(prov, "hol_light", profile.path)
    context_root = context_root or recorded_path(prov, "context_root", profile.path)
    config = SweepConfig(corpus=recorded_path(prov, "corpus", profile.path), out=out,
                         answers=recorded_path(prov, "answers", profile.path),
                         workers=workers, timeout_map=Path(map_path), mem_limit=mem_limit,
                         hol_light=hol_light, context_root=context_root,
                         only=tuple(sorted(r.problem_id for r in profile.runs)),
                         runtime=prov.get("runtime") or None)     # what its times were measured under
    prepared = prepare(config)
    summary = run_sweep(prepared, executor_for(prepared), on_row=on_row, on_start=on_start)
    timed_out = sorted(r["problem_id"] for r in summary.table.to_pylist()
                       if r["problem_id"] in set(config.only) and r["verdict"] == "TIMEOUT")
    return Validation(map_path=Path(map_path), out=out, headroom=headroom(profile, loaded.limits()),
                      summary=summary, false_timeouts=timed_out)
