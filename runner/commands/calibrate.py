"""proofbatch calibrate: how much slower this host proves than a timeout map's host.

It checks a small stratified sample of the corpus's ground truths
(runner/maps/host_factor.sample) as an ordinary, resumable sweep, then
compares each proof's measured time, on the sweep's clock, with the map's
``prove_secs`` moved to the mode the check ran in, as `run` moves them (the
backend's ``expected_in_mode``). The median ratio is this host's factor
against the map; it is kept per map mode too, for `run --host-factor auto`
(runner/maps/host_factor.py).

Everything a calibration can be refused for is refused before the prover
boots: the sample and its budget, more --workers than cores, a map that
says nothing of its mode (as `run` refuses it), and an --out holding a
sweep that is not a calibration's. The sweep's executor starts the prover
inside the sweep, under its lock and only when a sampled check is left to
run: `status` says running while HOL Light boots, a stop during the boot
leaves the sweep stopped, and a fully recorded calibration boots nothing.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import socket
import statistics
from dataclasses import dataclass, fields
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console
from rich.table import Table

from cluster.local import LocalExecutor

from .. import prover_registry as backends
from .. import sweep_dir
from ..checks.priority import niceness
from ..checks.worker import cpu_model
from ..errors import InputError
from ..maps import host_factor, provenance
from ..maps.host_factor import SLOW_HOST, Calibration
from ..maps.provenance import LoadedMap
from ..prover import LimitClock
from ..reporting import progress
from ..settings import help_of, memory_size, options_of
from ..settings import setting as _help
from ..planning.sweep_config import PreparedSweep, SweepConfig
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
    runtime: str | None = _help("HOL Light: the OCaml runtime setting the sampled checks run "
                                "under, as for `run`: calibrate under the one your sweeps will use, "
                                "as a factor is kept per setting (default: as for `run`)", default=None)


@dataclass(frozen=True)
class Plan:
    """What a calibration will check, said before it starts."""

    problems: list[str]
    map_secs: dict[str, float]
    out: Path
    sweep: SweepConfig
    loaded: LoadedMap               # the map as read when planned: its sha256 and mode key the calibration

    @property
    def map_total_s(self) -> float:
        return sum(self.map_secs.values())

    @property
    def map_mode(self) -> str | None:
        mode = self.loaded.provenance.mode
        return None if mode is None else str(mode)


def plan(cfg: CalibrateConfig) -> Plan:
    """The sample and the sweep that checks it; raises InputError, writes nothing."""
    if not 1 <= cfg.sample <= 200:
        raise InputError("--sample", f"{cfg.sample} is not a sample size", "pass 1 to 200 (10 is usual)")
    if not 0 < cfg.budget_s <= 7 * 86400:
        raise InputError("--budget", f"{cfg.budget_s} s is not a budget", "pass seconds, up to a week")
    cores = os.cpu_count() or 1
    if cfg.workers > cores:
        # As `profile` refuses it: two checks sharing a core each take about
        # twice as long, and the factor would measure the sharing.
        raise InputError("--workers", f"{cfg.workers} checks at once on {cores} cores",
                         f"pass --workers {cores} or fewer: one check per core")
    loaded = provenance.load(cfg.timeout_map, cfg.map_mode, cfg.map_build)
    prover = backends.detect(cfg.corpus)
    # As `run` refuses it: a map of unknown mode is 2.5-6x off, one way or the other.
    provenance.require_mode(loaded, prover)
    problems = backends.load_problems(cfg.corpus, cfg.answers, prover)
    answered = [p.problem_id for p in problems if p.answer is not None]
    times = loaded.prove_secs()
    chosen = _sample(cfg, times, answered)
    # A setting changes proof times: each has its own calibration (the
    # prover's key, e.g. HOL Light's s=16M,o=200, as `run` resolves it).
    resolve = backends.descriptor(prover).runtime_of
    runtime = resolve(SimpleNamespace(mode=cfg.mode, runtime=cfg.runtime)) if resolve else ""
    out = Path(cfg.out or host_factor.record_path(loaded.digest, loaded.provenance.mode, cfg.mode,
                                                  cfg.limit_clock, runtime=runtime).with_suffix(""))
    limit = _limit(out, min(LIMIT_CAP_S, LIMIT_MULTIPLE * max(loaded.entries[p].timeout_sec
                                                                 for p in chosen)))
    # Where needs/loadt resolved, for a resume from another directory.
    root = cfg.context_root or (Path.cwd() if "context_root" in backends.descriptor(prover).options
                                else None)
    sweep = SweepConfig(corpus=cfg.corpus, out=out, answers=cfg.answers, workers=cfg.workers,
                        default_timeout=limit, mem_limit=cfg.mem_limit, hol_light=cfg.hol_light,
                        context_root=cfg.context_root, only=tuple(sorted(chosen)), mode=cfg.mode,
                        context_proofs=cfg.context_proofs, limit_clock=cfg.limit_clock, seed=cfg.seed,
                        nice=cfg.nice, runtime=cfg.runtime, command=resume_argv(cfg, out, root))
    return Plan(chosen, {p: times[p] for p in chosen}, out, sweep, loaded)


def _sample(cfg: CalibrateConfig, times: dict[str, float], answered: list[str]) -> list[str]:
    """The sample, or one InputError naming what leaves it empty: a budget
    below its first proof's map time, else a map with no proof in the band."""
    chosen = host_factor.sample(times, answered, n=cfg.sample, seed=cfg.seed, budget_s=cfg.budget_s)
    if chosen:
        return chosen
    unbounded = host_factor.sample(times, answered, n=cfg.sample, seed=cfg.seed, budget_s=math.inf)
    if unbounded:
        first = unbounded[0]
        raise InputError("--budget", f"{cfg.budget_s:g} s is less than the map time of the sample's "
                         f"first ground truth ({first}: {times[first]:.2f} s), so nothing fits in it",
                         f"pass --budget {math.ceil(times[first])} or more (600 by default)")
    lo, hi = host_factor.BAND_S
    raise InputError(cfg.timeout_map, f"none of the corpus's {len(answered)} answered problems has "
                     f"a map time of {lo:g}-{hi:g} s, so no sample measures this host",
                     "pass the map made for this corpus, or a corpus with ground truths of such proofs")


def is_calibration(manifest: dict) -> bool:
    """Whether the sweep of ``manifest`` (its sweep.json) is a calibration's:
    its config records calibrate's command, or, written before commands were
    recorded, names its problems (``only``), which `run` never does."""
    config = manifest.get("config") or {}
    command = config.get("command")
    if command:
        return list(command[:2]) == ["proofbatch", NAME]
    return bool(config.get("only"))


def _limit(out: Path, limit: float) -> float:
    """The time limit of the sweep in ``out``: ``limit``, or the one its
    recorded checks ran under when that is as long (a resume keeps its
    limits). An --out that holds another command's sweep, or a calibration
    under shorter limits, is refused, naming calibrate's flags."""
    manifest = sweep_dir.read_manifest(out)
    if manifest is None:
        return limit
    if not is_calibration(manifest):
        made_by = ((manifest.get("config") or {}).get("command") or ["proofbatch", "run"])[:2]
        raise InputError(out, f"holds a sweep of `{' '.join(made_by)}`, not a calibration's",
                         "pass a new or empty --out, or drop --out (calibrate keeps its sweep beside "
                         "the calibration)")
    was = float((manifest.get("config") or {}).get("default_timeout") or 0)
    if was >= limit:
        return was
    raise InputError(out, f"this calibration's sweep checked its sample under a limit of {was:g} s; "
                     f"this sample needs {limit:g} s ({LIMIT_MULTIPLE:g}x its longest map limit)",
                     "pass a new --out, or the --sample, --budget and --seed it was run with")


# calibrate's flags whose names are not their settings' (budget_s is --budget).
_FLAGS = {"budget_s": "--budget"}


def resume_argv(cfg: CalibrateConfig, out: Path, context_root: Path | None = None) -> tuple[str, ...]:
    """The `proofbatch calibrate` that resumes this calibration, with
    absolute paths: its sweep records it, and `status` gives it."""
    parts = ["proofbatch", NAME, str(Path(cfg.corpus).resolve()),
             "--timeout-map", str(Path(cfg.timeout_map).resolve()), "--out", str(Path(out).resolve())]
    for f in fields(CalibrateConfig):
        value = getattr(cfg, f.name)
        if f.name == "context_root":
            value = value or context_root
        if f.name in ("corpus", "timeout_map", "out") or value is None or value == f.default:
            continue
        if isinstance(value, Path):
            value = Path(value).resolve()
        elif f.name == "mem_limit":
            value = f"{int(value)}B"        # bytes: a plain number would read as MiB
        elif isinstance(value, float):
            value = f"{value:g}"
        parts += [_FLAGS.get(f.name, "--" + f.name.replace("_", "-")), str(value)]
    return tuple(parts)


def calibrate(cfg: CalibrateConfig, the_plan: Plan, executor, *, prepared: PreparedSweep | None = None,
              on_row=lambda row: None, on_start=lambda total, done: None
              ) -> tuple[Calibration, SweepSummary, dict[str, float]]:
    """Run the plan's sweep on ``executor`` (or resume it), measure the
    factor and keep it; with the map's times in the checks' mode.
    ``prepared``: the plan's sweep as ``prepare`` resolved it, when the
    caller did (once: a native build says itself as it goes)."""
    prepared = prepared or prepare(the_plan.sweep)
    # The map's times move to the mode each check runs in (a native map, a
    # bytecode sweep) as `run` moves them; handed over after `prepare`, so
    # the checks keep calibrate's own limits, not the map's.
    prepared.backend.use_map(the_plan.loaded)
    summary = run_sweep(prepared, executor, on_row=on_row, on_start=on_start)
    rows = [r for r in summary.table.to_pylist() if r["problem_id"] in the_plan.map_secs]
    key = "prove_cpu_secs" if cfg.limit_clock == LimitClock.CPU else "prove_secs"
    measured = {r["problem_id"]: r[key] for r in rows if r["verdict"] == "OK" and r[key] is not None}
    expected = dict(prepared.backend.expected_in_mode(prepared.problems, the_plan.map_secs))
    factor, low, high, ratios = host_factor.measure(measured, expected)
    loads = [r["host_load"] for r in rows if r.get("host_load") is not None]
    cal = Calibration(host=socket.gethostname(), map_sha256=the_plan.loaded.digest, mode=cfg.mode,
                      clock=cfg.limit_clock, factor=_kept(factor), low=_kept(low),
                      high=_kept(high), problems=len(ratios),
                      measured_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                      load=round(statistics.mean(loads), 2) if loads else None,
                      sweep=str(Path(the_plan.out).resolve()),
                      ratios={p: _kept(r) for p, r in ratios.items()}, map_mode=the_plan.map_mode,
                      cpu_model=cpu_model(), runtime=prepared.backend.info.runtime)
    host_factor.save(cal)
    return cal, summary, expected


def _kept(ratio: float) -> float:
    """A ratio as a calibration keeps it: four significant digits (four
    decimals made a fast host's 0.00004 a factor of 0)."""
    return float(f"{ratio:.4g}")


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
    p.add_argument("--runtime", metavar="SETTING", **opt("runtime"))


def run(args) -> int:
    cfg = CalibrateConfig(**{name: getattr(args, name) for name in CalibrateConfig.__dataclass_fields__})
    the_plan = plan(cfg)
    out = progress.console
    against = f"a {the_plan.map_mode} map, " if the_plan.map_mode else ""
    out.print(f"calibrating against {cfg.timeout_map}: {len(the_plan.problems)} ground truths whose map "
              f"times add up to {the_plan.map_total_s:.0f} s (this host takes its factor times that, "
              f"plus loading their contexts), {against}{cfg.limit_clock} clock, {cfg.mode}; sweep in "
              f"{the_plan.out}")
    with progress.SweepProgress() as bar:
        # Prepared once: a native build's block is printed once.
        prepared = prepare(the_plan.sweep)
        for warning in prepared.warnings:
            out.print(f"[bold yellow]warning:[/] {warning}")
        # The executor boots the prover inside the sweep: under its lock, and
        # only when a sampled check is left to run.
        cal, summary, expected = calibrate(cfg, the_plan, LocalExecutor(workers=cfg.workers),
                                           prepared=prepared, on_row=bar.row, on_start=bar.start)
    print_calibration(the_plan, cal, summary, expected, Console())
    return 0


def print_calibration(the_plan: Plan, cal, summary, expected: dict[str, float], out: Console) -> None:
    rows = {r["problem_id"]: r for r in summary.table.to_pylist()}
    # The map's times moved to the checks' mode: shown when they moved.
    moved = any(abs(expected.get(p, t) - t) > 1e-9 for p, t in the_plan.map_secs.items())
    # The map by its file name (its path is in the first line said).
    table = Table(title=f"this host against the map {the_plan.loaded.path.name}, per ground truth")
    names = ("problem", "map s", *((f"{cal.mode} s",) if moved else ()), "wall s", "CPU s", "ratio",
             "verdict")
    for name in names:
        table.add_column(name, justify="left" if name in ("problem", "verdict") else "right",
                         overflow="fold" if name == "problem" else "ellipsis")
    for pid in sorted(the_plan.problems, key=the_plan.map_secs.get):
        r = rows.get(pid, {})
        ratio = cal.ratios.get(pid)
        table.add_row(pid, f"{the_plan.map_secs[pid]:.2f}",
                      *((_secs(expected.get(pid)),) if moved else ()), _secs(r.get("prove_secs")),
                      _secs(r.get("prove_cpu_secs")), "" if ratio is None else f"{ratio:.2f}",
                      str(r.get("verdict", "")))
    out.print(table)
    if moved:
        out.print(f"the map was measured in {the_plan.map_mode} mode and the checks ran in {cal.mode}: "
                  f"ratios are against its times moved to {cal.mode} (column {cal.mode} s)")
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
