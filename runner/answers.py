"""Answers, as a corpus gives them: one or many per problem (attempts, as
LLM provers sample them for pass@k).

A problem folder (the corpus's own, or ``--answers DIR/<problem-id>``)
gives its attempts in one of two forms::

    answer.txt        attempt 0
    answer_<k>.txt    attempt k (a decimal number without leading zeros)

or::

    answers.jsonl     one JSON string per non-blank line: attempts 0, 1, 2, ...

and ``--answers FILE.csv`` may have an ``attempt`` column next to
``problem_id`` and ``answer``. ``runner.corpus`` calls these readers.
Every answer, from any of these, is unwrapped from its markdown fence as
s2n-bignum-bench unwraps it (``given_answer``); its row says so. Running
the attempts is runner/checks/attempts.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from .errors import InputError, read_utf8

ANSWER_FILE = "answer.txt"
JSONL_FILE = "answers.jsonl"
_NUMBERED = re.compile(r"answer_(.*)\.txt")
_ATTEMPT = re.compile(r"0|[1-9][0-9]*")
# The result rows store attempts as Arrow int32 (runner/results/rows.py).
MAX_ATTEMPT = 2**31 - 1


@dataclass(frozen=True)
class Answer:
    """One attempt's answer text and where it came from."""

    attempt: int
    text: bytes       # what is checked
    source: str       # a file path, "FILE line N"
    # The answer as given, when ``text`` was unwrapped from it (its last
    # markdown-fenced block); None when ``text`` is the answer as given.
    given: bytes | None = None


# s2n-bignum-bench's grader (combine-answer-and-setup.py, since 675f83f) reads
# answer.txt in Python's text mode (universal newlines) and, when the answer
# has a markdown-fenced block with any info string (```ocaml, ```hol, ...),
# checks the content of the last one, stripped, with one newline after it.
# Language models write their answers that way.
_FENCED = re.compile(r"```[a-zA-Z0-9_+-]*\s*\n(.*?)\n```", re.DOTALL)


def unwrap_fence(given: bytes) -> bytes | None:
    """The text the bench checks for an answer with a markdown fence, or
    None when it has none (the answer is checked as given). Bytes that are
    not UTF-8 pass through unchanged (surrogateescape)."""
    text = given.decode("utf-8", "surrogateescape").replace("\r\n", "\n").replace("\r", "\n")
    blocks = _FENCED.findall(text)
    if not blocks:
        return None
    return (blocks[-1].strip() + "\n").encode("utf-8", "surrogateescape")


def given_answer(attempt: int, given: bytes, source: str) -> Answer:
    """An attempt as read from any answer source: the one place where a
    fenced answer is unwrapped."""
    inner = unwrap_fence(given)
    return Answer(attempt, given, source) if inner is None else Answer(attempt, inner, source, given)


def refusal(text: bytes, refuses: Callable[[str], str | None] | None = None) -> str | None:
    """Why an answer cannot be checked by any prover, decided before one
    sees it, as the ERROR reason of its row; None when it can be.

    A NUL byte cannot occur in source text (OCaml's and Isabelle's lexers
    stop at it), and an answer of whitespace alone is empty. What is empty
    in a prover's own language (HOL Light: OCaml comments only) ``refuses``
    says, the prover's descriptor's (runner/prover_registry.py); an answer
    that is not UTF-8 is refused by runner/checks/worker.py."""
    nul = text.find(b"\0")
    if nul >= 0:
        line = text[:nul].count(b"\n") + 1
        return (f"answer holds a NUL byte (at offset {nul}, line {line}), which source text cannot "
                "contain; remove it (was the answer saved as UTF-16 or as binary?)")
    if refuses is not None and (reason := refuses(text.decode("utf-8", "surrogateescape"))):
        return reason
    if not text.strip():
        return "answer is empty (whitespace only); write the answer the problem asks for"
    return None


def _attempt_number(text: str, where, fix: str) -> int:
    text = text.strip()
    if not _ATTEMPT.fullmatch(text) or int(text) > MAX_ATTEMPT:
        raise InputError(where, f"attempt {text!r} is not a whole number from 0 to {MAX_ATTEMPT} "
                         "(without leading zeros)", fix)
    return int(text)


# -- loading -------------------------------------------------------------------

def from_folder(folder: Path) -> list[Answer]:
    """The attempts in one problem folder, by attempt; [] when it has none.
    An answer file that is not a file (a folder, a broken symlink) is
    refused, never read as no answer."""
    entries = list(folder.iterdir())
    for path in entries:
        if (path.name in (ANSWER_FILE, JSONL_FILE) or _NUMBERED.fullmatch(path.name)) \
                and not path.is_file():
            _not_a_file(path)
    numbered = sorted(p for p in entries if _NUMBERED.fullmatch(p.name))
    plain, jsonl = folder / ANSWER_FILE, folder / JSONL_FILE
    if jsonl.is_file():
        if numbered or plain.is_file():
            other = (numbered or [plain])[0]
            raise InputError(folder, f"has both {JSONL_FILE} and {other.name}",
                             f"keep one form: {JSONL_FILE}, or answer.txt and answer_<k>.txt")
        return from_jsonl(jsonl)
    found: dict[int, Answer] = {}
    if plain.is_file():
        found[0] = given_answer(0, plain.read_bytes(), str(plain))
    for path in numbered:
        k = _attempt_number(_NUMBERED.fullmatch(path.name).group(1), path,
                            "name the file answer_<k>.txt with k = 0, 1, 2, ...")
        if k in found:
            raise InputError(path, f"attempt {k} is also given by {Path(found[k].source).name}",
                             "keep one file per attempt")
        found[k] = given_answer(k, path.read_bytes(), str(path))
    return [found[k] for k in sorted(found)]


def _not_a_file(path: Path) -> None:
    """Refuse an answer file that is a folder, a broken symlink or a device."""
    if path.is_symlink() and not path.exists():
        what = f"is a symlink to {path.readlink()}, which does not exist"
    elif path.is_dir():
        what = "is a folder, not a file"
    elif path.exists():
        what = "is not a regular file"
    else:
        return      # gone since the folder was listed: no answer, as before
    raise InputError(path, f"{what}, so it gives no answer", f"put the answer's text in a file "
                     f"named {path.name}, or remove it to give no answer")


def from_jsonl(path: Path) -> list[Answer]:
    """``answers.jsonl``: attempt k is the k-th non-blank line, a JSON string."""
    text = read_utf8(path)
    out: list[Answer] = []
    fix = 'write one JSON string per line, e.g. "ARITH_TAC"'
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(path, f"line {number} is not JSON ({exc.msg} at column {exc.colno})",
                             fix) from None
        if not isinstance(value, str):
            raise InputError(path, f"line {number} is a JSON {type(value).__name__}, not a string",
                             fix)
        out.append(given_answer(len(out), value.encode("utf-8"), f"{path} line {number}"))
    if not out:
        raise InputError(path, "has no answers", f"{fix}, or delete the file")
    return out


def from_csv(path: Path, header_line: int, header: list[str],
             rows: Iterable[tuple[int, list[str]]], ids: set[str]) -> dict[str, list[Answer]]:
    """A CSV with ``problem_id``, ``attempt`` and ``answer`` columns (any
    others are allowed), already split into records by runner.corpus."""
    if header.count("attempt") > 1:
        raise InputError(path, f"header on line {header_line} has column attempt twice",
                         "keep one of them")
    id_col, attempt_col, answer_col = (header.index(c) for c in ("problem_id", "attempt", "answer"))
    by_id: dict[str, dict[int, Answer]] = {}
    first_line: dict[tuple[str, int], int] = {}
    for line, record in rows:
        if len(record) != len(header):
            raise InputError(path, f"line {line} has {len(record)} fields but the header has "
                             f"{len(header)}", "quote answers that contain commas, quotes or newlines")
        pid = record[id_col].strip()
        if pid not in ids:
            raise InputError(path, f"line {line}: unknown problem id {pid!r}",
                             "remove the row, or check that the answers belong to this corpus")
        k = _attempt_number(record[attempt_col], f"{path} line {line}",
                            "number each problem's attempts 0, 1, 2, ...")
        if (pid, k) in first_line:
            raise InputError(path, f"problem {pid} attempt {k} appears on line "
                             f"{first_line[pid, k]} and line {line}",
                             "keep one answer per (problem_id, attempt)")
        first_line[pid, k] = line
        by_id.setdefault(pid, {})[k] = given_answer(k, record[answer_col].encode("utf-8"),
                                                    f"{path} line {line}")
    if not by_id:
        raise InputError(path, "answers CSV has a header but no answers", "add one row per attempt")
    return {pid: [found[k] for k in sorted(found)] for pid, found in by_id.items()}
