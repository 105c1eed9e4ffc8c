"""`proofbatch run` refuses bad input up front, cheaply and without damage.

The contract (runner/cli.py, runner/sweep.py): when the input is bad,
``proofbatch run CORPUS --out DIR ...``

- exits 2,
- prints exactly one line on stderr, naming the file or problem and the fix
  (``proofbatch: error: WHERE: WHAT; FIX``), and nothing on stdout,
- writes nothing under --out: a fresh --out is not even created, and an --out
  that already holds a previous sweep keeps every file byte for byte,
- and never starts the prover: validation happens before HOL Light (70-90 s
  of CPU to load) is touched, so a mistake costs well under a second.

How the tests know the prover was not started: every run points --hol-light
at a *tripwire checkout*, a fake HOL Light whose hol.sh only records that it
ran (in a file outside --out) and exits. In-process runs also replace
subprocess.Popen with one that fails the test. The first two tests are the
controls: the baseline input is valid, and when it gets past validation the
tripwire does fire and --out is written. So every "nothing happened"
assertion below can fail, and each bad-input case fails only because of the
one thing it breaks.

The last tests pin down two holes in validation found while writing these:
a hol.sh that is a directory or is not executable.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from runner import cli
from runner.errors import InputError
from runner.planning.sweep_config import SweepConfig
from runner.sweep import prepare
from runner.sweep_dir import check_manifest

from ..helpers import ADD, assert_one_line_error, DEMO, NO_BOX, previous_sweep, PROOFBATCH, snapshot, WORD


# -- building input -----------------------------------------------------------


# -- running the CLI ----------------------------------------------------------


# -- controls: the baseline is valid, and the tripwire works ------------------

def test_baseline_input_with_every_option_file_passes_validation(corpus, hol, tmp_path, tripwire,
                                                                 no_processes):
    """Each bad-input case below breaks one thing in this input; unbroken, it validates."""
    timeout_map = tmp_path / "timeout-map.json"
    timeout_map.write_text(json.dumps([{"problem_id": ADD, "prove_secs": 1.5, "timeout_sec": 30}]))
    category_timeouts = tmp_path / "timeouts.json"
    category_timeouts.write_text(json.dumps({"bit_vector": 60, "generic": 120}))
    answers_csv = tmp_path / "answers.csv"
    answers_csv.write_text(f"problem_id,answer\n{WORD},WORD_BLAST_TAC\n{ADD},ARITH_TAC\n")
    answers_dir = tmp_path / "answers"
    (answers_dir / ADD).mkdir(parents=True)
    (answers_dir / ADD / "answer.txt").write_text("ARITH_TAC\n")

    for answers in (None, answers_csv, answers_dir):
        prepared = prepare(SweepConfig(
            corpus=corpus, out=tmp_path / "out", answers=answers, workers=2,
            timeout_map=timeout_map, map_mode="bytecode", category_timeouts=category_timeouts,
            mem_limit=2**30, hol_light=hol, context_root=tmp_path))
        limits = {t.problem.problem_id: t.limits.time_s for t in prepared.tasks}
        assert limits == {ADD: 30.0, WORD: 60.0}
    assert not (tmp_path / "out").exists()
    assert not tripwire.exists()
    assert no_processes == []


def test_valid_input_gets_past_validation_and_trips_the_wire(corpus, hol, tmp_path, tripwire, capsys):
    """Proof that the checks in `run` can fail: with good input the CLI writes
    --out/sweep.json and starts "HOL Light", which trips the wire and exits 1."""
    out = tmp_path / "out"
    code = cli.main(["run", str(corpus), "--out", str(out), *NO_BOX, "--hol-light", str(hol),
                     "--context-root", str(tmp_path)])
    assert code == 1, capsys.readouterr().err
    assert tripwire.exists()
    assert (out / "sweep.json").is_file()
    assert "HOL Light did not start" in capsys.readouterr().err


# -- the corpus and its answers -----------------------------------------------

def test_corpus_path_that_does_not_exist(run, hol, tmp_path):
    missing = tmp_path / "no-such-corpus"
    result = run(missing, "--hol-light", hol)
    assert_one_line_error(result, missing, "corpus directory does not exist", "; check the path")


def test_problem_folder_missing_query_txt(run, corpus, hol):
    (corpus / ADD / "query.txt").unlink()
    result = run(corpus, "--hol-light", hol)
    assert_one_line_error(result, corpus / ADD / "query.txt",
                          f"problem {ADD} is missing query.txt",
                          "; retrieve the problem again, or remove its folder")


def test_unknown_problem_id_in_answers_directory(run, corpus, hol, tmp_path):
    answers = tmp_path / "answers"
    for pid in (ADD, "arm.bignum_sub.NOT_IN_CORPUS"):
        (answers / pid).mkdir(parents=True)
        (answers / pid / "answer.txt").write_text("ARITH_TAC\n")
    result = run(corpus, "--answers", answers, "--hol-light", hol)
    assert_one_line_error(result, answers / "arm.bignum_sub.NOT_IN_CORPUS",
                          "unknown problem id arm.bignum_sub.NOT_IN_CORPUS",
                          "; remove the folder, or check that the answers belong to this corpus")


def test_unknown_problem_id_in_answers_csv(run, corpus, hol, tmp_path):
    answers = tmp_path / "answers.csv"
    answers.write_text(f"problem_id,answer\n{ADD},ARITH_TAC\narm.bignum_sub.NOT_IN_CORPUS,ARITH_TAC\n")
    result = run(corpus, "--answers", answers, "--hol-light", hol)
    assert_one_line_error(result, answers, "line 3: unknown problem id 'arm.bignum_sub.NOT_IN_CORPUS'",
                          "; remove the row, or check that the answers belong to this corpus")


def test_duplicate_problem_ids_in_answers_csv(run, corpus, hol, tmp_path):
    answers = tmp_path / "answers.csv"
    # The second answer spans lines 3-4, so the duplicate starts on line 5.
    answers.write_text(f'problem_id,answer\n{ADD},ARITH_TAC\n{WORD},"WORD_BLAST_TAC THEN\n'
                       f' REWRITE_TAC[]"\n{ADD},DECIDE_TAC\n')
    result = run(corpus, "--answers", answers, "--hol-light", hol)
    assert_one_line_error(result, answers, f"problem id {ADD} appears on line 2 and line 5",
                          "; keep one answer per problem")


# -- time limits --------------------------------------------------------------

def test_timeout_map_that_is_not_json(run, corpus, hol, tmp_path):
    timeout_map = tmp_path / "timeout-map.json"
    timeout_map.write_text('[{"problem_id": "%s", "timeout_sec": 30},\n  ]\n' % ADD)
    result = run(corpus, "--timeout-map", timeout_map, "--hol-light", hol)
    assert_one_line_error(result, timeout_map, "invalid JSON at line 2", "; fix the JSON syntax")


@pytest.mark.parametrize("content, complaint", [
    pytest.param({ADD: 30}, "top level is a JSON object, not a list", id="object-not-list"),
    pytest.param([[ADD, 30]], "entry 0 is a JSON list, not an object", id="entry-not-object"),
    pytest.param([{"problem_id": ADD, "timeout": 30}], "entry 0 has no 'timeout_sec'",
                 id="entry-without-timeout_sec"),
    pytest.param([{"problem_id": ADD, "timeout_sec": "30s"}],
                 f"entry 0 ({ADD}): timeout_sec '30s' is not a number", id="timeout-not-a-number"),
    pytest.param([{"problem_id": ADD, "timeout_sec": 0}],
                 f"entry 0 ({ADD}): timeout_sec 0 is not a positive", id="timeout-zero"),
])
def test_timeout_map_of_the_wrong_shape(run, corpus, hol, tmp_path, content, complaint):
    timeout_map = tmp_path / "timeout-map.json"
    timeout_map.write_text(json.dumps(content))
    result = run(corpus, "--timeout-map", timeout_map, "--hol-light", hol)
    assert_one_line_error(result, timeout_map, complaint)


def test_category_timeouts_of_the_wrong_shape(run, corpus, hol, tmp_path):
    category_timeouts = tmp_path / "timeouts.json"
    category_timeouts.write_text(json.dumps([["bit_vector", 60]]))
    result = run(corpus, "--category-timeouts", category_timeouts, "--hol-light", hol)
    assert_one_line_error(result, category_timeouts, "top level is a JSON list, not an object",
                          "; write {")


def test_category_missing_from_category_timeouts(run, corpus, hol, tmp_path):
    """category.txt says bit_vector; timeouts.json only knows generic. That is a
    mistake to report, not a reason to fall back to the default limit."""
    category_timeouts = tmp_path / "timeouts.json"
    category_timeouts.write_text(json.dumps({"generic": 120}))
    result = run(corpus, "--category-timeouts", category_timeouts, "--hol-light", hol)
    assert_one_line_error(result, category_timeouts, f"unknown category 'bit_vector' of problem {WORD}",
                          f"; add it to the file or fix {WORD}/category.txt")


# -- HOL Light and the command line -------------------------------------------

def test_hol_light_directory_that_does_not_exist(run, corpus):
    result = run(corpus, "--hol-light", "/nonexistent/dir")
    assert_one_line_error(result, "/nonexistent/dir", "HOL Light not found: no such directory",
                          "; pass --hol-light the directory of a HOL Light checkout")


def test_hol_light_directory_without_hol_sh(run, corpus, tmp_path):
    unbuilt = tmp_path / "hol-light-unbuilt"
    unbuilt.mkdir()
    (unbuilt / "hol.ml").write_text("(* sources, but never built *)\n")
    result = run(corpus, "--hol-light", unbuilt)
    assert_one_line_error(result, unbuilt / "hol.sh", "the checkout has no hol.sh",
                          f"; build it with `make` in {unbuilt}")


@pytest.mark.parametrize("workers", ["0", "-2"])
def test_worker_count_below_one(run, corpus, hol, workers):
    result = run(corpus, f"--workers={workers}", "--hol-light", hol)
    assert_one_line_error(result, "--workers", f"{workers} is not a worker count", "; pass 1 or more")


@pytest.mark.parametrize("size, complaint", [
    ("lots", "cannot read 'lots' as a memory size"),
    ("4X", "cannot read '4X' as a memory size"),
    ("0", "memory size '0' is zero"),
])
def test_bad_mem_limit_is_rejected_in_one_line_naming_the_option(run, corpus, hol, size, complaint):
    """argparse's usage dump is gone: one line naming --mem-limit and what a
    size looks like."""
    result = run(corpus, f"--mem-limit={size}", "--hol-light", hol)
    assert_one_line_error(result, "--mem-limit", complaint, "; ")


# -- the real exit code, through the console script ---------------------------

@pytest.mark.parametrize("case", ["missing-query", "unknown-category", "bad-mem-limit"])
def test_console_script_exits_2_without_touching_out(case, corpus, hol, tmp_path, tripwire):
    """The same contract seen from a shell: the installed `proofbatch` script's
    exit status, its stderr, and --out holding a previous sweep."""
    out = tmp_path / "out"
    previous_sweep(out)
    before = snapshot(out)
    args = ["run", str(corpus), "--out", str(out), *NO_BOX, "--hol-light", str(hol)]
    if case == "missing-query":
        (corpus / WORD / "query.txt").unlink()
        expected = f"proofbatch: error: {corpus / WORD / 'query.txt'}: problem {WORD} is missing query.txt; "
    elif case == "unknown-category":
        category_timeouts = tmp_path / "timeouts.json"
        category_timeouts.write_text('{"generic": 120}')
        args += ["--category-timeouts", str(category_timeouts)]
        expected = f"proofbatch: error: {category_timeouts}: unknown category 'bit_vector'"
    else:
        args += ["--mem-limit", "lots"]
        expected = "proofbatch: error: --mem-limit: cannot read 'lots' as a memory size; "

    started = time.monotonic()
    proc = subprocess.run([str(PROOFBATCH), *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    elapsed = time.monotonic() - started

    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    err = proc.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith(expected), err
    assert snapshot(out) == before
    assert not tripwire.exists()
    assert elapsed < 10, f"{elapsed:.1f} s (interpreter start-up included)"


# -- a broken checkout is bad input, not a crash ----------------------------------

@pytest.mark.parametrize("out", ["fresh"], indirect=True)
def test_hol_sh_that_is_a_directory(run, corpus, tmp_path):
    broken = tmp_path / "hol-light-broken"
    (broken / "hol.sh").mkdir(parents=True)
    result = run(corpus, "--hol-light", broken)
    assert_one_line_error(result, broken / "hol.sh", "hol.sh")


@pytest.mark.parametrize("out", ["fresh"], indirect=True)
def test_hol_sh_that_is_not_executable(run, corpus, hol):
    (hol / "hol.sh").chmod(0o644)
    result = run(corpus, "--hol-light", hol)
    assert_one_line_error(result, hol / "hol.sh", "hol.sh")


def test_a_sweep_begun_before_prover_build_and_one_mode_vocabulary_resumes(tmp_path):
    """sweep.json written by an older proofbatch says hol_build and
    bytecode-fork: resuming it with the same build is this sweep, and
    another build is still refused. (No prover starts: nothing is checked.)"""
    out = tmp_path / "out"
    prepared = prepare(SweepConfig(corpus=DEMO, out=out, workers=1))
    manifest = check_manifest(prepared)
    assert manifest["prover_build"] == prepared.backend.info.build and manifest["mode"] == "bytecode"
    old = {k: v for k, v in manifest.items() if k != "prover_build"}
    (out / "sweep.json").write_text(json.dumps({**old, "hol_build": manifest["prover_build"],
                                                "mode": "bytecode-fork"}))
    check_manifest(prepared)
    (out / "sweep.json").write_text(json.dumps({**old, "hol_build": "another", "mode": "bytecode-fork"}))
    with pytest.raises(InputError, match="prover_build 'another'"):
        check_manifest(prepared)
