"""The errors proofbatch raises. Library code raises; only the CLI exits."""

from __future__ import annotations


class ProofbatchError(Exception):
    """Base class of every error proofbatch raises on purpose."""


class InputError(ProofbatchError):
    """Bad input from the user: the CLI prints one line and exits 2.

    The line names where the problem is (a file or a problem id), what is
    wrong, and what to do about it.
    """

    def __init__(self, where: str, problem: str, fix: str):
        self.where, self.problem, self.fix = str(where), problem, fix
        super().__init__(f"{self.where}: {problem}; {fix}")


class CommandError(ProofbatchError):
    """An external command failed: names the command, exit code and stderr."""

    def __init__(self, argv: list[str], returncode: int, stderr: str):
        self.argv, self.returncode, self.stderr = argv, returncode, stderr
        tail = stderr.strip().splitlines()[-5:]
        super().__init__(f"command {' '.join(argv)!r} exited {returncode}: " + " | ".join(tail))


class ProverError(ProofbatchError):
    """The prover itself could not be started or stopped answering."""
