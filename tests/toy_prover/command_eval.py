"""proofbatch toy-eval: the toy prover's own subcommand (a prover's
subcommands come from its descriptor)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from . import CHECKER

NAME = "toy-eval"
HELP = "evaluate a toy goal and print its value"


def add_arguments(p) -> None:
    p.add_argument("goal", type=Path, help="a goal.txt of a toy corpus")
    p.add_argument("claim", type=Path, help="a file holding the value claimed for it")


def run(args) -> int:
    done = subprocess.run([sys.executable, "-c", CHECKER, str(args.goal), str(args.claim)],
                          capture_output=True, text=True)
    print(done.stdout.strip())
    return 0 if done.returncode == 0 else 1
