"""The corpus: one folder per problem, in s2n-bignum-bench's retrieve layout.

::

    CORPUS/<problem-id>/setup.ml      HOL Light code that sets up the context
    CORPUS/<problem-id>/query.txt     the goal to prove
    CORPUS/<problem-id>/category.txt  optional; "generic" when absent
    CORPUS/<problem-id>/answer.txt    optional; the proof to check

Answers may instead come from a directory laid out like the corpus
(``DIR/<problem-id>/answer.txt``) or from a CSV with ``problem_id`` and
``answer`` columns, as the bench's challenger CSV has. A problem may have
several answers (attempts, for pass@k): see runner/answers.py for the forms.
"""

from __future__ import annotations

import csv
import errno
import fnmatch
import hashlib
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from . import answers as attempt_files
from .errors import InputError, read_utf8

PROBLEM_ID = re.compile(r"[A-Za-z0-9_.+-]+")
DEFAULT_CATEGORY = "generic"
ANSWER_FILE = "answer.txt"

# Python's csv module refuses fields over 128 KiB by default; answers that
# inline long proof scripts can be larger.
_CSV_FIELD_LIMIT = 256 * 1024 * 1024


@dataclass(frozen=True)
class Problem:
    """One problem of the corpus and the answer to check against it.

    ``answer`` is the answer's raw bytes, or None when there is none;
    ``answer_source`` says where it came from (a file path or
    ``FILE.csv line N``) or where it was looked for.
    """

    problem_id: str
    directory: Path
    setup_path: Path
    query_path: Path
    category: str
    answer: bytes | None
    answer_source: str
    # Every answer given, by attempt (runner/answers.py); ``answer`` is the
    # lowest attempt's. Empty when there is none, or for one attempt's copy.
    attempts: tuple[attempt_files.Answer, ...] = ()
    # The answer as given when ``answer`` was unwrapped from its markdown
    # fence (answers.unwrap_fence), else None.
    answer_given: bytes | None = None


def load_corpus(corpus: Path, answers: Path | None = None) -> list[Problem]:
    """Read every problem of ``corpus``, sorted by id, with its answer.

    Answers come from ``answers`` when given (a directory or a ``.csv``
    file), else from ``answer.txt`` in each problem folder. A problem
    without an answer gets ``answer=None``. Raises InputError on anything
    malformed.
    """
    corpus = Path(corpus)
    if not corpus.exists():
        raise InputError(corpus, "corpus directory does not exist",
                         "check the path, or retrieve the problems first")
    if not corpus.is_dir():
        raise InputError(corpus, "corpus is not a directory",
                         "pass the folder that holds one folder per problem")

    entries = sorted((d for d in corpus.iterdir() if not d.name.startswith(".")), key=lambda d: d.name)
    for d in entries:
        _refuse_dangling(d)
    folders = [d for d in entries if d.is_dir()]
    for d in folders:
        _refuse_non_problem(corpus, d)
    if not folders:
        hidden = hidden_problems(corpus)
        skipped = f"; {_hidden_said(hidden)}" if hidden else ""
        raise InputError(corpus, f"corpus has no problems (no problem folders{skipped})",
                         "pass the folder that holds <problem-id>/setup.ml and query.txt")

    found = [_read_problem_folder(d) for d in folders]
    ids = [d.name for d in folders]

    if answers is None:
        by_id = {pid: attempt_files.from_folder(d) for pid, d in zip(ids, folders)}
        where_missing = "no answer.txt in the problem folder"
    else:
        answers = Path(answers)
        if not answers.exists():
            raise InputError(answers, "answers path does not exist",
                             "pass a directory of <problem-id>/answer.txt or a .csv file")
        if answers.is_dir():
            by_id = _answers_from_directory(answers, set(ids))
            where_missing = f"no answer.txt in {answers}/<problem-id>"
        elif answers.suffix.lower() == ".csv":
            by_id = _answers_from_csv(answers, set(ids))
            where_missing = f"no row in {answers}"
        else:
            raise InputError(answers, "answers path is neither a directory nor a .csv file",
                             "pass a directory of <problem-id>/answer.txt or a .csv file")

    problems = []
    for pid, d, (setup, query, category) in zip(ids, folders, found):
        given = by_id.get(pid) or []
        answer, source = (given[0].text, given[0].source) if given else (None, where_missing)
        problems.append(Problem(problem_id=pid, directory=d, setup_path=setup, query_path=query,
                                category=category, answer=answer, answer_source=source,
                                attempts=tuple(given), answer_given=given[0].given if given else None))
    return problems


def corpus_fingerprint(problems: Iterable[Problem]) -> str:
    """A sha256 that changes when any problem's setup, query or category does.

    Answers are not part of it: the same corpus can be checked with many
    answer sets.
    """
    outer = hashlib.sha256()
    rows = sorted((p.problem_id, _file_sha256(p.setup_path), _file_sha256(p.query_path), p.category)
                  for p in problems)
    for row in rows:
        # NUL cannot occur in any field, so the encoding is unambiguous.
        outer.update("\0".join(row).encode("utf-8") + b"\n")
    return outer.hexdigest()


def problem_patterns(text: str) -> list[str]:
    """argparse type of ``--problems``: one value, patterns separated by commas."""
    return text.split(",")


def select_problems(problems: list[Problem], patterns: Iterable[str]) -> list[Problem]:
    """The problems whose ids match any of ``patterns``, in corpus order
    (:func:`select_ids`)."""
    matched = set(select_ids([p.problem_id for p in problems], patterns))
    return [p for p in problems if p.problem_id in matched]


def select_ids(ids: list[str], patterns: Iterable[str], what: str = "the corpus") -> list[str]:
    """The ids of ``ids`` (a corpus's, or a map's) matching any of ``patterns``, in order.

    A pattern is a problem id, a shell-style glob (fnmatch, case-sensitive:
    ``arith.*``, ``x86.bignum_?dd.*``, ``[ab]*``), or ``@FILE``: a file of
    ids and globs, one a line, with blank lines and ``#`` comments. A pattern
    that matches no problem is refused (InputError): a typo must not quietly
    check less than was asked for.
    """
    wanted: list[tuple[str, str]] = []          # (pattern, where it was given)
    for pattern in patterns:
        pattern = pattern.strip()
        if pattern.startswith("@"):
            wanted += _pattern_file(Path(pattern[1:]))
        elif not pattern:
            raise InputError("--problems", "an empty pattern",
                             "give problem ids or globs separated by commas, or @FILE")
        else:
            wanted.append((pattern, "--problems"))
    known = set(ids)
    matched: set[str] = set()
    for pattern, where in wanted:
        if any(c in pattern for c in "*?["):
            hits = [i for i in ids if fnmatch.fnmatchcase(i, pattern)]
        else:
            hits = [pattern] if pattern in known else []
        if not hits:
            example = f", e.g. {ids[0]}" if ids else ""
            raise InputError(where, f"{pattern!r} matches no problem of {what} "
                             f"({len(ids)} problems{example})",
                             f"give an id of {what} or a shell-style glob such as 'arith.*'")
        matched.update(hits)
    return [i for i in ids if i in matched]


def _pattern_file(path: Path) -> list[tuple[str, str]]:
    """(pattern, FILE:line) of each id or glob of an ``@FILE``."""
    fix = "pass @FILE naming a file of problem ids or globs, one a line"
    if not path.is_file():
        raise InputError(f"@{path}", "does not exist" if not path.exists() else "is not a file", fix)
    text = read_utf8(path, "problem list")
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        pattern = line.split("#", 1)[0].strip()
        if pattern:
            found.append((pattern, f"{path}:{number}"))
    if not found:
        raise InputError(path, "lists no problem id or glob", fix)
    return found


def _refuse_dangling(entry: Path) -> None:
    """A symlink leading nowhere or in a circle is named, never skipped: it
    may have been a problem folder, and the sweep would look complete."""
    try:
        entry.stat()
    except OSError as exc:
        if not entry.is_symlink():
            raise
        loop = exc.errno == errno.ELOOP
        raise InputError(entry, f"is a {'symlink loop' if loop else 'broken symlink'} (-> "
                         f"{os.readlink(entry)}{'' if loop else ': ' + exc.strerror}), not a problem "
                         "folder", "remove the symlink from the corpus, or point it at a problem "
                         "folder" if loop else "restore its target, or remove the symlink from the "
                         "corpus") from None


def _refuse_non_problem(corpus: Path, folder: Path) -> None:
    """Folders that are not problems are named for what they are: every
    folder of a corpus is read as a problem, and none is skipped silently."""
    if folder.is_symlink():
        target = folder.resolve()
        home = corpus.resolve()
        if target == home or target in home.parents:
            raise InputError(folder, f"is a symlink to {target}, which holds the corpus itself "
                             "(a loop), not a problem", "remove the symlink from the corpus")
    if (folder / "sweep.json").is_file() or (folder / "shards").is_dir():
        raise InputError(folder, "is a proofbatch sweep directory (results), not a problem",
                         "move it out of the corpus (keep it: it holds results), and give --out "
                         "a path outside the corpus")


def hidden_problems(corpus: Path) -> list[Path]:
    """The hidden folders of ``corpus`` (names beginning with ".") that look
    like problems: they hold a setup.ml, query.txt or answer.txt. They are
    never read as problems, as .git is not; ``corpus_notes`` says so."""
    try:
        entries = sorted(Path(corpus).iterdir())
    except OSError:
        return []
    return [d for d in entries if d.name.startswith(".") and d.is_dir()
            and any((d / f).exists() for f in ("setup.ml", "query.txt", ANSWER_FILE))]


def _hidden_said(hidden: list[Path]) -> str:
    names = ", ".join(d.name for d in hidden[:3]) + (", ..." if len(hidden) > 3 else "")
    if len(hidden) == 1:
        return f"1 hidden folder that looks like a problem is skipped ({names})"
    return f"{len(hidden)} hidden folders that look like problems are skipped ({names})"


def corpus_notes(corpus: Path, problems: Iterable[Problem]) -> tuple[str, ...]:
    """What a sweep says once, before it starts, about how it read the
    corpus: hidden problem folders it skipped, and setup.ml files that are
    symlinks out of the corpus, which it follows.

    Why follow them rather than refuse: a context is the user's own code,
    not an answer; runner.prover_registry reads its text once, in Python, and only
    that text reaches HOL Light (the fingerprint in sweep.json hashes it too).
    Its needs/loadt already reach outside the corpus (--context-root), so a
    link adds no exposure, and linking one shared setup into many problem
    folders is a fair way to build a corpus. But such a corpus is not
    self-contained (copied elsewhere, it loses or changes its contexts), so
    it is said."""
    corpus = Path(corpus)
    notes = []
    hidden = hidden_problems(corpus)
    if hidden:
        notes.append(f"CORPUS: {_hidden_said(hidden)}: a folder whose name begins with '.' is never "
                     "read as a problem; rename it to check it")
    home = corpus.resolve()
    outside = []
    for p in problems:
        if p.setup_path.is_symlink():
            target = p.setup_path.resolve()
            if home not in target.parents:
                outside.append((p, target))
    if outside:
        p, target = outside[0]
        many = len(outside) > 1
        whose = f"{len(outside)} problems' setup.ml are symlinks" if many \
            else "1 problem's setup.ml is a symlink"
        contexts = "their contexts are" if many else "its context is"
        notes.append(f"CORPUS: {whose} out of the corpus (e.g. {p.setup_path} -> {target}); "
                     f"followed: {contexts} read from there, so the corpus is not self-contained "
                     "(copy the files in to make it so)")
    return tuple(notes)


def _read_problem_folder(folder: Path) -> tuple[Path, Path, str]:
    """Validate one problem folder; return (setup path, query path, category)."""
    if not PROBLEM_ID.fullmatch(folder.name):
        raise InputError(folder, f"problem id {folder.name!r} has characters outside [A-Za-z0-9_.+-]",
                         "rename the folder")
    setup, query = folder / "setup.ml", folder / "query.txt"
    for needed in (setup, query):
        if not needed.is_file():
            raise InputError(needed, f"problem {folder.name} is missing {needed.name}",
                             "retrieve the problem again, or remove its folder from the corpus")
    text = read_utf8(query, f"query of problem {folder.name}").strip()
    if not text:
        raise InputError(query, f"query of problem {folder.name} is empty",
                         "retrieve the problem again")
    # The bench's queries are HOL term quotations. An unquoted one reached
    # the prover as something other than the goal (FAIL "Too deep").
    if len(text) < 3 or not (text.startswith("`") and text.endswith("`")):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise InputError(query, f"query of problem {folder.name} is not a backquoted HOL term "
                         f"(it reads {shown!r})", "write the goal between backquotes, e.g. "
                         "`1 + 1 = 2`, or retrieve the problem again")
    return setup, query, _read_category(folder / "category.txt")


def _read_category(path: Path) -> str:
    if not path.exists():
        return DEFAULT_CATEGORY
    text = read_utf8(path, "category").strip()
    if not text or any(c.isspace() for c in text):
        raise InputError(path, f"category {text!r} is not a single word",
                         f"write one category name, or delete the file to use {DEFAULT_CATEGORY!r}")
    return text


def _answers_from_directory(directory: Path, ids: set[str]) -> dict[str, list[attempt_files.Answer]]:
    out: dict[str, list[attempt_files.Answer]] = {}
    for d in sorted(directory.iterdir()):
        if not d.is_dir() or d.name.startswith("."):
            continue
        if d.name not in ids:
            raise InputError(d, f"unknown problem id {d.name}",
                             "remove the folder, or check that the answers belong to this corpus")
        out[d.name] = attempt_files.from_folder(d)
    return out


def _answers_from_csv(path: Path, ids: set[str]) -> dict[str, list[attempt_files.Answer]]:
    records = _csv_records(path)
    if not records:
        raise InputError(path, "answers CSV is empty", "write a header line with problem_id and answer")
    (header_line, header), rows = records[0], records[1:]
    header = [name.strip() for name in header]
    missing = [c for c in ("problem_id", "answer") if c not in header]
    if missing:
        raise InputError(path, f"header on line {header_line} lacks column(s) {', '.join(missing)}",
                         "name the columns problem_id and answer")
    for col in ("problem_id", "answer"):
        if header.count(col) > 1:
            raise InputError(path, f"header on line {header_line} has column {col} twice",
                             "keep one of them")
    if "attempt" in header:    # several answers per problem
        return attempt_files.from_csv(path, header_line, header, rows, ids)
    id_col, answer_col = header.index("problem_id"), header.index("answer")

    out: dict[str, list[attempt_files.Answer]] = {}
    first_line: dict[str, int] = {}
    for line, record in rows:
        if len(record) != len(header):
            raise InputError(path, f"line {line} has {len(record)} fields but the header has {len(header)}",
                             "quote answers that contain commas, quotes or newlines")
        pid = record[id_col].strip()
        if pid not in ids:
            raise InputError(path, f"line {line}: unknown problem id {pid!r}",
                             "remove the row, or check that the answers belong to this corpus")
        if pid in first_line:
            raise InputError(path, f"problem id {pid} appears on line {first_line[pid]} and line {line}",
                             "keep one answer per problem")
        first_line[pid] = line
        out[pid] = [attempt_files.given_answer(0, record[answer_col].encode("utf-8"),
                                               f"{path} line {line}")]
    if not out:
        raise InputError(path, "answers CSV has a header but no answers", "add one row per problem")
    return out


def _csv_records(path: Path) -> list[tuple[int, list[str]]]:
    """Return (line the record starts on, fields) per record, skipping blank lines."""
    # Spreadsheet programs often start UTF-8 CSVs with a byte order mark.
    text = read_utf8(path, "answers CSV", "save the CSV as UTF-8").removeprefix("\ufeff")
    records = []
    # newline="" keeps line ends inside quoted answers as they are, which
    # the csv module requires.
    # strict: Python's reader otherwise takes an unclosed quote as a field
    # that runs to the end of the file, swallowing every later row.
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    old_limit = csv.field_size_limit(max(_CSV_FIELD_LIMIT, csv.field_size_limit()))
    try:
        before = 0
        while True:
            try:
                record = next(reader)
            except StopIteration:
                return records
            except csv.Error as exc:
                raise InputError(path, f"line {before + 1}: malformed CSV ({exc})",
                                 "write the file with a CSV library") from None
            start, before = before + 1, reader.line_num
            if record:
                records.append((start, record))
    finally:
        csv.field_size_limit(old_limit)


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
