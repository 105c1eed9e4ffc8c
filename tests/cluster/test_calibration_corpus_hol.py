"""--calibration-corpus DIR (issue 47) on HOL Light's example corpus and the
demo map: a cluster sweep with no ground truth of its own to measure a
node by (answers given with --answers, no answer.txt in its folders; or
ground truths all outside the calibration band) draws each node's sample
and its canary from DIR's, each under the limit the sweep would give it.

Prepared as a cluster's sweep is (``prepare(..., per_node=True)``), in
bytecode (nothing compiled); one sweep runs on this machine as the node,
on the local executor as a Slurm array task runs its checks, with the
session fixture's HOL Light. (A DIR that cannot give one is refused:
tests/cli/test_calibration_corpus.py.)
"""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest

from cluster.local import LocalExecutor
from runner.checks.worker import NODE_HOST_ENV
from runner.maps.node_factor import SAMPLE_LIMIT_MULTIPLE
from runner.sweep import prepare, run_sweep

from ..helpers import DEMO, ROOT, demo_config

pytestmark = pytest.mark.hol

DEMO_MAP = ROOT / "timeout_maps" / "hol_light_demo.json"
LIGHT = ("arith.add_comm", "logic.drinker", "sets.union_comm")
HEAVY = ("heavy.arith_cases", "heavy.big_mod")


def ids(spec) -> tuple[list[str], str | None]:
    """The problems of a node spec's sample, and its canary's."""
    return ([s.task.problem.problem_id for s in spec.sample],
            None if spec.canary is None else spec.canary.task.problem.problem_id)


def copy_problems(to, pids, answers: bool = True):
    for pid in pids:
        shutil.copytree(DEMO / pid, to / pid)
        if not answers:
            (to / pid / "answer.txt").unlink()
    return to


def given_answers(to, pids):
    """An --answers folder answering ``pids`` as the example corpus does."""
    for pid in pids:
        (to / pid).mkdir(parents=True)
        shutil.copy(DEMO / pid / "answer.txt", to / pid / "answer.txt")
    return to


def bench_map(path, times: dict[str, float], limits: dict[str, float] = {}):
    """The demo map with some times and limits changed, without its sidecar
    (a map measured elsewhere, as the bench's own: declared bytecode)."""
    entries = json.loads(DEMO_MAP.read_text())
    for e in entries:
        e["prove_secs"] = times.get(e["problem_id"], e["prove_secs"])
        e["timeout_sec"] = limits.get(e["problem_id"], e["timeout_sec"])
    path.write_text(json.dumps(entries))
    return path


def test_a_sweep_whose_ground_truths_are_too_heavy_draws_from_the_calibration_corpus(tmp_path):
    # The sweep's one ground truth with a map time of 1 s or more is
    # heavy.meson_group, 107 s: above the calibration band (60 s), so no node
    # can measure on it, nor check it as a canary (canary.CANARY_MAX_S).
    timed = bench_map(tmp_path / "map.json", {}, {"heavy.arith_cases": 300.0})
    calibration = copy_problems(tmp_path / "calibration", HEAVY + ("logic.drinker",))
    settings = dict(only=LIGHT + ("heavy.meson_group",), timeout_map=timed, map_mode="bytecode",
                    host_factor="auto", calibration_budget=0.5, limit_slack=30.0)
    own = prepare(demo_config(tmp_path / "own", **settings), per_node=True)
    assert ids(own.node_factor) == ([], None)
    prepared = prepare(demo_config(tmp_path / "out", calibration_corpus=calibration, **settings),
                       per_node=True)
    spec = prepared.node_factor
    # The budget (half of the sweep's 107 s) takes heavy.arith_cases (31 s),
    # not heavy.big_mod too; the canary is the one nearest 2 s.
    assert ids(spec) == (["heavy.arith_cases"], "heavy.arith_cases")
    (sample,) = spec.sample
    assert sample.task.problem.directory == calibration / "heavy.arith_cases"
    assert sample.task.problem.answer == (calibration / "heavy.arith_cases" / "answer.txt").read_bytes()
    assert sample.expected_s == pytest.approx(31.028019)
    # Its limit is the one the sweep would give it (the map's 300 s, the
    # slack), times the sample's room; the canary's the same check.
    given = prepare(demo_config(tmp_path / "given", **{**settings, "only": ("heavy.arith_cases",),
                                                       "host_factor": "1"}))
    (task,) = given.tasks
    assert task.limits.time_s == 330.0
    assert sample.task.limits.time_s == SAMPLE_LIMIT_MULTIPLE * 330.0
    assert sample.task.limits.mem_bytes == task.limits.mem_bytes
    assert spec.canary.task == sample.task
    # The sweep's own checks are as without the flag.
    assert {t.problem.problem_id: t.limits for t in prepared.tasks} == \
        {t.problem.problem_id: t.limits for t in own.tasks}
    said = " ".join(prepared.warnings)
    assert f"measures one on 1 ground truths of --calibration-corpus {calibration}, about 31 s" in said
    assert "each node checks the canary heavy.arith_cases (about 31.0 s" in said


def test_a_sweep_of_given_answers_takes_its_canary_from_the_example_corpus(tmp_path):
    # Answers given with --answers, and no answer.txt in the problem folders:
    # no ground truth at hand. The example corpus, timed by the demo map,
    # gives the canary; its sample costs more than the budget of a sweep of
    # light proofs allows: not an error, the note says so.
    corpus = copy_problems(tmp_path / "corpus", LIGHT, answers=False)
    answers = given_answers(tmp_path / "answers", LIGHT)
    settings = dict(corpus=corpus, answers=answers, timeout_map=DEMO_MAP, host_factor="auto",
                    calibration_budget=1.0)
    assert ids(prepare(demo_config(tmp_path / "own", **settings), per_node=True).node_factor) == \
        ([], None)
    prepared = prepare(demo_config(tmp_path / "out", calibration_corpus=DEMO, **settings),
                       per_node=True)
    assert ids(prepared.node_factor) == ([], "heavy.arith_cases")
    assert prepared.node_factor.canary.task.problem.directory == DEMO / "heavy.arith_cases"
    said = " ".join(prepared.warnings)
    assert f"no ground truth of --calibration-corpus {DEMO} fits --calibration-budget 1" in said
    assert "each node checks the canary heavy.arith_cases" in said


def test_a_node_measures_its_factor_and_canary_on_the_calibration_corpus(hol_session, tmp_path,
                                                                        monkeypatch):
    # This machine as a node with nothing cached. The sweep's answers are
    # given, none of its folders has an answer.txt; the calibration corpus is
    # the example corpus, on a map that times logic.drinker at 1.5 s (in the
    # band, a cheap canary) and the sweep's add_comm at 5 s (so that half of
    # the sweep's expected time pays for it).
    monkeypatch.setenv("PROOFBATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(NODE_HOST_ENV, "pb-calibration-corpus-node")
    only = ("arith.add_comm", "sets.union_comm")
    corpus = copy_problems(tmp_path / "corpus", only, answers=False)
    answers = given_answers(tmp_path / "answers", only)
    timed = bench_map(tmp_path / "map.json", {"logic.drinker": 1.5, "arith.add_comm": 5.0})
    out = tmp_path / "out"
    prepared = prepare(demo_config(out, corpus=corpus, answers=answers, timeout_map=timed,
                                   map_mode="bytecode", host_factor="auto", calibration_budget=0.5,
                                   calibration_corpus=DEMO, workers=1), per_node=True)
    assert ids(prepared.node_factor) == (["logic.drinker"], "logic.drinker")
    summary = run_sweep(prepared, LocalExecutor(workers=1, session=hol_session), on_note=lambda n: None)
    assert summary.counts == {"OK": 2}
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert sorted(r["problem_id"] for r in rows) == sorted(only)
    manifest = json.loads((out / "sweep.json").read_text())
    (node,) = manifest["node_factors"]
    # Measured on the calibration corpus's ground truth (its 0.02 s proof
    # against the map's 1.5 s: a fast node, whose limits stay the map's).
    assert node["how"] == "measured" and node["problems"] == 1 and node["factor"] < 1, node
    assert all(r["host_factor"] == node["factor"] for r in rows)
    (watched,) = manifest["node_canaries"]
    assert watched["problem_id"] == "logic.drinker" and watched["runs"] >= 1, watched
