"""Running many answers per problem, as LLM provers sample them for pass@k
(runner/answers.py reads them).

Each answer is an *attempt*, identified by (problem_id, attempt) in tasks,
result rows, shards and resume. All attempts of a problem are one
contiguous run of tasks, in attempt order, and one worker drains the run
(``problem_runs``), so it forks them all from the one loaded context, reuses
the verdict of an identical earlier answer (``dedup_of``) and, with
``--stop-on-first-ok``, skips the rest once one attempt is OK. A skipped
attempt is not a check, so it gets no result row and no verdict (the verdict
set stays closed); it is listed in ``OUT/skipped.csv`` and a resumed sweep
re-derives it from the recorded OK.

A recorded row settles its attempt only for the answer it checked
(``answer_sha256``) on the problem as it was (``problem_sha256``: its setup,
query and the files its setup loads, CheckTask.problem_sha256): an attempt
whose answer or problem changed since is checked again (``pending``);
``compare`` says which answers changed, which are gone, and which
problems changed.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..results.done import PROBLEM_HASH, Done, row_version, settles, version
from ..results.publish import publish
from ..answers import Answer
from ..corpus import Problem
from ..prover import CheckLimits, CheckResult
from .tasks import CheckTask
from ..verdicts import Outcome, Verdict

SKIPPED_FILE = "skipped.csv"


def answers_of(problem: Problem) -> list[Answer]:
    """A problem's attempts; a Problem built by hand has only ``answer``."""
    if problem.attempts:
        return list(problem.attempts)
    if problem.answer is None:
        return []
    return [Answer(0, problem.answer, problem.answer_source, problem.answer_given)]


def answer_sha256(problem: Problem) -> str:
    """The hash a row records of the answer it checked: of the answer as
    given (fenced or not), "" when there is none (as runner/checks/worker.py)."""
    if problem.answer is None:
        return ""
    return hashlib.sha256(problem.answer if problem.answer_given is None
                          else problem.answer_given).hexdigest()


def _answer_hash(t: CheckTask) -> str:
    return t.answer_sha256 if t.answer_sha256 is not None else answer_sha256(t.problem)


def task_hashes(tasks: Sequence[CheckTask]) -> tuple[list[tuple[str, int]], list[str]]:
    """The tasks' keys and what a row must have checked to settle each: the
    hash of its answer and of its problem (runner.results.done.version)."""
    return ([(t.problem.problem_id, t.attempt) for t in tasks],
            [version(_answer_hash(t), t.problem_sha256) for t in tasks])


def answer_hashes(tasks: Sequence[CheckTask]) -> tuple[list[tuple[str, int]], list[str]]:
    """The tasks' keys and the hashes of their answers alone."""
    return ([(t.problem.problem_id, t.attempt) for t in tasks], [_answer_hash(t) for t in tasks])


@dataclass
class AnswerChanges:
    """How this run's answers and problems differ from those the recorded rows checked."""

    changed: list[tuple[str, int]] = field(default_factory=list)   # another answer now: checked again
    gone: list[tuple[str, int]] = field(default_factory=list)      # recorded with an answer, none now
    # Problems recorded with the answer given now whose hash (setup, query,
    # loaded files) is not theirs now: checked again.
    problems: list[str] = field(default_factory=list)
    unhashed: int = 0       # rows of the answer given now from before rows hashed problems: they stand

    def notes(self) -> list[str]:
        """What a resume says of them, a line each."""
        out = []
        if self.changed:
            out.append(f"{len(self.changed)} answers changed since the last run: checking them again")
        if self.gone:
            out.append(f"{len(self.gone)} answers recorded before are gone (--allow-missing-answers): "
                       "checking those problems as given now")
        if self.problems:
            shown = ", ".join(self.problems[:3]) + (", ..." if len(self.problems) > 3 else "")
            out.append(f"{len(self.problems)} problems changed since the last run (their setup, query "
                       f"or a file their setup loads): checking them again ({shown})")
        if self.unhashed:
            out.append(f"{self.unhashed} recorded checks were written before rows recorded their "
                       "problem's hash: their verdicts stand, whatever their problem is now (a new "
                       "--out checks everything)")
        return out


def recheck_note(verdicts: Sequence[str], rechecks: int) -> str:
    """What `run --recheck` says it will do."""
    if rechecks:
        return (f"--recheck {','.join(verdicts)}: checking {rechecks} recorded checks again (their "
                "rows stay as history)")
    return (f"--recheck {','.join(verdicts)}: no recorded check of the selected problems has that "
            "verdict: none to check again")


def compare(tasks: Sequence[CheckTask], done, problem_ids: set[str]) -> AnswerChanges:
    """The recorded attempts of ``problem_ids`` whose answer changed, those
    whose answer is gone (no answer now, or no such attempt), and the
    problems that changed under an answer that did not. One join, in Arrow:
    a resume of a million rows makes no pass over them in Python."""
    result = AnswerChanges()
    table = getattr(done, "table", None)
    if table is None or table.num_rows == 0 or "answer_sha256" not in table.column_names:
        return result
    keys, hashes = answer_hashes(tasks)
    now = pa.table({"problem_id": pa.array([k[0] for k in keys], pa.string()),
                    "attempt": pa.array([k[1] for k in keys], pa.int32()),
                    "now": pa.array(hashes, pa.string()),
                    "problem_now": pa.array([t.problem_sha256 for t in tasks], pa.string())})
    hashed = PROBLEM_HASH in table.column_names
    recorded = table.select(["problem_id", "attempt", "answer_sha256", *([PROBLEM_HASH] if hashed else [])])
    recorded = recorded.filter(pc.is_in(recorded["problem_id"],
                                        value_set=pa.array(sorted(problem_ids), pa.string())))
    both = recorded.join(now, ["problem_id", "attempt"], join_type="left outer")
    was = pc.fill_null(both["answer_sha256"], "")
    now_hash = pc.fill_null(both["now"], "")
    differ = pc.not_equal(was, now_hash)
    gone = pc.and_(differ, pc.and_(pc.not_equal(was, ""), pc.equal(now_hash, "")))
    def keys_of(mask) -> list[tuple[str, int]]:
        rows = both.filter(mask).select(["problem_id", "attempt"]).to_pylist()
        return sorted((r["problem_id"], r["attempt"]) for r in rows)
    result.changed = keys_of(pc.and_(differ, pc.invert(gone)))
    result.gone = keys_of(gone)
    # Of the rows of the answer given now: their problem changed, or they
    # predate problem hashes (and stand).
    same = pc.and_(pc.invert(differ), pc.is_valid(both["now"]))
    problem_was = pc.fill_null(both[PROBLEM_HASH] if hashed else pa.nulls(both.num_rows, pa.string()), "")
    problem_now = pc.fill_null(both["problem_now"], "")
    moved = pc.and_(same, pc.and_(pc.and_(pc.not_equal(problem_was, ""), pc.not_equal(problem_now, "")),
                                  pc.not_equal(problem_was, problem_now)))
    result.problems = sorted(pc.unique(both.filter(moved)["problem_id"]).to_pylist())
    result.unhashed = pc.sum(pc.and_(same, pc.equal(problem_was, ""))).as_py() or 0
    return result


# -- planning ------------------------------------------------------------------

def same_text(a: bytes, b: bytes) -> bool:
    """Answers equal up to surrounding whitespace, which OCaml's lexer skips:
    "ARITH_TAC\\n" in answer.txt is the same answer as "ARITH_TAC" in JSON."""
    return a.strip() == b.strip()


def tasks_for(problem: Problem, limits: CheckLimits, *, stop_on_first_ok: bool = False,
              problem_sha256: str = "") -> list[CheckTask]:
    """One task per attempt, in attempt order. A later attempt whose text is
    the same as an earlier one's gets ``dedup_of`` = that earlier attempt.
    ``problem_sha256``: the hash of the problem's inputs (runner.checks.problem_hash)."""
    answers = answers_of(problem)
    if not answers:    # still one verdict: ERROR "no answer given"
        return [CheckTask(problem, limits, skip_if_solved=stop_on_first_ok,
                          problem_sha256=problem_sha256, answer_sha256="")]
    first: dict[bytes, int] = {}
    tasks = []
    for a in answers:
        original = first.setdefault(a.text.strip(), a.attempt)
        one = dataclasses.replace(problem, answer=a.text, answer_source=a.source,
                                  answer_given=a.given, attempts=())
        tasks.append(CheckTask(one, limits, attempt=a.attempt,
                               dedup_of=None if original == a.attempt else original,
                               skip_if_solved=stop_on_first_ok, problem_sha256=problem_sha256,
                               answer_sha256=answer_sha256(one)))
    return tasks


def contiguous(tasks: Sequence[CheckTask]) -> list[CheckTask]:
    """``tasks`` with each problem's attempts brought together, in attempt
    order, where the problem first appears. A plan that orders problems
    (runner/sweep.order, runner/planning/planner) keeps its problem order this way."""
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
    return CheckResult(Outcome(Verdict(row["verdict"]), row["reason"]), row["prove_secs"],
                       row["wall_secs"], None, row["image_key"], row["exit_status"])


def pending(tasks: Sequence[CheckTask], done) -> tuple[list[CheckTask], list[tuple[str, int]]]:
    """(tasks still to run, keys skipped) given the rows already recorded
    (``Done``, or a mapping of key -> row dict).

    A task whose problem already has an OK row is skipped if it asks to be
    (``--stop-on-first-ok``). A duplicate whose original was recorded by an
    earlier run carries that row's result, so it is not checked again.
    """
    if not isinstance(done, Done):
        done = Done.from_rows(done.values())
    # Membership and solved problems in Arrow compute: a million recorded
    # rows cost no Python pass; only the tasks themselves are walked. Only
    # rows of the answers as they are now count: a changed answer runs again.
    keys, hashes = task_hashes(tasks)
    done = unsuperseded(tasks, done).matching(keys, hashes)
    recorded = done.has(keys)
    solved = done.solved()
    hash_of = dict(zip(keys, hashes))
    originals = done.rows([(t.problem.problem_id, t.dedup_of) for t, seen in zip(tasks, recorded)
                           if not seen and t.dedup_of is not None])
    originals = {k: r for k, r in originals.items()
                 if k not in hash_of or settles(row_version(r), hash_of[k])}
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


def unsuperseded(tasks: Sequence[CheckTask], done: Done) -> Done:
    """``done`` less the rows that tasks asked to run again (``run
    --recheck``: CheckTask.recheck_after) check again."""
    return done.since({(t.problem.problem_id, t.attempt): t.recheck_after
                       for t in tasks if t.recheck_after is not None})


def mark_rechecks(tasks: Sequence[CheckTask], done: Done, verdicts: Sequence[str] | None,
                  problem_ids: set[str]) -> tuple[list[CheckTask], int]:
    """``tasks`` with those whose current row (of their answer and problem
    as they are now) has one of ``verdicts`` marked to run again, and how
    many; the rows stay as history."""
    if not verdicts:
        return list(tasks), 0
    keys, hashes = task_hashes(tasks)
    found = done.matching(keys, hashes).with_verdicts(verdicts, problem_ids)
    out = [dataclasses.replace(t, recheck_after=found[(t.problem.problem_id, t.attempt)])
           if (t.problem.problem_id, t.attempt) in found else t for t in tasks]
    return out, sum(1 for t in out if t.recheck_after is not None)


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
