"""The hostile catalogue's command-line cases, replayed against the
installed CLI by examples/hostile/replay.py (issue 33): every case's exit
code and first line, and no traceback from any command.

Only the cases that load no prover (`--cli-only`, about 35 s on 2 cores):
the full replay (`replay.py` with no flag) also sweeps the hostile answers
in HOL Light, which tests/hol_light/test_hostile.py does on the shared
session.
"""

from __future__ import annotations

import os
import subprocess
import sys

from .helpers import PROOFBATCH, ROOT

SCRIPT = ROOT / "examples" / "hostile" / "replay.py"


def test_every_command_line_case_of_the_catalogue_exits_and_says_as_catalogued():
    # -B: no __pycache__ in the catalogue, where a folder is read as a problem.
    result = subprocess.run([sys.executable, "-B", str(SCRIPT), "--cli-only", "--jobs", "2"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PROOFBATCH": str(PROOFBATCH)})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert result.stdout.strip().endswith("replay: 0 failed")
    # Every catalogued CLI case ran: none was skipped by a typo in its name or flag.
    ran = [line for line in result.stdout.splitlines() if line.startswith("ok ")]
    assert len(ran) >= 28, result.stdout
    assert not (SCRIPT.parent / "__pycache__").exists()
