"""Reuse only what matches (issue 45): vs_bench_harness.py --resume reuses a
kept flow only when its record has this run's commit, host, draw, builds,
bench and --min-secs (it used to check the draw alone); regenerate_bench_map.py
keeps a corpus and a profile only when the record they were made with has
this run's inputs (it used to keep any it found)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from types import SimpleNamespace

from ..helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import on_path  # noqa: E402,F401  (the groups' folders too)
import record  # noqa: E402
import regenerate_bench_map  # noqa: E402
import vs_bench_flows  # noqa: E402

INPUTS = {"seed": 1, "ids": ["arm.a.X"], "answers_sha256": "0" * 64, "workers": 2,
          "min_secs": 0.5, "hol_light_rev": "5e62421" + "0" * 33, "native_build": "checkout-x-1",
          "s2n_bignum_rev": "51147aa" + "0" * 33, "bench_rev": "b" * 40, "bench_map_sha256": "1" * 64}
FIGURES = {"verdicts": {"arm.a.X": "OK"}, "wall_s": 10.0, "ended": "2026-01-01 00:00:00 UTC"}


def kept_clean(tmp_path, inputs=INPUTS):
    """A flow kept with its record, the record's tree taken as clean (this
    work tree is shared and may be dirty; a dirty tree's flow is never reused)."""
    kept = tmp_path / "flow-1-1-bench.json"
    path = vs_bench_flows.keep(kept, {"seed": 1}, FIGURES, inputs, 1, "bench", directory=tmp_path)
    data = json.loads(path.read_text())
    data["dirty"] = False
    path.write_text(json.dumps(data))
    return kept, path


def test_a_kept_flow_is_reused_only_with_every_setting_the_same(tmp_path):
    kept, path = kept_clean(tmp_path)
    figures, why = vs_bench_flows.kept_flow(kept, INPUTS, 1, "bench", tmp_path)
    assert figures == FIGURES and why == str(path)
    for key, other in (("min_secs", 2.0), ("native_build", "checkout-x-2"), ("bench_rev", "c" * 40),
                       ("hol_light_rev", "1" * 40), ("workers", 4)):
        figures, why = vs_bench_flows.kept_flow(kept, {**INPUTS, key: other}, 1, "bench", tmp_path)
        assert figures is None and "with these builds and settings" in why, key
    # Another round or the other flow is not this one.
    assert vs_bench_flows.kept_flow(kept, INPUTS, 2, "bench", tmp_path)[0] is None
    assert vs_bench_flows.kept_flow(kept, INPUTS, 1, "pb", tmp_path)[0] is None


def test_a_kept_flow_of_another_commit_or_rewritten_is_run_again(tmp_path):
    kept, path = kept_clean(tmp_path)
    data = json.loads(path.read_text())
    data["commit"] = "0" * 40
    path.write_text(json.dumps(data))
    assert vs_bench_flows.kept_flow(kept, INPUTS, 1, "bench", tmp_path)[0] is None
    kept, _ = kept_clean(tmp_path)
    # A later run of other settings in the same --work wrote the same file name.
    kept.write_text(json.dumps({"draw": {"seed": 1}, "figures": {**FIGURES, "wall_s": 99.0}}))
    figures, why = vs_bench_flows.kept_flow(kept, INPUTS, 1, "bench", tmp_path)
    assert figures is None and "was rewritten since its record" in why
    kept.unlink()
    assert vs_bench_flows.kept_flow(kept, INPUTS, 1, "bench", tmp_path) == (None, f"no {kept.name}")


def test_settings_name_the_builds_and_the_bench(tmp_path):
    """The revisions come from the trees themselves (a tree's commit, and
    ``-dirty`` when a tracked file differs from it), the native build's key
    from what ``build-native`` keys its cache on: a rebuilt library is
    another build."""
    hol = tmp_path / "hol-light"
    hol.mkdir()
    git = ["git", "-C", str(hol), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], check=True)
    (hol / "hol.sh").write_text("#!/bin/sh\n")
    (hol / "hol.sh").chmod(0o755)
    subprocess.run(git + ["add", "hol.sh"], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    (hol / "hol_lib.cmxa").write_bytes(b"built once")
    bench_map = tmp_path / "map.json"
    bench_map.write_text("[]")
    args = SimpleNamespace(min_secs=0.5, hol_light=hol, s2n_bignum=hol, bench_repo=hol,
                           bench_map=bench_map)
    draw = {"seed": 1, "ids": ["a"], "answers": {"a": "ARITH_TAC"}, "workers": 2}
    got = vs_bench_flows.settings(args, draw)
    assert len(got["hol_light_rev"]) == 40 and got["bench_rev"] == got["hol_light_rev"]
    assert got["bench_map_sha256"] == record.digest(bench_map) and got["min_secs"] == 0.5
    (hol / "hol_lib.cmxa").write_bytes(b"built again")
    again = vs_bench_flows.settings(args, draw)
    assert again["native_build"] != got["native_build"]
    assert again["hol_light_rev"] == got["hol_light_rev"]
    (hol / "hol.sh").write_text("#!/bin/sh\n# edited\n")
    assert vs_bench_flows.git_rev(hol) == got["hol_light_rev"] + "-dirty"
    assert vs_bench_flows.git_rev(tmp_path / "nothing") is None
    other = vs_bench_flows.settings(args, {**draw, "answers": {"a": "NO_TAC"}})
    assert other["answers_sha256"] != got["answers_sha256"]


def clean(path):
    data = json.loads(path.read_text())
    data["dirty"] = False
    path.write_text(json.dumps(data))


def test_regenerate_keeps_a_profile_only_when_its_record_matches(tmp_path):
    profile = tmp_path / "regen-1-profile"
    (profile / "runs").mkdir(parents=True)
    (profile / "runs" / "0.csv").write_text("half a profile\n")
    inputs = {"files": ["bignum_add"], "s2n_bignum_rev": "5" * 40, "corpus_sha256": "1" * 64,
              "problems": ["arm.bignum_add.A"], "runs": 3, "seed": 1,
              "hol_light_rev": "e" * 40, "native_build": "checkout-x-1"}
    # No record: whatever is in the folder was made by something else.
    assert not regenerate_bench_map.reusable("profile", profile, inputs, directory=tmp_path)
    assert not profile.exists()
    (profile / "runs").mkdir(parents=True)
    (profile / "runs" / "0.csv").write_text("half a profile\n")
    clean(regenerate_bench_map.made("profile", profile, inputs, directory=tmp_path))
    assert regenerate_bench_map.reusable("profile", profile, inputs, directory=tmp_path)
    assert (profile / "runs" / "0.csv").is_file()          # continued, not cleared
    for key, other in (("runs", 5), ("native_build", "checkout-x-2"), ("corpus_sha256", "2" * 64)):
        assert not regenerate_bench_map.reusable("profile", profile, {**inputs, key: other},
                                                 directory=tmp_path), key
        assert not profile.exists()
        profile.mkdir()


def test_regenerate_keeps_a_corpus_only_once_extracted(tmp_path):
    corpus = tmp_path / "regen-1-corpus"
    corpus.mkdir()
    inputs = {"files": ["bignum_add"], "s2n_bignum_rev": "5" * 40}
    clean(regenerate_bench_map.made("corpus", corpus, inputs, directory=tmp_path))
    # Its extract was cut short: no marker, so it is extracted again.
    assert not regenerate_bench_map.reusable("corpus", corpus, inputs, corpus / ".extracted",
                                             directory=tmp_path)
    corpus.mkdir()
    (corpus / ".extracted").touch()
    assert regenerate_bench_map.reusable("corpus", corpus, inputs, corpus / ".extracted",
                                         directory=tmp_path)
    assert not regenerate_bench_map.reusable("corpus", corpus, {**inputs, "files": ["other"]},
                                             corpus / ".extracted", directory=tmp_path)


def test_a_sweeps_host_factor_is_the_one_it_resolved_not_the_one_asked(tmp_path):
    """sweep.json keeps ``--host-factor auto`` in its config and the factor
    auto resolved to beside it; heavy_tail.py recorded "auto" as its figure,
    and heavy_preemption.py waited for a number that never came."""
    import common

    out = tmp_path / "out"
    assert common.sweep_host_factor(out) is None                 # no sweep yet
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"config": {"host_factor": "auto"}, "host_factor": None}))
    assert common.sweep_host_factor(out) is None                 # not resolved yet
    (out / "sweep.json").write_text(json.dumps({"config": {"host_factor": "auto"}, "host_factor": 0.9702}))
    assert common.sweep_host_factor(out) == 0.9702


def test_a_cluster_sweeps_host_factor_is_its_nodes_when_they_agree(tmp_path):
    """On Slurm each node resolves --host-factor auto itself and sweep.json
    keeps null: heavy_preemption.py waited for sweep.json's factor while its
    one node checked under 0.9702."""
    import common
    from runner.maps.node_factor import NodeFactor
    from runner.maps.node_files import node_dir

    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"config": {"host_factor": "auto"}, "host_factor": None}))
    assert common.sweep_host_factor(out) is None                 # no node has resolved one yet
    nodes = node_dir(out) / "nodes"
    nodes.mkdir(parents=True)
    node = NodeFactor(host="node-a", cpu_model="AMD EPYC", factor=0.9702, how="cached")
    (nodes / "node-a.json").write_text(json.dumps(dataclasses.asdict(node)))
    assert common.sweep_host_factor(out) == 0.9702
    other = dataclasses.replace(node, host="node-b", factor=1.5)
    (nodes / "node-b.json").write_text(json.dumps(dataclasses.asdict(other)))
    assert common.sweep_host_factor(out) is None                 # nodes of two speeds: no one factor
