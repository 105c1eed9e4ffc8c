"""A map measured on another host (runner/maps/host_factor.py, issue 31).

The story: calibration draws a small sample of ground truths spread over the
map's times, measures this host against the map as one median ratio, keeps
it per host, map, the map's mode, the checks' mode and clock; a sweep asked
for ``--host-factor auto`` finds the one of its own map mode, a sweep not asked for it on a host measured slower says so, and a
map scaled for a slower host keeps its limits' floor while its times grow.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.errors import InputError
from runner.maps import host_factor, provenance
from runner.maps.host_factor import Calibration


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PROOFBATCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_sample_takes_one_proof_per_slice_of_log_time_inside_the_band():
    times = {f"p{k}": t for k, t in enumerate([0.01, 0.5, 1.1, 1.2, 2.0, 5.0, 9.0, 30.0, 59.0, 61.0, 900.0])}
    chosen = host_factor.sample(times, list(times), n=10, seed=1)
    assert all(1.0 <= times[p] <= 60.0 for p in chosen)
    # 1.1 and 1.2 share the first slice: one of them; every other band time is its slice's only one.
    assert len(chosen) == 6 and len({"p2", "p3"} & set(chosen)) == 1
    assert host_factor.sample(times, list(times), n=10, seed=1) == chosen      # seeded


def test_the_sample_keeps_to_its_budget_and_to_answered_problems():
    times = {f"p{k}": float(t) for k, t in enumerate([2, 5, 9, 20, 50])}
    assert sum(times[p] for p in host_factor.sample(times, list(times), budget_s=20)) <= 20
    assert host_factor.sample(times, ["p1"]) == ["p1"]
    assert host_factor.sample(times, ["nobody"]) == []


def test_the_factor_is_the_median_ratio_with_its_quartiles():
    factor, low, high, ratios = host_factor.measure({"a": 2.0, "b": 9.0, "c": 30.0},
                                                    {"a": 1.0, "b": 3.0, "c": 10.0})
    assert (factor, ratios) == (3.0, {"a": 2.0, "b": 3.0, "c": 3.0})
    assert low == 2.5 and high == 3.0
    with pytest.raises(InputError, match="no ground truth of the sample was proved"):
        host_factor.measure({}, {"a": 1.0})


@pytest.mark.parametrize("text", ["0", "-2", "nan", "inf", "fast", "1e9"])
def test_a_host_factor_that_is_no_factor_is_refused(text):
    with pytest.raises(InputError, match="is not a host factor"):
        host_factor.parse(text)


def save(factor: float, digest: str = "ab" * 32, *, mode: str = "native",
         map_mode: str | None = "native", runtime: str = "") -> Calibration:
    cal = Calibration(host=__import__("socket").gethostname(), map_sha256=digest, mode=mode,
                      clock="cpu", factor=factor, low=factor * 0.9, high=factor * 1.1, problems=5,
                      measured_at="2026-11-27T00:00:00+00:00", load=4.0, sweep="/tmp/x",
                      ratios={"a": factor}, map_mode=map_mode, runtime=runtime)
    host_factor.save(cal)
    return cal


def test_auto_finds_this_host_s_calibration_and_a_resume_keeps_its_recorded_factor(cache):
    digest = "ab" * 32
    with pytest.raises(InputError, match="no calibration against") as err:
        host_factor.resolve("auto", digest, Path("m.json"), "native", "cpu", Path("c"), map_mode="native")
    assert "proofbatch calibrate c --timeout-map m.json --map-mode native --mode native" in err.value.fix
    save(2.5)
    factor, said = host_factor.resolve("auto", digest, Path("m.json"), "native", "cpu", Path("c"),
                                       map_mode="native")
    assert factor == 2.5 and "x2.50" in said[0] and "against a native map" in said[0]
    # Another clock or mode is another calibration.
    with pytest.raises(InputError):
        host_factor.resolve("auto", digest, Path("m.json"), "native", "wall", Path("c"), map_mode="native")
    assert host_factor.resolve("auto", digest, Path("m.json"), "native", "cpu", Path("c"),
                               recorded=1.7, map_mode="native")[0] == 1.7


def test_a_map_used_unscaled_on_a_host_measured_slower_says_so():
    digest = "cd" * 32
    args = (digest, Path("m.json"), "native", "cpu", Path("c"))
    assert host_factor.resolve(None, *args, map_mode="native") == (1.0, ())
    save(1.2, digest)
    assert host_factor.resolve(None, *args, map_mode="native") == (1.0, ())
    save(2.2, digest)
    factor, said = host_factor.resolve(None, *args, map_mode="native")
    assert factor == 1.0 and "2.20x" in said[0] and "--host-factor auto" in said[0]


def test_a_scaled_map_moves_its_times_by_the_factor_and_never_lowers_a_limit(tmp_path):
    path = tmp_path / "map.json"
    path.write_text(json.dumps([{"problem_id": "a", "prove_secs": 10.0, "timeout_sec": 120},
                                {"problem_id": "b", "prove_secs": 100.0, "timeout_sec": 300}]))
    loaded = provenance.load(path, "native")
    assert loaded.provenance.clock == "wall"           # a map without a sidecar: the bench's clock
    slow = loaded.scaled(2.5)
    assert slow.limits() == {"a": 300.0, "b": 750.0} and slow.prove_secs() == {"a": 25.0, "b": 250.0}
    assert slow.host_factor == 2.5 and "limits x2.50" in slow.describe()
    fast = loaded.scaled(0.5)
    assert fast.limits() == loaded.limits() and fast.prove_secs() == {"a": 5.0, "b": 50.0}
    assert loaded.scaled(1.0) is loaded


# -- the map's mode is part of a calibration (issue 46, defect 4) ------------------------


def test_a_calibration_is_kept_per_map_mode():
    """A native map's times, moved to bytecode, are 4.3x longer: the factor
    against the same file declared native or bytecode differs, and neither
    calibration overwrites the other."""
    digest = "ef" * 32
    as_native = save(0.5, digest, mode="bytecode", map_mode="native")
    as_bytecode = save(2.15, digest, mode="bytecode", map_mode="bytecode")
    assert host_factor.load(digest, "native", "bytecode", "cpu") == as_native
    assert host_factor.load(digest, "bytecode", "bytecode", "cpu") == as_bytecode
    assert host_factor.load(digest, None, "bytecode", "cpu") is None


def test_a_calibration_is_kept_per_runtime_setting_the_defaults_under_the_old_name():
    """Proof times differ between runtime settings (HOL Light's GC): a
    factor measured under OCaml's defaults is not one under the native
    default, and one kept before the setting was recorded is the defaults'."""
    digest = "cd" * 32
    old = save(1.2, digest)                                  # before the record: ""
    assert host_factor.load(digest, "native", "native", "cpu", runtime="default") == old
    assert host_factor.load(digest, "native", "native", "cpu", runtime="s=16M,o=200") is None
    tuned = save(1.1, digest, runtime="s=16M,o=200")
    assert host_factor.load(digest, "native", "native", "cpu", runtime="s=16M,o=200") == tuned
    assert host_factor.load(digest, "native", "native", "cpu") == old
    assert "runtime s=16M,o=200" in tuned.describe() and "runtime" not in old.describe()


def test_run_s_auto_takes_the_calibration_of_its_own_map_mode(tmp_path):
    """`run --host-factor auto` under a map declared native applies the
    factor measured against it as native, never the one against it as
    bytecode (which holds the bytecode/native ratio too, and would multiply
    limits that run converts to bytecode anyway)."""
    from dataclasses import replace

    from runner.sweep import prepare

    from ..helpers import LIGHT, demo_config

    path = tmp_path / "map.json"
    path.write_text(json.dumps([{"problem_id": p, "prove_secs": 2.0, "timeout_sec": 60} for p in LIGHT]))
    digest = provenance.load(path, "native").digest
    tuned = "s=4M,o=200"        # the setting bytecode checks run under by default (runtime.py)
    save(3.0, digest, mode="bytecode", map_mode="bytecode", runtime=tuned)
    config = demo_config(tmp_path / "out", timeout_map=path, map_mode="native", host_factor="auto",
                         problems=(LIGHT[0],))
    with pytest.raises(InputError, match=r"no calibration against .*map.json \(a native map\)") as err:
        prepare(config)
    assert "--map-mode native --mode bytecode" in err.value.fix
    save(1.4, digest, mode="bytecode", map_mode="native", runtime=tuned)
    assert prepare(config).host_factor == 1.4
    assert prepare(replace(config, map_mode="bytecode")).host_factor == 3.0
