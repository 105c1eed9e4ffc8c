"""One module per subcommand of ``proofbatch``.

Each module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``. Library code raises; these modules only translate
arguments into configuration and results into text. ``runner.cli`` turns
errors into exit codes.

``proofbatch --version``, ``--help`` and ``status`` must answer at once, so
the command line imports only the module of the command it runs: names and
one-line helps are listed here (``COMMANDS``) and in the provers'
descriptors, checked against each module's ``NAME`` and ``HELP`` by
tests/test_startup.py, and what a command
needs that is slow to import (matplotlib, pyarrow, dask, submitit, the
provers' backends) is imported where the command uses it.
"""

import argparse

# (name, module, help) of runner/commands/<module>.py, in the order
# `proofbatch --help` lists them; the provers' own commands follow
# (all_commands).
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("run", "runner.commands.run",
     "check every problem of a corpus and record one verdict each"),
    ("status", "runner.commands.status",
     "show a sweep's progress while it runs, on any executor"),
    ("profile", "runner.commands.profile",
     "check the ground-truth proofs several times and record what each costs"),
    ("timeout-map", "runner.commands.timeout_map",
     "derive a per-problem timeout map from a profile (s2n-bignum-bench's format), validate one, "
     "or compare two"),
    ("calibrate", "runner.commands.calibrate",
     "measure this host's speed against a timeout map's, for run --host-factor auto"),
    ("simulate", "runner.commands.simulate",
     "predict a sweep's makespan, utilization and cost from a timeout map or profile"),
    ("report", "runner.commands.report",
     "report a sweep's cost, throughput and verdicts (two sweeps: compare them)"),
)


def all_commands() -> list[tuple[str, str, str]]:
    """Every subcommand, (name, module, help): ours, then the registered
    provers' (their descriptors say theirs without importing the modules)."""
    from .. import prover_registry as provers

    return [*COMMANDS, *provers.commands()]


def price_flag(text: str) -> float:
    """argparse type for --core-hour-price: a finite number, 0 or more
    (``float`` took "nan" and printed ``cost nan``)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as a price; give a number, "
                                         "e.g. 0.05") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text} is not a price (a finite number, 0 or more); "
                                         "pass the price of one core-hour, e.g. 0.05")
    return value
