"""A profile and the timeout map derived from it record the OCaml runtime
setting their times were measured under (--runtime,
runner/provers/hol_light/runtime.py): the garbage collector's settings
change proof times, so a map's times hold under its own setting. A sweep
under another setting says so in one line; a map without the record (the
bench's own, maps derived before it) counts as OCaml's defaults. No HOL
Light is booted: prepare and resumes are refused or resolved before any
check."""

from __future__ import annotations

import json

import pytest

from runner import cli
from runner.errors import InputError
from runner.maps.profile_data import ProblemRuns, write_profile
from runner.maps.provenance import load
from runner.maps.timeout_map import MapPolicy, derive, read_sidecar, write_map
from runner.profile import ProfileConfig, profile
from runner.sweep import prepare

from ..helpers import DEMO, TEST_MEM_LIMIT, beside_coverage, demo_config

IDS = ("arith.add_comm", "lists.append_nil")


def derived_map(path, **provenance):
    derived = derive([ProblemRuns(pid, "generic", (0.5, 0.5, 0.6)) for pid in IDS], MapPolicy())
    write_map(path, derived, {"prover": "hol-light", "mode": "bytecode", **provenance})
    return path


def runtime_warnings(prepared) -> list[str]:
    return [w for w in beside_coverage(prepared) if "runtime" in w]


def test_a_map_without_the_record_counts_as_ocamls_defaults(tmp_path):
    assert load(derived_map(tmp_path / "old.json")).provenance.runtime == "default"
    assert load(derived_map(tmp_path / "tuned.json", runtime="s=4M,o=120")).provenance.runtime \
        == "s=4M,o=120"


def test_a_sweep_under_another_runtime_than_its_maps_says_so_in_one_line(tmp_path):
    tuned = derived_map(tmp_path / "tuned.json", runtime="s=4M")
    old = derived_map(tmp_path / "old.json")
    # The same setting, or a map without the record under a mode's default
    # (bytecode's here): nothing said.
    assert runtime_warnings(prepare(demo_config(tmp_path / "a", timeout_map=tuned, runtime="s=4M"))) == []
    assert runtime_warnings(prepare(demo_config(tmp_path / "b", timeout_map=old))) == []
    [line] = runtime_warnings(prepare(demo_config(tmp_path / "c", timeout_map=tuned)))
    assert "\n" not in line and str(tuned) in line
    assert "measured under another runtime (s=4M)" in line and "--runtime s=4M,o=200" in line
    # The bench's map (no sidecar, declared native) ran under OCaml's defaults too.
    [line] = runtime_warnings(prepare(demo_config(tmp_path / "d", timeout_map=old,
                                                  runtime="o=200,settle=compact")))
    assert "another runtime (default)" in line and "--runtime o=200,settle=compact" in line


def test_the_bench_s_map_holds_under_each_mode_s_default_without_a_word(tmp_path):
    from runner.maps.timeout_map import use_map
    from runner.provers import hol_light

    # What a native sweep (runtime.TUNED, by default) and a bytecode one
    # (runtime.BYTECODE_TUNED) ask of the map they read.
    holds, old = hol_light.PROVER.map_runtime_holds, load(derived_map(tmp_path / "old.json"))
    assert use_map(old, "hol-light", "", "native", "s=16M,o=200", holds).warnings == ()
    assert use_map(old, "hol-light", "", "bytecode", "s=4M,o=200", holds).warnings == ()
    [line] = use_map(old, "hol-light", "", "native", "s=4M", holds).warnings
    assert "another runtime (default)" in line and "--runtime s=4M" in line
    tuned = load(derived_map(tmp_path / "tuned.json", runtime="s=16M,o=200"))
    [line] = use_map(tuned, "hol-light", "", "native", "default", holds).warnings
    assert "another runtime (s=16M,o=200)" in line


def test_a_sidecar_whose_runtime_is_not_text_is_refused_naming_it(tmp_path):
    tmap = derived_map(tmp_path / "m.json")
    meta = read_sidecar(tmap)
    meta["provenance"]["runtime"] = 4
    tmap.with_name("m.meta.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match="provenance.runtime is 4"):
        load(tmap)


def test_the_map_derived_from_a_profile_records_its_runtime(tmp_path, capsys):
    runs = [ProblemRuns("a", "generic", (1.0, 1.1, 1.2))]
    tuned = write_profile(tmp_path / "tuned", runs, {"corpus": "/x", "mode": "native",
                                                     "runtime": "s=16M,o=200"})
    old = write_profile(tmp_path / "old", runs, {"corpus": "/x", "mode": "native"})
    for prof, said in ((tuned, "s=16M,o=200"), (old, None)):
        out = tmp_path / f"{prof.name}.json"
        assert cli.main(["timeout-map", str(prof), "--out", str(out)]) == 0
        assert read_sidecar(out)["provenance"]["runtime"] == said
        assert load(out).provenance.runtime == (said or "default")


def unfinished_profile(out, **provenance):
    """A profile interrupted in its first run, as profile.json leaves it."""
    out.mkdir(parents=True)
    (out / "profile.json").write_text(json.dumps({
        "format": "proofbatch-profile/1", "corpus": str(DEMO.resolve()), "answers": None,
        "generations": [{"id": "g1", "finished": None, "problems": list(IDS), "ceiling_s": 300,
                         "runs": [{"dir": "runs/g1-r1", "seed": 0}]}], "limit_clock": "cpu",
        **provenance}))
    return out / "profile.json"


@pytest.mark.parametrize("recorded, given, said", [
    ({"runtime": "s=4M"}, None, "taken with --runtime s=4M, not s=4M,o=200"),   # bytecode's default
    ({}, "s=4M", "taken with --runtime default, not s=4M"),      # before the record: the defaults
])
def test_a_profile_resumed_under_another_runtime_is_refused(tmp_path, recorded, given, said):
    prov = unfinished_profile(tmp_path / "p", **recorded)
    before = prov.read_text()
    cfg = ProfileConfig(corpus=DEMO, out=tmp_path / "p", context_root=DEMO, mem_limit=TEST_MEM_LIMIT,
                        ceiling_s=300, runtime=given)
    with pytest.raises(InputError) as err:
        profile(cfg, lambda prepared: None)
    assert said in str(err.value) and str(prov) in str(err.value)
    assert prov.read_text() == before and not (tmp_path / "p" / "runs").exists()
