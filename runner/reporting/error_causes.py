"""A sweep's ERRORs grouped by cause, for the last lines of its report.

Issue 46: a sweep whose 11 checks all failed because a file their setup
loads was never built said so only row by row, in the table; the report's
last lines now say "11 ERROR: setup could not load a file: PATH". Many
contexts can fail for one cause (every proof file reading an object file
not built yet), each naming its own file: those group under one cause,
naming the files.

A sweep can hold a million rows: the ERROR rows are counted per distinct
reason in Arrow, and only the distinct reasons become Python strings.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from ..checks.guard import BACKSTOP
from ..verdicts import Verdict

# OCaml's Sys_error for a file that is not there, as HOL Light prints it
# when a setup opens one (`Sys_error("/x/unopt/f.o: No such file or
# directory")`, or the toplevel's `Exception: Sys_error "..."`).
MISSING_FILE = re.compile(r'Sys_error\s*\(?\s*"(?P<path>[^"]*?): No such file or directory"')
# Rows whose reason runs this long are cut here: a cause is read in one line.
CAUSE_CHARS = 160
# Causes said one a line; the rest are summed in one more.
SHOWN = 5
# Files named per cause; the rest are counted.
FILES_SHOWN = 2


@dataclass(frozen=True)
class ErrorCause:
    cause: str
    count: int
    files: tuple[str, ...] = field(default_factory=tuple)     # missing files, in order met


def _cause(reason: str) -> tuple[str, str | None]:
    """(the cause of an ERROR, the missing file it names or None)."""
    if reason.startswith(BACKSTOP):
        return "starved past the wall-clock backstop every time it ran", None
    if found := MISSING_FILE.search(reason):
        where = "setup could not load a file" if reason.startswith("setup:") else "a missing file"
        return where, found["path"]
    first = reason.strip().splitlines()[0] if reason.strip() else "(no reason recorded)"
    return (first if len(first) <= CAUSE_CHARS else first[:CAUSE_CHARS - 3] + "..."), None


def error_causes(table: pa.Table) -> list[ErrorCause]:
    """The ERROR rows of ``table`` grouped by cause, the most frequent first
    (equal counts by cause)."""
    errors = table.filter(pc.equal(table["verdict"], Verdict.ERROR.value))
    if errors.num_rows == 0:
        return []
    per = errors.group_by("reason", use_threads=False).aggregate([([], "count_all")])
    counts: Counter = Counter()
    files: dict[str, dict[str, None]] = {}
    for reason, n in zip(per["reason"].to_pylist(), per["count_all"].to_pylist()):
        cause, path = _cause(reason or "")
        counts[cause] += n
        named = files.setdefault(cause, {})
        if path is not None:
            named[path] = None
    return [ErrorCause(cause, n, tuple(files[cause]))
            for cause, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]


def _files(files: tuple[str, ...]) -> str:
    if not files:
        return ""
    shown = ", ".join(files[:FILES_SHOWN])
    more = len(files) - FILES_SHOWN
    return f": {shown}" + (f" and {more} more file{'s' if more > 1 else ''}" if more > 0 else "")


def lines(causes: list[ErrorCause]) -> list[str]:
    """One line per cause, "11 ERROR: setup could not load a file: PATH",
    the most frequent SHOWN of them, and one line for the rest."""
    out = [f"{c.count} ERROR: {c.cause}{_files(c.files)}" for c in causes[:SHOWN]]
    if rest := causes[SHOWN:]:
        out.append(f"{sum(c.count for c in rest)} ERROR of {len(rest)} other causes "
                   "(the table of rows holds each reason)")
    return out
