"""The bad day every profile on a cluster lives through, and what it must
leave, whichever executor ran it (tests/cluster/test_profile_cluster.py on
Slurm, test_profile_dask.py on Dask): the driver is stopped in the middle
of run 2 and the same command started again finishes the profile; each
selected example problem is then timed in each of three runs, each check in
exactly one row, each run seeded and shuffled, every row naming this host
and its CPU."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Sequence

from runner.checks.worker import cpu_model
from runner.profile import load_profile

from ..helpers import DEMO, LIGHT, TEST_MEM_LIMIT
from .test_slurm import all_shard_keys

# The run a driver is stopped in: one run done before it, one to start after.
RUN_2 = Path("runs") / "g1-r2"


def busy_corpus(root: Path, busy: str, problems: Sequence[str] = LIGHT) -> Path:
    """``problems`` of the demo corpus under ``root/corpus``, each answer
    begun by ``busy``: seconds of work before its proof, so that a stop
    lands between checks. (An answer may not read a clock: Sys is forbidden
    in answers.)"""
    corpus = root / "corpus"
    for pid in problems:
        folder = corpus / pid
        folder.mkdir(parents=True)
        for name in ("setup.ml", "query.txt"):
            (folder / name).write_bytes((DEMO / pid / name).read_bytes())
        (folder / "answer.txt").write_text(busy + (DEMO / pid / "answer.txt").read_text())
    return corpus


def profile_args(corpus: str | Path, out: str | Path) -> list[str]:
    """`profile`'s arguments for three runs seeded 5, 6 and 7, as
    assert_seeded_runs_on_this_host expects; a test adds its cluster's."""
    return ["profile", str(corpus), "--out", str(out), "--runs", "3", "--seed", "5",
            "--ceiling", "300", "--mem-limit", f"{TEST_MEM_LIMIT // 2**20}M",
            "--context-root", str(DEMO)]


def start_driver(argv: Sequence[str], cwd: Path) -> subprocess.Popen:
    """A driver in a session of its own (a stop reaches its whole group),
    its output read back as one text."""
    return subprocess.Popen(list(argv), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, env={**os.environ, "COLUMNS": "120"})


@contextmanager
def stopped_then_resumed(start: Callable[[], subprocess.Popen], mid_run_2: Callable[[subprocess.Popen], dict],
                         stop: int, *, resume_s: float) -> Iterator[dict]:
    """``start`` a profile's driver; ``mid_run_2`` waits, while it runs, for
    the moment of the story, does to the cluster what the story does there
    and returns what it saw; the driver is stopped by the signal ``stop``,
    and ``start`` again must finish the profile within ``resume_s``. Yields
    what ``mid_run_2`` saw with each driver's output and exit, and the
    seconds all took. A driver still running at the end is killed."""
    drivers: list[subprocess.Popen] = []
    started = time.monotonic()
    try:
        first = start()
        drivers.append(first)
        story = dict(mid_run_2(first))
        assert first.poll() is None, \
            f"the first driver ended (exit {first.returncode}) before it could be stopped " \
            f"in run 2:\n{first.communicate()[0]}"
        os.killpg(first.pid, stop)
        story["first_output"] = first.communicate(timeout=120)[0]
        story["first_exit"] = first.returncode
        second = start()
        drivers.append(second)
        story["second_output"] = second.communicate(timeout=resume_s)[0]
        story["second_exit"] = second.returncode
        story["seconds"] = time.monotonic() - started
        yield story
    finally:
        for proc in drivers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


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
