"""A node's canary and the confirmation of its TIMEOUTs (issue 47, "kept
live"), on HOL Light's example corpus and the demo map, natively checked.

The node is this machine: under the local executor, as a Slurm array task
runs its checks (cluster/slurm_worker.py hands its job, node spec and all,
to the local executor), and on the dev Slurm itself, where the
confirmation is a second job of the sweep. One worker thread and corpus
order, so which check comes after which canary is known. The canary's
drift is the test hook's (runner/maps/canary.TEST_DRIFT_ENV, which the
array tasks inherit from the driver's environment): its three canaries
after its first take twice their time, then the node is back.
"""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest

from cluster.local import LocalExecutor
from cluster.slurm import SlurmExecutor, SlurmOptions
from runner.checks.worker import NODE_HOST_ENV, cpu_model
from runner.maps import host_factor, provenance
from runner.maps.canary import TEST_DRIFT_ENV
from runner.provers.hol_light import runtime
from runner.reporting import limits
from runner.results import shards
from runner.results.shard_reads import read_shards
from runner.sweep import prepare, run_sweep

from ..helpers import ROOT, demo_config

pytestmark = pytest.mark.hol

DEMO_MAP = ROOT / "timeout_maps" / "hol_light_demo.json"
NODE = "pb-canary-node"
# In corpus order: a light proof (checked before any canary but the first),
# a TIMEOUT of the corpus (its 10 s category limit: a loop), the canary
# itself (the one ground truth of the map over canary.CANARY_MIN_S), and a
# light proof.
ONLY = ("arith.add_comm", "fault.loop_nonalloc", "heavy.arith_cases", "logic.drinker")


def local_node(prepared, tmp_path, notes):
    session = prepared.backend.start(tmp_path / "session")
    try:
        return run_sweep(prepared, LocalExecutor(workers=1, session=session), on_note=notes.append)
    finally:
        session.close()


def slurm_node(prepared, tmp_path, notes):
    return run_sweep(prepared, SlurmExecutor(SlurmOptions(nodes=1, cpus_per_task=1, poll_s=1.0)),
                     on_note=notes.append)


@pytest.mark.parametrize("executor", [
    pytest.param(local_node, id="local"),
    pytest.param(slurm_node, id="slurm", marks=pytest.mark.slurm)])
def test_a_timeout_on_a_drifting_node_is_confirmed_once_its_canary_is_back(native_build, tmp_path,
                                                                           monkeypatch, executor,
                                                                           request):
    if executor is slurm_node:
        request.getfixturevalue("slurm_cluster")
    monkeypatch.setenv(NODE_HOST_ENV, NODE)
    monkeypatch.setenv(TEST_DRIFT_ENV, "2.0:3")
    digest = provenance.load(DEMO_MAP).digest
    host_factor.save(host_factor.Calibration(
        host=NODE, map_sha256=digest, mode="native", clock="cpu", factor=1.0, low=1.0, high=1.0,
        problems=2, measured_at="2026-11-30T00:00:00+00:00", load=None, sweep="", ratios={},
        map_mode="bytecode", cpu_model=cpu_model(), runtime=runtime.TUNED.key))   # native's default
    out = tmp_path / "out"
    prepared = prepare(demo_config(out, only=ONLY, mode="native", timeout_map=DEMO_MAP,
                                   host_factor="auto", canary_checks=1, policy="naive", workers=1),
                       per_node=True)
    spec = prepared.node_factor.canary
    assert spec is not None and spec.task.problem.problem_id == "heavy.arith_cases"
    assert [t.problem.problem_id for t in prepared.tasks] == list(ONLY)
    notes: list[str] = []
    load_before = os.getloadavg()[0]
    summary = executor(prepared, tmp_path, notes)
    rows = {r["problem_id"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    assert {p: r["verdict"] for p, r in rows.items()} == {
        "arith.add_comm": "OK", "fault.loop_nonalloc": "TIMEOUT", "heavy.arith_cases": "OK",
        "logic.drinker": "OK"}
    # The first check ran after the baseline only; every later one after a
    # canary that took twice its time: marked.
    assert rows["arith.add_comm"]["node_drift"] == 1.0
    for pid in ("heavy.arith_cases", "logic.drinker"):
        assert rows[pid]["node_drift"] > 1.25 and not rows[pid]["confirmed"], rows[pid]
    # The TIMEOUT came at twice the node's speed: checked again at the end,
    # once the canary was back, and that run's row is the one recorded.
    confirmed = rows["fault.loop_nonalloc"]
    # (Its run id: the sweep's with -confirm; on Slurm, its array task's after that.)
    assert "-confirm" in confirmed["run_id"] and confirmed["run_id"] != rows["arith.add_comm"]["run_id"]
    assert confirmed["confirmed"].startswith(f"TIMEOUT on {NODE} ("), confirmed["confirmed"]
    assert "x its first" in confirmed["confirmed"]
    assert 0.75 <= confirmed["node_drift"] <= 1.25, confirmed
    assert confirmed["host"] == NODE and confirmed["cpu_secs"] >= 9.0, confirmed
    assert any("checked again now" in n and "fault.loop_nonalloc" in n for n in notes), notes
    assert any(n.startswith("confirmed 1 of 1: fault.loop_nonalloc TIMEOUT") for n in notes), notes
    # The first run's TIMEOUT stays in the shards, as history.
    history = read_shards(shards.scan(out, repair=False).shards).table.to_pylist()
    first = [r for r in history if r["problem_id"] == "fault.loop_nonalloc" and not r["confirmed"]]
    assert len(first) == 1 and first[0]["node_drift"] > 1.25 and first[0]["verdict"] == "TIMEOUT"
    assert summary.counts == {"OK": 3, "TIMEOUT": 1}
    manifest = json.loads((out / "sweep.json").read_text())
    (node,) = manifest["node_canaries"]
    # Its first, three drifted, and the one that found it back.
    assert node["host"] == NODE and node["runs"] == 5 and node["worst"] > 1.25, node
    assert node["drifting"] is False and node["problem_id"] == "heavy.arith_cases"
    # The report names the node and the confirmed TIMEOUT.
    table = pq.read_table(out / "results.parquet")
    said = limits.lines(limits.check(table, manifest))
    assert any(line.startswith("nodes whose canary drifted past --canary-drift 0.25") and NODE in line
               and "(2 checks)" in line for line in said), said
    assert any("1 TIMEOUT of drifting nodes checked again" in line
               and f"fault.loop_nonalloc TIMEOUT on {NODE}" in line for line in said), said
    # For docs/limits.md: what the canary cost.
    print(f"\nCANARY: {node['runs']} runs of {node['problem_id']}, {node['cost_cpu_s']} s of CPU "
          f"({node['cost_cpu_s'] / node['runs']:.2f} s each); load {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
