"""The proofbatch command line. The only place that prints and exits.

Exit codes: 0 when the command completed, whatever the verdicts; 2 on bad
input, with one line naming the file or problem and the fix; 1 when the
prover failed or a validation did not pass; 130 when interrupted (rerun the
same command to resume).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import sys

from .errors import InputError, ProofbatchError

# runner/commands/<module>.py, in the order `proofbatch --help` lists them.
COMMANDS = ["run", "status", "profile", "timeout-map", "simulate", "report", "serve",
            "build-native", "extract"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="proofbatch", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"runner.commands.{name.replace('-', '_')}")
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(handler=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except InputError as exc:
        print(f"proofbatch: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("proofbatch: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except ProofbatchError as exc:
        print(f"proofbatch: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        # A full disk: every file proofbatch publishes appears whole or not
        # at all (shards.publish), so nothing written before is lost.
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        where = exc.filename or getattr(args, "out", None) or "output"
        print(f"proofbatch: {where}: {exc.strerror} while writing results; "
              "everything published before is kept: free space and run the same command again "
              "to resume", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
