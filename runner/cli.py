"""The proofbatch command line: the only module that prints and exits.

Exit codes: 0 when the command completed, whatever the verdicts; 2 on bad
input, with one line naming the file or problem and the fix; 1 when the
prover failed or a validation did not pass; 130 when interrupted by Ctrl-C and
143 on SIGTERM (rerun the same command to resume).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import importlib.metadata
import re
import signal
import sys
import threading

from . import provers
from .errors import InputError, ProofbatchError

# runner/commands/<module>.py, in the order `proofbatch --help` lists them; the
# provers' own commands (runner.provers.command_modules) follow.
COMMANDS = ["run", "status", "profile", "timeout-map", "simulate", "report"]


DESCRIPTION = ("Batch proof checking for HOL Light and Isabelle sweeps: per-problem timeout maps, "
               "planned dispatch over local workers, Slurm or Dask, guarded checks forked from "
               "prebuilt images, and resumable Parquet results.")

# What to do about each kind of value argparse could not read.
_TYPE_FIXES = {"int": "give a whole number", "float": "give a number in seconds",
               "Path": "give a path"}
# OSErrors whose path the user chose (--out, a map's --out, a corpus): bad
# input, not a failure of proofbatch.
_PATH_ERRNOS = {errno.ENOENT, errno.ENAMETOOLONG, errno.EISDIR, errno.ENOTDIR, errno.EACCES,
                errno.EROFS, errno.EPERM, errno.ELOOP, errno.EEXIST}


class _Parser(argparse.ArgumentParser):
    """argparse that refuses in one line naming the flag and the fix, with no
    usage dump above it (subparsers inherit this class)."""

    def error(self, message: str):
        command = self.prog.removeprefix("proofbatch").strip()
        see = f"see `{self.prog} --help`"
        if m := re.match(r"argument (?P<flag>[^:]+): (?P<what>.*)", message):
            flag = m["flag"].split("/")[0]
            what = m["what"]
            if t := re.match(r"invalid (?P<type>\w+) value: (?P<value>.*)", what):
                fix = _TYPE_FIXES.get(t["type"], see)
                raise InputError(flag, f"cannot read {t['value']}", fix)
            if c := re.match(r"invalid choice: (?P<value>.*?) \(choose from (?P<choices>.*)\)", what):
                raise InputError(flag, f"{c['value']} is not a choice",
                                 f"choose one of {c['choices'].replace(chr(39), '')}")
            if ";" in what:            # our own types say the problem and the fix
                problem, fix = what.split(";", 1)
                raise InputError(flag, problem.strip(), fix.strip())
            raise InputError(flag, what, see)
        raise InputError(f"proofbatch {command}".strip(), message, see)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="proofbatch", description=DESCRIPTION)
    parser.add_argument("--version", action="version",
                        version=f"proofbatch {importlib.metadata.version('proofbatch')}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = [f"runner.commands.{name.replace('-', '_')}" for name in COMMANDS]
    for name in modules + provers.command_modules():
        module = importlib.import_module(name)
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(handler=module.run)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM: the sweep stops exactly as on Ctrl-C (its prover processes
    and work directory go with it), and the exit code says which."""


def _terminate(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    args = None
    # Python's default SIGTERM ends the process without running a finally
    # clause, which left loading images and work directories behind.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    try:
        args = build_parser().parse_args(argv)
        return args.handler(args)
    except InputError as exc:
        print(f"proofbatch: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        what = "terminated" if isinstance(exc, Terminated) else "interrupted"
        print(f"proofbatch: {what}; run the same command again to resume", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    except ProofbatchError as exc:
        print(f"proofbatch: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        # A full disk: every file proofbatch publishes appears whole or not
        # at all (shards.publish), so nothing written before is lost.
        if exc.errno in _PATH_ERRNOS and exc.filename:
            print(f"proofbatch: error: {exc.filename}: {exc.strerror}; pass a path that "
                  "proofbatch can create and write", file=sys.stderr)
            return 2
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        where = exc.filename or getattr(args, "out", None) or "output"
        print(f"proofbatch: {where}: {exc.strerror} while writing results; "
              "everything published before is kept: free space and run the same command again "
              "to resume", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
