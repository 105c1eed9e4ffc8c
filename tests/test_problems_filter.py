"""`proofbatch run --problems`: a subset of a corpus, by ids, shell-style
globs and @FILE lists (issue 23, finding 7).

The story: patterns select in corpus order; a pattern that matches nothing
is refused in one line, exit 2, before anything is written or started; the
manifest fingerprints the corpus, not the subset, so a resume may check
other problems of the same sweep; and the counts of a resumed subset are
its own. No HOL Light: the checkout is a fake whose hol.sh only records
that it ran and fails, so a sweep that gets past validation exits 1.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from cluster.local import LocalExecutor
from runner import cli
from runner.results import shards
from runner.corpus import Problem, corpus_fingerprint, load_corpus, select_problems
from runner.errors import InputError
from runner.reporting.status import read_status
from runner.planning.sweep_config import SweepConfig
from runner.sweep import prepare, run_sweep
from runner.sweep_dir import check_manifest

from .helpers import make_corpus, row

IDS = ["arith.add_comm", "arith.mul_comm", "lists.append_nil", "logic.drinker", "x86.add.LEMMA"]


@pytest.fixture
def corpus(tmp_path) -> Path:
    return make_corpus(tmp_path / "corpus", {pid: ("", "`T`\n", "ARITH_TAC\n") for pid in IDS})


@pytest.fixture
def hol(tmp_path) -> Path:
    """A HOL Light checkout as far as validation can tell; started, it records so and fails."""
    checkout = tmp_path / "hol-light"
    checkout.mkdir()
    (checkout / "hol.sh").write_text(f"#!/bin/sh\necho started >> '{tmp_path / 'started'}'\n"
                                     "cat > /dev/null\nexit 1\n")
    (checkout / "hol.sh").chmod(0o755)
    return checkout


def ids(problems: list[Problem]) -> list[str]:
    return [p.problem_id for p in problems]


def test_ids_globs_and_files_select_in_corpus_order(corpus, tmp_path):
    problems = load_corpus(corpus)
    assert ids(select_problems(problems, ["logic.drinker", "arith.*"])) == [
        "arith.add_comm", "arith.mul_comm", "logic.drinker"]
    assert ids(select_problems(problems, ["*.?ppend_nil", "[lx]*.LEMMA", "x86.add.LEMMA"])) == [
        "lists.append_nil", "x86.add.LEMMA"]
    listed = tmp_path / "subset.txt"
    listed.write_text("# the light ones\n\nlists.append_nil   # one\n  arith.mul_*\n")
    assert ids(select_problems(problems, [f"@{listed}", "x86.add.LEMMA"])) == [
        "arith.mul_comm", "lists.append_nil", "x86.add.LEMMA"]
    # Ids are case-sensitive, globs too.
    with pytest.raises(InputError, match="'ARITH.*' matches no problem"):
        select_problems(problems, ["ARITH.*"])


@pytest.mark.parametrize("given, where, words", [
    (["arith.add_comm", "arith.nope"], "--problems", "'arith.nope' matches no problem of the corpus "
                                                     "(5 problems, e.g. arith.add_comm)"),
    (["zzz*"], "--problems", "'zzz*' matches no problem"),
    (["arith.add_comm", ""], "--problems", "an empty pattern"),
    (["@LIST"], "LIST:3", "'logic.drunk' matches no problem"),
    (["@MISSING"], "@MISSING", "does not exist"),
    (["@EMPTY"], "EMPTY", "lists no problem id or glob"),
])
def test_a_pattern_that_matches_nothing_is_refused_naming_it(corpus, tmp_path, given, where, words):
    (tmp_path / "list.txt").write_text("arith.*\n# a typo below\nlogic.drunk\n")
    (tmp_path / "empty.txt").write_text("# nothing\n\n")
    files = {"LIST": "list.txt", "MISSING": "missing.txt", "EMPTY": "empty.txt"}

    def path(text: str) -> str:
        for name, file in files.items():
            text = text.replace(name, str(tmp_path / file))
        return text

    with pytest.raises(InputError) as err:
        select_problems(load_corpus(corpus), [path(g) for g in given])
    where = path(where)
    assert err.value.where == where and words in err.value.problem, err.value


def test_the_cli_refuses_an_unmatched_pattern_in_one_line_and_does_nothing(corpus, hol, tmp_path,
                                                                          capsys):
    out = tmp_path / "out"
    code = cli.main(["run", str(corpus), "--out", str(out), "--hol-light", str(hol),
                     "--sandbox", "none", "--problems", "arith.*,logic.drunk"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("proofbatch: error: --problems: 'logic.drunk' matches no problem"), err
    assert not out.exists() and not (tmp_path / "started").exists()


def config(corpus: Path, out: Path, hol: Path, problems, **kw) -> SweepConfig:
    return SweepConfig(corpus=corpus, out=out, hol_light=hol, sandbox="none", mem_limit=2**30,
                       context_root=corpus.parent, default_timeout=60.0,
                       problems=None if problems is None else tuple(problems), **kw)


def test_a_resume_may_check_another_subset_of_the_same_sweep(corpus, hol, tmp_path, capsys):
    out = tmp_path / "out"
    first = prepare(config(corpus, out, hol, ["arith.*"]))
    assert ids(first.problems) == ["arith.add_comm", "arith.mul_comm"]
    assert [t.problem.problem_id for t in sorted(first.tasks, key=lambda t: t.problem.problem_id)] \
        == ["arith.add_comm", "arith.mul_comm"]
    check_manifest(first)
    manifest = json.loads((out / "sweep.json").read_text())
    # The sweep's corpus is the whole one, whichever checks a run selects:
    # a subset sweep compares with a whole one (`proofbatch report A B`).
    assert manifest["corpus_fingerprint"] == corpus_fingerprint(load_corpus(corpus))
    assert manifest["checks"] == 2 and manifest["config"]["problems"] == ["arith.*"]
    # Another subset resumes the same sweep; sweep.json describes it as last started.
    again = check_manifest(prepare(config(corpus, out, hol, ["logic.drinker", "x86.*"])))
    assert again["corpus_fingerprint"] == manifest["corpus_fingerprint"]
    assert again["checks"] == 2 and again["config"]["problems"] == ["logic.drinker", "x86.*"]
    assert json.loads((out / "sweep.json").read_text())["config"]["problems"] == [
        "logic.drinker", "x86.*"]
    # Through the command line too: it gets past validation (the fake HOL
    # Light fails to boot: exit 1), never refused (exit 2).
    for subset in ("arith.*", "lists.append_nil,logic.*"):
        code = cli.main(["run", str(corpus), "--out", str(out), "--hol-light", str(hol),
                         "--sandbox", "none", "--mem-limit", "1G", "--context-root",
                         str(corpus.parent), "--default-timeout", "60", "--problems", subset])
        assert code == 1, capsys.readouterr().err
    assert json.loads((out / "sweep.json").read_text())["checks"] == 2


def test_a_resumed_subset_counts_its_own_checks(corpus, hol, tmp_path):
    out = tmp_path / "out"
    check_manifest(prepare(config(corpus, out, hol, None)))       # a sweep of the whole corpus
    with shards.ShardWriter(out, "w0") as w:
        for p in load_corpus(corpus):
            # Rows of the answers given now: a changed answer would be checked again.
            w.add(dataclasses.replace(row(p.problem_id),
                                      answer_sha256=hashlib.sha256(p.answer).hexdigest()))
    # Every check of the subset is recorded: nothing runs, nothing starts.
    summary = run_sweep(prepare(config(corpus, out, hol, ["arith.*"])), executor=LocalExecutor(1))
    assert summary.total == 2 and summary.counts == {"OK": 2}
    s = read_status(out)
    assert s.state == "finished" and (s.done, s.total) == (2, 2) and s.counts == {"OK": 2}
    assert not (tmp_path / "started").exists()
