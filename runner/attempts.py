"""Many answers per problem, as LLM provers sample them for pass@k.

Each answer is an *attempt*, identified by (problem_id, attempt) in tasks,
result rows, shards and resume. A problem folder (the corpus's own, or
``--answers DIR/<problem-id>``) gives its attempts in one of two forms::

    answer.txt        attempt 0
    answer_<k>.txt    attempt k (a decimal number without leading zeros)

or::

    answers.jsonl     one JSON string per non-blank line: attempts 0, 1, 2, ...

and ``--answers FILE.csv`` may have an ``attempt`` column next to
``problem_id`` and ``answer``. Loading lives here; ``runner.corpus`` calls it.
Every answer, from any of these, is unwrapped here from its markdown fence
as s2n-bignum-bench unwraps it (``given_answer``); its row says so.

Running: all attempts of a problem are one contiguous run of tasks, in
attempt order, and one worker drains the run (``problem_runs``), so it forks
them all from the one loaded context, reuses the verdict of an identical
earlier answer (``dedup_of``) and, with ``--stop-on-first-ok``, skips the
rest once one attempt is OK. A skipped attempt is not a check, so it gets no
result row and no verdict (the verdict set stays closed); it is listed in
``OUT/skipped.csv`` and a resumed sweep re-derives it from the recorded OK.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from .errors import InputError
from .verdicts import Outcome, Verdict

if TYPE_CHECKING:
    import pyarrow as pa

    from .corpus import Problem
    from .prover import CheckLimits, CheckResult
    from .worker import CheckTask

ANSWER_FILE = "answer.txt"
JSONL_FILE = "answers.jsonl"
SKIPPED_FILE = "skipped.csv"
_NUMBERED = re.compile(r"answer_(.*)\.txt")
_ATTEMPT = re.compile(r"0|[1-9][0-9]*")
# The result rows store attempts as Arrow int32 (runner/results.py).
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


def _attempt_number(text: str, where, fix: str) -> int:
    text = text.strip()
    if not _ATTEMPT.fullmatch(text) or int(text) > MAX_ATTEMPT:
        raise InputError(where, f"attempt {text!r} is not a whole number from 0 to {MAX_ATTEMPT} "
                         "(without leading zeros)", fix)
    return int(text)


# -- loading -------------------------------------------------------------------

def from_folder(folder: Path) -> list[Answer]:
    """The attempts in one problem folder, by attempt; [] when it has none."""
    numbered = sorted(p for p in folder.iterdir() if p.is_file() and _NUMBERED.fullmatch(p.name))
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


def from_jsonl(path: Path) -> list[Answer]:
    """``answers.jsonl``: attempt k is the k-th non-blank line, a JSON string."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(path, f"line {line} is not valid UTF-8 ({exc.reason})",
                         "save the file as UTF-8") from None
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


def answers_of(problem: Problem) -> list[Answer]:
    """A problem's attempts; a Problem built by hand has only ``answer``."""
    if problem.attempts:
        return list(problem.attempts)
    if problem.answer is None:
        return []
    return [Answer(0, problem.answer, problem.answer_source, problem.answer_given)]


# -- planning ------------------------------------------------------------------

def same_text(a: bytes, b: bytes) -> bool:
    """Answers equal up to surrounding whitespace, which OCaml's lexer skips:
    "ARITH_TAC\\n" in answer.txt is the same answer as "ARITH_TAC" in JSON."""
    return a.strip() == b.strip()


def tasks_for(problem: Problem, limits: CheckLimits, *, stop_on_first_ok: bool = False) -> list[CheckTask]:
    """One task per attempt, in attempt order. A later attempt whose text is
    the same as an earlier one's gets ``dedup_of`` = that earlier attempt."""
    from .worker import CheckTask

    answers = answers_of(problem)
    if not answers:    # still one verdict: ERROR "no answer given"
        return [CheckTask(problem, limits, skip_if_solved=stop_on_first_ok)]
    first: dict[bytes, int] = {}
    tasks = []
    for a in answers:
        original = first.setdefault(a.text.strip(), a.attempt)
        one = dataclasses.replace(problem, answer=a.text, answer_source=a.source,
                                  answer_given=a.given, attempts=())
        tasks.append(CheckTask(one, limits, attempt=a.attempt,
                               dedup_of=None if original == a.attempt else original,
                               skip_if_solved=stop_on_first_ok))
    return tasks


def contiguous(tasks: Sequence[CheckTask]) -> list[CheckTask]:
    """``tasks`` with each problem's attempts brought together, in attempt
    order, where the problem first appears. A plan that orders problems
    (runner/sweep.order, runner/planner) keeps its problem order this way."""
    runs: dict[str, list[CheckTask]] = {}
    for t in tasks:
        runs.setdefault(t.problem.problem_id, []).append(t)
    return [t for run in runs.values() for t in sorted(run, key=lambda t: t.attempt)]


def problem_runs(tasks: Sequence[CheckTask]) -> list[list[CheckTask]]:
    """The consecutive tasks of one problem, as units a worker drains whole."""
    runs: list[list[CheckTask]] = []
    for t in tasks:
        if runs and runs[-1][0].problem.problem_id == t.problem.problem_id:
            runs[-1].append(t)
        else:
            runs.append([t])
    return runs


def _result_of(row: dict) -> CheckResult:
    from .prover import CheckResult

    return CheckResult(Outcome(Verdict(row["verdict"]), row["reason"]), row["prove_secs"],
                       row["wall_secs"], None, row["image_key"], row["exit_status"])


def pending(tasks: Sequence[CheckTask], done) -> tuple[list[CheckTask], list[tuple[str, int]]]:
    """(tasks still to run, keys skipped) given the rows already recorded
    (``shards.Done``, or a mapping of key -> row dict).

    A task whose problem already has an OK row is skipped if it asks to be
    (``--stop-on-first-ok``). A duplicate whose original was recorded by an
    earlier run carries that row's result, so it is not checked again.
    """
    from .shards import Done

    if not isinstance(done, Done):
        done = Done.from_rows(done.values())
    # Membership and solved problems in Arrow compute: a million recorded
    # rows cost no Python pass; only the tasks themselves are walked.
    keys = [(t.problem.problem_id, t.attempt) for t in tasks]
    recorded = done.has(keys)
    solved = done.solved()
    originals = done.rows([(t.problem.problem_id, t.dedup_of) for t, seen in zip(tasks, recorded)
                           if not seen and t.dedup_of is not None])
    todo, skipped = [], []
    for t, key, seen in zip(tasks, keys, recorded):
        if seen:
            continue
        if t.skip_if_solved and key[0] in solved:
            skipped.append(key)
            continue
        original = originals.get((key[0], t.dedup_of)) if t.dedup_of is not None else None
        todo.append(dataclasses.replace(t, reuse=_result_of(original)) if original else t)
    return todo, skipped


class EarlyStops:
    """The attempts early stop settles without a check, counted as rows come
    in (for progress): once a problem that stops early has an OK row, its
    attempts not yet recorded will be skipped."""

    def __init__(self, left: dict[str, int]):
        self._left = {pid: n for pid, n in left.items() if n > 0}
        self._lock = threading.Lock()     # local workers report from their threads

    @classmethod
    def of(cls, tasks: Sequence[CheckTask]) -> EarlyStops:
        """Over ``tasks`` still to run (``pending``'s first result)."""
        left: dict[str, int] = {}
        for t in tasks:
            if t.skip_if_solved:
                left[t.problem.problem_id] = left.get(t.problem.problem_id, 0) + 1
        return cls(left)

    def row(self, problem_id: str, verdict: str) -> int:
        """Take one recorded row; returns how many attempts it settles besides
        its own: all of the problem's unrecorded attempts when it is OK."""
        with self._lock:
            if problem_id not in self._left:
                return 0
            self._left[problem_id] -= 1
            if verdict == Verdict.OK.value:
                return max(0, self._left.pop(problem_id))
            return 0


class Drain:
    """What one worker remembers of the problem whose attempts it is draining:
    the results of its checks and whether an attempt was OK."""

    def __init__(self):
        self._problem: str | None = None
        self._results: dict[int, CheckResult] = {}
        self._solved = False

    def _on(self, task: CheckTask) -> None:
        if task.problem.problem_id != self._problem:
            self._problem, self._results, self._solved = task.problem.problem_id, {}, False

    def skips(self, task: CheckTask) -> bool:
        """True when early stop applies: an earlier attempt here was OK."""
        self._on(task)
        return task.skip_if_solved and self._solved

    def reused(self, task: CheckTask) -> CheckResult | None:
        """The result of the identical earlier attempt, if known; no check runs.

        None when this worker did not see that attempt (another executor split
        the run): then the duplicate is checked like any attempt."""
        from .prover import CheckResult

        self._on(task)
        if task.dedup_of is None:
            return None
        original = self._results.get(task.dedup_of) or task.reuse
        if original is None:
            return None
        return CheckResult(original.outcome, None, 0.0, None, original.image_key,
                           f"deduplicated: the check of attempt {task.dedup_of}")

    def remember(self, task: CheckTask, result: CheckResult) -> None:
        self._on(task)
        self._results[task.attempt] = result
        self._solved = self._solved or result.outcome.verdict is Verdict.OK


# -- after a sweep ---------------------------------------------------------------

def record_skipped(out: Path, tasks: Sequence[CheckTask], table: pa.Table) -> int:
    """Publish OUT/skipped.csv (problem_id, attempt, solved_by): the planned
    attempts that early stop skipped. Removes a stale one when there are none.
    Returns how many there are."""
    import pyarrow.compute as pc

    from .shards import Done, publish

    # In Arrow compute: the merged table may hold a million rows.
    keys = [(t.problem.problem_id, t.attempt) for t in tasks if t.skip_if_solved]
    ok = table.filter(pc.equal(table["verdict"], Verdict.OK.value))
    first_ok = ok.group_by("problem_id").aggregate([("attempt", "min")]) if keys else ok
    solved_by = dict(zip(first_ok["problem_id"].to_pylist(),
                         first_ok["attempt_min"].to_pylist())) if keys else {}
    recorded = Done(table).has(keys)
    skipped = sorted(k for k, seen in zip(keys, recorded) if not seen and k[0] in solved_by)
    path = Path(out) / SKIPPED_FILE
    if not skipped:
        path.unlink(missing_ok=True)
        return 0

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(["problem_id", "attempt", "solved_by"])
            w.writerows([pid, k, solved_by[pid]] for pid, k in skipped)
    publish(path, write)
    return len(skipped)


def read_skipped(out: Path) -> list[tuple[str, int]]:
    """The (problem_id, attempt) keys listed in OUT/skipped.csv, if any."""
    path = Path(out) / SKIPPED_FILE
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as fh:
        return [(r["problem_id"], int(r["attempt"])) for r in csv.DictReader(fh)]
