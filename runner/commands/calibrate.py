"""proofbatch calibrate: how much slower this host proves than a timeout map's host.

It checks a small stratified sample of the corpus's ground truths
(runner/maps/host_factor.sample) as an ordinary, resumable sweep, then
compares each proof's measured time, on the sweep's clock, with the map's
``prove_secs`` moved to the mode the check ran in. The median ratio is this
host's factor against the map; it is kept for `run --host-factor auto`
(runner/maps/host_factor.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import socket
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.table import Table

from cluster.local import LocalExecutor

from .. import prover_registry as backends
from ..checks.priority import niceness
from ..errors import InputError
from ..maps import host_factor, provenance
from ..maps.host_factor import SLOW_HOST, Calibration
from ..prover import LimitClock
from ..reporting import progress
from ..settings import help_of, memory_size, options_of
from ..settings import setting as _help
from ..planning.sweep_config import SweepConfig
from ..sweep import SweepSummary, prepare, run_sweep

NAME = "calibrate"
HELP = "measure this host's speed against a timeout map's, for run --host-factor auto"

# No calibrated check may stop at a limit: every sampled proof is a ground
# truth, and a host many times slower than the map's is what is measured.
LIMIT_MULTIPLE, LIMIT_CAP_S = 20.0, 10800.0


@dataclass(frozen=True)
class CalibrateConfig:
    corpus: Path = _help("CORPUS/<problem-id>/{setup.ml,query.txt} with ground truths")
    timeout_map: Path = _help("the timeout map to measure this host against")
    out: Path | None = _help("the calibration sweep's directory (resumable); default: beside the "
                             "kept calibration, under $PROOFBATCH_CACHE/calibrations/", default=None)
    answers: Path | None = _help("ground-truth answers, as for `run`; default: answer.txt in each "
                                 "problem folder", default=None)
    sample: int = _help("ground truths to check: one per slice of log map time in 1-60 s",
                        default=10)
    budget_s: float = _help("the sample's map times add up to at most this many seconds (this "
                            "host takes its factor times as long, plus loading the contexts)",
                            default=600.0)
    seed: int = _help("seed of the sample", default=0)
    workers: int = _help("checks at once; parallel checks share cores and skew each other's "
                         "times", default=1)
    map_mode: str | None = _help("the mode a map without a sidecar was measured in (native or "
                                 "bytecode), as for `run`", default=None)
    map_build: str | None = _help("the build a map without a sidecar was measured with", default=None)
    mode: str = _help("bytecode or native, as for `run`: a factor holds for the mode it was "
                      "measured in", default="bytecode")
    limit_clock: str = _help("the clock measured against the map's times: cpu (a proof's CPU "
                             "time: what this host's processor costs) or wall (elapsed: its load "
                             "too)", default=str(LimitClock.CPU))
    nice: int | None = _help("niceness of the sampled checks, or auto (the default), as for "
                             "`run`: calibrate at the one your sweeps will use", default=None)
    hol_light: Path | None = _help("a HOL Light checkout built with make (has hol.sh); default: "
                                   "Debian's", default=None)
    context_root: Path | None = _help("where needs/loadt in setup.ml resolve; default: cwd",
                                      default=None)
    context_proofs: str = _help("replay or trust, as for `run`", default="replay")
    mem_limit: int | None = _help("memory limit per check, as for `run`", default=None)


@dataclass(frozen=True)
class Plan:
    """What a calibration will check, said before it starts."""

    problems: list[str]
    map_secs: dict[str, float]
    out: Path
    sweep: SweepConfig
    map_sha256: str                 # of the map as read when planned: the calibration's key

    @property
    def map_total_s(self) -> float:
        return sum(self.map_secs.values())


def plan(cfg: CalibrateConfig) -> Plan:
    """The sample and the sweep that checks it; raises InputError, writes nothing."""
    if not 1 <= cfg.sample <= 200:
        raise InputError("--sample", f"{cfg.sample} is not a sample size", "pass 1 to 200 (10 is usual)")
    if not 0 < cfg.budget_s <= 7 * 86400:
        raise InputError("--budget", f"{cfg.budget_s} s is not a budget", "pass seconds, up to a week")
    loaded = provenance.load(cfg.timeout_map, cfg.map_mode, cfg.map_build)
    problems = backends.load_problems(cfg.corpus, cfg.answers)
    answered = [p.problem_id for p in problems if p.answer is not None]
    times = loaded.prove_secs()
    chosen = host_factor.sample(times, answered, n=cfg.sample, seed=cfg.seed, budget_s=cfg.budget_s)
    if not chosen:
        lo, hi = host_factor.BAND_S
        raise InputError(cfg.timeout_map, f"none of the corpus's {len(answered)} answered problems has "
                         f"a map time of {lo:g}-{hi:g} s, so no sample measures this host",
                         "pass the map made for this corpus, or a corpus with ground truths of such "
                         "proofs")
    out = cfg.out or host_factor.record_path(loaded.digest, loaded.provenance.mode, cfg.mode,
                                             cfg.limit_clock).with_suffix("")
    limit = min(LIMIT_CAP_S, LIMIT_MULTIPLE * max(loaded.entries[p].timeout_sec for p in chosen))
    sweep = SweepConfig(corpus=cfg.corpus, out=out, answers=cfg.answers, workers=cfg.workers,
                        default_timeout=limit, mem_limit=cfg.mem_limit, hol_light=cfg.hol_light,
                        context_root=cfg.context_root, only=tuple(sorted(chosen)), mode=cfg.mode,
                        context_proofs=cfg.context_proofs, limit_clock=cfg.limit_clock, seed=cfg.seed,
                        nice=cfg.nice)
    return Plan(chosen, {p: times[p] for p in chosen}, out, sweep, loaded.digest)


def calibrate(cfg: CalibrateConfig, the_plan: Plan, executor_for: Callable[[SweepConfig], object],
              on_row=lambda row: None, on_start=lambda total, done: None) -> tuple[Calibration, SweepSummary]:
    """Run the plan's sweep (or resume it), measure the factor and keep it."""
    prepared = prepare(the_plan.sweep)
    summary = run_sweep(prepared, executor_for(the_plan.sweep), on_row=on_row, on_start=on_start)
    rows = [r for r in summary.table.to_pylist() if r["problem_id"] in the_plan.map_secs]
    key = "prove_cpu_secs" if cfg.limit_clock == LimitClock.CPU else "prove_secs"
    measured = {r["problem_id"]: r[key] for r in rows if r["verdict"] == "OK" and r[key] is not None}
    # The map's times in the mode each check ran in (a native map, a bytecode sweep).
    expected = dict(prepared.backend.expected_in_mode(prepared.problems, the_plan.map_secs))
    factor, low, high, ratios = host_factor.measure(measured, expected)
    loads = [r["host_load"] for r in rows if r.get("host_load") is not None]
    cal = Calibration(host=socket.gethostname(), map_sha256=the_plan.map_sha256, mode=cfg.mode,
                      clock=cfg.limit_clock, factor=round(factor, 4), low=round(low, 4),
                      high=round(high, 4), problems=len(ratios),
                      measured_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                      load=round(statistics.mean(loads), 2) if loads else None,
                      sweep=str(Path(the_plan.out).resolve()),
                      ratios={p: round(r, 4) for p, r in ratios.items()})
    host_factor.save(cal)
    return cal, summary


def add_arguments(p) -> None:
    opt = options_of(CalibrateConfig)
    p.add_argument("corpus", type=Path, help=help_of(CalibrateConfig, "corpus"))
    p.add_argument("--timeout-map", type=Path, required=True, help=help_of(CalibrateConfig, "timeout_map"))
    p.add_argument("--out", type=Path, **opt("out"))
    p.add_argument("--answers", type=Path, **opt("answers"))
    p.add_argument("--sample", type=int, metavar="N", **opt("sample"))
    p.add_argument("--budget", type=float, metavar="SECS", dest="budget_s", **opt("budget_s"))
    p.add_argument("--seed", type=int, **opt("seed"))
    p.add_argument("--workers", type=int, **opt("workers"))
    p.add_argument("--map-mode", choices=("native", "bytecode"), **opt("map_mode"))
    p.add_argument("--map-build", metavar="B", **opt("map_build"))
    p.add_argument("--mode", choices=("bytecode", "native"), **opt("mode"))
    p.add_argument("--limit-clock", choices=[str(c) for c in LimitClock], **opt("limit_clock"))
    p.add_argument("--nice", type=niceness, metavar="auto|N", **opt("nice"))
    p.add_argument("--hol-light", type=Path, **opt("hol_light"))
    p.add_argument("--context-root", type=Path, **opt("context_root"))
    p.add_argument("--context-proofs", choices=("replay", "trust"), **opt("context_proofs"))
    p.add_argument("--mem-limit", type=memory_size, **opt("mem_limit"))


def run(args) -> int:
    cfg = CalibrateConfig(**{name: getattr(args, name) for name in CalibrateConfig.__dataclass_fields__})
    the_plan = plan(cfg)
    out = progress.console
    out.print(f"calibrating against {cfg.timeout_map}: {len(the_plan.problems)} ground truths whose map "
              f"times add up to {the_plan.map_total_s:.0f} s (this host takes its factor times that, "
              f"plus loading their contexts), {cfg.limit_clock} clock, {cfg.mode}; sweep in "
              f"{the_plan.out}")
    with progress.SweepProgress() as bar, contextlib.ExitStack() as stack:
        def executor_for(config):
            workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="proofbatch-"))
            session = stack.enter_context(prepare(config).backend.start(Path(workdir)))
            return LocalExecutor(workers=config.workers, session=session)

        cal, summary = calibrate(cfg, the_plan, executor_for, on_row=bar.row, on_start=bar.start)
    print_calibration(the_plan, cal, summary, Console())
    return 0


def print_calibration(the_plan: Plan, cal, summary, out: Console) -> None:
    rows = {r["problem_id"]: r for r in summary.table.to_pylist()}
    table = Table(title=f"this host against {the_plan.sweep.corpus}'s map, per ground truth")
    for name in ("problem", "map s", "wall s", "CPU s", "ratio", "verdict"):
        table.add_column(name, justify="left" if name in ("problem", "verdict") else "right",
                         overflow="fold" if name == "problem" else "ellipsis")
    for pid in sorted(the_plan.problems, key=the_plan.map_secs.get):
        r = rows.get(pid, {})
        ratio = cal.ratios.get(pid)
        table.add_row(pid, f"{the_plan.map_secs[pid]:.2f}", _secs(r.get("prove_secs")),
                      _secs(r.get("prove_cpu_secs")), "" if ratio is None else f"{ratio:.2f}",
                      str(r.get("verdict", "")))
    out.print(table)
    out.print(f"host factor: {cal.describe()}")
    if cal.problems < len(the_plan.problems):
        out.print(f"[yellow]{len(the_plan.problems) - cal.problems} sampled ground truths were not "
                  "OK and are left out; see their reasons above")
    if cal.factor > SLOW_HOST:
        out.print(f"this host is slower than the map's: `run --host-factor auto` multiplies its limits "
                  f"by {cal.factor:.2f}")
    else:
        out.print("this host is not slower than the map's by more than "
                  f"{SLOW_HOST:g}x: its limits hold as they are")


def _secs(value) -> str:
    return "" if value is None else f"{value:.2f}"
