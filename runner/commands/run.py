"""proofbatch run: check every problem of a corpus and record one verdict each."""

from __future__ import annotations

from pathlib import Path

import cluster
from cluster.local import LocalExecutor

from ..reporting import progress
from .. import provers
from ..corpus import problem_patterns
from ..errors import InputError, ProverError
from ..checks.image_server import RemoteSession, ServerSettings
from ..prover import LimitClock, Mode
from ..settings import help_of, option, options_of
from ..sweep import SweepConfig, prepare, run_sweep
from ..checks.worker import outside_deaths
from ..planning.learned_costs import require_sweeps
from . import size

NAME = "run"
HELP = "check every problem of a corpus and record one verdict each"


def add_arguments(run) -> None:
    opt = options_of(SweepConfig)      # help and defaults written once, in the dataclass

    run.add_argument("corpus", type=Path, help=help_of(SweepConfig, "corpus"))
    run.add_argument("--answers", type=Path, **opt("answers"))
    run.add_argument("--out", type=Path, required=True, help=help_of(SweepConfig, "out"))
    run.add_argument("--workers", type=int, **opt("workers"))
    run.add_argument("--timeout-map", type=Path, **opt("timeout_map"))
    run.add_argument("--map-mode", choices=("native", "bytecode"), **opt("map_mode"))
    run.add_argument("--map-build", metavar="B", **opt("map_build"))
    run.add_argument("--category-timeouts", type=Path, **opt("category_timeouts"))
    run.add_argument("--default-timeout", type=float, **opt("default_timeout"))
    run.add_argument("--mem-limit", type=size, **opt("mem_limit"))
    run.add_argument("--hol-light", type=Path, **opt("hol_light"))
    run.add_argument("--prover", choices=provers.names(), **opt("prover"))
    run.add_argument("--isabelle", type=Path, metavar="DIR", **opt("isabelle"))
    run.add_argument("--context-root", type=Path, **opt("context_root"))
    run.add_argument("--grace", type=float, **opt("grace"))
    run.add_argument("--limit-clock", choices=[str(c) for c in LimitClock], **opt("limit_clock"))
    run.add_argument("--limit-slack", type=float, metavar="SECS", **opt("limit_slack"))
    run.add_argument("--backstop-factor", type=float, metavar="F", **opt("backstop_factor"))
    run.add_argument("--backstop-extra", type=float, metavar="SECS", **opt("backstop_extra"))
    run.add_argument("--host-factor", metavar="auto|X", **opt("host_factor"))
    run.add_argument("--policy", choices=("planned", "naive", "shuffle"), **opt("policy"))
    run.add_argument("--seed", type=int, **opt("seed"))
    run.add_argument("--sandbox", choices=("auto", "bwrap", "rlimits", "none"), **opt("sandbox"))
    run.add_argument("--server", type=Path, metavar="DIR",
                     help="check in the images of `proofbatch serve DIR` instead of loading HOL "
                     "Light here (local threads)")
    run.add_argument("--server-timeout", type=float, metavar="SECS",
                     **option(ServerSettings, "server_timeout"))
    run.add_argument("--mode", choices=("bytecode", "native", "auto"), **opt("mode"))
    run.add_argument("--context-proofs", choices=("replay", "trust"), **opt("context_proofs"))
    run.add_argument("--no-fallback", action="store_true", **opt("no_fallback"))
    run.add_argument("--stop-on-first-ok", action="store_true", **opt("stop_on_first_ok"))
    run.add_argument("--allow-missing-answers", action="store_true", **opt("allow_missing_answers"))
    run.add_argument("--problems", type=problem_patterns, action="extend",
                     metavar="ID,GLOB,@FILE", **opt("problems"))
    run.add_argument("--costs-from", nargs="+", metavar="OUT", **opt("costs_from"))
    cluster.add_arguments(run)    # --cluster and each executor's options


def agrees_with_server(remote: RemoteSession, server: Path, config: SweepConfig) -> None:
    """Raises InputError when the image server on ``server`` serves checks
    another way than ``config`` asks: its rows would say what it did, not
    what the run asked (mode, context proofs, limit clock)."""
    mode = str(remote.info.mode or "bytecode")
    # Only a mode --mode names (HOL Light's) can disagree: another prover's
    # server runs its own way (Isabelle's build sessions, a test's processes).
    if mode in (Mode.BYTECODE, Mode.NATIVE, Mode.AUTO) and mode != str(config.mode):
        raise InputError(server, f"serves {mode} images, not {config.mode}", f"pass --mode {mode}, "
                         f"or serve with --mode {config.mode}" + (" (a server serves bytecode or "
                         "native, not auto)" if str(config.mode) == "auto" else ""))
    served = remote.info.context_proofs or "replay"
    if served != config.context_proofs:
        raise InputError(server, f"serves images with --context-proofs {served}, not "
                         f"{config.context_proofs}", f"pass --context-proofs {served}, or serve "
                         f"with --context-proofs {config.context_proofs}")
    if (clock := remote.clock()) not in (None, str(config.limit_clock)):
        raise InputError(server, f"serves checks limited on the {clock} clock, not "
                         f"{config.limit_clock}", f"pass --limit-clock {clock}, or serve with "
                         f"--limit-clock {config.limit_clock}")


def run(args) -> int:
    remote = RemoteSession(args.server, args.server_timeout) if args.server is not None else None
    context_root = args.context_root
    if remote is not None and "context_root" in provers.descriptor(remote.info.prover).options \
            and (served := remote.context_root()) is not None:
        # The served images resolve needs/loadt under the server's context
        # root: the sweep hashes the loaded files and records the root there
        # too (a --context-root of its own was recorded but never used).
        if context_root is not None and Path(context_root).resolve() != served:
            raise InputError("--context-root", f"{context_root} is not the context root of the "
                             f"image server on {args.server} ({served}), where its images load "
                             "files", f"drop --context-root (the server's is used), or serve with "
                             f"--context-root {context_root}")
        context_root = served
    config = SweepConfig(
        corpus=args.corpus, out=args.out, answers=args.answers, workers=args.workers,
        timeout_map=args.timeout_map, map_mode=args.map_mode, map_build=args.map_build,
        category_timeouts=args.category_timeouts, default_timeout=args.default_timeout, mem_limit=args.mem_limit,
        hol_light=args.hol_light, context_root=context_root, grace=args.grace,
        limit_clock=args.limit_clock, limit_slack=args.limit_slack, backstop_factor=args.backstop_factor,
        backstop_extra=args.backstop_extra, host_factor=args.host_factor,
        policy=args.policy, seed=args.seed,
        prover=args.prover, isabelle=args.isabelle, sandbox=args.sandbox,
        stop_on_first_ok=args.stop_on_first_ok, mode=args.mode, context_proofs=args.context_proofs,
        allow_missing_answers=args.allow_missing_answers, no_fallback=args.no_fallback,
        problems=tuple(args.problems) if args.problems else None,
        costs_from=tuple(args.costs_from) if args.costs_from else None)
    if remote is not None:      # before a native sweep spends minutes compiling
        agrees_with_server(remote, args.server, config)
    require_sweeps(config.costs_from or ())      # before a native sweep spends minutes compiling
    with progress.PrepareLog():        # --mode native compiles the contexts here
        prepared = prepare(config)
    for warning in prepared.warnings:
        progress.console.print(f"[bold yellow]warning:[/] {warning}")
    executor = cluster.make_executor(args, config.workers)
    if remote is not None:
        executor = LocalExecutor(workers=config.workers, session=remote)
    with progress.SweepProgress(prepared.plan, config.workers) as bar:
        summary = run_sweep(prepared, executor,
                            on_row=bar.row, on_start=bar.start, on_skip=bar.skip)
    progress.print_summary(summary)
    if deaths := outside_deaths(summary.table):
        progress.console.print(f"[bold yellow]{deaths}")
    if summary.skipped:
        progress.console.print(f"skipped {summary.skipped} attempts after an OK attempt "
                               f"(--stop-on-first-ok): {summary.out}/skipped.csv")
    # Rows are recorded; a sweep whose every context failed to load tested
    # no answer: the prover setup failed, not the answers (exit 1).
    if failed := summary.every_context_failed():
        raise ProverError(failed)
    return 0
