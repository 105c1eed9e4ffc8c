"""Each node's own host factor (runner/maps/node_factor.py, issue 47), on a
real Dask: a scheduler and two workers started with distributed's own
commands, each given the name of another node (PROOFBATCH_NODE_HOST), as
two machines of a cluster are.

The checks are the toy prover's (tests/toy_prover: each check a real
process summing a range), so that what is tested here is the executor's
part: which factor each worker takes, and what it does to its rows. The
same on HOL Light's example corpus, on Dask and on the dev Slurm, is in
test_node_factors_hol.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import time

import pyarrow.parquet as pq
import pytest

from cluster.dask import DaskExecutor
from runner.checks.worker import NODE_HOST_ENV, cpu_model
from runner.maps import host_factor
from runner.planning.sweep_config import SweepConfig
from runner.prover_registry import ENV
from runner.sweep import prepare, run_sweep

from ..helpers import ROOT
from ..test_registry import TOY_REF, toy_corpus
from .dask_cluster import scheduler_and_workers

FACTORS = {"pb-node-a": 1.5, "pb-node-b": 2.5}
# Sums of about a second here: long enough that the idle worker steals
# from the busy one (the toy's checks share one image, hinted to one worker).
N = 3 * 10**7
PROBLEMS = {f"p{i:02d}": (f"sum(range({N + i}))", str((N + i) * (N + i - 1) // 2), "OK")
            for i in range(10)}


@pytest.fixture(scope="module")
def toy_nodes(tmp_path_factory):
    """Two Dask workers of one thread each, named as nodes pb-node-a and
    pb-node-b, sharing a calibration cache; the toy prover registered."""
    d = tmp_path_factory.mktemp("node-factors")
    cache = d / "cache"
    base = {**os.environ, ENV: TOY_REF, "PYTHONPATH": str(ROOT), "PROOFBATCH_CACHE": str(cache)}
    workers = {host: {**base, NODE_HOST_ENV: host} for host in FACTORS}
    with scheduler_and_workers(d, workers, memory="2GiB") as address:
        yield {"address": address, "cache": cache, "root": d}


def bench_map(path, times: dict[str, float], limit: float = 20.0):
    """A map without a sidecar, as s2n-bignum-bench's: measured elsewhere."""
    path.write_text(json.dumps([{"problem_id": pid, "prove_secs": t, "timeout_sec": limit}
                                for pid, t in times.items()]))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def cached(host: str, digest: str, factor: float) -> None:
    host_factor.save(host_factor.Calibration(
        host=host, map_sha256=digest, mode="bytecode", clock="cpu", factor=factor, low=factor,
        high=factor, problems=3, measured_at="2026-11-30T00:00:00+00:00", load=None, sweep="",
        ratios={}, map_mode=None, cpu_model=cpu_model()))


def sweep(toy_nodes, name: str, map_path, **overrides):
    out = toy_nodes["root"] / name
    config = SweepConfig(corpus=toy_nodes["corpus"], out=out, timeout_map=map_path, workers=2,
                         **overrides)
    prepared = prepare(config, per_node=True)
    summary = run_sweep(prepared, DaskExecutor(toy_nodes["address"]))
    rows = pq.read_table(out / "results.parquet").to_pylist()
    return prepared, summary, rows, json.loads((out / "sweep.json").read_text())


@pytest.fixture(scope="module")
def corpus(toy_nodes, monkeypatch_module):
    monkeypatch_module.setenv(ENV, TOY_REF)
    monkeypatch_module.setenv("PROOFBATCH_CACHE", str(toy_nodes["cache"]))
    toy_nodes["corpus"] = toy_corpus(toy_nodes["root"] / "corpus", PROBLEMS)
    return toy_nodes["corpus"]


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_each_worker_scales_the_map_by_its_own_cached_factor(toy_nodes, corpus):
    map_path, digest = bench_map(toy_nodes["root"] / "cached-map.json", {p: 0.5 for p in PROBLEMS})
    for host, factor in FACTORS.items():
        cached(host, digest, factor)
    # No --host-factor: a map without a sidecar was measured elsewhere, so auto.
    prepared, summary, rows, manifest = sweep(toy_nodes, "cached", map_path)
    assert any("auto by default" in w and "each node" in w for w in prepared.warnings), \
        prepared.warnings
    assert {t.limits.time_s for t in prepared.tasks} == {20.0}      # the map's, unscaled
    assert summary.counts == {"OK": len(PROBLEMS)}
    by_host = {}
    for r in rows:
        by_host.setdefault(r["host"], []).append(r)
    assert set(by_host) == set(FACTORS), f"both workers should have checked: {set(by_host)}"
    for host, factor in FACTORS.items():
        assert {(r["host_factor"], r["timeout_s"]) for r in by_host[host]} == {(factor, 20.0 * factor)}
    nodes = {n["host"]: n for n in manifest["node_factors"]}
    assert {h: (n["factor"], n["how"]) for h, n in nodes.items()} == \
        {h: (f, "cached") for h, f in FACTORS.items()}
    assert manifest["host_factor"] is None


def test_the_first_node_of_a_cpu_model_measures_and_its_peer_reuses_it(toy_nodes, corpus):
    # Another map (so no cached calibration), with times in the calibration band.
    rate_s = {p: 1.0 for p in PROBLEMS}
    map_path, digest = bench_map(toy_nodes["root"] / "measured-map.json", rate_s)
    started = time.time()
    prepared, summary, rows, manifest = sweep(toy_nodes, "measured", map_path, host_factor="auto",
                                              calibration_budget=0.5)
    spec = prepared.node_factor
    assert spec is not None and 1 <= len(spec.sample) <= 5 and spec.cost_s <= 0.5 * 10
    assert any("measures one on" in w for w in prepared.warnings), prepared.warnings
    assert summary.counts == {"OK": len(PROBLEMS)}
    nodes = {n["host"]: n for n in manifest["node_factors"]}
    hows = sorted(n["how"] for n in nodes.values())
    assert hows in (["measured"], ["measured", "peer"]), nodes
    (measurer,) = [n for n in nodes.values() if n["how"] == "measured"]
    assert measurer["problems"] == len(spec.sample) and measurer["cost_cpu_s"] > 0
    # A peer of the same CPU model takes the measured factor, never measures again.
    assert len({n["factor"] for n in nodes.values()}) == 1
    factor = measurer["factor"]
    assert all(r["host_factor"] == factor and r["timeout_s"] == round(20.0 * max(1, factor), 3)
               for r in rows)
    # Kept in the measuring node's cache, by host and CPU model.
    cal = host_factor.load(digest, None, "bytecode", "cpu", host=measurer["host"],
                           cpu_model=cpu_model())
    assert cal is not None and cal.factor == factor and cal.measured_at >= \
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(started - 1))
