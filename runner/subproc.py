"""The one way proofbatch runs a short external command."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .errors import CommandError


def run(argv: list[str], *, cwd: Path | None = None, timeout: float = 60.0,
        input_text: str | None = None) -> str:
    """Run ``argv`` to completion and return its stdout.

    Raises CommandError naming the command, its exit code and its stderr, so a
    failure is never silent and never needs a second look to diagnose.
    """
    try:
        proc = subprocess.run(argv, cwd=cwd, input=input_text, capture_output=True,
                              text=True, timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise CommandError(argv, 127, str(exc)) from exc
    except subprocess.TimeoutExpired as exc:
        raise CommandError(argv, -1, f"timed out after {timeout} s") from exc
    if proc.returncode != 0:
        raise CommandError(argv, proc.returncode, proc.stderr)
    return proc.stdout
