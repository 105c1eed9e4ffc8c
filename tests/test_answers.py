"""An answer as a model gives it: wrapped in a markdown fence, it is checked
as s2n-bignum-bench's grader reads it, its last whole fenced block, while
the row keeps and hashes what was given. Every answer source (answer.txt,
answer_<k>.txt, answers.jsonl, an answers CSV of either width) unwraps the
same way; an answer without a whole fenced block is checked as given.
"""

from __future__ import annotations

import csv
import json

import pytest

from runner import answers
from runner.checks import attempts
from runner.corpus import load_corpus


FENCED = "Here is the proof:\n\n```ocaml\nREWRITE_TAC[ADD_SYM] THEN\nARITH_TAC\n```\nDone.\n"


@pytest.mark.parametrize("given, checked", [
    (FENCED, "REWRITE_TAC[ADD_SYM] THEN\nARITH_TAC\n"),
    ("```\nARITH_TAC\n```", "ARITH_TAC\n"),
    ("```hol\n  ARITH_TAC  \n\n```", "ARITH_TAC\n"),
    ("```ocaml\nALL_TAC\n```\nor better:\n```ocaml\nARITH_TAC\n```", "ARITH_TAC\n"),   # the last
    ("```ocaml\r\nARITH_TAC\r\n```\r\n", "ARITH_TAC\n"),      # read with universal newlines
    ("```ocaml\rARITH_TAC\r```", "ARITH_TAC\n"),
    ("```ocaml\n(* ;; *) ARITH_TAC\n```", "(* ;; *) ARITH_TAC\n"),
])
def test_a_fenced_answer_is_its_last_fenced_block_as_the_bench_reads_it(given, checked):
    assert answers.unwrap_fence(given.encode()) == checked.encode()


@pytest.mark.parametrize("given", [
    "ARITH_TAC", "```ARITH_TAC```", "```ocaml\nARITH_TAC", "ARITH_TAC\n```",
    "(* ``` *) ARITH_TAC", "```ocaml ARITH_TAC\n```"])
def test_an_answer_without_a_whole_fenced_block_is_checked_as_given(given):
    # The bench's grader unwraps nothing here either (its strip.sh, which drops
    # a last line with ```, is a tool for its own problem set, not the grader).
    assert answers.unwrap_fence(given.encode()) is None


def test_every_answer_source_unwraps_and_keeps_the_answer_as_given(tmp_path):
    corpus = tmp_path / "c"
    for pid in ("f.txt", "f.numbered", "f.jsonl", "f.plain"):
        (corpus / pid).mkdir(parents=True)
        (corpus / pid / "setup.ml").write_text("")
        (corpus / pid / "query.txt").write_text("`1 + 1 = 2`\n")
    (corpus / "f.txt" / "answer.txt").write_text(FENCED)
    (corpus / "f.numbered" / "answer_1.txt").write_text(FENCED)
    (corpus / "f.jsonl" / "answers.jsonl").write_text('"ARITH_TAC"\n' + json.dumps(FENCED) + "\n")
    (corpus / "f.plain" / "answer.txt").write_text("ARITH_TAC\n")
    inner = b"REWRITE_TAC[ADD_SYM] THEN\nARITH_TAC\n"

    by_id = {p.problem_id: p for p in load_corpus(corpus)}
    assert (by_id["f.txt"].answer, by_id["f.txt"].answer_given) == (inner, FENCED.encode())
    assert (by_id["f.numbered"].attempts[0].text, by_id["f.numbered"].attempts[0].given) == (
        inner, FENCED.encode())
    assert [(a.text, a.given) for a in by_id["f.jsonl"].attempts] == [
        (b"ARITH_TAC", None), (inner, FENCED.encode())]
    assert (by_id["f.plain"].answer, by_id["f.plain"].answer_given) == (b"ARITH_TAC\n", None)

    answers = tmp_path / "answers.csv"
    with open(answers, "w", newline="") as f:
        csv.writer(f).writerows([["problem_id", "answer"], ["f.plain", FENCED]])
    [plain] = [p for p in load_corpus(corpus, answers) if p.problem_id == "f.plain"]
    assert (plain.answer, plain.answer_given) == (inner, FENCED.encode())
    with open(answers, "w", newline="") as f:
        csv.writer(f).writerows([["problem_id", "attempt", "answer"], ["f.plain", "0", "ALL_TAC"],
                                 ["f.plain", "1", FENCED]])
    [plain] = [p for p in load_corpus(corpus, answers) if p.problem_id == "f.plain"]
    assert [(a.text, a.given) for a in plain.attempts] == [(b"ALL_TAC", None), (inner, FENCED.encode())]


def test_the_row_of_a_fenced_answer_says_it_was_unwrapped_and_hashes_what_was_given(tmp_path):
    import datetime as dt
    import hashlib

    from runner.prover import BackendInfo, CheckLimits, CheckResult
    from runner.verdicts import Outcome, Verdict
    from runner.checks.worker import result_row

    corpus = tmp_path / "c"
    (corpus / "f.jsonl").mkdir(parents=True)
    (corpus / "f.jsonl" / "setup.ml").write_text("")
    (corpus / "f.jsonl" / "query.txt").write_text("`1 + 1 = 2`\n")
    (corpus / "f.jsonl" / "answers.jsonl").write_text(json.dumps(FENCED) + '\n"ARITH_TAC"\n')
    [problem] = load_corpus(corpus)
    limits = CheckLimits(time_s=1.0, time_source="default", mem_bytes=2**30, expected_mem_bytes=0)
    fenced, bare = attempts.tasks_for(problem, limits)
    now = dt.datetime.now(dt.timezone.utc)
    result = CheckResult(Outcome(Verdict.OK, "proved"), 0.1, 0.2, None, "k", "exited 0")
    rows = [result_row(t, result, info=BackendInfo("hol-light", "b", "m"), worker="w", run_id="r",
                       started_at=now, finished_at=now) for t in (fenced, bare)]
    assert [r.answer_unwrapped for r in rows] == [True, False]
    assert rows[0].answer_sha256 == hashlib.sha256(FENCED.encode()).hexdigest()
    assert rows[1].answer_sha256 == hashlib.sha256(b"ARITH_TAC").hexdigest()
    assert fenced.problem.answer == b"REWRITE_TAC[ADD_SYM] THEN\nARITH_TAC\n"
