"""What every profile on a cluster must leave, whichever executor ran it
(tests/cluster/test_profile_cluster.py on Slurm, test_profile_dask.py on
Dask): each selected example problem timed in each of three runs, each
check in exactly one row, each run seeded and shuffled, every row naming
this host and its CPU."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from runner.checks.worker import cpu_model
from runner.profile import load_profile

from ..helpers import LIGHT
from .test_slurm import all_shard_keys


def assert_three_times_each(out: Path, min_prove_s: float = 0.0) -> None:
    """Every problem of LIGHT timed three times (each over ``min_prove_s``),
    none a defect; never half-counted: in every run each check has exactly
    one row in all of its shards, a stopped or cancelled worker's included."""
    result = load_profile(out)
    assert result.defects == [], result.defects
    assert sorted(r.problem_id for r in result.runs) == sorted(LIGHT)
    for r in result.runs:
        assert len(r.prove_secs) == 3 and all(t > min_prove_s for t in r.prove_secs), r
    for run in result.provenance["generations"][0]["runs"]:
        keys = all_shard_keys(out / run["dir"])
        assert sorted(keys) == sorted((pid, 0) for pid in LIGHT), (run["dir"], keys)


def assert_seeded_runs_on_this_host(out: Path, cluster: str) -> dict:
    """Each problem's three times from this host and its CPU model; runs of
    seeds 5, 6, 7 on ``cluster``, each shuffled by its seed. Returns the
    profile's generation."""
    result = load_profile(out)
    host = socket.gethostname()
    assert cpu_model()
    for r in result.runs:
        assert r.hosts == (host,) * 3 and r.cpu_models == (cpu_model(),) * 3, r
    generation = result.provenance["generations"][0]
    assert generation["cluster"] == cluster and [r["seed"] for r in generation["runs"]] == [5, 6, 7]
    for run in generation["runs"]:
        manifest = json.loads((out / run["dir"] / "sweep.json").read_text())
        assert manifest["config"]["policy"] == "shuffle" and manifest["config"]["seed"] == run["seed"]
    return generation
