"""Isabelle's console and server output, read into verdicts.

Every input here is a SAMPLE (tests/samples/isabelle/, see its README): the
message formats come from Isabelle's sources and System manual, but no
Isabelle produced these files, because none can be installed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.provers.isabelle import output as out
from runner.verdicts import Verdict

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "isabelle"
NONCE = "0123456789abcdef"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def session_of(text: str) -> str:
    return text.split()[1]   # "Running <session> ..."


@pytest.mark.parametrize("name, code, verdict, reason", [
    ("build_finished.txt", 0, Verdict.OK, "theory checked"),
    ("build_failed_proof.txt", 1, Verdict.FAIL, "Failed to finish proof"),
    ("build_syntax_error.txt", 1, Verdict.ERROR, "syntax: Outer syntax error"),
    ("build_undefined_fact.txt", 1, Verdict.FAIL, 'Undefined fact: "no_such_lemma_anywhere"'),
    ("build_timeout.txt", 1, Verdict.TIMEOUT, "build timeout"),
    ("build_cheating.txt", 1, Verdict.CHEATING, "Cheating requires quick_and_dirty mode!"),
    ("build_check_cheating.txt", 1, Verdict.CHEATING, "the proved statement of goal differs"),
    ("build_original_broken.txt", 1, Verdict.ERROR, "setup: the problem theory itself fails"),
    ("build_out_of_store.txt", 1, Verdict.MEMOUT, "Isabelle ran out of memory"),
])
def test_build_samples_map_to_verdicts(name, code, verdict, reason):
    text = sample(name)
    report = out.parse_build(text, session_of(text))
    outcome = out.classify_build(report, nonce=NONCE, original_file="Proofbatch_Original.thy",
                                 exit_code=code)
    assert outcome.verdict == verdict and reason in outcome.reason, outcome


def test_finished_line_gives_the_session_time():
    text = sample("build_finished.txt")
    report = out.parse_build(text, session_of(text))
    assert report.finished and not report.failed and report.elapsed_s == 4.0
    assert out.hms_seconds("1:02:03") == 3723.0


def test_error_message_lines_are_joined_and_located():
    text = sample("build_syntax_error.txt")
    report = out.parse_build(text, session_of(text))
    assert report.failed and not report.finished
    assert report.errors == ['Outer syntax error (line 8 of "/tmp/proofbatch-x/checks/2/Goal.thy"): '
                             'command expected, but end-of-input (line 8 of '
                             '"/tmp/proofbatch-x/checks/2/Goal.thy") was found']
    assert report.where == [("<malformed>", 7, "/tmp/proofbatch-x/checks/2/Goal.thy")]


def test_another_sessions_finished_line_is_not_ours():
    text = sample("build_finished.txt")
    report = out.parse_build(text, "Proofbatch_Check_4242_99")
    outcome = out.classify_build(report, nonce=NONCE, original_file="Proofbatch_Original.thy",
                                 exit_code=0)
    assert outcome.verdict == Verdict.ERROR


def test_an_answer_cannot_forge_the_checks_verdict_without_the_nonce():
    """The sample's CHEATING message carries nonce 0123...; a check run with
    another nonce reads it as an ordinary error, never as its own verdict."""
    text = sample("build_check_cheating.txt")
    report = out.parse_build(text, session_of(text))
    outcome = out.classify_build(report, nonce="fedcba9876543210",
                                 original_file="Proofbatch_Original.thy", exit_code=1)
    assert outcome.verdict == Verdict.FAIL and "PROOFBATCH-0123456789abcdef" in outcome.reason


def test_forged_finished_line_inside_an_error_does_not_make_ok():
    text = sample("build_failed_proof.txt").replace(
        "***  1. False", "*** Finished Proofbatch_Check_4242_1 (0:00:01 elapsed time)")
    report = out.parse_build(text, "Proofbatch_Check_4242_1")
    assert not report.finished
    assert out.classify_build(report, nonce=NONCE, original_file="Proofbatch_Original.thy",
                              exit_code=1).verdict == Verdict.FAIL


def test_nonzero_exit_without_messages_is_an_error():
    report = out.parse_build("", "S")
    outcome = out.classify_build(report, nonce=NONCE, original_file="O.thy", exit_code=2)
    assert outcome.verdict == Verdict.ERROR and "exited 2" in outcome.reason


@pytest.mark.parametrize("name, verdict, reason", [
    ("server_use_theories_ok.txt", Verdict.OK, "theory checked"),
    ("server_use_theories_failed.txt", Verdict.FAIL, "Undefined fact"),
])
def test_server_use_theories_samples(name, verdict, reason):
    reply = out.parse_server_line(sample(name))
    assert reply.name == "FINISHED"
    outcome = out.classify_use_theories(reply.value, theory="Proofbatch_Check", nonce=NONCE)
    assert outcome.verdict == verdict and reason in outcome.reason


def test_server_canceled_node_is_a_timeout():
    value = json.loads(sample("server_use_theories_failed.txt").split(" ", 1)[1])
    value["errors"] = []
    value["nodes"][0]["theory_name"] = "Draft.Proofbatch_Check"
    value["nodes"][0]["status"]["canceled"] = True
    outcome = out.classify_use_theories(value, theory="Proofbatch_Check", nonce=NONCE)
    assert outcome.verdict == Verdict.TIMEOUT
