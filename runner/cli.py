"""The proofbatch command line. The only place that prints and exits.

Exit codes: 0 when the sweep completed, whatever its verdicts; 2 on bad
input, with one line naming the file or problem and the fix; 1 when the
prover failed; 130 when interrupted (rerun the same command to resume).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import progress
from .errors import InputError, ProofbatchError
from .sizes import parse_size
from .sweep import SweepConfig, prepare, run_sweep


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="proofbatch", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="check every problem of a corpus and record one verdict each")
    run.add_argument("corpus", type=Path, help="CORPUS/<problem-id>/{setup.ml,query.txt}")
    run.add_argument("--answers", type=Path, help="answers DIR/<id>/answer.txt or FILE.csv "
                     "(problem_id,answer); default: answer.txt in each problem folder")
    run.add_argument("--out", type=Path, required=True, help="sweep directory; rerun to resume")
    run.add_argument("--workers", type=int, default=1, help="checks at once (default 1)")
    run.add_argument("--timeout-map", type=Path, help="s2n-bignum-bench timeout-map.json")
    run.add_argument("--category-timeouts", type=Path, help="s2n-bignum-bench timeouts.json")
    run.add_argument("--default-timeout", type=float, default=120.0,
                     help="seconds, for problems in neither file (default 120)")
    run.add_argument("--mem-limit", type=_size, help="per check, e.g. 4G (default: 8G or an even "
                     "share of 80%% of RAM per worker, whichever is smaller)")
    run.add_argument("--hol-light", type=Path, help="HOL Light checkout built with make (has hol.sh)")
    run.add_argument("--context-root", type=Path,
                     help="directory that needs/loadt in setup.ml resolve against (default: cwd)")
    run.add_argument("--grace", type=float, default=2.0,
                     help="seconds past the limit before the outside kill (default 2)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
    except InputError as exc:
        print(f"proofbatch: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("proofbatch: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except ProofbatchError as exc:
        print(f"proofbatch: {exc}", file=sys.stderr)
        return 1
    return 0


def _run(args) -> int:
    config = SweepConfig(
        corpus=args.corpus, out=args.out, answers=args.answers, workers=args.workers,
        timeout_map=args.timeout_map, category_timeouts=args.category_timeouts,
        default_timeout=args.default_timeout, mem_limit=args.mem_limit,
        hol_light=args.hol_light, context_root=args.context_root, grace=args.grace)
    prepared = prepare(config)
    from cluster.local import LocalExecutor

    with progress.SweepProgress() as bar:
        summary = run_sweep(prepared, LocalExecutor(workers=config.workers),
                            on_row=bar.row, on_start=bar.start)
    progress.print_summary(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
