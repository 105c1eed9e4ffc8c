"""Each node's own host factor on HOL Light's example corpus (issue 47): on
the dev Slurm with nothing cached, the array task measures its node's
factor on the sweep's own ground truths and every row records it; on Dask,
two workers named as two nodes, each with its own cached calibration, each
scale their checks' map limits by their own factor, and the verdicts are the
corpus's.

Native checks on the session's build (the native_build fixture, whose cache
is a fresh folder of this test session: PROOFBATCH_CACHE), as the other
cluster tests run them: a worker boots in about 14 s instead of 70-90 s.
"""

from __future__ import annotations

import json
import os
import socket
import time

import pyarrow.parquet as pq
import pytest

from cluster.dask import DaskExecutor
from cluster.slurm import SlurmExecutor, SlurmOptions
from runner.checks.worker import NODE_HOST_ENV, cpu_model
from runner.maps import host_factor, provenance
from runner.provers.hol_light import runtime
from runner.sweep import prepare, run_sweep

from ..helpers import ROOT, demo_config, expected_verdicts
from .dask_cluster import scheduler_and_workers

pytestmark = pytest.mark.hol

DEMO_MAP = ROOT / "timeout_maps" / "hol_light_demo.json"
# Light problems of several contexts (so Dask's affinity hints spread them
# over both workers), a verdict of each kind; and for Slurm, the two heavy
# proofs whose map times (31 and 45 s bytecode, 7-11 s native) lie in the
# calibration band: the sample is drawn from them.
LIGHT = ("arith.add_comm", "arith.false_claim", "fault.cheat_tac", "lists.append_nil",
         "logic.drinker", "sets.union_comm", "logic.taut_contrapos", "lists.length_append")
HEAVY = ("heavy.arith_cases", "heavy.big_mod")
FACTORS = {"pb-hol-node-a": 1.5, "pb-hol-node-b": 3.0}


def rows_of(out) -> list[dict]:
    return pq.read_table(out / "results.parquet").to_pylist()


def map_limit(prepared) -> dict[str, float]:
    """Each problem's limit before any node scaled it."""
    return {t.problem.problem_id: t.limits.time_s for t in prepared.tasks}


@pytest.mark.slurm
def test_a_slurm_task_with_nothing_cached_calibrates_on_its_node(native_build, slurm_cluster,
                                                                  tmp_path):
    digest = provenance.load(DEMO_MAP).digest
    # Nothing cached for this node: PROOFBATCH_CACHE is the session's fresh cache.
    assert host_factor.load(digest, "bytecode", "native", "cpu", host=socket.gethostname()) is None
    out = tmp_path / "out"
    prepared = prepare(demo_config(out, only=LIGHT + HEAVY, mode="native", timeout_map=DEMO_MAP,
                                   host_factor="auto", calibration_budget=0.5), per_node=True)
    spec = prepared.node_factor
    assert spec is not None and [s.task.problem.problem_id for s in spec.sample] == ["heavy.arith_cases"]
    assert any("measures one on 1 ground truths" in w for w in prepared.warnings), prepared.warnings
    started = time.monotonic()
    summary = run_sweep(prepared, SlurmExecutor(SlurmOptions(nodes=1, cpus_per_task=2, poll_s=1.0)))
    wall = time.monotonic() - started
    wanted = expected_verdicts()
    rows = rows_of(out)
    assert {r["problem_id"]: r["verdict"] for r in rows} == {p: wanted[p] for p in LIGHT + HEAVY}
    manifest = json.loads((out / "sweep.json").read_text())
    (node,) = manifest["node_factors"]
    assert node["host"] == socket.gethostname() and node["how"] == "measured" and node["problems"] == 1
    assert node["cpu_model"] == cpu_model() and node["cost_cpu_s"] > 0
    factor = node["factor"]
    base = map_limit(prepared)
    for r in rows:
        assert r["host_factor"] == factor, r
        scale = max(1.0, factor) if r["timeout_source"].startswith("map") else 1.0
        assert r["timeout_s"] == pytest.approx(round(base[r["problem_id"]] * scale, 3)), r
    # Kept in the node's cache, under the runtime setting its checks ran
    # under (native's default): its next sweep takes it without measuring.
    assert prepared.backend.info.runtime == runtime.TUNED.key
    cal = host_factor.load(digest, "bytecode", "native", "cpu", host=socket.gethostname(),
                           cpu_model=cpu_model(), runtime=runtime.TUNED.key)
    assert cal is not None and cal.factor == factor and cal.runtime == runtime.TUNED.key
    assert host_factor.load(digest, "bytecode", "native", "cpu", host=socket.gethostname()) is None
    # For docs/slurm.md: what the calibration cost on the dev cluster, and the load.
    print(f"\nSLURM CALIBRATION: factor {factor} on {node['problems']} ground truth, "
          f"{node['cost_cpu_s']} s of CPU, {node['note']}; sweep wall {wall:.0f} s, "
          f"load now {os.getloadavg()[0]:.1f}")


@pytest.fixture(scope="module")
def two_nodes(native_build, tmp_path_factory):
    """Two Dask workers of two threads, named as nodes of the two cached
    calibrations of FACTORS against the demo map (native checks under
    native's default runtime setting, CPU clock)."""
    digest = provenance.load(DEMO_MAP).digest
    for host, factor in FACTORS.items():
        host_factor.save(host_factor.Calibration(
            host=host, map_sha256=digest, mode="native", clock="cpu", factor=factor, low=factor,
            high=factor, problems=2, measured_at="2026-11-30T00:00:00+00:00", load=None,
            sweep="", ratios={}, map_mode="bytecode", cpu_model=cpu_model(),
            runtime=runtime.TUNED.key))
    d = tmp_path_factory.mktemp("hol-nodes")
    workers = {host: {**os.environ, NODE_HOST_ENV: host} for host in FACTORS}
    with scheduler_and_workers(d, workers, memory="6GiB", nthreads=2, stop_s=60) as address:
        yield address


def test_two_dask_workers_each_scale_limits_by_their_own_cached_factor(two_nodes, tmp_path):
    out = tmp_path / "out"
    prepared = prepare(demo_config(out, only=LIGHT, mode="native", timeout_map=DEMO_MAP,
                                   host_factor="auto"), per_node=True)
    summary = run_sweep(prepared, DaskExecutor(two_nodes))
    rows = rows_of(out)
    wanted = expected_verdicts()
    # The verdicts agree with the corpus's whichever node checked.
    assert {r["problem_id"]: r["verdict"] for r in rows} == {p: wanted[p] for p in LIGHT}
    by_host: dict[str, list[dict]] = {}
    for r in rows:
        by_host.setdefault(r["host"], []).append(r)
    assert set(by_host) == set(FACTORS), f"each worker should have checked: {sorted(by_host)}"
    base = map_limit(prepared)
    for host, factor in FACTORS.items():
        for r in by_host[host]:
            assert r["host_factor"] == factor
            # A limit from the map scales; one from the category file (a
            # problem the map has no entry for: arith.false_claim) does not.
            scale = factor if r["timeout_source"].startswith("map") else 1.0
            assert r["timeout_s"] == pytest.approx(round(base[r["problem_id"]] * scale, 3))
    # The map's limits on the two nodes differ by their factors.
    a, b = ({round(r["timeout_s"] / base[r["problem_id"]], 3) for r in by_host[h]
             if r["timeout_source"].startswith("map")} for h in FACTORS)
    assert a == {1.5} and b == {3.0}, (a, b)
    manifest = json.loads((out / "sweep.json").read_text())
    assert {n["host"]: (n["factor"], n["how"]) for n in manifest["node_factors"]} == \
        {h: (f, "cached") for h, f in FACTORS.items()}
    assert summary.counts.total() == len(LIGHT)


def test_the_heaviest_checks_go_first_to_the_fastest_node(two_nodes, tmp_path):
    # The two heavy proofs are the plan's heaviest checks; the workers'
    # factors are their cached calibrations, known before any check: the
    # fastest node's two threads take the two heaviest (cluster/dask_placement.py,
    # the order simulate --node-factors prices). No canary: placement alone.
    out = tmp_path / "out"
    only = HEAVY + LIGHT[:4]
    prepared = prepare(demo_config(out, only=only, mode="native", timeout_map=DEMO_MAP,
                                   host_factor="auto", canary_checks=0, canary_minutes=0),
                       per_node=True)
    heaviest = [t.problem.problem_id for t in prepared.tasks[:2]]
    assert sorted(heaviest) == sorted(HEAVY), [t.problem.problem_id for t in prepared.tasks]
    run_sweep(prepared, DaskExecutor(two_nodes))
    rows = {r["problem_id"]: r for r in rows_of(out)}
    wanted = expected_verdicts()
    assert {p: r["verdict"] for p, r in rows.items()} == {p: wanted[p] for p in only}
    fastest, slowest = sorted(FACTORS, key=FACTORS.get)
    assert {p: rows[p]["host"] for p in heaviest} == {p: fastest for p in heaviest}
    assert {rows[p]["host_factor"] for p in heaviest} == {FACTORS[fastest]}
    # The next two, one per thread of the slower node: without placement by
    # speed, image affinity hints all of them (one empty context) to one worker.
    after = [t.problem.problem_id for t in prepared.tasks[2:4]]
    assert {p: rows[p]["host"] for p in after} == {p: slowest for p in after}
