"""Nodes of different speed in one profile (runner/maps/nodes.py): a fake
slow node, hand-made. The profile's rows are data here: what is tested is
the arithmetic of the factors and of normalisation, and the command that
derives a map from them (`timeout-map`, --no-normalise, --reference-node,
--compare-with) and what its sidecar records."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from runner import cli
from runner.maps.nodes import SAME_SPEED, most_at_once, node_factors
from runner.maps.profile_data import ProblemRuns, load_profile, write_profile
from runner.maps.timeout_map import MapPolicy, derive, read_sidecar
from runner.maps.timeouts import read_map

FAST, SLOW, ODD = "fast-1", "slow-1", "odd-1"
MODELS = {FAST: "Fast CPU @ 3.5GHz", SLOW: "Slow CPU @ 1.7GHz", ODD: "Odd CPU"}
# Problem -> its time on the fast node; the slow node takes exactly twice.
BASE = {f"p{i:02d}": t for i, t in enumerate([0.01, 0.2, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0,
                                              34.0, 55.0, 70.0, 90.0, 150.0, 400.0])}
# Which node timed each of a problem's three runs: all fast, mixed, or
# mostly slow. The fast node times the most runs, so it is the reference.
PLACES = [(FAST, FAST, FAST), (FAST, SLOW, FAST), (SLOW, SLOW, FAST), (FAST, FAST, SLOW)]


def placed(pid: str) -> tuple[str, ...]:
    return PLACES[int(pid[1:]) % len(PLACES)]


def fake_runs(slow: float = 2.0, odd: bool = False) -> list[ProblemRuns]:
    runs = []
    for pid, t in BASE.items():
        hosts = placed(pid)
        times = tuple(t * (slow if h == SLOW else 1.0) for h in hosts)
        runs.append(ProblemRuns(pid, "generic", times, prove_cpu_secs=times, hosts=hosts,
                                cpu_models=tuple(MODELS[h] for h in hosts)))
    if odd:
        # A node that shares no problem with any other: no factor can be measured.
        runs.append(ProblemRuns("lonely", "generic", (4.0, 4.2, 4.1), prove_cpu_secs=(4.0, 4.2, 4.1),
                                hosts=(ODD,) * 3, cpu_models=(MODELS[ODD],) * 3))
    return runs


@pytest.fixture
def slow_node_profile(tmp_path) -> Path:
    """A profile directory whose slow node took exactly 2x, as `profile` writes one."""
    path = write_profile(tmp_path / "profile", fake_runs(), {
        "limit_clock": "cpu", "corpus": "corpus", "generations": [
            {"id": "g1", "machine": {"host": "driver-1", "cpu_model": "Driver CPU", "cores": 8},
             "runs": [], "finished": "2026-11-27T07:00:00+00:00"}]})
    summary = json.loads((path / "summary.json").read_text())
    for p in summary["problems"]:
        p["host_load"] = [0.5 if h == FAST else 1.5 for h in p["run_hosts"]]
        p["host_cpus"] = [4 if h == FAST else 2 for h in p["run_hosts"]]
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def test_the_slow_node_is_measured_at_twice_the_reference():
    nodes = node_factors(fake_runs())
    assert nodes.reference == FAST
    fast, slow = nodes.node(FAST), nodes.node(SLOW)
    assert (fast.factor, fast.cpu_model) == (1.0, MODELS[FAST])
    assert slow.factor == pytest.approx(2.0) and slow.low == pytest.approx(2.0) and slow.cpu_model == MODELS[SLOW]
    # Problems timed on both nodes at 0.5 s or more: p01 (0.2 s) is the clock's, not the node's.
    shared = [pid for pid, t in BASE.items() if len(set(placed(pid))) == 2 and t >= 0.5]
    assert slow.problems == len(shared)
    assert nodes.differ
    assert list(nodes.mixed) == sorted(pid for pid in BASE if len(set(placed(pid))) == 2)


def test_normalised_times_read_as_on_the_reference_node():
    normalised = node_factors(fake_runs()).normalise(fake_runs())
    for r in normalised:
        assert r.prove_secs == pytest.approx((BASE[r.problem_id],) * 3)
        assert r.prove_cpu_secs == pytest.approx((BASE[r.problem_id],) * 3)
    # The map of normalised runs is the map of a profile taken on the fast node alone.
    alone = [ProblemRuns(pid, "generic", (t,) * 3) for pid, t in BASE.items()]
    policy = MapPolicy(target_false_timeout=0)
    assert [(e.cls, e.timeout_sec) for e in derive(normalised, policy).entries] == \
        [(e.cls, e.timeout_sec) for e in derive(alone, policy).entries]
    # Raw, a problem of 1.5 s with a run on the slow node spreads 2x: heavy, for speed, not spread.
    raw = {e.problem_id: e for e in derive(fake_runs(), policy).entries}
    assert placed("p03") == (FAST, FAST, SLOW) and raw["p03"].cls == "heavy"


def test_nodes_of_one_speed_are_not_normalised():
    nodes = node_factors(fake_runs(slow=1.04))
    assert not nodes.differ and 1.04 < SAME_SPEED and nodes.mixed == ()


def test_a_node_sharing_no_problem_keeps_its_times_and_says_so():
    nodes = node_factors(fake_runs(odd=True))
    assert nodes.unknown == [ODD] and nodes.node(ODD).factor is None and nodes.differ
    lonely = next(r for r in nodes.normalise(fake_runs(odd=True)) if r.problem_id == "lonely")
    assert lonely.prove_secs == (4.0, 4.2, 4.1)


def test_the_reference_can_be_named_and_the_fast_node_then_reads_half():
    nodes = node_factors(fake_runs(), reference=SLOW)
    assert nodes.reference == SLOW and nodes.node(FAST).factor == pytest.approx(0.5)
    for r in nodes.normalise(fake_runs()):
        assert r.prove_secs == pytest.approx((2 * BASE[r.problem_id],) * 3)


def test_timeout_map_normalises_and_its_sidecar_names_the_reference(slow_node_profile, tmp_path, capsys):
    map_path = tmp_path / "maps" / "fake.json"
    assert cli.main(["timeout-map", str(slow_node_profile), "--out", str(map_path)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"times normalised to node {FAST}" in said and f"{SLOW} x2.000" in said
    times = {e.problem_id: e.prove_secs for e in read_map(map_path).values()}
    assert times == pytest.approx(BASE)
    prov = read_sidecar(map_path)["provenance"]
    assert prov["clock"] == "cpu"
    nodes = prov["nodes"]
    assert (nodes["reference"], nodes["reference_cpu_model"], nodes["normalised"]) == \
        (FAST, MODELS[FAST], True)
    assert {n["host"]: n["factor"] for n in nodes["nodes"]} == {FAST: 1.0, SLOW: 2.0}
    hosts = {h["host"]: h for h in prov["hosts"]}
    assert set(hosts) == {FAST, SLOW, "driver-1"}
    assert (hosts[FAST]["cpu_model"], hosts[FAST]["cores"], hosts[FAST]["median_load"]) == \
        (MODELS[FAST], 4, 0.5)
    assert hosts[SLOW]["median_load"] == 1.5 and hosts[SLOW]["load_samples"] == hosts[SLOW]["runs"]
    assert hosts[FAST]["runs"] + hosts[SLOW]["runs"] == 3 * len(BASE)
    assert hosts["driver-1"]["runs"] == 0 and hosts["driver-1"]["cpu_model"] == "Driver CPU"


def test_no_normalise_keeps_the_raw_times(slow_node_profile, tmp_path, capsys):
    map_path = tmp_path / "raw.json"
    assert cli.main(["timeout-map", str(slow_node_profile), "--out", str(map_path), "--no-normalise"]) == 0
    assert "--no-normalise" in capsys.readouterr().out
    times = {e.problem_id: e.prove_secs for e in read_map(map_path).values()}
    assert placed("p02") == (SLOW, SLOW, FAST) and times["p02"] == pytest.approx(2.0)  # 2, 2, 1
    assert placed("p03") == (FAST, FAST, SLOW) and times["p03"] == pytest.approx(1.5)  # 1.5, 1.5, 3
    nodes = read_sidecar(map_path)["provenance"]["nodes"]
    assert nodes["normalised"] is False and nodes["differ"] is True


def test_reference_node_on_the_command_line(slow_node_profile, tmp_path, capsys):
    map_path = tmp_path / "slow.json"
    assert cli.main(["timeout-map", str(slow_node_profile), "--out", str(map_path),
                     "--reference-node", SLOW]) == 0
    times = {e.problem_id: e.prove_secs for e in read_map(map_path).values()}
    assert times == pytest.approx({pid: 2 * t for pid, t in BASE.items()})
    assert read_sidecar(map_path)["provenance"]["nodes"]["reference"] == SLOW
    assert cli.main(["timeout-map", str(slow_node_profile), "--out", str(tmp_path / "x.json"),
                     "--reference-node", "nowhere-9"]) == 2
    err = capsys.readouterr().err
    assert "nowhere-9" in err and FAST in err and not (tmp_path / "x.json").exists()


def test_compare_with_records_the_factor_in_the_sidecar(slow_node_profile, tmp_path, capsys):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps([{"problem_id": pid, "prove_secs": round(1.7 * t, 6), "timeout_sec": 120}
                                 for pid, t in BASE.items()] +
                                [{"problem_id": "elsewhere", "prove_secs": 3.0, "timeout_sec": 120}]))
    map_path = tmp_path / "ours.json"
    assert cli.main(["timeout-map", str(slow_node_profile), "--out", str(map_path),
                     "--compare-with", str(bench)]) == 0
    assert "their prove_secs / ours = 1.700" in " ".join(capsys.readouterr().out.split())
    [record] = read_sidecar(map_path)["provenance"]["compared_with"]
    assert record["map"] == str(bench) and record["factor"] == pytest.approx(1.7)
    assert (record["in_both"], record["here_only"], record["there_only"]) == (len(BASE), 0, 1)
    assert record["clock"] == "wall" and len(record["sha256"]) == 64
    # The bench's 120 s limits are below our (normalised) time x1.7 for the long proofs.
    assert record["limits_there_below_our_time"] == sum(1.7 * t > 120 for t in BASE.values())


def test_a_bad_compare_with_is_refused_before_anything_is_written(slow_node_profile, tmp_path, capsys):
    map_path = tmp_path / "ours.json"
    missing = tmp_path / "missing.json"
    assert cli.main(["timeout-map", str(slow_node_profile), "--out", str(map_path),
                     "--compare-with", str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err and not map_path.exists()
    assert cli.main(["timeout-map", str(slow_node_profile), "--validate", "--map", str(map_path),
                     "--compare-with", str(missing)]) == 2
    assert "--compare-with" in capsys.readouterr().err


def test_a_summary_whose_nodes_do_not_match_its_runs_is_refused(slow_node_profile, capsys):
    summary = json.loads((slow_node_profile / "summary.json").read_text())
    summary["problems"][3]["run_hosts"] = [FAST]
    (slow_node_profile / "summary.json").write_text(json.dumps(summary))
    assert cli.main(["timeout-map", str(slow_node_profile), "--out", "/tmp/never-written.json"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "summary.json" in err and "run_hosts" in err and "p03" in err
    with pytest.raises(Exception, match="run_hosts"):
        load_profile(slow_node_profile)


def test_checks_at_once_per_host():
    t0 = dt.datetime(2026, 11, 27, 7, 0, tzinfo=dt.timezone.utc)

    def row(host, start, end, cpus=2):
        return {"host": host, "started_at": t0 + dt.timedelta(seconds=start),
                "finished_at": t0 + dt.timedelta(seconds=end), "host_cpus": cpus, "dedup_of": None}

    rows = [row("a", 0, 10), row("a", 5, 12), row("a", 6, 8), row("a", 12, 20),   # 3 at once at 6-8
            row("b", 0, 1), row("b", 1, 2), row("b", 2, 3)]                          # back to back: 1
    assert most_at_once(rows) == {"a": {"most_at_once": 3, "cpus": 2}, "b": {"most_at_once": 1, "cpus": 2}}


def test_a_profile_refuses_more_checks_than_cores_and_bad_executor_options(tmp_path, capsys):
    """One check per core: two on one core each take about twice as long.
    Refused before anything is read or written (no prover starts)."""
    import os

    from ..helpers import DEMO

    out = tmp_path / "profile"
    assert cli.main(["profile", str(DEMO), "--out", str(out), "--workers", str(os.cpu_count() + 1)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--workers" in err and f"on {os.cpu_count()} cores" in err and not out.exists()
    assert cli.main(["profile", str(DEMO), "--out", str(out), "--cluster", "slurm", "--add-tasks", "1"]) == 2
    assert "--add-tasks" in capsys.readouterr().err and not out.exists()
    assert cli.main(["profile", str(DEMO), "--out", str(out), "--cluster", "dask"]) == 2
    assert "--scheduler-address" in capsys.readouterr().err and not out.exists()
    assert cli.main(["profile", str(DEMO), "--out", str(out), "--cluster", "slurm", "--nodes", "0"]) == 2
    assert "--nodes" in capsys.readouterr().err and not out.exists()
