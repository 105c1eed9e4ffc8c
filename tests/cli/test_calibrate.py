"""`proofbatch calibrate` as a user meets it (issue 46).

The story: a calibration moves the map's times to the mode its checks run
in, as `run` does, so the factor against a map declared native is the one
against it declared bytecode over the bytecode/native ratio, and both are
kept. Everything calibrate can refuse it refuses in one line before the
prover boots, naming its own flags. It boots the prover inside its sweep,
under the sweep's lock and only when a check is left: `status` says running
during the boot, a stop then leaves the sweep stopped with the calibrate
command that resumes it, and a fully recorded calibration boots nothing.
"""

from __future__ import annotations

import json
import os

import pytest

from cluster.local import LocalExecutor
from runner import cli
from runner.commands import calibrate
from runner.commands.calibrate import CalibrateConfig
from runner.errors import InputError
from runner.maps import host_factor
from runner.provers.hol_light import runtime
from runner.provers.hol_light.costs.map_modes import RATIO_CENTRAL
from runner.prover_registry import ENV
from runner.results import heartbeat, lock

from ..helpers import DEMO, LIGHT, TEST_MEM_LIMIT, assert_one_line_error, previous_sweep
from ..test_registry import TOY_REF, toy_corpus
from .test_bad_inputs import cli_result


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFBATCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "calibrations"


def write_map(path, times: dict[str, float]):
    path.write_text(json.dumps([{"problem_id": p, "prove_secs": t, "timeout_sec": 60}
                                for p, t in times.items()]))
    return path


# Map times of three light demo proofs, in three slices of the calibration band.
LIGHT_MAP = dict(zip(LIGHT, (2.0, 5.0, 12.0)))


def test_a_native_calibration_is_kept_under_its_runtime_setting_as_run_resolves_it(tmp_path):
    """`run --mode native` checks under the tuned setting unless told
    otherwise, and looks its factor up under that setting: calibrate keeps
    the factor where that lookup finds it, and passes the setting on."""
    path = write_map(tmp_path / "map.json", LIGHT_MAP)

    def planned(**given):
        return calibrate.plan(CalibrateConfig(corpus=DEMO, timeout_map=path, map_mode="native",
                                              context_root=DEMO, **given))
    native, ocaml = planned(mode="native"), planned(mode="native", runtime="default")
    assert native.out.name.endswith("-map-native-cpu-s=16M,o=200") and native.sweep.runtime is None
    assert ocaml.out.name.endswith("-map-native-cpu") and ocaml.sweep.runtime == "default"
    assert "--runtime default" in " ".join(ocaml.sweep.command)
    assert planned(mode="bytecode").out.name.endswith("-map-bytecode-cpu-s=4M,o=200")
    with pytest.raises(InputError, match="settle=sometimes"):
        planned(mode="native", runtime="settle=sometimes")


# -- defect 4: the map's mode ---------------------------------------------------------


def test_a_native_map_is_moved_to_the_checks_mode_and_both_calibrations_are_kept(hol_session, tmp_path):
    bench_map = write_map(tmp_path / "map.json", LIGHT_MAP)
    out = tmp_path / "calibration"

    def calibrated(map_mode: str):
        cfg = CalibrateConfig(corpus=DEMO, timeout_map=bench_map, out=out, map_mode=map_mode,
                              context_root=DEMO, mem_limit=TEST_MEM_LIMIT)
        the_plan = calibrate.plan(cfg)
        assert sorted(the_plan.problems) == sorted(LIGHT)
        cal, summary, expected = calibrate.calibrate(cfg, the_plan,
                                                     LocalExecutor(workers=1, session=hol_session))
        return cal, summary, expected

    as_bytecode, first, same = calibrated("bytecode")
    # The same --out: the second calibration reads the first's measurements.
    as_native, second, moved = calibrated("native")
    assert (first.ran_now, second.ran_now) == (3, 0)
    assert same == LIGHT_MAP
    assert moved == {p: pytest.approx(t * RATIO_CENTRAL) for p, t in LIGHT_MAP.items()}
    assert as_bytecode.problems == as_native.problems == 3
    # The same measured times against the map's moved 4.3x: the factor is 4.3x smaller.
    assert as_bytecode.factor > 0
    assert as_native.factor == pytest.approx(as_bytecode.factor / RATIO_CENTRAL, rel=0.002)
    assert as_native.ratios == {p: pytest.approx(r / RATIO_CENTRAL, rel=0.002)
                                for p, r in as_bytecode.ratios.items()}
    assert (as_bytecode.map_mode, as_native.map_mode) == ("bytecode", "native")
    # Both kept, each under its map mode and bytecode's default setting.
    digest, setting = as_native.map_sha256, runtime.BYTECODE_TUNED.key
    assert as_bytecode.runtime == as_native.runtime == setting
    assert host_factor.load(digest, "bytecode", "bytecode", "cpu", runtime=setting) == as_bytecode
    assert host_factor.load(digest, "native", "bytecode", "cpu", runtime=setting) == as_native


# -- misleading: refused before anything boots, naming calibrate's flags ----------------


@pytest.mark.parametrize("flags, where, fragments", [
    # run refuses a map that says nothing of its mode: so does calibrate.
    ((), "{map}", ("says nothing of the mode it was measured in", "--map-mode native|bytecode")),
    (("--map-mode", "native", "--sample", "1", "--budget", "1"), "--budget",
     ("1 s is less than the map time of the sample's first ground truth", "pass --budget")),
    (("--map-mode", "native", "--workers", str((os.cpu_count() or 1) + 1)), "--workers",
     (f"checks at once on {os.cpu_count()} cores", f"pass --workers {os.cpu_count()} or fewer")),
    (("--map-mode", "native", "--out", "{run_sweep}"), "{run_sweep}",
     ("holds a sweep of `proofbatch run`, not a calibration's", "pass a new or empty --out, or drop --out")),
])
def test_calibrate_refuses_before_booting_in_its_own_words(capsys, hol, tripwire, tmp_path, flags, where,
                                                          fragments):
    bench_map = write_map(tmp_path / "map.json", LIGHT_MAP)
    run_sweep = tmp_path / "run-sweep"
    previous_sweep(run_sweep)
    fill = {"map": str(bench_map), "run_sweep": str(run_sweep)}
    result = cli_result(capsys, "calibrate", DEMO, "--timeout-map", bench_map, "--hol-light", hol,
                        *(f.format(**fill) for f in flags))
    line = assert_one_line_error(result, where.format(**fill), *fragments)
    assert "--category-timeouts" not in line and "--default-timeout" not in line
    assert not tripwire.exists()


# -- misleading: the lock, the boot, the resume command --------------------------------


def test_calibrate_boots_under_its_lock_and_only_when_a_check_is_left(capsys, tmp_path, monkeypatch):
    from tests import toy_prover

    monkeypatch.setenv(ENV, TOY_REF)
    corpus = toy_corpus(tmp_path / "corpus", {"small": ("6 * 7", "42", "OK"), "big": ("2 + 3", "5", "OK")})
    bench_map = write_map(tmp_path / "map.json", {"small": 2.0, "big": 5.0})
    out = tmp_path / "calibration"
    argv = ["calibrate", str(corpus), "--timeout-map", str(bench_map), "--out", str(out)]
    real_start, boots = toy_prover.ToyBackend.start, []

    def start(backend, workdir):
        holder = lock.read_holder(out) or {}
        boots.append((holder.get("pid"), (heartbeat.read(out) or {}).get("state")))
        if len(boots) == 1:
            raise cli.Terminated()      # SIGTERM while the prover boots
        if len(boots) == 3:
            raise AssertionError("a fully recorded calibration booted the prover")
        return real_start(backend, workdir)

    monkeypatch.setattr(toy_prover.ToyBackend, "start", start)
    prepared = []       # a native build says itself while the sweep is prepared: once
    real_prepare = calibrate.prepare
    monkeypatch.setattr(calibrate, "prepare", lambda config: prepared.append(config) or real_prepare(config))
    assert cli.main(argv) == 143
    assert len(prepared) == 1
    # It held the sweep and said it was running while it booted; stopped, it says so.
    assert boots == [(os.getpid(), "running")]
    assert heartbeat.read(out)["state"] == "stopped"
    capsys.readouterr()
    assert cli.main(["status", str(out)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"resume with: proofbatch calibrate {corpus} --timeout-map {bench_map} --out {out}" in said, said
    assert "proofbatch run" not in said
    # Resumed, it runs; run again, it finds everything recorded and boots nothing.
    assert cli.main(argv) == 0
    assert cli.main(argv) == 0 and len(boots) == 2
    said = " ".join(capsys.readouterr().out.split())
    assert len(prepared) == 3
    # Its title names the map file.
    assert f"this host against the map {bench_map.name}, per ground truth" in said and "host factor:" in said
    assert heartbeat.read(out)["state"] == "finished"
