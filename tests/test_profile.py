"""Profiling the example corpus on the real HOL Light, three runs, then
deriving its timeout map and validating it: every ground truth reruns under
the map with no false timeout.

The ground truth is the demo's answers for the problems expected to verify,
plus one wrong "ground truth" (arith.false_claim's), which must surface as a
corpus defect and never be timed. The other demo problems have no ground
truth at all, which is a defect too; among them the two heaviest proofs,
whose bytecode minutes each of the three runs and the validation would pay
again (heavy.arith_cases, tens of seconds, stands for the heavy proofs).
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import pytest

from cluster.local import LocalExecutor
from runner import cli
from runner.results import shards
from runner.errors import InputError
from runner.provers.hol_light import runtime
from runner.profile import ProfileConfig, load_profile, profile, recorded_path
from runner.maps.provenance import load

from .helpers import DEMO, TEST_MEM_LIMIT, expected_verdicts

pytestmark = pytest.mark.hol

BROKEN_TRUTH = "arith.false_claim"
# Proofs that verify, given no ground truth: defects with "no answer", never run.
LEFT_OUT = ("heavy.meson_group", "heavy.big_mod")


def write_ground_truth(path: Path, changed: dict[str, str] | None = None) -> Path:
    truths = {pid: (DEMO / pid / "answer.txt").read_text()
              for pid, verdict in expected_verdicts().items()
              if (verdict == "OK" and pid not in LEFT_OUT) or pid == BROKEN_TRUTH}
    truths.update(changed or {})
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["problem_id", "answer"])
        w.writerows(sorted(truths.items()))
    return path


class Interrupt(KeyboardInterrupt):
    """Stands for Ctrl-C arriving while run 2 is under way."""


@pytest.fixture(scope="module")
def demo_profile(hol_session, tmp_path_factory):
    root = tmp_path_factory.mktemp("profile")
    answers = write_ground_truth(root / "truth.csv")
    cfg = ProfileConfig(corpus=DEMO, out=root / "profiles" / "demo", answers=answers, runs=3,
                        ceiling_s=300, seed=7, workers=2, mem_limit=TEST_MEM_LIMIT, context_root=DEMO)

    def executor_for(prepared):
        return LocalExecutor(workers=prepared.config.workers, session=hol_session)

    runs_started: list[str] = []
    rows_in_run_2 = []

    def interrupt_in_run_2(row):
        if len(runs_started) == 2:
            rows_in_run_2.append(row)
            if len(rows_in_run_2) == 4:
                raise Interrupt()

    with pytest.raises(KeyboardInterrupt):
        profile(cfg, executor_for, on_run=lambda r, n, d: runs_started.append(d),
                on_row=interrupt_in_run_2)
    interrupted = {d: len(shards.read_results(Path(d))) for d in runs_started}
    result = profile(cfg, executor_for)
    return cfg, result, interrupted


def ok_ids() -> set[str]:
    """The problems given a ground truth that verifies."""
    return {pid for pid, v in expected_verdicts().items() if v == "OK" and pid not in LEFT_OUT}


def why(result) -> str:
    """The defects a profile found, each with its verdict and reason: what a
    failed assertion on them must show."""
    return "\n".join(f"{d.problem_id} {d.verdict} (run {d.run}): {d.reason}" for d in result.defects)


def test_every_ground_truth_is_timed_in_each_of_three_runs(demo_profile):
    cfg, result, _ = demo_profile
    assert {r.problem_id for r in result.runs} == ok_ids(), why(result)
    for r in result.runs:
        assert len(r.prove_secs) == 3 and all(t > 0 for t in r.prove_secs)
        assert len(r.peak_rss_mb) == 3 and r.image_key
    stats = {s["problem_id"]: s for s in result.stats}
    heavy = stats["heavy.arith_cases"]
    assert heavy["min"] <= heavy["median"] <= heavy["max"]
    assert heavy["max"] > 20 * stats["arith.add_comm"]["max"]
    assert (cfg.out / "summary.csv").read_text().count("\n") == len(ok_ids()) + 1


def test_an_interrupted_profile_resumes_without_redoing_checks(demo_profile):
    cfg, result, interrupted = demo_profile
    runs = result.provenance["generations"][0]["runs"]
    assert [r["seed"] for r in runs] == [7, 8, 9]
    assert 0 < interrupted[str(cfg.out / runs[1]["dir"])] < len(ok_ids())
    for run in runs:
        table = shards.read_results(cfg.out / run["dir"])
        ids = table.column("problem_id").to_pylist()
        assert len(ids) == len(set(ids)), "a check was recorded twice"
        manifest = json.loads((cfg.out / run["dir"] / "sweep.json").read_text())
        assert manifest["config"]["policy"] == "shuffle"
        assert manifest["config"]["default_timeout"] == 300


def test_wrong_or_missing_ground_truths_are_defects_and_never_timed(demo_profile):
    cfg, result, _ = demo_profile
    defects = {d.problem_id: d for d in result.defects}
    assert set(defects) == set(expected_verdicts()) - ok_ids(), why(result)
    assert defects[BROKEN_TRUTH].verdict == "FAIL"
    assert "no answer" in defects["fault.memout"].reason
    assert all("no answer" in defects[pid].reason for pid in LEFT_OUT)
    # Found in run 1, a defect is left out of runs 2 and 3.
    for run in result.provenance["generations"][0]["runs"][1:]:
        ids = set(shards.read_results(cfg.out / run["dir"]).column("problem_id").to_pylist())
        assert ids == ok_ids()


def test_the_profile_describes_itself(demo_profile):
    cfg, result, _ = demo_profile
    prov = result.provenance
    assert recorded_path(prov, "corpus", cfg.out) == DEMO.resolve() and prov["mode"] == "bytecode"
    assert not Path(prov["corpus"]).is_absolute()     # the profile moves with its corpus
    assert prov["prover_build"].startswith("debian-hol-light")
    # The OCaml runtime its times were measured under: bytecode's default.
    assert prov["runtime"] == runtime.BYTECODE_TUNED.key
    assert set(prov["problems"]) == set(expected_verdicts())
    assert all(len(p["content_sha256"]) == 64 for p in prov["problems"].values())
    assert prov["generations"][0]["machine"]["cores"] >= 1
    assert load_profile(cfg.out).stats == result.stats


def test_derived_map_validates_with_no_false_timeout(demo_profile, hol_session, tmp_path, capsys):
    cfg, result, _ = demo_profile
    map_path = tmp_path / "demo.json"
    assert cli.main(["timeout-map", str(cfg.out), "--out", str(map_path)]) == 0
    timeouts = load(map_path).limits()
    assert load(map_path).sidecar.provenance["runtime"] == runtime.BYTECODE_TUNED.key     # the profile's
    assert set(timeouts) == ok_ids(), why(result)
    assert all(120 <= t <= 10800 for t in timeouts.values())

    from runner.profile import validate
    v = validate(result, map_path, lambda c: LocalExecutor(workers=2, session=hol_session),
                 workers=2, mem_limit=TEST_MEM_LIMIT)
    assert v.passed and v.false_timeouts == []
    assert {r["problem_id"] for r in v.summary.table.to_pylist()} == ok_ids()
    assert all(r["verdict"] == "OK" and r["timeout_source"] == "map"
               for r in v.summary.table.to_pylist())
    assert v.headroom[0].ratio == max(max(r.prove_secs) / timeouts[r.problem_id] for r in result.runs)


def test_incremental_profiles_only_what_changed(demo_profile, hol_session, tmp_path):
    cfg, before, _ = demo_profile
    answers = write_ground_truth(tmp_path / "changed.csv",
                                 {"logic.drinker": "MESON_TAC[] THEN ALL_TAC"})
    with pytest.raises(InputError, match="new or changed"):
        profile(replace(cfg, answers=answers), lambda c: LocalExecutor(workers=2, session=hol_session))
    changed = replace(cfg, answers=answers, incremental=True)
    after = profile(changed, lambda c: LocalExecutor(workers=2, session=hol_session))
    generations = after.provenance["generations"]
    assert [g["id"] for g in generations] == ["g1", "g2"]
    assert generations[1]["problems"] == ["logic.drinker"]
    stats = {s["problem_id"]: s for s in after.stats}
    assert stats["logic.drinker"]["generation"] == "g2"
    assert all(s["generation"] == "g1" for pid, s in stats.items() if pid != "logic.drinker")
    kept = {s["problem_id"]: s["prove_secs"] for s in before.stats}
    assert all(stats[pid]["prove_secs"] == kept[pid] for pid in kept if pid != "logic.drinker")
