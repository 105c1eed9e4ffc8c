"""Input that is not bad command-line input, but was accepted without a word
or with a word that misled (issue 24): answers that cannot be checked at all
(decided in Python, as the ERROR reason of their row), and what a sweep says
once before it starts (hidden problem folders skipped, setup.ml symlinks
followed out of the corpus, a --mem-limit above this machine's RAM).

None of these boots HOL Light: sweeps are only prepared, against a checkout
that refuses to start. The refusals at the command line are in
tests/cli/test_bad_inputs.py."""

from __future__ import annotations

import json
from collections import namedtuple
from pathlib import Path

import pytest

from runner import answers, prover_registry as provers
from runner.corpus import load_corpus
from runner.errors import InputError
from runner.planning.sweep_config import SweepConfig
from runner.sweep import prepare
from runner.maps.timeouts import TimeoutPolicy, read_map

from .helpers import ADD, WORD, make_problem

EMPTY = "answer is empty (whitespace and comments only); write one OCaml expression of type tactic"


@pytest.fixture
def hol(tmp_path) -> Path:
    """A HOL Light checkout as far as validation can tell; it fails if started."""
    checkout = tmp_path / "hol-light"
    checkout.mkdir()
    (checkout / "hol.sh").write_text("#!/bin/sh\ncat > /dev/null\nexit 1\n")
    (checkout / "hol.sh").chmod(0o755)
    return checkout


@pytest.fixture
def corpus(tmp_path) -> Path:
    root = tmp_path / "corpus"
    make_problem(root, WORD)
    make_problem(root, ADD, query="`1 + 1 = 2`\n", answer="ARITH_TAC\n")
    return root


def prepared(corpus: Path, hol: Path, tmp_path: Path, **settings):
    return prepare(SweepConfig(corpus=corpus, out=tmp_path / "out", hol_light=hol, sandbox="none",
                               **settings))


# -- answers that cannot be checked: ERROR with the reason, before any prover --

@pytest.mark.parametrize("text", [b"", b"  \n\t\n", b"(* TODO *)\n", b"(* (* nested *) *)\n",
                                  b'(* a string "*)" inside *)', b"```ocaml\n\n```\n"])
def test_an_answer_of_whitespace_or_comments_is_empty(text):
    """HOL Light's toplevel said `illegal begin of top_phrase`: HOL Light's
    descriptor refuses it, in OCaml's terms."""
    checked = answers.given_answer(0, text, "answer.txt").text      # a fence unwrapped
    assert provers.answer_refusal("hol-light", checked) == f"{EMPTY}, e.g. ARITH_TAC"


@pytest.mark.parametrize("text", [b"", b"  \n\t\n"])
def test_a_blank_answer_is_empty_for_every_prover(text):
    """Comments are each prover's own; blanks are empty in any language."""
    assert answers.refusal(text).startswith("answer is empty (whitespace only)")
    assert provers.answer_refusal("isabelle", text).startswith("answer is empty (whitespace only)")
    # An OCaml comment is not Isabelle's to refuse here: its own parser names it.
    assert provers.answer_refusal("isabelle", b"(* TODO *)") is None


@pytest.mark.parametrize("text", [b"ARITH_TAC", b"(* first *) ARITH_TAC (* then *)",
                                  b'(* "*)" *) REFL_TAC', b"(* never closed", b"\xc2\xa0"])
def test_an_answer_with_code_is_left_to_the_prover(text):
    """An unclosed comment, or a no-break space, is the prover's to name."""
    assert answers.refusal(text) is None
    assert provers.answer_refusal("hol-light", text) is None


def test_an_answer_with_a_nul_byte_names_it():
    reason = answers.refusal(b"CONJ_TAC THEN\n ARITH\0_TAC")
    assert reason.startswith("answer holds a NUL byte (at offset 20, line 2), which source text "
                             "cannot contain; remove it")
    # A NUL inside a comment is still one: the toplevel's lexer stops there.
    assert answers.refusal(b"(* \0 *)").startswith("answer holds a NUL byte")


def test_the_worker_records_an_empty_answer_as_error_without_a_check(corpus):
    """The row's reason is the refusal's; the session is never asked."""
    from runner.checks import worker
    from runner.prover import CheckLimits
    from runner.checks.tasks import CheckTask

    [problem] = [p for p in load_corpus(corpus) if p.problem_id == ADD]
    task = CheckTask(problem.__class__(**{**problem.__dict__, "answer": b"(* nothing yet *)\n"}),
                     CheckLimits(time_s=10, time_source="default", mem_bytes=2**31,
                                 expected_mem_bytes=2**29))
    refused = worker.unreadable(task, "hol-light")
    assert refused is not None and refused.outcome.verdict.value == "ERROR"
    assert refused.outcome.reason.startswith(EMPTY)


# -- said once, before the sweep starts ----------------------------------------

def test_a_hidden_problem_folder_is_said_to_be_skipped_once(corpus, hol, tmp_path):
    make_problem(corpus, ".p2")
    make_problem(corpus, ".p3")
    (corpus / ".git").mkdir()
    sweep = prepared(corpus, hol, tmp_path)
    assert [p.problem_id for p in sweep.problems] == [ADD, WORD]
    said = [w for w in sweep.warnings if "hidden" in w]
    assert said == ["CORPUS: 2 hidden folders that look like problems are skipped (.p2, .p3): a "
                    "folder whose name begins with '.' is never read as a problem; rename it to "
                    "check it"]


def test_a_setup_symlinked_out_of_the_corpus_is_followed_and_said(corpus, hol, tmp_path):
    shared = tmp_path / "shared" / "setup.ml"
    shared.parent.mkdir()
    shared.write_text("let shared_context = 1;;\n")
    for pid in (ADD, WORD):
        (corpus / pid / "setup.ml").unlink()
        (corpus / pid / "setup.ml").symlink_to(shared)
    # A link inside the corpus is not said.
    make_problem(corpus, "inner.link")
    (corpus / "inner.link" / "setup.ml").unlink()
    (corpus / "inner.link" / "setup.ml").symlink_to(corpus / WORD / "query.txt")
    sweep = prepared(corpus, hol, tmp_path)
    said = [w for w in sweep.warnings if "symlink" in w]
    assert said == [f"CORPUS: 2 problems' setup.ml are symlinks out of the corpus (e.g. "
                    f"{corpus / ADD / 'setup.ml'} -> {shared}); followed: their contexts are read "
                    "from there, so the corpus is not self-contained (copy the files in to make it so)"]


Memory = namedtuple("Memory", "total")


def test_a_memory_limit_above_this_machines_ram_is_warned_about(corpus, hol, tmp_path, monkeypatch):
    """10T on a 23 GiB machine was taken without a word."""
    import psutil

    from runner.settings import beyond_ram

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Memory(23 * 2**30))
    sweep = prepared(corpus, hol, tmp_path, mem_limit=10 * 2**40)
    said = [w for w in sweep.warnings if "--mem-limit" in w]
    assert said == ["--mem-limit 10 TiB is more than this machine's 23 GiB of RAM: a check run here "
                    "would swap or meet the OOM killer long before its limit. Kept (a warning, not a "
                    "refusal: cluster nodes may have more memory than this one); for checks on this "
                    "machine pass at most --mem-limit 18G"]
    assert beyond_ram(8 * 2**30) is None
    # The default is a share of this machine's memory: nothing to say.
    assert not [w for w in prepared(corpus, hol, tmp_path).warnings if "--mem-limit" in w]


# -- time limits and maps, at the Python level ---------------------------------

def test_a_default_timeout_below_a_millisecond_is_refused():
    with pytest.raises(InputError, match="below a millisecond"):
        TimeoutPolicy(by_problem={}, by_category=None, default=0.0002)
    TimeoutPolicy(by_problem={}, by_category=None, default=0.001)


@pytest.mark.parametrize("prove_secs", [-0.5, "NaN", "Infinity"])
def test_a_map_with_a_prove_secs_that_is_no_time_is_refused(tmp_path, prove_secs):
    path = tmp_path / "map.json"
    value = prove_secs if isinstance(prove_secs, str) else json.dumps(prove_secs)
    path.write_text(f'[{{"problem_id": "{ADD}", "prove_secs": {value}, "timeout_sec": 60}}]')
    with pytest.raises(InputError) as refused:
        read_map(path)
    assert refused.value.where == str(path)
    assert refused.value.problem.startswith(f"entry 0 ({ADD}): prove_secs ")
    assert refused.value.problem.endswith("is not a measured time (negative or not finite)")
    path.write_text(f'[{{"problem_id": "{ADD}", "prove_secs": 0, "timeout_sec": 60}}]')
    assert read_map(path)[ADD].prove_secs == 0.0


# -- answer files that are not files --------------------------------------------

def test_an_answer_txt_that_is_a_broken_symlink_is_named(corpus):
    answer = corpus / ADD / "answer.txt"
    answer.unlink()
    answer.symlink_to(corpus / "gone.txt")
    with pytest.raises(InputError) as refused:
        load_corpus(corpus)
    assert refused.value.where == str(answer)
    assert refused.value.problem == (f"is a symlink to {corpus / 'gone.txt'}, which does not exist, "
                                     "so it gives no answer")


def test_a_numbered_answer_that_is_a_folder_is_named(corpus):
    (corpus / ADD / "answer_1.txt").mkdir()
    with pytest.raises(InputError, match="is a folder, not a file"):
        load_corpus(corpus)
