"""A sweep can be killed at any moment and resumed without losing or
repeating anything: kill -9 of the runner mid-sweep, a torn shard."""

from __future__ import annotations

import pytest

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from runner.results import shards

from .helpers import DEMO, demo_config, ROOT, SPIN, sweep_with

# Every test here boots HOL Light or checks in it.
pytestmark = pytest.mark.hol

LIGHT = ["arith.add_comm", "lists.append_nil", "lists.length_append", "logic.drinker",
         "logic.taut_contrapos", "sets.subset_trans", "sets.union_comm"]


def small_corpus(root: Path) -> Path:
    """Light demo problems, then a check that spins for its whole limit, so
    that a kill lands while work is recorded and work is still running."""
    corpus = root / "corpus"
    for pid in LIGHT:
        shutil.copytree(DEMO / pid, corpus / pid)
        (corpus / pid / "category.txt").write_text("light\n")
    for i in range(2):
        spin = corpus / f"slow.spin{i}"
        spin.mkdir(parents=True)
        (spin / "setup.ml").write_text("")
        (spin / "query.txt").write_text("`F`\n")
        (spin / "answer.txt").write_text(SPIN + "\n")
        (spin / "category.txt").write_text("slow\n")
    (root / "timeouts.json").write_text(json.dumps({"light": 60, "slow": 8}))
    return corpus


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_kill_9_mid_sweep_then_resume_gives_exactly_one_verdict_each(hol_session, tmp_path):
    corpus = small_corpus(tmp_path)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "runner.cli", "run", str(corpus), "--out", str(out),
            "--category-timeouts", str(tmp_path / "timeouts.json"), "--workers", "1",
            "--context-root", str(DEMO), "--mem-limit", "2G"]
    runner = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Wait until the light checks are published and a spinning check runs.
        deadline = time.monotonic() + 600
        while not list((out / "shards").glob("*.parquet")):
            assert runner.poll() is None, "the runner ended before it was killed"
            assert time.monotonic() < deadline, "no shard was ever published"
            time.sleep(0.5)
        provers = descendants(runner.pid)
        assert provers, "the runner should have HOL Light processes"
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    finally:
        if runner.poll() is None:
            runner.kill()

    # Every image and check follows the runner down: nothing is left running.
    gone, alive = psutil.wait_procs(provers, timeout=30)
    assert not alive, f"prover processes outlived the killed runner: {alive}"

    before = shards.scan(out)
    assert 0 < len(before.done) < len(LIGHT) + 2, "the kill should land mid-sweep"

    summary = sweep_with(hol_session, demo_config(
        out, corpus=corpus, category_timeouts=tmp_path / "timeouts.json", workers=1))
    table = summary.table.to_pylist()
    ids = [row["problem_id"] for row in table]
    assert sorted(ids) == sorted(LIGHT + ["slow.spin0", "slow.spin1"])   # exactly once each
    assert summary.resumed == len(before.done)
    verdicts = {row["problem_id"]: row["verdict"] for row in table}
    said = {row["problem_id"]: f'{row["verdict"]}: {row["reason"]}' for row in table}
    assert all(verdicts[p] == "OK" for p in LIGHT), said
    assert verdicts["slow.spin0"] == verdicts["slow.spin1"] == "TIMEOUT", said
    # Rows recorded before the kill were kept as they were, not redone.
    final = {(row["problem_id"], row["attempt"]): row for row in table}
    for key, row in before.done.items():
        assert final[key]["run_id"] == row["run_id"]
        assert final[key]["finished_at"] == row["finished_at"]


def test_a_torn_shard_is_quarantined_and_its_checks_redone(demo_sweep, hol_session, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(demo_sweep.out, out)
    for name in ("results.parquet", "results.csv", "verdicts.csv"):
        (out / name).unlink()
    shard = sorted((out / "shards").glob("*.parquet"))[0]
    torn_ids = set(shards.scan(out).done) - set(_without(out, shard))
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])           # a disk that filled mid-write

    summary = sweep_with(hol_session, demo_config(out))

    assert [p.name for p in summary.quarantined] == [shard.name]
    assert (out / "shards" / "quarantine" / shard.name).exists()   # kept for inspection
    assert summary.ran_now == len(torn_ids)
    ids = summary.table.column("problem_id").to_pylist()
    assert len(ids) == len(set(ids)) == demo_sweep.total


def _without(out: Path, shard: Path) -> set:
    """The keys recorded by every shard except ``shard``."""
    aside = shard.with_name(".aside")
    os.rename(shard, aside)
    try:
        return set(shards.scan(out).done)
    finally:
        os.rename(aside, shard)
