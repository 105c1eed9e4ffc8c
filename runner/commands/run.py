"""proofbatch run: check every problem of a corpus and record one verdict each."""

from __future__ import annotations

from pathlib import Path

from .. import progress
from ..sweep import SweepConfig, prepare, run_sweep
from . import size

NAME = "run"
HELP = "check every problem of a corpus and record one verdict each"


def add_arguments(run) -> None:
    run.add_argument("corpus", type=Path, help="CORPUS/<problem-id>/{setup.ml,query.txt}")
    run.add_argument("--answers", type=Path, help="answers DIR/<id>/answer.txt or FILE.csv "
                     "(problem_id,answer); default: answer.txt in each problem folder. Several "
                     "attempts: DIR/<id>/answer_<k>.txt or answers.jsonl, or an attempt column")
    run.add_argument("--out", type=Path, required=True, help="sweep directory; rerun to resume")
    run.add_argument("--workers", type=int, default=1, help="checks at once (default 1)")
    run.add_argument("--timeout-map", type=Path, help="s2n-bignum-bench timeout-map.json")
    run.add_argument("--map-mode", choices=("native", "bytecode"),
                     help="the mode a timeout map without a sidecar was measured in (required for "
                     "HOL Light: s2n-bignum-bench's map is native); limits of another mode than "
                     "a check runs in are converted, with a warning")
    run.add_argument("--map-build", metavar="B", help="the HOL Light build such a map was measured "
                     "with (warned about when it is not this sweep's)")
    run.add_argument("--category-timeouts", type=Path, help="s2n-bignum-bench timeouts.json")
    run.add_argument("--default-timeout", type=float, default=120.0,
                     help="seconds, for problems in neither file (default 120)")
    run.add_argument("--mem-limit", type=size, help="per check, e.g. 4G (default: 8G or an even "
                     "share of 80%% of RAM per worker, whichever is smaller)")
    run.add_argument("--hol-light", type=Path, help="HOL Light checkout built with make (has hol.sh)")
    run.add_argument("--prover", choices=("hol-light", "isabelle"),
                     help="default: from the corpus (isabelle.toml means Isabelle)")
    run.add_argument("--isabelle", type=Path, metavar="DIR",
                     help="Isabelle installation (default: $ISABELLE_HOME, or isabelle on PATH)")
    run.add_argument("--context-root", type=Path,
                     help="directory that needs/loadt in setup.ml resolve against (default: cwd)")
    run.add_argument("--grace", type=float, default=2.0,
                     help="seconds past the limit before the outside kill (default 2)")
    run.add_argument("--policy", choices=("planned", "naive", "shuffle"), default="planned",
                     help="dispatch order (default planned: longest first, context affinity, "
                     "memory packing; runner/planner.py); naive: corpus order; shuffle: seeded")
    run.add_argument("--seed", type=int, default=0, help="seed of shuffle and tie-breaking (default 0)")
    run.add_argument("--sandbox", choices=("auto", "bwrap", "rlimits", "none"), default="auto",
                     help="the box checks run in (default auto: bwrap when installed and root, "
                     "else rlimits; see README, Sandbox)")
    run.add_argument("--server", type=Path, metavar="DIR",
                     help="check in the images of `proofbatch serve DIR` instead of loading HOL "
                     "Light here (local threads)")
    run.add_argument("--mode", choices=("bytecode", "native", "auto"), default="bytecode",
                     help="HOL Light execution (default bytecode): native compiles HOL Light once "
                     "per machine (proofbatch build-native) and checks in batches; auto runs checks "
                     "expected above 0.35 s of bytecode time natively, the rest in bytecode")
    run.add_argument("--context-proofs", choices=("replay", "trust"), default="replay",
                     help="HOL Light contexts: replay their proofs as written (default), or trust "
                     "them: while a context loads, a top-level prove returns its statement without "
                     "running the tactic; answers always prove for real (README, Trusted contexts)")
    run.add_argument("--stop-on-first-ok", action="store_true",
                     help="skip a problem's remaining attempts once one is OK (listed in skipped.csv)")
    import cluster

    cluster.add_arguments(run)    # --cluster and each executor's options


def run(args) -> int:
    config = SweepConfig(
        corpus=args.corpus, out=args.out, answers=args.answers, workers=args.workers,
        timeout_map=args.timeout_map, map_mode=args.map_mode, map_build=args.map_build,
        category_timeouts=args.category_timeouts, default_timeout=args.default_timeout, mem_limit=args.mem_limit,
        hol_light=args.hol_light, context_root=args.context_root, grace=args.grace,
        policy=args.policy, seed=args.seed,
        prover=args.prover, isabelle=args.isabelle, sandbox=args.sandbox,
        stop_on_first_ok=args.stop_on_first_ok, mode=args.mode, context_proofs=args.context_proofs)
    prepared = prepare(config)
    for warning in prepared.warnings:
        progress.console.print(f"[bold yellow]warning:[/] {warning}")
    import cluster

    executor = cluster.make_executor(args, config.workers)
    if args.server is not None:
        from cluster.local import LocalExecutor

        from ..image_server import RemoteSession
        remote = RemoteSession(args.server)
        served = getattr(remote.info, "context_proofs", "") or "replay"
        if served != config.context_proofs:
            from ..errors import InputError

            raise InputError(args.server, f"serves images with --context-proofs {served}, not "
                             f"{config.context_proofs}", f"pass --context-proofs {served}, or serve "
                             f"with --context-proofs {config.context_proofs}")
        executor = LocalExecutor(workers=config.workers, session=remote)
    with progress.SweepProgress(prepared.plan, config.workers) as bar:
        summary = run_sweep(prepared, executor,
                            on_row=bar.row, on_start=bar.start, on_skip=bar.skip)
    progress.print_summary(summary)
    if summary.skipped:
        progress.console.print(f"skipped {summary.skipped} attempts after an OK attempt "
                               f"(--stop-on-first-ok): {summary.out}/skipped.csv")
    return 0
