"""A node's canary and the confirmation of its TIMEOUTs (runner/maps/canary.py,
runner/maps/drift_confirm.py), and where the Dask executors place checks
(cluster/dask_placement.py): the choices, from planted rows and settings.
The canary and the confirmation on HOL Light are in
tests/cluster/test_node_canary.py; placement by speed on a real Dask in
tests/cluster/test_node_factors_hol.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cluster import dask_placement
from runner.checks.tasks import CheckTask
from runner.corpus import Problem
from runner.errors import InputError
from runner.maps import canary, drift_confirm
from runner.planning.sweep_config import SweepConfig
from runner.prover import CheckLimits
from runner.results.shards import ShardWriter

from ..helpers import row


def task(pid: str, limit: float = 10.0) -> CheckTask:
    p = Problem(pid, Path(pid), Path(pid) / "setup.ml", Path(pid) / "query.txt", "generic", b"x", "")
    return CheckTask(p, CheckLimits(time_s=limit, time_source="map", mem_bytes=2**30,
                                    expected_mem_bytes=2**29), answer_sha256="ab" * 32)


def config(**overrides) -> SweepConfig:
    return SweepConfig(corpus=Path("c"), out=Path("o"), **overrides)


@pytest.mark.parametrize("flag, overrides", [
    ("--canary-checks", {"canary_checks": -1}),
    ("--canary-minutes", {"canary_minutes": -5.0}),
    ("--canary-drift", {"canary_drift": 0.0}),
    ("--canary-drift", {"canary_drift": 1.5}),
])
def test_canary_settings_that_mean_nothing_are_refused_naming_the_flag(flag, overrides):
    with pytest.raises(InputError) as raised:
        canary.check_flags(config(**overrides))
    assert raised.value.where == flag


def test_the_canary_is_the_ground_truth_nearest_two_seconds_of_those_long_enough():
    tasks = {pid: task(pid) for pid in ("tiny", "near", "far", "untimed")}
    expected = {"tiny": 0.05, "near": 3.0, "far": 40.0}
    spec = canary.choose(expected, tasks, config())
    assert spec.task.problem.problem_id == "near" and spec.expected_s == 3.0
    assert (spec.every_checks, spec.every_s, spec.drift) == (100, 600.0, 0.25)
    # A proof shorter than CANARY_MIN_S measures the clock, and one longer
    # than CANARY_MAX_S costs a node more than its checks: no canary then.
    assert canary.choose({"tiny": 0.05}, tasks, config()) is None
    assert canary.choose({"tiny": 0.05, "far": 321.0}, tasks, config()) is None
    assert canary.choose(expected, tasks, config(canary_checks=0, canary_minutes=0)) is None


def test_timeouts_of_a_drifting_node_within_its_drift_are_confirmed(tmp_path):
    def planted(pid, verdict="TIMEOUT", drift=2.0, cpu=10.0, confirmed=""):
        return dataclasses.replace(row(pid, verdict=verdict), timeout_s=10.0, limit_clock="cpu",
                                   cpu_secs=cpu, prove_cpu_secs=None, node_drift=drift,
                                   confirmed=confirmed, host="node-a")

    with ShardWriter(tmp_path, "w0") as writer:
        for r in (planted("drifted"), planted("steady", drift=1.1), planted("ok", verdict="OK"),
                  planted("beyond", cpu=25.0), planted("done", confirmed="TIMEOUT on node-b"),
                  planted("faster", drift=0.5), planted("unmarked", drift=None)):
            writer.add(r)
    tasks = [task(pid) for pid in ("drifted", "steady", "ok", "beyond", "done", "faster",
                                   "unmarked")]
    (found,) = drift_confirm.to_confirm(tmp_path, tasks, 0.25)
    assert found.problem.problem_id == "drifted" and found.recheck_after is not None
    assert found.confirms.host == "node-a"
    assert found.confirms.note.startswith("TIMEOUT on node-a (10.0 s of CPU time, limit 10 s) "
                                          "while its canary ran 2.00x its first")


def test_a_timeout_the_executor_did_not_confirm_is_named_and_stands(tmp_path, monkeypatch):
    # An executor that ran no confirming check (one that read the first
    # row back as done): the sweep says the TIMEOUT stands unconfirmed.
    from types import SimpleNamespace

    from runner.maps import node_factor

    monkeypatch.setattr(node_factor, "record", lambda out: None)
    with ShardWriter(tmp_path, "w0") as writer:
        writer.add(dataclasses.replace(row("drifted", verdict="TIMEOUT"), timeout_s=10.0,
                                       limit_clock="cpu", cpu_secs=10.0, node_drift=2.0))
    spec = SimpleNamespace(canary=SimpleNamespace(drift=0.25))
    prepared = SimpleNamespace(config=SimpleNamespace(out=tmp_path), tasks=[task("drifted")],
                               node_factor=spec)
    ran, notes = [], []
    drift_confirm.after_sweep(prepared, lambda tasks, on_row: ran.extend(tasks), notes.append)
    assert [t.problem.problem_id for t in ran] == ["drifted"]
    assert notes[-1] == ("confirmed 0 of 1; not confirmed (1, the first TIMEOUT stands; a resume "
                         "tries again): drifted"), notes


def test_dask_places_the_heaviest_on_the_fastest_and_confirmations_elsewhere():
    workers = ["tcp://a:1", "tcp://b:2", "tcp://c:3"]
    nodes = {"tcp://a:1": ("slow", 3.0), "tcp://b:2": ("fast", 1.0), "tcp://c:3": ("new", None)}
    threads = {w: 2 for w in workers}
    fastest = dask_placement.by_speed(workers, threads, nodes)
    # The fast node's two slots first, then the unmeasured one (at the
    # median of the others, 2.0), then the slow one.
    assert fastest == ["tcp://b:2", "tcp://b:2", "tcp://c:3", "tcp://c:3", "tcp://a:1", "tcp://a:1"]
    assert dask_placement.by_speed(workers[:2], threads, {w: ("n", 1.5) for w in workers}) == []
    heavy = [task("heavy")]
    assert dask_placement.hint(heavy, 0, fastest, workers, nodes, "tcp://a:1") == (["tcp://b:2"], True)
    assert dask_placement.hint(heavy, 9, fastest, workers, nodes, "tcp://a:1") == (["tcp://a:1"], True)
    again = [dataclasses.replace(heavy[0], confirms=drift_confirm.Confirmation("fast", "note"))]
    assert dask_placement.hint(again, 0, fastest, workers, nodes, "tcp://b:2") == \
        (["tcp://a:1", "tcp://c:3"], False)
