"""The errors proofbatch raises. Library code raises; only the CLI exits."""

from __future__ import annotations

from pathlib import Path


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


def not_utf8(data: bytes, exc: UnicodeDecodeError) -> str:
    """Where ``data`` stops being UTF-8, as a message says it:
    "byte 0xff at offset 12, line 3" (``exc``: what decoding ``data`` raised)."""
    line = data[: exc.start].count(b"\n") + 1
    return f"byte 0x{data[exc.start]:02x} at offset {exc.start}, line {line}"


def utf8_text(data: bytes, where, what: str = "", fix: str = "save the file as UTF-8") -> str:
    """``data``, read from ``where``, as text. Every input proofbatch reads
    is UTF-8, as the bench reads it; other bytes are InputError naming
    ``where``, ``what`` it holds, the first bad byte and its offset, and ``fix``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(where, f"{what + ' ' if what else ''}is not UTF-8 text "
                         f"({not_utf8(data, exc)})", fix) from None


def read_utf8(path, what: str = "", fix: str = "save the file as UTF-8") -> str:
    """The text of the file ``path`` (``utf8_text``); OSError as reading raises it."""
    return utf8_text(Path(path).read_bytes(), path, what, fix)
