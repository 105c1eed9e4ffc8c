"""Answers edited, added and deleted between interrupted runs of a pass@k
sweep (issue 24): whatever was killed when, the sweep directory ends up with
the verdicts of the answers as they are, each checked once since it last
changed.

Each test is a seeded sequence of rounds. A round changes the answers
(several attempts per problem, as ``--answers FILE.csv`` or as the
``--answers DIR/<problem>/answer[_<k>].txt`` folders README's pass@k section
documents): an attempt's text edited (sometimes back to a text it had
before), an attempt added, an attempt deleted, all of a problem's attempts
deleted. Then one or two `proofbatch run` subprocesses resume the sweep, and
each is, at a random moment, SIGKILLed (the runner: the next run must take
the lock over from the dead holder), has one of its running checks SIGKILLed
(the stand-in's `isabelle build` process group, a child of the runner), both,
or neither. A run after a deletion is refused without --allow-missing-answers
and touches nothing. The last round puts every deleted attempt back and
runs to the end.

Two cases have a test of their own: an attempt deleted for good leaves
results.csv and verdicts.csv (``test_a_deleted_attempt_leaves_results_csv``),
and a problem without an answer that gets attempts from 1 on loses its
attempt 0 "no answer given" ERROR
(``test_a_problem_answered_from_attempt_1_keeps_no_unanswered_row``):
results.csv lists the checks the sweep holds now, not every key recorded.

Checks are cheap and real: the stand-in Isabelle (tests/samples/isabelle/
standin) runs a process per check, as Isabelle would, and its verdict
follows the answer's text (``verdict_of``). No HOL Light.

A killed check is an infrastructure death. The Isabelle backend does not
retry one yet (HOL Light's worker does, runner/checks/worker.check_retrying): it
records an ERROR whose reason says the build was killed ("exited -9 without a
result"). Such a row is the one check of its answer, so that answer's
verdict may be that ERROR instead of its own; nothing else may differ, and
there are no more such rows than kills that landed. Once Isabelle's deaths
are retried, a killed check leaves no row and runs again: the test holds
either way.
"""

from __future__ import annotations

import csv
import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from runner.checks.guard import DIED
from runner.results.lock import read_holder
from runner.checks.worker import KILLED

from ..helpers import ROOT, snapshot
from ..test_sweep_dir import ISABELLE_DEMO, STANDIN, raw_rows

SEED = int(os.environ.get("PROOFBATCH_ANSWER_FAULTS_SEED", "20261125"))
ROUNDS = 10
PROBLEMS = ("arith.add_comm", "arith.false_claim", "lib.double_add_use", "lib.double_even",
            "lists.append_length", "lists.rev_rev", "logic.drinker", "vc.bounded_sum")
# Texts an answer takes. A few, so edits return to earlier texts and some
# attempts repeat others (checked once, runner/checks/attempts.py: "  by simp" is
# "by simp" up to whitespace, its own hash all the same). Tags make more.
BASE = ("by simp", "  by simp", "by auto", "by (standin_fail)", "sorry", "oops")
# A check killed from outside, as its row says when it is not retried.
KILL_REASONS = re.compile(rf"exited -9 without a result|^{re.escape(KILLED)}|^{re.escape(DIED)}")

Key = tuple[str, int]


def verdict_of(text: str | None) -> str:
    """The stand-in's verdict of an answer (None: the problem has none)."""
    if text is None:
        return "ERROR"                   # no answer given for this problem
    if "standin_fail" in text:
        return "FAIL"
    if text.split("(*")[0].strip() in ("sorry", "oops"):
        return "CHEATING"                # screened before any check
    return "OK"


def sha(text: str | None) -> str:
    """The answer_sha256 a row of this answer carries ("" for none)."""
    return "" if text is None else hashlib.sha256(text.encode()).hexdigest()


def corpus(root: Path) -> Path:
    """The Isabelle demo's ordinary problems, without their answer.txt."""
    c = root / "corpus"
    shutil.copytree(ISABELLE_DEMO, c)
    for d in c.iterdir():
        if d.is_dir() and d.name != "library":
            if d.name in PROBLEMS:
                (d / "answer.txt").unlink()
            else:
                shutil.rmtree(d)
    toml = c / "isabelle.toml"
    toml.write_text(toml.read_text() + f'heap_store = "{root / "store"}"\n')
    return c


def write_answers(where: Path, layout: str, answers: dict[Key, str]) -> None:
    if layout == "csv":
        tmp = where.with_suffix(".tmp")
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["problem_id", "attempt", "answer"])
            w.writerows([pid, k, text] for (pid, k), text in sorted(answers.items()))
        tmp.replace(where)
        return
    shutil.rmtree(where, ignore_errors=True)
    for (pid, k), text in answers.items():
        (where / pid).mkdir(parents=True, exist_ok=True)
        (where / pid / ("answer.txt" if k == 0 else f"answer_{k}.txt")).write_bytes(text.encode())


def current(answers: dict[Key, str]) -> dict[Key, str | None]:
    """Every check the sweep holds now, with its answer: a problem with no
    answer is one check, attempt 0, ERROR 'no answer given'."""
    now: dict[Key, str | None] = dict(answers)
    for pid in PROBLEMS:
        if not any(p == pid for p, _ in answers):
            now[(pid, 0)] = None
    return now


def latest_hashes(out: Path) -> dict[Key, str]:
    """Per check, the hash of the last row recorded (by finishing time)."""
    latest: dict[Key, dict] = {}
    for r in raw_rows(out) if (out / "shards").is_dir() else ():
        key = (r["problem_id"], r["attempt"])
        if key not in latest or r["finished_at"] > latest[key]["finished_at"]:
            latest[key] = r
    return {k: r["answer_sha256"] or "" for k, r in latest.items()}


def checks_of(runner: subprocess.Popen) -> list[psutil.Process]:
    """The runner's running checks: stand-in `isabelle build` processes of a
    check session (not the parent heap's `build -b`)."""
    found = []
    try:
        children = psutil.Process(runner.pid).children(recursive=True)
    except psutil.Error:
        return []
    for child in children:
        try:
            argv = child.cmdline()
        except psutil.Error:
            continue
        if any(a.endswith("standin/bin/isabelle") for a in argv) and "build" in argv and "-b" not in argv:
            found.append(child)
    return found


class Sweep:
    """The sweep under test and what the test did to it."""

    def __init__(self, root: Path, layout: str, rng: random.Random):
        self.root, self.layout, self.rng = root, layout, rng
        self.corpus, self.out = corpus(root), root / "out"
        self.where = root / ("answers.csv" if layout == "csv" else "answers")
        self.answers: dict[Key, str] = {}
        self.deleted: dict[Key, str] = {}       # what a deleted attempt said
        self.given: dict[Key, set[str]] = {}    # every hash a check's answer had
        self.runs = self.runner_kills = self.check_kills = self.refusals = 0
        self.log: list[str] = []
        (root / "tmp").mkdir()
        self.env = {**os.environ, "STANDIN_HEAPS": str(root / "heaps"), "ISABELLE_HOME": str(STANDIN),
                    "TMPDIR": str(root / "tmp")}

    def why(self) -> str:
        return (f"seed {SEED} ({self.layout}; rerun with PROOFBATCH_ANSWER_FAULTS_SEED={SEED}): "
                f"{self.runs} runs, {self.runner_kills} runner kills and {self.check_kills} check kills "
                f"landed, {self.refusals} refusals; " + " | ".join(self.log[-12:]))

    # -- the answers --------------------------------------------------------------

    def text(self) -> str:
        base = self.rng.choice(BASE)
        return base if self.rng.random() < 0.5 else f"{base} (* v{self.rng.randrange(3)} *)"

    def put(self, key: Key, text: str) -> None:
        self.answers[key] = text
        self.deleted.pop(key, None)

    def change(self) -> None:
        """Two to six edits, additions or deletions."""
        for _ in range(self.rng.randint(2, 6)):
            op = self.rng.choices(("edit", "add", "delete", "delete problem"), (5, 2, 2, 0.7))[0]
            keys = sorted(self.answers)
            if op == "edit" and keys:
                key = self.rng.choice(keys)
                text = self.text()
                while text == self.answers[key]:
                    text = self.text()
                self.put(key, text)
            elif op == "add" or not keys:
                op = "add"
                if self.deleted and self.rng.random() < 0.4:
                    key = self.rng.choice(sorted(self.deleted))
                    text = self.deleted[key] if self.rng.random() < 0.5 else self.text()
                else:
                    # The next attempt, after a gap sometimes; attempt 0 of a
                    # problem with none (for a first attempt 1, see
                    # test_a_problem_answered_from_attempt_1_keeps_no_unanswered_row).
                    pid = self.rng.choice(PROBLEMS)
                    have = [k for p, k in self.answers if p == pid]
                    key = (pid, max(have) + 1 + self.rng.choice((0, 0, 1)) if have else 0)
                    text = self.text()
                self.put(key, text)
            elif len(keys) < 3:
                continue                # some answer stays: an --answers giving none is refused
            elif op == "delete":
                key = self.rng.choice(keys)
                self.deleted[key] = self.answers.pop(key)
            else:
                answered = sorted({p for p, _ in keys})
                if len(answered) < 2:
                    continue
                pid = self.rng.choice(answered)
                for key in [k for k in keys if k[0] == pid]:
                    self.deleted[key] = self.answers.pop(key)
            self.log.append(f"{op} {key if op != 'delete problem' else pid}")
        self.publish()

    def publish(self) -> None:
        write_answers(self.where, self.layout, self.answers)
        for key, text in current(self.answers).items():
            self.given.setdefault(key, set()).add(sha(text))

    # -- the runs -----------------------------------------------------------------------

    def gone(self) -> list[Key]:
        """Recorded checks whose answer is gone: a resume is refused without
        --allow-missing-answers."""
        now = {k: sha(t) for k, t in current(self.answers).items()}
        return sorted(k for k, h in latest_hashes(self.out).items() if h and not now.get(k))

    def argv(self, allow_missing: bool) -> list[str]:
        return ([sys.executable, "-m", "runner.cli", "run", str(self.corpus), "--out", str(self.out),
                 "--answers", str(self.where), "--workers", "2", "--default-timeout", "30"]
                + (["--allow-missing-answers"] if allow_missing else []))

    def refused(self) -> None:
        """A resume that would drop recorded answers is refused and touches nothing."""
        before = snapshot(self.out / "shards")
        done = subprocess.run(self.argv(False), cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=120)
        self.refusals += 1
        assert done.returncode == 2, (self.why(), done.stderr)
        assert "answers its rows checked are gone" in done.stderr, (self.why(), done.stderr)
        assert snapshot(self.out / "shards") == before, self.why()

    def run(self, kill: str) -> None:
        """One resume, killed as ``kill`` says: runner, check, check+runner or none."""
        allow = bool(self.gone())
        runner = subprocess.Popen(self.argv(allow), cwd=ROOT, env=self.env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.runs += 1
        deadline = time.monotonic() + self.rng.uniform(0.2, 1.3)
        if "check" in kill:
            # The first check the run starts, or one a moment later.
            while runner.poll() is None and not checks_of(runner):
                time.sleep(0.005)
            time.sleep(self.rng.choice((0.0, self.rng.uniform(0.0, 0.8))))
            while runner.poll() is None:
                victims = checks_of(runner)
                if victims:
                    try:        # the stand-in's group: its script and its "poly"
                        os.killpg(victims[0].pid, signal.SIGKILL)
                        self.check_kills += 1
                        self.log.append("check killed")
                        break
                    except ProcessLookupError:
                        pass
                time.sleep(0.005)
            deadline = time.monotonic() + self.rng.uniform(0.05, 1.0)
        if "runner" in kill:
            if kill == "runner" and self.rng.random() < 0.6:
                # While a check runs (else in start-up, scan, dispatch or merge).
                while runner.poll() is None and not checks_of(runner):
                    time.sleep(0.005)
                deadline = time.monotonic() + self.rng.uniform(0.0, 0.25)
            while runner.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            if runner.poll() is None:
                runner.send_signal(signal.SIGKILL)
                self.runner_kills += 1
                self.log.append("runner killed")
        try:
            _, err = runner.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            runner.kill()
            raise AssertionError(f"a run did not end in 180 s: {self.why()}")
        # A dead holder's lock is taken over: no run is refused as "in use".
        assert runner.returncode in (0, -signal.SIGKILL), (self.why(), err)
        assert runner.returncode == 0 or "runner killed" == self.log[-1], (self.why(), err)


@pytest.mark.parametrize("layout", ["csv", "folders"])
def test_answers_changing_between_killed_runs_end_as_the_answers_are(tmp_path, layout):
    """"Checked once since it last changed", precisely: for each check the
    sweep holds now (problem, attempt) with answer hash h ("" for a problem
    with no answer), take its rows in every shard (history included), in
    finishing order; the last one of another hash than h marks the last
    change (none: its first row). Exactly one row of h finishes after it. An
    answer edited from A to B and back to A before B was ever checked still
    has A's row: the rows never knew B, and A's verdict is A's. A check killed
    with its runner leaves no row, so it is checked once, after. Compaction
    keeps the first and last row of each (check, hash), so a duplicate shows."""
    rng = random.Random(f"{SEED}-{layout}")
    sweep = Sweep(tmp_path, layout, rng)
    for pid in PROBLEMS[:6]:                  # two problems start with no answer
        for k in range(rng.randint(1, 4)):
            sweep.answers[(pid, k)] = sweep.text()
    sweep.publish()
    round_ = 0
    # Rounds past ROUNDS (at most 8) only if fewer kills than wanted landed.
    while round_ < ROUNDS or ((sweep.runner_kills < 3 or sweep.check_kills < 2) and round_ < ROUNDS + 8):
        if round_:
            sweep.change()
        if sweep.gone():
            sweep.refused()
        for _ in range(rng.randint(1, 2)):
            if round_ < ROUNDS:
                kill = rng.choices(("runner", "check", "check+runner", "none"), (5, 3, 2, 2))[0]
            else:
                kill = "runner" if sweep.runner_kills < 3 else "check"
            sweep.run(kill)
        round_ += 1

    # The end: every deleted attempt back (as it was, or edited), run to the end.
    for key, text in sorted(sweep.deleted.items()):
        sweep.put(key, text if rng.random() < 0.5 else sweep.text())
    sweep.log.append("deleted put back")
    sweep.publish()
    sweep.run("none")
    why = sweep.why()
    now = current(sweep.answers)

    # Checked once since it last changed (the docstring), and no row of an
    # answer the check never had.
    rows: dict[Key, list[dict]] = {}
    for r in sorted(raw_rows(sweep.out), key=lambda r: r["finished_at"]):
        rows.setdefault((r["problem_id"], r["attempt"]), []).append(r)
    for key, text in now.items():
        h = sha(text)
        history = [r["answer_sha256"] or "" for r in rows.get(key, [])]
        last_change = max((i for i, x in enumerate(history) if x != h), default=-1)
        since = history[last_change + 1:]
        assert since == [h], (f"{key}: {len(since)} checks of its answer since it last changed "
                              f"(hashes in finishing order: {[x[:8] for x in history]}, now {h[:8]}); {why}")
    for key, checked in rows.items():
        assert {r["answer_sha256"] or "" for r in checked} <= sweep.given.get(key, set()), (key, why)

    # results.csv: the verdicts of the answers as they are, one line per check.
    with open(sweep.out / "results.csv", newline="") as f:
        results = {(r["problem_id"], int(r["attempt"])): r for r in csv.DictReader(f)}
    assert sorted(results) == sorted(now), why
    killed = []
    for key, text in now.items():
        got = results[key]
        if got["verdict"] == "ERROR" and KILL_REASONS.search(got["reason"]) and text is not None:
            if not got["dedup_of"]:
                killed.append(key)          # an unretried death of a check killed here
            continue
        assert got["verdict"] == verdict_of(text), (key, text, got["verdict"], got["reason"], why)
    assert len(killed) <= sweep.check_kills, (killed, why)
    # verdicts.csv: per problem, OK if an attempt is, else CHEATING if one
    # cheated, else its lowest attempt's verdict.
    want = {}
    for pid in PROBLEMS:
        attempts = sorted((k, r["verdict"]) for (p, k), r in results.items() if p == pid)
        verdicts = [v for _, v in attempts]
        want[pid] = "OK" if "OK" in verdicts else "CHEATING" if "CHEATING" in verdicts else verdicts[0]
    with open(sweep.out / "verdicts.csv", newline="") as f:
        assert {r["Problem"]: r["Verdict"] for r in csv.DictReader(f)} == want, why

    # Settled: another run checks nothing, and lets go of the sweep.
    again = subprocess.run(sweep.argv(False), cwd=ROOT, env=sweep.env, capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0, (again.stderr, why)
    assert "ran 0 checks now" in " ".join(again.stdout.split()), (again.stdout, why)
    assert read_holder(sweep.out) is None, why
    # The kills this was about landed (checked last: on code that checks no changed
    # answer again, few checks run to be killed).
    assert sweep.runner_kills >= 3 and sweep.check_kills >= 2, why


def test_a_deleted_attempt_leaves_results_csv(tmp_path):
    sweep = Sweep(tmp_path, "csv", random.Random(SEED))
    sweep.answers = {("arith.add_comm", 0): "by (standin_fail)", ("arith.add_comm", 1): "by simp"}
    sweep.publish()
    sweep.run("none")
    del sweep.answers[("arith.add_comm", 1)]
    sweep.publish()
    sweep.refused()
    sweep.run("none")
    with open(sweep.out / "results.csv", newline="") as f:
        results = {(r["problem_id"], int(r["attempt"])): r["verdict"] for r in csv.DictReader(f)}
    with open(sweep.out / "verdicts.csv", newline="") as f:
        verdicts = {r["Problem"]: r["Verdict"] for r in csv.DictReader(f)}
    assert verdicts["arith.add_comm"] == "FAIL", verdicts      # not the OK of the deleted attempt
    assert sorted(k for k in results if k[0] == "arith.add_comm") == [("arith.add_comm", 0)]


def test_a_problem_answered_from_attempt_1_keeps_no_unanswered_row(tmp_path):
    sweep = Sweep(tmp_path, "csv", random.Random(SEED))
    sweep.answers = {("arith.add_comm", 0): "by simp"}
    sweep.publish()
    sweep.run("none")
    sweep.answers[("lists.rev_rev", 1)] = "by (standin_fail)"
    sweep.publish()
    sweep.run("none")
    with open(sweep.out / "results.csv", newline="") as f:
        results = {(r["problem_id"], int(r["attempt"])): r["verdict"] for r in csv.DictReader(f)}
    with open(sweep.out / "verdicts.csv", newline="") as f:
        verdicts = {r["Problem"]: r["Verdict"] for r in csv.DictReader(f)}
    assert verdicts["lists.rev_rev"] == "FAIL", verdicts
    assert sorted(k for k in results if k[0] == "lists.rev_rev") == [("lists.rev_rev", 1)]
