"""A row is the verdict of its answer on the problem as it was (issue 33,
point 1): a resume checks again a problem whose setup, query or loaded files
changed, and says so; rows written before problems were hashed stand; the
same corpus at a new path and a sweep directory moved or copied resume.

Sweeps run on the stand-in Isabelle (no HOL Light here); HOL Light's
resolution of loads is tested on its backend, which boots nothing until a
session starts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from runner import cli
from runner.checks import attempts
from runner.errors import InputError
from runner.results.done import Done
from runner.planning.sweep_config import SweepConfig
from runner.sweep import prepare

from .helpers import DEMO
from .test_sweep_dir import KEEP, STANDIN, small_corpus, standin, sweep, verdicts  # noqa: F401 (fixture)


def test_a_changed_problem_is_checked_again_and_said(standin):
    corpus, out = small_corpus(standin, answers_in_folders=True), standin / "out"
    first = sweep(corpus, out)
    assert first.ran_now == 2
    theory = corpus / "lists.rev_rev" / "Goal.thy"
    theory.write_text(theory.read_text() + "\n(* changed *)\n")
    notes: list[str] = []
    again = sweep(corpus, out, notes)
    assert (again.ran_now, again.resumed) == (1, 1), notes
    assert [n for n in notes if "problems changed" in n] == [
        "1 problems changed since the last run (their setup, query or a file their setup loads): "
        "checking them again (lists.rev_rev)"]
    # Settled now: nothing runs, nothing is said.
    notes.clear()
    third = sweep(corpus, out, notes)
    assert (third.ran_now, third.resumed, notes) == (0, 2, [])


def test_rows_from_before_problem_hashes_stand_and_are_said(standin):
    corpus, out = small_corpus(standin, answers_in_folders=True), standin / "out"
    sweep(corpus, out)
    for path in (out / "shards").glob("*.parquet"):
        table = pq.read_table(path)
        pq.write_table(table.drop_columns(["problem_sha256"]), path)
    theory = corpus / "lists.rev_rev" / "Goal.thy"
    theory.write_text(theory.read_text() + "\n(* changed *)\n")
    notes: list[str] = []
    again = sweep(corpus, out, notes)
    assert (again.ran_now, again.resumed) == (0, 2)
    assert any(n.startswith("2 recorded checks were written before rows recorded their problem's hash")
               for n in notes), notes


def test_the_same_corpus_at_a_new_path_resumes_and_another_is_refused(standin):
    corpus, out = small_corpus(standin, answers_in_folders=True), standin / "out"
    sweep(corpus, out)
    moved = standin / "elsewhere" / "corpus"
    shutil.copytree(corpus, moved)
    notes: list[str] = []
    config = SweepConfig(corpus=moved, out=out, isabelle=STANDIN)
    prepared = prepare(config)
    assert any(w.startswith(f"the corpus moved from {corpus.resolve()} to {moved.resolve()}")
               for w in prepared.warnings), prepared.warnings
    again = sweep(moved, out, notes)
    assert (again.ran_now, again.resumed) == (0, 2)
    assert json.loads((out / "sweep.json").read_text())["corpus"] == str(moved.resolve())
    # Another corpus at another path is refused, as before.
    query = moved / "arith.add_comm" / "Goal.thy"
    query.write_text(query.read_text() + "\n(* another *)\n")
    other = standin / "other"
    shutil.copytree(moved, other)
    with pytest.raises(InputError, match=r"holds the results of another corpus"):
        prepare(SweepConfig(corpus=other, out=out, isabelle=STANDIN))


def test_a_moved_sweep_directory_resumes_where_it_is(standin, capsys):
    corpus, out = small_corpus(standin, answers_in_folders=True), standin / "out"
    assert cli.main(["run", str(corpus), "--out", str(out), "--isabelle", str(STANDIN)]) == 0
    moved = standin / "moved-out"
    shutil.move(out, moved)
    # A runner stopped before it moved: status names the folder where it is now.
    status = json.loads((moved / "status.json").read_text())
    (moved / "status.json").write_text(json.dumps({**status, "state": "stopped"}))
    capsys.readouterr()
    assert cli.main(["status", str(moved)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"--out {moved.resolve()}" in said and f"--out {out.resolve()} " not in said + " ", said
    again = sweep(corpus, moved)
    assert (again.ran_now, again.resumed) == (0, 2)
    assert verdicts(moved) == {k: "OK" for k in KEEP}


# -- HOL Light: the files a setup loads, as the toplevel resolves them --------

def hol_corpus(root: Path) -> tuple[Path, Path]:
    """A corpus under ``root``/corpus whose setups load files of a context
    root ``root``/ctx: one directly, one through another, one nothing."""
    ctx = root / "ctx"
    (ctx / "lib").mkdir(parents=True)
    (ctx / "lib" / "inner.ml").write_text("let inner_def = new_definition `inner n = n + 1`;;\n")
    (ctx / "lib" / "outer.ml").write_text('needs "lib/inner.ml";;\nlet outer = 1;;\n')
    (ctx / "unrelated.ml").write_text("let nobody = 0;;\n")
    corpus = root / "corpus"
    for pid, setup in {"p.direct": 'needs "lib/inner.ml";;\n', "p.nested": 'loadt "lib/outer.ml";;\n',
                       "p.none": "let x = 1;;\n"}.items():
        (corpus / pid).mkdir(parents=True)
        (corpus / pid / "setup.ml").write_text(setup)
        (corpus / pid / "query.txt").write_text("`T`\n")
        (corpus / pid / "answer.txt").write_text("ACCEPT_TAC TRUTH\n")
    return corpus, ctx


def task_hashes(corpus: Path, ctx: Path, out: Path) -> dict[str, str]:
    prepared = prepare(SweepConfig(corpus=corpus, out=out, context_root=ctx, mem_limit=2 * 2**30))
    return {t.problem.problem_id: t.problem_sha256 for t in prepared.tasks}


def test_hol_light_hashes_every_file_a_setup_loads(tmp_path):
    corpus, ctx = hol_corpus(tmp_path)
    before = task_hashes(corpus, ctx, tmp_path / "out")
    assert len(set(before.values())) == 3 and all(before.values())
    (ctx / "unrelated.ml").write_text("let nobody = 1;;\n")
    assert task_hashes(corpus, ctx, tmp_path / "out") == before
    # A file loaded through another one changed: both its loaders change.
    (ctx / "lib" / "inner.ml").write_text("let inner_def = new_definition `inner n = n + 2`;;\n")
    after = task_hashes(corpus, ctx, tmp_path / "out")
    assert after["p.none"] == before["p.none"]
    assert after["p.direct"] != before["p.direct"] and after["p.nested"] != before["p.nested"]
    # The same corpus and context root elsewhere hash the same.
    shutil.copytree(tmp_path / "corpus", tmp_path / "copy" / "corpus")
    shutil.copytree(ctx, tmp_path / "copy" / "ctx")
    assert task_hashes(tmp_path / "copy" / "corpus", tmp_path / "copy" / "ctx", tmp_path / "out2") == after


def test_a_problem_whose_loaded_file_changed_is_pending_again(tmp_path):
    """pending() on rows recorded for the problem as it was: only the
    problems whose loads changed run again."""
    from .helpers import row
    import dataclasses

    corpus, ctx = hol_corpus(tmp_path)
    config = SweepConfig(corpus=corpus, out=tmp_path / "out", context_root=ctx, mem_limit=2 * 2**30)
    prepared = prepare(config)
    recorded = {(t.problem.problem_id, 0): dataclasses.replace(
        row(t.problem.problem_id), answer_sha256=attempts.answer_sha256(t.problem),
        problem_sha256=t.problem_sha256).as_dict() for t in prepared.tasks}
    todo, _ = attempts.pending(prepared.tasks, Done.from_rows(recorded.values()))
    assert todo == []
    (ctx / "lib" / "outer.ml").write_text('needs "lib/inner.ml";;\nlet outer = 2;;\n')
    prepared = prepare(config)
    todo, _ = attempts.pending(prepared.tasks, Done.from_rows(recorded.values()))
    assert [t.problem.problem_id for t in todo] == ["p.nested"]
    changes = attempts.compare(prepared.tasks, Done.from_rows(recorded.values()),
                               {"p.direct", "p.nested", "p.none"})
    assert (changes.problems, changes.changed, changes.unhashed) == (["p.nested"], [], 0)


def test_the_demo_corpus_hashes_its_problems(tmp_path):
    """Every demo problem gets a hash, without a prover started."""
    prepared = prepare(SweepConfig(corpus=DEMO, out=tmp_path / "out",
                                   context_root=DEMO, mem_limit=2 * 2**30))
    assert prepared.tasks, "the demo corpus gave no tasks: nothing was hashed"
    assert all(len(t.problem_sha256) == 64 for t in prepared.tasks)
