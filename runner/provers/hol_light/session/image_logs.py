"""What a HOL Light image's log says: why a context did not load (its
first error, else how its process ended, with its last meaningful output),
and a check's log kept beside the sweep's results, truncated."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ....checks.guard import signal_name
from ....corpus import Problem
from ....results.publish import publish


def failure_reason(error: str | None, status: str, last: str | None) -> str:
    """Why an image did not load: killed by a signal, named as the OS names
    it; else the first error its toplevel printed; else how it exited. The
    last meaningful output follows when no error line says more."""
    tail = f"; last output: {last}" if last else ""
    kind, _, value = status.partition(" ")
    if kind == "signal":
        return f"the context's process was killed by {signal_name(status)} while it loaded{tail}"
    if error:
        return error
    if kind == "exit" and value != "3":       # 3: the driver's own "did not load"
        return f"the context's process exited with status {value} while it loaded{tail}"
    return f"the context did not load{tail}"


# What a toplevel prints that says nothing: prompts, blank lines, the
# outcome of a phrase of type unit.
_NOISE = re.compile(r"^[#\s]*(- : unit = \(\))?\s*$")
LAST_OUTPUT_CHARS = 240


def last_output(log: Path) -> str | None:
    """The last meaningful line(s) of a log, on one line: as many of the
    last lines as fit in LAST_OUTPUT_CHARS, the last one cut to fit."""
    try:
        data, _ = tail_bytes(log, 16384)
    except OSError:
        return None
    lines = [line.strip().lstrip("# ").strip() for line in data.decode("utf-8", "replace").splitlines()
             if not _NOISE.match(line)]
    if not lines:
        return None
    text = lines.pop()
    if len(text) > LAST_OUTPUT_CHARS:
        return text[:LAST_OUTPUT_CHARS - 3] + "..."
    while lines and len(lines[-1]) + 3 + len(text) <= LAST_OUTPUT_CHARS:
        text = f"{lines.pop()} | {text}"
    return text


def tail_bytes(path: Path, keep: int) -> tuple[bytes, int]:
    """The last ``keep`` bytes of a file, and how many came before them."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - keep))
        return f.read(), max(0, size - keep)


def keep_log(log_dir: Path, keep: int, problem: Problem, log: Path) -> None:
    """The check's own output, truncated to ``keep`` bytes, kept as
    ``<problem-id>.log``; never parsed."""
    if not log.exists():
        return
    with open(log, "rb") as f:
        data = f.read(keep + 1)
    if len(data) > keep:
        data = data[:keep] + f"\n[proofbatch: output truncated at {keep} bytes]\n".encode()
    target = Path(log_dir) / f"{problem.problem_id}.log"
    target.parent.mkdir(parents=True, exist_ok=True)
    publish(target, lambda tmp: tmp.write_bytes(data))


_ERROR_LINE = re.compile(r"^(Exception:|Error:|Parse error:|.*Error: |Cannot find file)")
# A file a context loads that the driver refused or that did not load
# (hol_light_driver.ml, checked_load), as the toplevel prints its Failure
# (a long one on lines of its own: "Exception:", "Failure", then the string).
_LOAD_FAILED = re.compile(r'Failure\s+"proofbatch: load failed: (?P<why>(?:[^"\\]|\\.)*)"')


def log_reason(log: Path) -> str | None:
    """The first error a toplevel printed while loading, if any: a load the
    driver refused or that failed first (the innermost, naming its file and
    its first error), else the first error line."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if m := _LOAD_FAILED.search(text):
        return re.sub(r'\\(.)', r"\1", m["why"])
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _ERROR_LINE.match(line.lstrip("# ")):
            follow = _continued(lines[i + 1:]) if line.rstrip().endswith(":") else ""
            return f"{line.lstrip('# ').strip()} {follow}".strip()
    return None


# The toplevel prints an exception too long for its margin on lines of its
# own, ending in "." ("Exception:", "Sys_error", "\"/x/f.o: No such file or
# directory\"."): read up to that many lines, so the reason keeps the file.
CONTINUED_LINES = 4


def _continued(lines: list[str]) -> str:
    """The lines that continue an error line ending in ":", joined: up to
    the one ending in "." or a blank line, CONTINUED_LINES at most."""
    out = []
    for line in lines[:CONTINUED_LINES]:
        if not line.strip():
            break
        out.append(line.strip())
        if line.rstrip().endswith("."):
            break
    return " ".join(out)
