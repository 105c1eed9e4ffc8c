"""`profile --runs`: bounded, and honoured on a profile that was taken.

A finished profile given another --runs used to exit 0 with its old
summary, as if the count had been met; `--runs 1000000000` planned a
billion runs in memory (4 GB in 12 s) before any check. Now more runs than
a profile has run just the new ones, fewer are refused naming the count it
was taken with, and above MAX_RUNS is refused before anything is read.
"""

from __future__ import annotations

import json
import resource
import subprocess
from dataclasses import replace

import pytest

from cluster.local import LocalExecutor
from runner import cli
from runner.errors import InputError
from runner import sweep
from runner.profile import MAX_RUNS, ProfileConfig, _with_runs_asked, profile
from runner.results import shards

from .helpers import DEMO, PROOFBATCH, TEST_MEM_LIMIT

PROBLEMS = ("arith.add_comm", "lists.append_nil")


def test_more_runs_than_the_bound_are_refused_before_anything_is_planned(tmp_path):
    def one_gib():
        # The refusal needs Python and its imports, well under this; the
        # old plan of a billion runs needed gigabytes.
        resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))

    for runs in ("1000000000", str(MAX_RUNS + 1), "0"):
        done = subprocess.run([str(PROOFBATCH), "profile", str(DEMO), "--out", str(tmp_path / "p"),
                               "--runs", runs], capture_output=True, text=True, timeout=120,
                              preexec_fn=one_gib)
        err = done.stderr.strip().splitlines()
        assert done.returncode == 2, done.stderr[-2000:]
        assert len(err) == 1 and err[0].startswith(f"proofbatch: error: --runs: {runs} ")
        assert f"1 to {MAX_RUNS}" in err[0]
        assert not (tmp_path / "p").exists()


def generation(gid: str, runs: int, finished: bool = True) -> dict:
    return {"id": gid, "finished": "2026-01-01T00:00:00" if finished else None,
            "runs": [{"dir": f"runs/{gid}-r{r}", "seed": 40 + r - 1} for r in range(1, runs + 1)]}


def test_fewer_runs_or_more_for_several_generations_are_refused_naming_the_count(tmp_path):
    cfg = ProfileConfig(corpus=DEMO, out=tmp_path / "p", runs=2)
    with pytest.raises(InputError, match=r"taken with --runs 3, not 2 .*pass --runs 3"):
        _with_runs_asked(cfg, [generation("g1", 3)])
    with pytest.raises(InputError, match=r"taken with --runs 3, not 2 .*pass --runs 3"):
        _with_runs_asked(cfg, [generation("g1", 3, finished=False)])
    # g1's problems would keep 1 run while g2's had 4.
    with pytest.raises(InputError, match=r"taken with --runs 1, not 4 .*one generation only"):
        _with_runs_asked(replace(cfg, runs=4), [generation("g1", 1), generation("g2", 1)])
    # Unasked, or asked the same: nothing to do for a finished one, a resume for the other.
    assert _with_runs_asked(replace(cfg, runs=None), [generation("g1", 3)]) is None
    assert _with_runs_asked(replace(cfg, runs=3), [generation("g1", 3)]) is None
    unfinished = generation("g2", 2, finished=False)
    assert _with_runs_asked(replace(cfg, runs=None), [generation("g1", 5), unfinished]) is unfinished
    # An unfinished generation takes more runs, whatever came before it.
    more = _with_runs_asked(replace(cfg, runs=4), [generation("g1", 3), unfinished])
    assert [(r["dir"], r["seed"]) for r in more["runs"]] == [
        ("runs/g2-r1", 40), ("runs/g2-r2", 41), ("runs/g2-r3", 42), ("runs/g2-r4", 43)]


@pytest.mark.hol
def test_more_runs_on_a_finished_profile_run_only_the_new_ones(hol_session, tmp_path, capsys,
                                                               monkeypatch):
    started = []
    # Each run is prepared once: a native backend compiles every context of
    # the corpus as it prepares, and run 1 used to be prepared twice.
    prepared = []
    real_prepare = sweep._prepare
    monkeypatch.setattr(sweep, "_prepare", lambda config, *a, **kw: prepared.append(config.out)
                        or real_prepare(config, *a, **kw))

    def executor_for(prepared):
        return LocalExecutor(workers=prepared.config.workers, session=hol_session)

    cfg = ProfileConfig(corpus=DEMO, out=tmp_path / "profile", runs=1, ceiling_s=120, seed=7,
                        mem_limit=TEST_MEM_LIMIT, context_root=DEMO, problems=PROBLEMS)
    first = profile(cfg, executor_for)
    assert {r.problem_id: len(r.prove_secs) for r in first.runs} == dict.fromkeys(PROBLEMS, 1)
    assert prepared == [cfg.out / "runs" / "g1-r1"]
    run_1 = sorted(shards.read_results(cfg.out / "runs" / "g1-r1").to_pylist(),
                   key=lambda row: row["problem_id"])

    grown = profile(replace(cfg, runs=3), executor_for,
                    on_row=lambda row: started.append(row.problem_id))
    assert {r.problem_id: len(r.prove_secs) for r in grown.runs} == dict.fromkeys(PROBLEMS, 3)
    assert sorted(started) == sorted(PROBLEMS * 2), "only runs 2 and 3 check anything"
    assert prepared[1:] == [cfg.out / "runs" / f"g1-r{r}" for r in (1, 2, 3)]
    g1 = grown.provenance["generations"][0]
    assert [(r["dir"], r["seed"]) for r in g1["runs"]] == [
        ("runs/g1-r1", 7), ("runs/g1-r2", 8), ("runs/g1-r3", 9)]
    assert g1["finished"] and [e["runs"] for e in g1["extended"]] == [3]
    assert sorted(shards.read_results(cfg.out / "runs" / "g1-r1").to_pylist(),
                  key=lambda row: row["problem_id"]) == run_1
    assert {p["problem_id"]: p["runs"] for p in json.loads(
        (cfg.out / "summary.json").read_text())["problems"]} == dict.fromkeys(PROBLEMS, 3)

    # Without --runs, the profile's own count: nothing to do.
    started.clear()
    assert len(profile(replace(cfg, runs=None), executor_for).runs[0].prove_secs) == 3
    assert started == []
    # Fewer, through the command line: one line naming the count, exit 2.
    capsys.readouterr()
    code = cli.main(["profile", str(DEMO), "--out", str(cfg.out), "--runs", "2", "--ceiling", "120",
                     "--seed", "7", "--context-root", str(DEMO), "--problems", ",".join(PROBLEMS)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "taken with --runs 3, not 2" in err[0] and "pass --runs 3" in err[0]
