"""The catalogue of bad input: each case is refused with one line naming the
file, the problem and the fix, exit code 2, before HOL Light starts and
without touching --out.

The contract and its machinery (a tripwire HOL Light that records being
started, a check that --out is byte-for-byte untouched, a refusal to start
any process) live in tests/cli/test_cli.py, which also holds these cases of the
catalogue:

- a missing corpus: test_corpus_path_that_does_not_exist
- a problem without a query: test_problem_folder_missing_query_txt
- answers for unknown problems: test_unknown_problem_id_in_answers_{directory,csv}
- duplicate ids in an answers CSV: test_duplicate_problem_ids_in_answers_csv
- malformed JSON and timeout maps: test_timeout_map_that_is_not_json,
  test_timeout_map_of_the_wrong_shape, test_category_timeouts_of_the_wrong_shape
- a timeout of zero: test_timeout_map_of_the_wrong_shape[timeout-zero]

This file adds the rest: an empty corpus, malformed CSV, duplicate ids in a
timeout map, negative and absurd timeouts, a memory limit below the size of
a loaded image, an unwritable output directory, and an --out that holds
another corpus's results.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from runner import cli
from runner.errors import InputError

from ..helpers import ADD, assert_one_line_error, FAST_S, NO_BOX, previous_sweep, ROOT, snapshot, WORD

# Import every subcommand's module now: the time limit on a refusal is about
# validation, not about Python importing scipy on a busy host.
cli.build_parser()


def test_an_empty_corpus(run, hol, tmp_path):
    empty = tmp_path / "empty-corpus"
    empty.mkdir()
    (empty / ".git").mkdir()          # hidden folders are not problems
    result = run(empty, "--hol-light", hol)
    assert_one_line_error(result, empty, "corpus has no problems", "; pass the folder that holds")


def test_an_answers_csv_with_a_row_of_the_wrong_width(run, corpus, hol, tmp_path):
    answers = tmp_path / "answers.csv"
    answers.write_text(f"problem_id,answer\n{ADD},ARITH_TAC,REFL_TAC\n")
    result = run(corpus, "--answers", answers, "--hol-light", hol)
    assert_one_line_error(result, answers, "line 2 has 3 fields but the header has 2",
                          "; quote answers that contain commas")


def test_an_answers_csv_with_an_unclosed_quote(run, corpus, hol, tmp_path):
    """Read leniently, the quote would swallow the next row into this answer."""
    answers = tmp_path / "answers.csv"
    answers.write_text(f'problem_id,answer\n{ADD},"ARITH_TAC\n{WORD},WORD_BLAST_TAC\n')
    result = run(corpus, "--answers", answers, "--hol-light", hol)
    assert_one_line_error(result, answers, "line 2: malformed CSV (unexpected end of data)",
                          "; write the file with a CSV library")


def test_a_timeout_map_with_a_problem_twice(run, corpus, hol, tmp_path):
    timeout_map = tmp_path / "timeout-map.json"
    timeout_map.write_text(json.dumps([{"problem_id": ADD, "timeout_sec": 30},
                                       {"problem_id": ADD, "timeout_sec": 60}]))
    result = run(corpus, "--timeout-map", timeout_map, "--hol-light", hol)
    assert_one_line_error(result, timeout_map, f"problem id {ADD} appears in entry 0 and entry 1",
                          "; keep one entry per problem")


@pytest.mark.parametrize("seconds, complaint", [
    ("-5", "-5.0 seconds is not a positive finite time"),
    ("1e12", "1e+12 seconds is more than a week"),
])
def test_a_negative_or_absurd_default_timeout(run, corpus, hol, seconds, complaint):
    result = run(corpus, f"--default-timeout={seconds}", "--hol-light", hol)
    assert_one_line_error(result, "default timeout", complaint)


def test_an_absurd_timeout_in_a_map(run, corpus, hol, tmp_path):
    timeout_map = tmp_path / "timeout-map.json"
    timeout_map.write_text(json.dumps([{"problem_id": ADD, "timeout_sec": 3.2e9}]))
    result = run(corpus, "--timeout-map", timeout_map, "--hol-light", hol)
    assert_one_line_error(result, timeout_map, f"entry 0 ({ADD}): timeout_sec", "more than a week")


def test_a_memory_limit_below_the_image_size(run, corpus, hol):
    """Every check counts its image's pages, so 100 MiB would make every check MEMOUT."""
    result = run(corpus, "--mem-limit", "100M", "--hol-light", hol)
    assert_one_line_error(result, "--mem-limit", "100 MiB is below the size of a loaded HOL Light image",
                          "; give 1G or more")


# -- where the results go --------------------------------------------------------

def run_with_out(capsys, corpus: Path, out_dir: Path, *args) -> tuple[int, str, list[str]]:
    started = time.monotonic()
    code = cli.main(["run", str(corpus), "--out", str(out_dir), *map(str, args)])
    assert time.monotonic() - started < FAST_S
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory on a read-only file system (root ignores permission bits,
    not a read-only mount)."""
    mount = tmp_path / "ro"
    mount.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(mount)],
                       check=True, capture_output=True)
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        pytest.skip(f"cannot mount a read-only tmpfs here: {exc}")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_an_unwritable_output_directory(capsys, corpus, hol, read_only_dir, tripwire, no_processes):
    result = run_with_out(capsys, corpus, read_only_dir / "out", "--hol-light", hol)
    assert_one_line_error(result, read_only_dir, "is not writable", "; pass an --out on a writable disk")
    assert not tripwire.exists()


def test_an_output_path_below_a_file(capsys, corpus, hol, tmp_path, tripwire, no_processes):
    a_file = tmp_path / "results.csv"
    a_file.write_text("not a directory\n")
    result = run_with_out(capsys, corpus, a_file / "out", "--hol-light", hol)
    assert_one_line_error(result, a_file, "is not a directory", "; pass a directory path for --out")
    assert not tripwire.exists()


def test_out_holding_another_corpuss_results(capsys, corpus, hol, tmp_path, tripwire, no_processes):
    out_dir = tmp_path / "out-of-another-corpus"
    previous_sweep(out_dir)
    manifest = json.loads((out_dir / "sweep.json").read_text())
    manifest["corpus"] = "/data/s2n-bignum-bench/other-corpus"
    (out_dir / "sweep.json").write_text(json.dumps(manifest))
    before = snapshot(out_dir)
    result = run_with_out(capsys, corpus, out_dir, "--hol-light", hol)
    assert_one_line_error(result, out_dir, "holds the results of another corpus "
                          "(/data/s2n-bignum-bench/other-corpus)", "; use a new --out for this corpus")
    assert snapshot(out_dir) == before
    assert not tripwire.exists()


# -- the command line itself: one line, naming the flag the user gave ---------

def cli_result(capsys, *argv) -> tuple[int, str, list[str]]:
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exc:          # argparse itself must never exit
        raise AssertionError(f"argparse exited {exc.code} on its own") from None
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


@pytest.mark.parametrize("flag, value, complaint", [
    ("--mem-limit", "banana", "cannot read 'banana' as a memory size"),
    ("--seed", "banana", "cannot read 'banana'"),
    ("--workers", "many", "cannot read 'many'"),
    ("--policy", "best", "'best' is not a choice"),
])
def test_a_flag_value_that_cannot_be_read(capsys, corpus, tmp_path, flag, value, complaint):
    """argparse's own refusal was 20 lines of usage above the useful one."""
    result = cli_result(capsys, "run", corpus, "--out", tmp_path / "out", flag, value)
    assert_one_line_error(result, flag, complaint)
    assert not (tmp_path / "out").exists()


def test_a_missing_argument_names_the_command(capsys, tmp_path):
    assert_one_line_error(cli_result(capsys, "simulate"), "proofbatch simulate",
                          "one of the arguments --timeout-map --profile --plan is required",
                          "; see `proofbatch simulate --help`")
    assert_one_line_error(cli_result(capsys, "frobnicate"), "COMMAND", "'frobnicate' is not a choice",
                          "; choose one of run, status")


def test_too_many_workers_blame_workers_not_the_memory_limit_nobody_gave(capsys, corpus, tmp_path):
    result = cli_result(capsys, "run", corpus, "--out", tmp_path / "out", "--workers", "100000")
    assert_one_line_error(result, "--workers", "100000 workers share this machine's memory",
                          "below the size of a loaded HOL Light image", "; pass fewer --workers")


def test_simulate_with_no_workers_blames_workers(capsys):
    result = cli_result(capsys, "simulate", "--timeout-map",
                        ROOT / "timeout_maps" / "hol_light_demo.json", "--workers", "0")
    assert_one_line_error(result, "--workers", "0 is not a positive count", "; pass 1 or more")


@pytest.mark.parametrize("where", ["proc", "name-too-long"])
def test_an_out_that_cannot_be_created(capsys, corpus, tmp_path, where):
    out_dir = Path("/proc/pbtest") if where == "proc" else tmp_path / ("x" * 300)
    result = cli_result(capsys, "run", corpus, "--out", out_dir, *NO_BOX)
    assert_one_line_error(result, out_dir, "; pass a path that proofbatch can create and write")
    assert out_dir.name not in os.listdir(out_dir.parent)


def test_a_map_written_over_a_directory(capsys, tmp_path):
    result = cli_result(capsys, "timeout-map", ROOT / "profiles" / "hol_light_demo", "--out", tmp_path)
    assert_one_line_error(result, tmp_path, "is a directory", "; pass the path of the map file")
    assert list(tmp_path.iterdir()) == []


def test_version_and_help_describe_the_tool(capsys):
    with pytest.raises(SystemExit) as version:
        cli.main(["--version"])
    assert version.value.code == 0
    assert capsys.readouterr().out.startswith("proofbatch 0.")
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    assert "Batch proof checking for HOL Light and Isabelle" in text
    assert "prints and exits" not in text


# -- a corpus and what lives beside its problems --------------------------------

def test_an_out_inside_the_corpus(capsys, corpus, hol, tripwire, no_processes):
    """Accepted once, it became a "problem" of the next run, whose advice to
    remove its folder would have deleted the results."""
    result = run_with_out(capsys, corpus, corpus / "sweep", "--hol-light", hol)
    assert_one_line_error(result, corpus / "sweep", f"is inside the corpus {corpus.resolve()}",
                          "; pass an --out outside the corpus folder")
    assert not (corpus / "sweep").exists()


def test_a_sweep_directory_in_the_corpus_is_named_never_a_problem(capsys, corpus, hol, tmp_path,
                                                                  tripwire, no_processes):
    previous_sweep(corpus / "old-sweep")
    before = snapshot(corpus / "old-sweep")
    result = run_with_out(capsys, corpus, tmp_path / "out", "--hol-light", hol)
    assert_one_line_error(result, corpus / "old-sweep", "is a proofbatch sweep directory",
                          "; move it out of the corpus (keep it: it holds results)")
    assert snapshot(corpus / "old-sweep") == before


def test_a_symlink_loop_in_the_corpus(capsys, corpus, hol, tmp_path, tripwire, no_processes):
    (corpus / "loop").symlink_to(".")
    result = run_with_out(capsys, corpus, tmp_path / "out", "--hol-light", hol)
    assert_one_line_error(result, corpus / "loop", "is a symlink to", "which holds the corpus "
                          "itself (a loop)", "; remove the symlink")


def test_a_query_that_is_not_utf8_names_the_encoding(capsys, corpus, hol, tmp_path, tripwire,
                                                     no_processes):
    query = corpus / ADD / "query.txt"
    query.write_bytes(b"`1 + 1 = 2 \xff`\n")
    result = run_with_out(capsys, corpus, tmp_path / "out", "--hol-light", hol)
    assert_one_line_error(result, query, "is not UTF-8 text (byte 0xff at offset 11, line 1)",
                          "; save the file as UTF-8")


# -- a resume under other settings ------------------------------------------------

def test_a_resume_under_other_time_limits_is_refused(corpus, hol, tmp_path):
    """Accepted, it left rows under both limits while sweep.json named one."""
    from runner.results import shards
    from runner.results.rows import ResultRow, utcnow
    from runner.planning.sweep_config import SweepConfig
    from runner.sweep import prepare, run_sweep
    from runner.sweep_dir import check_manifest

    out_dir = tmp_path / "out"
    base = dict(corpus=corpus, out=out_dir, hol_light=hol, sandbox="none")
    first = prepare(SweepConfig(**base, default_timeout=60))
    check_manifest(first, {})
    task = first.tasks[0]
    now = utcnow()
    with shards.ShardWriter(out_dir, "w0") as writer:
        writer.add(ResultRow(
            problem_id=task.problem.problem_id, attempt=0, category=task.problem.category,
            verdict="OK", reason="proved", prove_secs=0.1, wall_secs=0.2, peak_rss_mb=None,
            timeout_s=60.0, timeout_source="default", worker="w0", host="h", started_at=now,
            finished_at=now, image_key="k", prover_build=first.backend.info.build,
            mode=first.backend.info.mode, exit_status="exit 0", answer_sha256="", run_id="r"))
    before = snapshot(out_dir)
    with pytest.raises(InputError) as refused:
        run_sweep(prepare(SweepConfig(**base, default_timeout=3)), executor=None)
    assert refused.value.where == str(out_dir / "sweep.json")
    assert refused.value.problem.startswith(
        f"1 recorded checks ran under other time limits than this run gives them "
        f"(e.g. {task.problem.problem_id}: 60 s, now 3 s from default)")
    assert refused.value.fix.startswith("use a new --out, or the limits it was run with")
    assert snapshot(out_dir) == before
    # The same limits resume; only the memory limit differs now, and that is refused too.
    from runner.settings import format_size
    from runner.planning.sweep_config import default_mem_limit
    with pytest.raises(InputError, match=f"--mem-limit {format_size(default_mem_limit(1))}, not 2 GiB"):
        run_sweep(prepare(SweepConfig(**base, default_timeout=60, mem_limit=2**31)), executor=None)


def test_a_server_directory_whose_server_stopped(capsys, corpus, hol, tmp_path):
    """Its socket file is left behind; connecting to it is refused."""
    import socket as sockets

    from runner.checks.image_server import KEY, SOCKET

    dead = tmp_path / "server"
    dead.mkdir()
    listener = sockets.socket(sockets.AF_UNIX)
    listener.bind(str(dead / SOCKET))
    listener.close()
    (dead / KEY).write_bytes(b"k" * 32)
    result = cli_result(capsys, "run", corpus, "--out", tmp_path / "out", "--hol-light", hol,
                        *NO_BOX, "--server", dead)
    assert_one_line_error(result, dead, "no image server answers here",
                          f"; start one with `proofbatch serve {dead}`, or drop --server")


# -- a sweep directory holds the verdicts of the answers as they are now (issue 24) --

def test_an_out_holding_the_users_own_results_is_refused(capsys, corpus, hol, tmp_path, tripwire):
    mine = tmp_path / "my-results"
    mine.mkdir()
    (mine / "results.csv").write_text(f"problem_id,verdict\n{WORD},OK\n")
    before = snapshot(mine)
    result = cli_result(capsys, "run", corpus, "--out", mine, "--hol-light", hol, *NO_BOX)
    assert_one_line_error(result, mine, "is not a proofbatch sweep directory: it holds results.csv "
                          "and no sweep.json", "; pass a new or empty --out")
    assert snapshot(mine) == before
    assert not tripwire.exists()


@pytest.mark.parametrize("content", ["empty", "no problem of the corpus"])
def test_an_answers_folder_that_answers_no_problem(capsys, corpus, hol, tmp_path, tripwire, content):
    folder = tmp_path / "answers"
    folder.mkdir()
    if content != "empty":
        (folder / "answers.csv").write_text(f"problem_id,answer\n{ADD},ARITH_TAC\n")
    result = cli_result(capsys, "run", corpus, "--out", tmp_path / "out", "--answers", folder,
                        "--hol-light", hol, *NO_BOX)
    assert_one_line_error(result, folder, "answers folder gives no answer to any of the corpus's 2 "
                          "problems", "; pass the folder that holds <problem-id>/answer.txt")
    assert not (tmp_path / "out").exists()
    assert not tripwire.exists()


def test_a_resume_in_another_mode_is_refused_before_anything_is_built(capsys, corpus, hol, tmp_path,
                                                                     monkeypatch, tripwire):
    """Refused only after the native build (minutes), with a fix about HOL Light, before."""
    from runner.planning.sweep_config import SweepConfig
    from runner.sweep import prepare
    from runner.sweep_dir import check_manifest

    out_dir = tmp_path / "out"
    check_manifest(prepare(SweepConfig(corpus=corpus, out=out_dir, hol_light=hol, sandbox="none")), {})

    def no_build(*args, **kwargs):
        raise AssertionError("the native build ran before the refusal")

    monkeypatch.setattr("runner.provers.hol_light.session.native_auto.build_native", no_build)
    before = snapshot(out_dir)
    result = cli_result(capsys, "run", corpus, "--out", out_dir, "--hol-light", hol, *NO_BOX,
                        "--mode", "native")
    assert_one_line_error(result, out_dir / "sweep.json", "this sweep was run with --mode bytecode, "
                          "not native", "; use a new --out, or pass --mode bytecode")
    assert snapshot(out_dir) == before
    assert not tripwire.exists()


def test_a_resume_giving_the_default_memory_limit_is_not_refused(corpus, hol, tmp_path):
    """The default was recorded as None and compared with the size given."""
    from runner.settings import size_flag
    from runner.planning.sweep_config import SweepConfig, default_mem_limit
    from runner.sweep import prepare
    from runner.sweep_dir import check_manifest, check_resume_settings

    out_dir = tmp_path / "out"
    base = dict(corpus=corpus, out=out_dir, hol_light=hol, sandbox="none")
    check_manifest(prepare(SweepConfig(**base)), {})
    given = SweepConfig(**base, mem_limit=default_mem_limit(1))
    check_resume_settings(given)
    check_manifest(prepare(given), None, write=False)
    with pytest.raises(InputError) as refused:
        check_resume_settings(SweepConfig(**base, mem_limit=2**31))
    assert refused.value.problem.endswith("not 2 GiB; its verdicts would mix both")
    assert refused.value.fix == f"use a new --out, or pass --mem-limit {size_flag(default_mem_limit(1))}"
