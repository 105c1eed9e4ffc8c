"""proofbatch run: check every problem of a corpus and record one verdict each."""

from __future__ import annotations

from pathlib import Path

import cluster
from cluster.local import LocalExecutor

from ..reporting import progress
from .. import prover_registry as provers
from ..errors import InputError, ProverError
from ..checks.image_server import RemoteSession, ServerSettings
from ..prover import Mode
from ..settings import add_flags, config_from, option
from ..sweep import SweepConfig, prepare, run_sweep
from ..checks.worker import outside_deaths
from ..planning.learned_costs import require_sweeps

NAME = "run"
HELP = "check every problem of a corpus and record one verdict each"


def add_arguments(run) -> None:
    # Every setting of the sweep with its flag, help and default: declared
    # once, in the dataclass (runner/planning/sweep_config.py).
    add_flags(run, SweepConfig)
    # Where checks run, which sweep.json does not record: not settings.
    run.add_argument("--server", type=Path, metavar="DIR",
                     help="check in the images of `proofbatch serve DIR` instead of loading HOL "
                     "Light here (local threads)")
    run.add_argument("--server-timeout", type=float, metavar="SECS",
                     **option(ServerSettings, "server_timeout"))
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
    served_runtime = provers.descriptor(remote.info.prover).served_runtime
    if served_runtime and (why := served_runtime(remote.info.runtime, config.runtime)):
        serve = f"with --runtime {config.runtime}" if config.runtime else "without --runtime"
        raise InputError(server, why, f"pass a --runtime with the server's settle, or serve {serve}")
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
    config = config_from(SweepConfig, args, context_root=context_root)
    if remote is not None:      # before a native sweep spends minutes compiling
        agrees_with_server(remote, args.server, config)
    require_sweeps(config.costs_from or ())      # before a native sweep spends minutes compiling
    with progress.PrepareLog():        # --mode native compiles the contexts here
        prepared = prepare(config, per_node=cluster.per_node(args))
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
