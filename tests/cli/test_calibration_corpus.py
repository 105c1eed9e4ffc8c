"""--calibration-corpus DIR (issue 47): the corpus a cluster sweep's nodes
draw their calibration sample and canary from. A DIR that cannot give one
is refused in one line naming the flag, what is wrong and the fix, exit 2,
before HOL Light starts and without touching --out. (What a good DIR
gives: tests/cluster/test_calibration_corpus_hol.py.)"""

from __future__ import annotations

import json

import pytest

from runner import cli

from ..helpers import ADD, WORD, assert_one_line_error, make_problem

cli.build_parser()      # every subcommand imported now: the refusal's time limit is validation's

FLAG = "--calibration-corpus"
FIX = "; pass a corpus folder of <problem-id>/{setup.ml,query.txt,answer.txt} whose problems"


@pytest.fixture
def bench_map(tmp_path):
    """A map without a sidecar (as the bench's) timing the corpus's ADD and
    another problem of the bench, OTHER."""
    path = tmp_path / "timeout-map.json"
    path.write_text(json.dumps([{"problem_id": pid, "prove_secs": 2.0, "timeout_sec": 60}
                                for pid in (ADD, "arm.other.OTHER_CORRECT")]))
    return path


def cluster_run(run, corpus, hol, bench_map, calibration):
    return run(corpus, "--timeout-map", bench_map, "--map-mode", "native", "--hol-light", hol,
               "--cluster", "slurm", "--host-factor", "auto", FLAG, calibration)


def test_a_calibration_corpus_that_does_not_exist(run, corpus, hol, bench_map, tmp_path):
    missing = tmp_path / "no-such-corpus"
    result = cluster_run(run, corpus, hol, bench_map, missing)
    assert_one_line_error(result, FLAG, f"{missing} does not exist", FIX, f"or drop {FLAG}")


def test_a_calibration_corpus_that_is_a_file(run, corpus, hol, bench_map, tmp_path):
    result = cluster_run(run, corpus, hol, bench_map, bench_map)
    assert_one_line_error(result, FLAG, f"{bench_map} is not a directory", FIX)


def test_a_calibration_corpus_without_problems(run, corpus, hol, bench_map, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = cluster_run(run, corpus, hol, bench_map, empty)
    assert_one_line_error(result, f"{FLAG} {empty}", "corpus has no problems",
                          "; pass the folder that holds <problem-id>/setup.ml")


def test_a_calibration_corpus_whose_problems_the_map_does_not_time(run, corpus, hol, bench_map,
                                                                   tmp_path):
    other = tmp_path / "other"
    make_problem(other, WORD)         # the sweep's own, not in the map
    make_problem(other, "arm.untimed.UNTIMED_CORRECT")
    result = cluster_run(run, corpus, hol, bench_map, other)
    assert_one_line_error(result, FLAG, f"no problem of {other} has a time in the timeout map "
                          f"{bench_map} (e.g. arm.untimed.UNTIMED_CORRECT has none)", FIX)


def test_a_calibration_problem_with_a_sweep_problems_id_but_another_setup_is_left_out(
        run, corpus, hol, bench_map, tmp_path):
    other = tmp_path / "other"
    make_problem(other, ADD).joinpath("setup.ml").write_text("let another_context = 2;;\n")
    result = cluster_run(run, corpus, hol, bench_map, other)
    assert_one_line_error(result, FLAG, f"no problem of {other} other than 1 with the ids of other "
                          f"problems of the sweep (e.g. {ADD}) has a time in the timeout map", FIX)


def test_a_calibration_corpus_whose_timed_problems_have_no_ground_truth(run, corpus, hol, bench_map,
                                                                        tmp_path):
    other = tmp_path / "other"
    make_problem(other, "arm.other.OTHER_CORRECT", answer=None)
    result = cluster_run(run, corpus, hol, bench_map, other)
    assert_one_line_error(result, FLAG, f"none of the 1 problems of {other} the timeout map times "
                          "has an answer.txt (e.g. arm.other.OTHER_CORRECT)", FIX)


def test_a_calibration_corpus_without_a_timeout_map(run, corpus, hol, tmp_path):
    result = run(corpus, "--hol-light", hol, FLAG, corpus)
    assert_one_line_error(result, FLAG, "draws ground truths by their times in the timeout map, and "
                          "no --timeout-map is given", "; pass --timeout-map MAP, or drop " + FLAG)
