"""What a plan expects of each check when a map was derived from a profile
(runner/planning/inputs.py). The map's times are on one clock, normalised to
one node; the profile its sidecar names must be read the same way, or a
plan prices CPU-limited checks from the wall times of a loaded profiling
host. The profiles here are hand-made rows; the map is derived and priced
through the CLI, as a user does it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner import cli
from runner.maps.profile_data import ProblemRuns, write_profile

# Problem -> (CPU seconds, wall seconds) of each of its three runs: the
# profiling host was busy while `busy` ran, so its wall time is twice its CPU.
TIMES = {"light": ((0.5, 0.6, 0.55), (0.5, 0.6, 0.55)),
         "heavy": ((200.0, 210.0, 205.0), (201.0, 212.0, 206.0)),
         "busy": ((100.0, 104.0, 102.0), (200.0, 208.0, 204.0))}
FAST, SLOW = "fast-1", "slow-1"


def _profile(path: Path, runs: list[ProblemRuns]) -> Path:
    return write_profile(path, runs, {"limit_clock": "cpu", "corpus": "corpus", "mode": "native"})


def _planned(capsys, map_path: Path) -> dict[str, tuple[float, str]]:
    """Problem -> (expected seconds, where they came from) of a plan of the map."""
    assert cli.main(["simulate", "--timeout-map", str(map_path), "--workers", "2",
                     "--host-factor", "1", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)["planned_checks"]
    return {c["problem_id"]: (c["expected_s"], c["source"]) for c in planned}


def _derived(profile: Path, map_path: Path, capsys, *flags: str) -> Path:
    assert cli.main(["timeout-map", str(profile), "--out", str(map_path), *flags]) == 0
    capsys.readouterr()
    return map_path


def test_a_cpu_map_plans_its_profiles_cpu_times_and_a_wall_map_its_wall_times(tmp_path, capsys):
    profile = _profile(tmp_path / "profile", [
        ProblemRuns(pid, "generic", wall, wall_secs=wall, prove_cpu_secs=cpu)
        for pid, (cpu, wall) in TIMES.items()])
    cpu_map = _derived(profile, tmp_path / "cpu.json", capsys)
    wall_map = _derived(profile, tmp_path / "wall.json", capsys, "--clock", "wall")
    on_cpu, on_wall = _planned(capsys, cpu_map), _planned(capsys, wall_map)
    # The durations come from the profile the sidecar names, not the map's rounded times.
    assert {source for _, source in [*on_cpu.values(), *on_wall.values()]} == {"profile"}
    assert {pid: s for pid, (s, _) in on_cpu.items()} == pytest.approx(
        {pid: cpu[2] for pid, (cpu, _) in TIMES.items()})
    assert {pid: s for pid, (s, _) in on_wall.items()} == pytest.approx(
        {pid: wall[2] for pid, (_, wall) in TIMES.items()})
    # The busy host's doubling is what the CPU map leaves out.
    assert on_wall["busy"][0] == pytest.approx(2 * on_cpu["busy"][0])


def test_a_map_normalised_to_its_fast_node_plans_its_profiles_times_as_on_that_node(tmp_path, capsys):
    """Every problem ran twice on the fast node and once on one twice as slow:
    the map reads every time as on the fast node, and so does its plan."""
    runs = []
    for pid, (cpu, _) in TIMES.items():
        times = (cpu[0], cpu[1], 2 * cpu[2])
        runs.append(ProblemRuns(pid, "generic", times, prove_cpu_secs=times, hosts=(FAST, FAST, SLOW)))
    profile = _profile(tmp_path / "profile", runs)
    planned = _planned(capsys, _derived(profile, tmp_path / "map.json", capsys))
    assert {pid: s for pid, (s, _) in planned.items()} == pytest.approx(
        {pid: cpu[2] for pid, (cpu, _) in TIMES.items()})
    raw = _planned(capsys, _derived(profile, tmp_path / "raw.json", capsys, "--no-normalise"))
    # Unnormalised, the median of (a, b, 2c) is b for these rows.
    assert {pid: s for pid, (s, _) in raw.items()} == pytest.approx(
        {pid: cpu[1] for pid, (cpu, _) in TIMES.items()})
