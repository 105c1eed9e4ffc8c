"""One module per subcommand of ``proofbatch``.

Each module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``. Library code raises; these modules only translate
arguments into configuration and results into text. ``runner.cli`` turns
errors into exit codes.

``proofbatch --version``, ``--help`` and ``status`` must answer at once, so
the command line imports only the module of the command it runs: its names
and one-line helps are listed here (``COMMANDS``, checked against each
module's ``NAME`` and ``HELP`` by tests/test_startup.py), and what a command
needs that is slow to import (matplotlib, pyarrow, dask, submitit, the
provers' backends) is imported where the command uses it.
"""

import argparse

# (name, module, help) in the order `proofbatch --help` lists them:
# runner/commands/<module>.py, then the provers' own commands
# (runner.provers.command_modules()).
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("run", "runner.commands.run",
     "check every problem of a corpus and record one verdict each"),
    ("status", "runner.commands.status",
     "show a sweep's progress while it runs, on any executor"),
    ("profile", "runner.commands.profile",
     "check the ground-truth proofs several times and record what each costs"),
    ("timeout-map", "runner.commands.timeout_map",
     "derive a per-problem timeout map from a profile (s2n-bignum-bench's format), or validate one"),
    ("simulate", "runner.commands.simulate",
     "predict a sweep's makespan, utilization and cost from a timeout map or profile"),
    ("report", "runner.commands.report",
     "report a sweep's cost, throughput and verdicts (two sweeps: compare them)"),
    ("serve", "runner.provers.hol_light.command_serve",
     "keep HOL Light images loaded and serve checks to `proofbatch run --server DIR`, "
     "so a killed runner resumes without reloading HOL Light"),
    ("build-native", "runner.provers.hol_light.command_build_native",
     "compile HOL Light natively (core, server, answer front end) into the cache"),
    ("extract", "runner.provers.hol_light.command_extract",
     "cut HOL Light proof files into a corpus: one problem per top-level theorem"),
)


def size(text: str) -> int:
    """argparse type for a memory size such as 4G or 512M."""
    from ..sizes import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
