"""A timeout map says what measured it, or the user does. s2n-bignum-bench's
own map has no sidecar and was measured natively; a bytecode sweep that
took its limits as they are would cut correct proofs short. These maps are
generated here in the bench's format (ids, prove_secs, timeout_sec); no
HOL Light is booted: everything is refused or resolved in ``prepare``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runner import cli
from runner.errors import InputError
from runner.provers.hol_light.costs.map_modes import RATIO_CENTRAL, RATIO_MAX
from runner.maps.provenance import load
from runner.sweep import prepare
from runner.maps.timeout_map import SIDECAR_FORMAT

from ..helpers import DEMO, assert_one_line_error, beside_coverage, demo_config

IDS = ("arith.add_comm", "lists.append_nil")


def bench_map(path, **sidecar):
    """A map as the bench ships its own: no sidecar unless one is given."""
    path.write_text(json.dumps([{"problem_id": pid, "prove_secs": 0.5, "timeout_sec": 120}
                                for pid in IDS]))
    if sidecar:
        path.with_name(path.stem + ".meta.json").write_text(
            json.dumps({"format": SIDECAR_FORMAT, "provenance": sidecar}))
    return path


def test_a_map_of_unknown_mode_is_refused_before_anything_is_built(tmp_path):
    tmap = bench_map(tmp_path / "timeout-map.json")
    with pytest.raises(InputError) as err:
        prepare(demo_config(tmp_path / "out", timeout_map=tmap))
    line = str(err.value)
    assert str(tmap) in line and "--map-mode native|bytecode" in line and "\n" not in line
    assert not (tmp_path / "out").exists()


def test_the_command_refuses_it_in_one_line_with_exit_2(tmp_path, capsys):
    tmap = bench_map(tmp_path / "timeout-map.json")
    assert cli.main(["run", str(DEMO), "--out", str(tmp_path / "out"), "--timeout-map", str(tmap),
                     "--context-root", str(DEMO)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(tmap) in err and "--map-mode" in err


def test_declared_native_in_a_bytecode_sweep_is_converted_and_warned(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFBATCH_CACHE", str(tmp_path / "cache"))     # no calibration here
    tmap = bench_map(tmp_path / "timeout-map.json")
    prepared = prepare(demo_config(tmp_path / "out", timeout_map=tmap, map_mode="native"))
    limits = {t.problem.problem_id: t.limits for t in prepared.tasks}
    for pid in IDS:
        assert limits[pid].time_s == pytest.approx(120 * RATIO_MAX)
        assert limits[pid].time_source == f"map (native x{RATIO_MAX:.2f})"
    assert limits["logic.drinker"].time_source == "category"          # not in the map: unchanged
    # Issue 47: a map without a sidecar was measured elsewhere: auto by
    # default, said, and this host has no calibration (limits as they are).
    [elsewhere, warning] = beside_coverage(prepared)
    assert "measured on another machine" in elsewhere and "no calibration" in elsewhere
    assert "CONVERTED" in warning and f"{len(IDS)} checks run in bytecode mode" in warning
    assert str(tmap) in warning
    # The plan expects them in bytecode too: by the central ratio, not the
    # limits' conservative end (an expected time should be right on average).
    expected = {c.problem_id: c.expected_s for c in prepared.plan.checks}
    assert all(expected[pid] == pytest.approx(0.5 * RATIO_CENTRAL) for pid in IDS)


def test_declared_bytecode_in_a_bytecode_sweep_stands_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFBATCH_CACHE", str(tmp_path / "cache"))     # no calibration here
    tmap = bench_map(tmp_path / "timeout-map.json")
    prepared = prepare(demo_config(tmp_path / "out", timeout_map=tmap, map_mode="bytecode"))
    limits = {t.problem.problem_id: t.limits for t in prepared.tasks}
    assert all(limits[pid].time_s == 120 and limits[pid].time_source == "map" for pid in IDS)
    # Issue 47: the one note is that the map was measured elsewhere (auto by
    # default; no calibration here, so its limits as they are).
    [elsewhere] = beside_coverage(prepared)
    assert "auto by default" in elsewhere and "no calibration" in elsewhere
    [given] = beside_coverage(prepare(demo_config(tmp_path / "out1", timeout_map=tmap,
                                                  map_mode="bytecode", host_factor="1")))
    assert "host factor 1 (given)" in given and "another machine" not in given
    assert all(c.expected_s == 0.5 for c in prepared.plan.checks if c.problem_id in IDS)
    # Declared with another build than the sweep's: said before the sweep starts.
    other = prepare(demo_config(tmp_path / "out2", timeout_map=tmap, map_mode="bytecode",
                                map_build="checkout-5e62421", host_factor="1"))
    [given, warning] = beside_coverage(other)
    assert "(given)" in given and "checkout-5e62421" in warning and "prover_build" in warning


def test_a_declaration_that_contradicts_the_sidecar_is_refused(tmp_path):
    tmap = bench_map(tmp_path / "derived.json", mode="bytecode-fork", prover="hol-light")
    assert load(tmap).provenance.mode == "bytecode"     # written before: bytecode-fork
    assert load(tmap, mode="bytecode").provenance.source == "sidecar"
    with pytest.raises(InputError, match="--map-mode declares 'native'"):
        load(tmap, mode="native")
    # A derived map needs no declaration.
    prepared = prepare(demo_config(tmp_path / "out", timeout_map=tmap))
    assert beside_coverage(prepared) == ()


def test_a_native_sweep_converts_a_declared_bytecode_map(native_build, tmp_path, monkeypatch):
    """--mode native: the backend routes and converts by the map the sweep read."""
    from runner.provers.hol_light.costs.map_modes import RATIO_MIN

    # No calibration here, and the session's native build (native_build) still found.
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "native").symlink_to(Path(os.environ["PROOFBATCH_CACHE"]) / "native")
    monkeypatch.setenv("PROOFBATCH_CACHE", str(tmp_path / "cache"))
    tmap = bench_map(tmp_path / "timeout-map.json")
    with pytest.raises(InputError, match="--map-mode"):
        prepare(demo_config(tmp_path / "out", mode="native", timeout_map=tmap))
    prepared = prepare(demo_config(tmp_path / "out", mode="native", timeout_map=tmap,
                                   map_mode="bytecode"))
    limits = {t.problem.problem_id: t.limits for t in prepared.tasks}
    for pid in IDS:
        assert limits[pid].time_s == round(120 / RATIO_MIN, 1)
        assert limits[pid].time_source == f"map (bytecode x{1 / RATIO_MIN:.2f})"
    # Issue 47: a map without a sidecar was measured elsewhere: auto by
    # default, said, and this host has no calibration (limits as they are).
    [elsewhere, warning] = beside_coverage(prepared)
    assert "measured on another machine" in elsewhere and "no calibration" in elsewhere
    assert "CONVERTED" in warning and f"{len(IDS)} checks run in native mode" in warning


def test_a_map_names_how_much_of_the_corpus_it_covers(tmp_path):
    """A map naming part of the corpus says so; one naming none is refused
    (every problem would fall to the default limit without a word)."""
    tmap = bench_map(tmp_path / "timeout-map.json")
    prepared = prepare(demo_config(tmp_path / "out", timeout_map=tmap, map_mode="bytecode"))
    total = len(prepared.problems)
    assert f"MAP: {tmap} covers {len(IDS)} of the corpus's {total} problems; the other " \
           f"{total - len(IDS)} get category or default limits" in prepared.warnings
    stranger = tmp_path / "other-corpus.json"
    stranger.write_text(json.dumps([{"problem_id": "x.unknown", "prove_secs": 1, "timeout_sec": 120}]))
    with pytest.raises(InputError) as refused:
        prepare(demo_config(tmp_path / "out2", timeout_map=stranger, map_mode="bytecode"))
    assert refused.value.where == str(stranger)
    assert refused.value.problem.startswith(f"names none of the corpus's {total} problems")
    assert not (tmp_path / "out2").exists()


def test_the_loaded_map_carries_its_sidecar(tmp_path):
    """Read once: limits, memory, categories and the profile it came from are
    all on the one object a sweep, the planner and the backend are handed."""
    tmap = bench_map(tmp_path / "derived.json", mode="bytecode-fork", profile=str(tmp_path / "prof"))
    meta = json.loads(tmap.with_name("derived.meta.json").read_text())
    meta["problems"] = {IDS[0]: {"category": "arith", "expected_mem_mb": 400.0, "mem_guard_mb": 800.0},
                        IDS[1]: {"category": "lists", "expected_mem_mb": None, "mem_guard_mb": None}}
    tmap.with_name("derived.meta.json").write_text(json.dumps(meta))
    loaded = load(tmap)
    assert loaded.limits() == {pid: 120 for pid in IDS}
    assert loaded.problems[IDS[0]].expected_mem_bytes == 400 << 20
    assert loaded.problems[IDS[0]].mem_guard_bytes == 800 << 20
    assert loaded.problems[IDS[1]].expected_mem_bytes is None
    assert loaded.profile == tmp_path / "prof" and loaded.sidecar.path.name == "derived.meta.json"
    assert len(loaded.digest) == 64
    assert load(bench_map(tmp_path / "bench.json")).problems == {}


@pytest.mark.parametrize("problems, complaint", [
    ({IDS[0]: {"expected_mem_mb": "lots"}}, f"problems.{IDS[0]}.expected_mem_mb is 'lots'"),
    ({IDS[0]: {"category": 7}}, f"problems.{IDS[0]}.category is 7"),
    ([IDS[0]], "problems is ["),
])
def test_a_sidecar_of_the_wrong_shape_is_one_line_naming_it(tmp_path, capsys, problems, complaint):
    tmap = bench_map(tmp_path / "derived.json", mode="bytecode-fork")
    sidecar = tmap.with_name("derived.meta.json")
    sidecar.write_text(json.dumps({"format": SIDECAR_FORMAT, "provenance": {}, "problems": problems}))
    assert cli.main(["simulate", "--timeout-map", str(tmap), "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(sidecar) in err and complaint in err
    assert "derive the map again" in err


# -- issue 46: sidecars that were read as guesses, profiles that are not there ----------

def _sidecar_case(tmp_path, case: str):
    """(the map, its sidecar, fragments of the refusal)."""
    tmap = tmp_path / "timeout-map.json"
    if case == "other-map":
        bench_map(tmap, mode="native", clock="cpu")
        meta = json.loads((tmp_path / "timeout-map.meta.json").read_text())
        (tmp_path / "timeout-map.meta.json").write_text(json.dumps({**meta, "map": "derived.json"}))
        return tmap, ("is the sidecar of the map 'derived.json', not of " + str(tmap),
                      'set its "map" to "timeout-map.json"')
    if case == "quantum":
        bench_map(tmap, mode="quantum", clock="cpu")
        return tmap, ("provenance.mode 'quantum' is not an execution mode",
                      "write one of bytecode, native, auto, build-session")
    bench_map(tmap, mode="native", clock="sundial")
    return tmap, ("provenance.clock 'sundial' is not a clock", "write one of cpu, wall")


@pytest.mark.parametrize("case", ["other-map", "quantum", "sundial"])
@pytest.mark.parametrize("command", ["simulate", "compare", "run"])
def test_a_sidecar_of_another_map_or_unknown_words_is_refused(tmp_path, capsys, case, command):
    """Issue 46: a sidecar naming another map was used silently; a mode
    "quantum" or a clock "sundial" was accepted."""
    tmap, fragments = _sidecar_case(tmp_path, case)
    other = bench_map(tmp_path / "other.json")
    argv = {"simulate": ["simulate", "--timeout-map", tmap, "--workers", "1"],
            "compare": ["timeout-map", "compare", other, tmap],
            "run": ["run", DEMO, "--out", tmp_path / "out", "--timeout-map", tmap,
                    "--context-root", DEMO]}[command]
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert_one_line_error((code, captured.out, captured.err.splitlines()),
                          tmp_path / "timeout-map.meta.json", *fragments)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["timeout-map", "{p}", "--out", "{d}/m.json"],
                                  ["simulate", "--profile", "{p}", "--workers", "1"]])
def test_a_profile_path_that_is_not_there_is_said_to_be_missing(tmp_path, capsys, argv):
    """It said "not a finished profile ... rerun that to finish it"."""
    missing = tmp_path / "profiles" / "nope"
    code = cli.main([a.format(p=missing, d=tmp_path) for a in argv])
    captured = capsys.readouterr()
    line = assert_one_line_error((code, captured.out, captured.err.splitlines()), missing,
                                 "does not exist", "check the path")
    assert "rerun" not in line and not (tmp_path / "m.json").exists()


def test_a_map_and_its_sidecar_read_through_links_of_another_name_stand(tmp_path):
    """A sidecar names its map by file name; `current.json -> v3.json`, with
    `current.meta.json -> v3.meta.json`, is the same map, not another."""
    real = bench_map(tmp_path / "v3.json", mode="native", clock="cpu")
    meta = json.loads((tmp_path / "v3.meta.json").read_text())
    (tmp_path / "v3.meta.json").write_text(json.dumps({**meta, "map": "v3.json"}))
    (tmp_path / "current.json").symlink_to(real.name)
    (tmp_path / "current.meta.json").symlink_to("v3.meta.json")
    loaded = load(tmp_path / "current.json")
    assert loaded.provenance.mode == "native" and loaded.provenance.clock == "cpu"
