"""A sweep directory holds the verdicts of the answers as they are now
(issue 24): a changed answer is checked again, its old rows stay as
history, an answer that vanished is refused unless allowed, an --out that
is not a sweep is refused, and a resume compares resolved settings.

Sweeps run on the stand-in Isabelle (tests/samples/isabelle/standin), which
proves nothing and boots nothing: no HOL Light here."""

from __future__ import annotations

import csv
import dataclasses
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cluster.local import LocalExecutor
from runner import cli
from runner.results import compaction, shards
from runner.errors import InputError
from runner.settings import format_size, size_flag
from runner.planning.sweep_config import SweepConfig, default_mem_limit
from runner.sweep import prepare, run_sweep

from .helpers import ROOT, row, snapshot

STANDIN = ROOT / "tests" / "samples" / "isabelle" / "standin"
ISABELLE_DEMO = ROOT / "examples" / "isabelle_demo"
KEEP = ("arith.add_comm", "lists.rev_rev")


@pytest.fixture
def standin(tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_HEAPS", str(tmp_path / "heaps"))
    monkeypatch.setenv("ISABELLE_HOME", str(STANDIN))
    return tmp_path


def small_corpus(root: Path, *, answers_in_folders: bool = False) -> Path:
    """The Isabelle demo cut to two problems, without their answer.txt
    (answers come from --answers) unless ``answers_in_folders``."""
    corpus = root / "corpus"
    shutil.copytree(ISABELLE_DEMO, corpus)
    for d in corpus.iterdir():
        if d.is_dir() and d.name != "library" and d.name not in KEEP:
            shutil.rmtree(d)
        elif d.is_dir() and d.name in KEEP and not answers_in_folders:
            (d / "answer.txt").unlink()
    toml = corpus / "isabelle.toml"
    toml.write_text(toml.read_text() + f'heap_store = "{root / "store"}"\n')
    return corpus


def answers_csv(path: Path, answers: dict[str, str]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["problem_id", "answer"])
        w.writerows(answers.items())
    return path


def sweep(corpus: Path, out: Path, notes: list | None = None, **kw):
    config = SweepConfig(corpus=corpus, out=out, isabelle=STANDIN, **kw)
    return run_sweep(prepare(config), LocalExecutor(workers=1),
                     on_note=(notes.append if notes is not None else lambda text: None))


def verdicts(out: Path) -> dict[str, str]:
    with open(out / "verdicts.csv", newline="") as f:
        return {r["Problem"]: r["Verdict"] for r in csv.DictReader(f)}


def raw_rows(out: Path) -> list[dict]:
    """Every row in every shard, history included."""
    return [r for p in sorted((out / "shards").glob("*.parquet")) for r in pq.read_table(p).to_pylist()]


def cli_run(capsys, *argv) -> tuple[int, str, list[str]]:
    code = cli.main(["run", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


# -- 1. changed answers are checked again ----------------------------------------

def test_a_changed_answer_is_checked_again_and_its_old_row_kept_as_history(standin):
    corpus, out = small_corpus(standin), standin / "out"
    answers = answers_csv(standin / "a.csv", {k: "by simp" for k in KEEP})
    first = sweep(corpus, out, answers=answers)
    assert first.ran_now == 2 and verdicts(out) == {k: "OK" for k in KEEP}

    answers_csv(answers, {"arith.add_comm": "by (standin_fail)", "lists.rev_rev": "by simp"})
    notes: list[str] = []
    again = sweep(corpus, out, notes, answers=answers)
    assert notes == ["1 answers changed since the last run: checking them again"]
    assert (again.ran_now, again.resumed, again.rechecked) == (1, 1, 1)
    assert verdicts(out) == {"arith.add_comm": "FAIL", "lists.rev_rev": "OK"}
    with open(out / "results.csv", newline="") as f:
        assert {r["problem_id"]: r["verdict"] for r in csv.DictReader(f)}["arith.add_comm"] == "FAIL"
    # The verdict of the answer it replaced stays in the shards, as history.
    history = [r["verdict"] for r in raw_rows(out) if r["problem_id"] == "arith.add_comm"]
    assert sorted(history) == ["FAIL", "OK"]

    # Nothing changed since: nothing runs, nothing is said.
    notes.clear()
    third = sweep(corpus, out, notes, answers=answers)
    assert (third.ran_now, third.resumed, notes) == (0, 2, [])
    assert verdicts(out) == {"arith.add_comm": "FAIL", "lists.rev_rev": "OK"}


def test_the_cli_says_how_many_answers_changed(standin, capsys):
    corpus, out = small_corpus(standin), standin / "out"
    answers = answers_csv(standin / "a.csv", {k: "by simp" for k in KEEP})
    assert cli_run(capsys, corpus, "--out", out, "--answers", answers)[0] == 0
    answers_csv(answers, {"arith.add_comm": "by (standin_fail)", "lists.rev_rev": "by (standin_fail)"})
    code, _stdout, err = cli_run(capsys, corpus, "--out", out, "--answers", answers)
    assert code == 0
    assert "2 answers changed since the last run: checking them again" in " ".join(" ".join(err).split())
    assert verdicts(out) == {k: "FAIL" for k in KEEP}


def test_current_means_the_answer_of_the_latest_row_and_folding_keeps_history(tmp_path, monkeypatch):
    """A key checked with answer A, then B, then A again: its current row is
    A's, whichever shard a row sits in and after compaction folds them."""
    a, b = "a" * 64, "b" * 64
    rows = [dataclasses.replace(row("p", verdict="OK", finished=1), answer_sha256=a),
            dataclasses.replace(row("p", verdict="FAIL", finished=2), answer_sha256=b),
            dataclasses.replace(row("q", verdict="OK", finished=1), answer_sha256=a)]
    for i, r in enumerate(rows):
        with shards.ShardWriter(tmp_path, f"w{i}", compact=False) as w:
            w.add(r)
    done = shards.scan(tmp_path, repair=False).done
    assert done[("p", 0)]["verdict"] == "FAIL" and done[("q", 0)]["verdict"] == "OK"
    assert done.current([("p", 0), ("q", 0)], [a, a]) == [False, True]
    with shards.ShardWriter(tmp_path, "w9", compact=False) as w:
        w.add(dataclasses.replace(row("p", verdict="OK", finished=3, worker="w9"), answer_sha256=a))
    assert shards.scan(tmp_path, repair=False).done[("p", 0)]["verdict"] == "OK"
    # A repair scan folds every shard into one: the history stays.
    monkeypatch.setattr(compaction, "FAN_IN", 2)
    folded = shards.scan(tmp_path)
    assert len(folded.folded) == 1
    assert folded.done[("p", 0)]["verdict"] == "OK"
    kept = pq.read_table(folded.folded[0]).to_pylist()
    assert sorted((r["problem_id"], r["verdict"]) for r in kept) == [("p", "FAIL"), ("p", "OK"),
                                                                      ("p", "OK"), ("q", "OK")]
    assert shards.merge(tmp_path).num_rows == 2


# -- an answer source that vanished ---------------------------------------------

def test_dropping_answers_on_resume_is_refused_unless_allowed(standin, capsys):
    corpus, out = small_corpus(standin), standin / "out"
    answers = answers_csv(standin / "a.csv", {k: "by simp" for k in KEEP})
    assert cli_run(capsys, corpus, "--out", out, "--answers", answers)[0] == 0
    before = snapshot(out)
    code, stdout, err = cli_run(capsys, corpus, "--out", out)
    assert code == 2 and stdout == "" and len(err) == 1, err
    assert err[0].startswith(f"proofbatch: error: {out / 'sweep.json'}: 2 answers its rows checked are gone")
    assert f"the sweep was run with --answers {answers}" in err[0]
    assert "--allow-missing-answers" in err[0]
    assert snapshot(out) == before
    code, _stdout, _err = cli_run(capsys, corpus, "--out", out, "--allow-missing-answers")
    assert code == 0
    assert verdicts(out) == {k: "ERROR" for k in KEEP}


def test_a_deleted_answer_txt_is_refused(standin):
    corpus, out = small_corpus(standin, answers_in_folders=True), standin / "out"
    sweep(corpus, out)
    (corpus / "lists.rev_rev" / "answer.txt").unlink()
    with pytest.raises(InputError, match=r"1 answers its rows checked are gone \(e.g. lists.rev_rev "
                                         r"attempt 0 in the answer files in the problem folders\)"):
        sweep(corpus, out)
    summary = sweep(corpus, out, allow_missing_answers=True)
    assert summary.ran_now == 1
    assert verdicts(out) == {"arith.add_comm": "OK", "lists.rev_rev": "ERROR"}


# -- 2. an --out that is not a sweep ------------------------------------------------

def test_an_out_holding_someone_elses_files_is_refused_untouched(standin, capsys):
    corpus, mine = small_corpus(standin, answers_in_folders=True), standin / "mine"
    mine.mkdir()
    (mine / "results.csv").write_text("problem,verdict\nx,OK\n")
    before = snapshot(mine)
    code, stdout, err = cli_run(capsys, corpus, "--out", mine)
    assert code == 2 and stdout == "" and len(err) == 1, err
    assert err[0].startswith(f"proofbatch: error: {mine}: is not a proofbatch sweep directory: "
                             "it holds results.csv and no sweep.json; pass a new or empty --out")
    assert snapshot(mine) == before


def test_an_empty_out_and_a_sweep_stopped_before_its_manifest_are_fine(standin):
    corpus = small_corpus(standin, answers_in_folders=True)
    (standin / "empty").mkdir()
    assert sweep(corpus, standin / "empty").ran_now == 2
    stopped = standin / "stopped"
    (stopped / "logs").mkdir(parents=True)
    (stopped / ".sweep.lock").write_text("")
    assert sweep(corpus, stopped).ran_now == 2


# -- 4. --answers that answers nothing ------------------------------------------------

@pytest.mark.parametrize("content", ["empty", "files only", "empty problem folders"])
def test_an_answers_folder_answering_no_problem_is_refused(standin, capsys, content):
    corpus, folder = small_corpus(standin), standin / "answers"
    folder.mkdir()
    if content == "files only":
        (folder / "answer.txt").write_text("by simp\n")
    elif content == "empty problem folders":
        for k in KEEP:
            (folder / k).mkdir()
    code, stdout, err = cli_run(capsys, corpus, "--out", standin / "out", "--answers", folder)
    assert code == 2 and stdout == "" and len(err) == 1, err
    assert err[0].startswith(f"proofbatch: error: {folder}: answers folder gives no answer to any "
                             "of the corpus's 2 problems")
    assert "; pass the folder that holds <problem-id>/answer.txt" in err[0]
    assert not (standin / "out").exists()


# -- 5. resumes compare resolved values --------------------------------------------------

def test_a_resume_naming_the_default_memory_limit_is_the_same_sweep(standin, capsys):
    corpus, out = small_corpus(standin, answers_in_folders=True), standin / "out"
    assert cli_run(capsys, corpus, "--out", out)[0] == 0
    default = default_mem_limit(1)
    code, stdout, err = cli_run(capsys, corpus, "--out", out, "--mem-limit", size_flag(default))
    assert code == 0, err
    other = default // 2
    code, stdout, err = cli_run(capsys, corpus, "--out", out, "--mem-limit", size_flag(other))
    assert code == 2 and len(err) == 1, err
    assert err[0] == (f"proofbatch: error: {out / 'sweep.json'}: this sweep was run with --mem-limit "
                      f"{format_size(default)}, not {format_size(other)}; its verdicts would mix both; "
                      f"use a new --out, or pass --mem-limit {size_flag(default)}")


def test_an_old_manifest_recording_the_default_as_none_resumes_with_it_given(standin):
    import json

    corpus, out = small_corpus(standin, answers_in_folders=True), standin / "out"
    sweep(corpus, out)
    manifest = json.loads((out / "sweep.json").read_text())
    manifest["mem_limit"] = None        # as sweeps before issue 24 recorded the default
    (out / "sweep.json").write_text(json.dumps(manifest))
    assert sweep(corpus, out, mem_limit=default_mem_limit(1)).resumed == 2
    assert pa.__version__       # (pyarrow is what the shards are read with)


# -- 6. the resume command asks the prover what defaulted to where the sweep started -----

def test_the_resume_command_restates_what_the_prover_s_descriptor_says_defaulted(monkeypatch):
    """A setting whose default is where the sweep started (HOL Light's
    context root) is given back as sweep.json recorded it, for each prover
    whose descriptor says so (``corpus_defaults``): it decided by the name
    hol-light (issue 49). A calibration's sweep still resumes with its own
    command."""
    from runner import prover_registry
    from runner.prover_registry import ENV
    from runner.sweep_dir import resume_command

    assert prover_registry.descriptor("hol-light").corpus_defaults == ("context_root",)
    assert prover_registry.descriptor("isabelle").corpus_defaults == ()
    monkeypatch.setenv(ENV, "tests.toy_prover:ROOTED")      # the toy, with a context root
    started = "/where/it/started"

    def command(**manifest) -> str:
        base = {"corpus": "/c", "cwd": started, "context_root": started,
                "config": {"corpus": "/c", "context_root": None}}
        return resume_command({**base, **manifest}, Path("/out"))

    given = f"--context-root {started}"
    assert given in command(prover="toy-rooted")
    assert given in command(prover="hol-light")
    assert given in command()           # a sweep.json from before the prover was recorded
    assert given not in command(prover="isabelle")
    assert given not in command(prover="toy")       # not registered now: still a command
    calibration = ["proofbatch", "calibrate", "/c", "--timeout-map", "/m.json", "--out", "/out"]
    assert command(prover="hol-light", config={"corpus": "/c", "context_root": None,
                                               "command": calibration}) == " ".join(calibration)
