"""Deriving timeout maps from synthetic profiles: the bench's method (floor,
cap, light and heavy classes, margins), the format round trip with the
bench's own file, and the pooled-spread policy that goes beyond it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from runner import cli
from runner.errors import InputError
from runner.maps.profile_data import ProblemRuns, write_profile as write_profile_data
from runner.maps.timeout_map import MapPolicy, derive, read_sidecar, sidecar_path, write_map
from runner.maps.provenance import load
from runner.maps.timeouts import read_map

from ..helpers import BENCH_MAP, EMONTREDC

# The bench's method alone: no pooled model.
BENCH_ONLY = MapPolicy(target_false_timeout=0)


def runs(pid: str, *times: float, rss: tuple[float, ...] = ()) -> ProblemRuns:
    return ProblemRuns(pid, "generic", tuple(times), peak_rss_mb=rss)


def entry(derived, pid):
    return next(e for e in derived.entries if e.problem_id == pid)


def test_light_proofs_get_the_floor():
    m = derive([runs("tiny", 0.004, 0.003, 0.005), runs("ten", 10.0, 11.0, 10.5)], BENCH_ONLY)
    assert entry(m, "tiny").timeout_sec == 120 and entry(m, "tiny").rule == "floor"
    assert entry(m, "ten").cls == "light" and entry(m, "ten").timeout_sec == 120


def test_margins_multiply_the_max_by_class():
    m = derive([runs("light", 70.0, 80.0, 75.0), runs("heavy", 100.0, 110.0, 120.0)],
               MapPolicy(target_false_timeout=0, heavy_s=100))
    light, heavy = entry(m, "light"), entry(m, "heavy")
    assert (light.cls, light.timeout_sec, light.rule) == ("light", 160, "class-margin")
    assert (heavy.cls, heavy.timeout_sec, heavy.margin) == ("heavy", 360, 3.0)
    assert heavy.headroom == 3.0


def test_a_high_percentile_can_replace_the_max():
    m = derive([runs("p", 100.0, 200.0, 300.0)], MapPolicy(target_false_timeout=0, percentile=50))
    assert entry(m, "p").statistic == 200.0 and entry(m, "p").timeout_sec == 600


def test_class_boundaries():
    policy = MapPolicy(target_false_timeout=0)
    m = derive([runs("at_heavy_s", 60.0, 59.0, 58.0), runs("below", 59.9, 59.0, 58.0),
                runs("spread", 2.0, 3.1, 2.5), runs("spread_but_tiny", 0.2, 0.9, 0.5),
                runs("steady", 2.0, 2.9, 2.5)], policy)
    assert {e.problem_id: e.cls for e in m.entries} == {
        "at_heavy_s": "heavy", "below": "light", "spread": "heavy", "spread_but_tiny": "light",
        "steady": "light"}


def test_the_cap_clips_and_every_clipped_problem_is_listed(tmp_path):
    m = derive([runs("huge", 5000.0, 5200.0, 5100.0), runs("big", 3600.0, 3700.0, 3650.0),
                runs("ok", 1000.0, 1000.0, 1000.0)], BENCH_ONLY)
    assert [e.problem_id for e in m.clipped] == ["big", "huge"]
    assert entry(m, "huge").timeout_sec == 10800 and entry(m, "ok").timeout_sec == 3000
    write_map(tmp_path / "m.json", m, {"profile": "synthetic"})
    assert read_sidecar(tmp_path / "m.json")["clipped_at_cap"] == ["big", "huge"]


def test_floor_and_cap_are_options():
    m = derive([runs("a", 1.0, 1.0, 1.0), runs("b", 400.0, 400.0, 400.0)],
               MapPolicy(target_false_timeout=0, floor_s=10, cap_s=1000))
    assert [e.timeout_sec for e in m.entries] == [10, 1000]
    with pytest.raises(InputError, match="below the floor"):
        MapPolicy(floor_s=200, cap_s=100)


def test_the_map_is_the_bench_format_both_ways(tmp_path):
    bench = tmp_path / "bench-timeout-map.json"
    bench.write_text(json.dumps(BENCH_MAP))
    assert read_map(bench)[EMONTREDC].prove_secs == 9300.683
    ours = tmp_path / "ours.json"
    write_map(ours, derive([runs("x", 1.0, 2.0, 1.5, rss=(400.0, 410.0, 420.0))], BENCH_ONLY), {})
    data = json.loads(ours.read_text())
    assert [set(e) for e in data] == [{"problem_id", "prove_secs", "timeout_sec"}]
    assert data[0]["prove_secs"] == 1.5               # the median: the expected duration
    assert load(ours).limits() == {"x": 120.0}
    assert sidecar_path(ours).name == "ours.meta.json"
    meta = read_sidecar(ours)["problems"]["x"]
    assert meta["expected_mem_mb"] == 420.0 and meta["mem_guard_mb"] == 840.0
    assert read_sidecar(bench) is None                # the bench's maps have none


def lognormal_profile(rng, problems: int, runs_each: int, sigma: float, median_s: float):
    centres = median_s * np.exp(rng.uniform(-0.5, 0.5, problems))
    times = centres[:, None] * np.exp(rng.normal(0, sigma, (problems, runs_each)))
    return centres, [runs(f"p{i}", *map(float, t)) for i, t in enumerate(times)]


def test_three_runs_alone_are_too_few_and_the_pooled_model_meets_its_target():
    """Run times with 15% log-normal noise. A fourth run exceeds the max of
    three about one time in four; with the pooled spread, the rate of false
    timeouts in fresh runs matches the target asked for."""
    rng = np.random.default_rng(1)
    sigma, target = 0.15, 0.01
    centres, profile = lognormal_profile(rng, 2000, 3, sigma, median_s=30.0)
    fresh = centres[:, None] * np.exp(rng.normal(0, sigma, (2000, 200)))
    tight = dict(floor_s=1, light_margin=1, heavy_margin=1, heavy_spread=100)

    def false_timeout_rate(derived) -> float:
        limit = {e.problem_id: e.timeout_sec for e in derived.entries}
        limits = np.array([limit[r.problem_id] for r in profile])[:, None]
        return float((fresh > limits).mean())

    bare = derive(profile, MapPolicy(target_false_timeout=0, **tight))
    assert 0.2 < false_timeout_rate(bare) < 0.3

    pooled = derive(profile, MapPolicy(target_false_timeout=target, **tight))
    band = pooled.model.bands["10-60s"]
    assert band.df == 2 * band.problems > 3900 and band.sigma_from == "10-60s" and abs(band.sigma - sigma) < 0.01
    # Only a problem whose own max already lies past the prediction keeps its margin of 1.
    raised = [e.rule == "spread-target" for e in pooled.entries]
    assert sum(raised) > 0.99 * len(raised)
    assert 0.6 * target < false_timeout_rate(pooled) < 1.4 * target
    assert 0.8 * 2000 * target < pooled.expected_false_timeouts < 1.2 * 2000 * target


def test_a_sparse_band_borrows_the_spread_of_all_problems():
    rng = np.random.default_rng(2)
    _, light = lognormal_profile(rng, 50, 3, 0.1, median_s=5.0)
    m = derive(light + [runs("lone_heavy", 900.0, 1000.0, 950.0)], MapPolicy())
    assert m.model.bands["10-60min"].df == 2 and m.model.bands["10-60min"].sigma_from == "all"
    assert m.model.bands["10-60min"].sigma == m.model.bands["all"].sigma
    lone = entry(m, "lone_heavy")
    assert lone.cls == "heavy" and lone.timeout_sec >= 3000 and lone.p_false_timeout < 1e-3


def test_expected_false_timeouts_counts_clipped_problems():
    m = derive([runs("near_cap", 8000.0, 9000.0, 10000.0)], MapPolicy())
    assert m.clipped and m.expected_false_timeouts > 0.01


def write_profile(path: Path, problems: list[ProblemRuns]) -> Path:
    return write_profile_data(path, problems, {"corpus": "/synthetic", "mode": "bytecode-fork"})


def test_the_command_prints_every_clipped_problem(tmp_path, capsys):
    prof = write_profile(tmp_path / "prof", [runs("huge", 5000.0, 5100.0, 5200.0),
                                             runs("small", 0.1, 0.1, 0.12)])
    assert cli.main(["timeout-map", str(prof), "--out", str(tmp_path / "m.json")]) == 0
    printed = capsys.readouterr().out
    assert "CLIPPED" in printed and "huge" in printed and "small" not in printed.split("CLIPPED")[1]


def test_deriving_a_map_leaves_its_profile_untouched(tmp_path, capsys):
    """A profile is a record of measurements (profiles/ is tracked in git)."""
    prof = write_profile(tmp_path / "prof", [runs("a", 1.0, 1.1, 1.2)])
    before = {p: p.read_bytes() for p in prof.rglob("*") if p.is_file()}
    assert cli.main(["timeout-map", str(prof), "--out", str(tmp_path / "m.json")]) == 0
    assert {p: p.read_bytes() for p in prof.rglob("*") if p.is_file()} == before


def test_a_bad_policy_is_one_line_and_exit_2(tmp_path, capsys):
    prof = write_profile(tmp_path / "prof", [runs("a", 1.0, 1.0, 1.0)])
    assert cli.main(["timeout-map", str(prof), "--out", str(tmp_path / "m.json"),
                     "--light-margin", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--light-margin" in err and "pass 1 or more" in err
    assert not (tmp_path / "m.json").exists()


def test_validating_needs_a_map(tmp_path, capsys):
    prof = write_profile(tmp_path / "prof", [runs("a", 1.0, 1.0, 1.0)])
    assert cli.main(["timeout-map", str(prof), "--validate"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--validate needs the map to validate; pass --map MAP, or --out MAP to "
                        "derive one and validate it"), err


def test_timeouts_are_whole_seconds_rounded_up():
    m = derive([runs("a", 30.2, 30.1, 30.0)], MapPolicy(target_false_timeout=0, floor_s=10))
    assert entry(m, "a").timeout_sec == math.ceil(2 * 30.2) == 61


# --- a sweep under a derived map ---------------------------------------------

def test_a_sweep_takes_memory_needs_from_the_map_and_warns_of_another_mode(tmp_path):
    from runner.provers.hol_light.costs.map_modes import RATIO_MAX
    from runner.sweep import prepare
    from runner.maps.timeout_map import MIN_GUARD_BYTES

    from ..helpers import beside_coverage, demo_config

    m = derive([runs("arith.add_comm", 0.01, 0.01, 0.01, rss=(900.0, 950.0, 1000.0)),
                runs("lists.append_nil", 0.01, 0.01, 0.01, rss=(300.0, 300.0, 300.0))], MapPolicy())
    native = tmp_path / "native.json"
    write_map(native, m, {"prover": "hol-light", "mode": "native-fork"})
    prepared = prepare(demo_config(tmp_path / "out", timeout_map=native, mem_limit=8 << 30))
    limits = {t.problem.problem_id: t.limits for t in prepared.tasks}
    assert limits["arith.add_comm"].expected_mem_bytes == 1000 << 20
    assert limits["arith.add_comm"].mem_bytes == 2000 << 20           # the peak x mem_margin 2
    assert limits["lists.append_nil"].mem_bytes == MIN_GUARD_BYTES   # never under 1 GiB
    assert limits["logic.drinker"].mem_bytes == 8 << 30               # not in the map: --mem-limit
    # A native map in a bytecode sweep: its limits are converted (x RATIO_MAX), loudly.
    assert limits["arith.add_comm"].time_s == 120 * RATIO_MAX
    assert limits["arith.add_comm"].time_source == f"map (native x{RATIO_MAX:.2f})"
    [warning] = beside_coverage(prepared)
    assert "measured in native mode" in warning and "run in bytecode mode" in warning and str(native) in warning
    assert "CONVERTED" in warning and "2 checks" in warning

    small = prepare(demo_config(tmp_path / "out2", timeout_map=native, mem_limit=1500 << 20))
    assert {t.problem.problem_id: t.limits.mem_bytes for t in small.tasks}["arith.add_comm"] == 1500 << 20


def test_sub_second_proofs_keep_their_class_margin_whatever_the_clock_noise():
    """Three proofs of a few ms with 10x jitter (the clock's, not theirs):
    the pooled model, on 6 degrees of freedom, would put them past the floor;
    they must stay on it."""
    tiny = [runs(f"t{i}", 0.005, 0.05, 0.02) for i in range(3)]
    m = derive(tiny, MapPolicy())
    assert (m.model.predict(1e-4) > 120).all()
    assert all(e.timeout_sec == 120 and e.rule == "floor" for e in m.entries)
