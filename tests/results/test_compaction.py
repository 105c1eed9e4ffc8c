"""Compaction: small shards fold into larger ones while a sweep runs, and a
kill -9 at any instant of it loses no row and counts none twice.

The kill tests run the compaction in a real subprocess and kill it with
SIGKILL after a seeded random delay, many times: the order that makes it
safe (publish the folded shard, then delete its inputs) is what is tested,
not a simulation of it."""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from runner.results import compaction, done as done_module, shard_reads
from runner.results.rows import rows_to_table
from runner.results.shards import ShardWriter, merge, scan

from ..helpers import ROOT
from ..helpers import row
from .test_shard_reads import BAD, mixed_shards

SEED = 20261123
KILLS = 20


def parquet_files(out: Path) -> list[Path]:
    return sorted((out / "shards").glob("*.parquet"))


def one_row_shards(out: Path, n: int, writer: str = "w0") -> set[tuple[str, int]]:
    with ShardWriter(out, writer, flush_rows=1, flush_secs=1e9, compact=False) as w:
        for i in range(n):
            w.add(row(f"p{i:04d}", i % 3, finished=i, verdict="OK" if i % 4 else "FAIL"))
    return {(f"p{i:04d}", i % 3) for i in range(n)}


def test_levels_fold_and_rows_stay(tmp_path):
    keys = set()
    with ShardWriter(tmp_path, "w0", flush_rows=1, flush_secs=1e9, compact=False) as w:
        for i in range(70):
            w.add(row(f"p{i:04d}", finished=i))
            keys.add((f"p{i:04d}", 0))
            if i % 8 == 7:       # a writer's turn after every eighth shard
                compaction.compact(tmp_path, fan_in=8)
    names = [p.name for p in parquet_files(tmp_path)]
    # 64 writer shards folded eight at a time into level 1; the eighth
    # level-1 shard completed a level, folded into one of level 2; six stay.
    assert names[0].startswith("compact-L2-") and len(names) == 7
    assert sum(n.startswith("w0-") for n in names) == 6
    s = scan(tmp_path, repair=False)
    assert set(s.done) == keys and len(s.done) == 70
    assert sum(pq.read_metadata(p).num_rows for p in s.shards) == 70   # nothing twice
    record = compaction.footer(tmp_path / "shards" / names[0])
    assert record["level"] == 2 and record["rows"] == 64 and record["inputs"] == 8
    assert record["writer_seqs"] == {"w0": 64} and record["counts"] == {"OK": 64}


def test_writer_never_reuses_a_folded_name(tmp_path):
    one_row_shards(tmp_path, 10)
    compaction.compact(tmp_path, fan_in=4)
    assert not (tmp_path / "shards" / "w0-000001.parquet").exists()
    with ShardWriter(tmp_path, "w0", flush_rows=1, compact=False) as w:
        w.add(row("late"))
    # w0-000009 and -000010 were still on disk; 1-8 live on only in a footer.
    assert w.published == [tmp_path / "shards" / "w0-000011.parquet"]


def test_writers_compact_as_they_flush(tmp_path, monkeypatch):
    monkeypatch.setattr(compaction, "FAN_IN", 4)
    with ShardWriter(tmp_path, "w0", flush_rows=1, flush_secs=0.05) as w:
        for i in range(60):
            w.add(row(f"p{i:03d}"))
            time.sleep(0.005)
    assert len(parquet_files(tmp_path)) < 20
    assert any(p.name.startswith("compact-L") for p in parquet_files(tmp_path))
    s = scan(tmp_path, repair=False)
    assert len(s.done) == 60 and sum(pq.read_metadata(p).num_rows for p in s.shards) == 60


def test_repair_scan_folds_everything_once(tmp_path):
    keys = one_row_shards(tmp_path, 40)
    s = scan(tmp_path)                           # repair: no writer is running
    assert set(s.done) == keys and len(s.folded) == 1
    assert parquet_files(tmp_path) == s.folded
    assert scan(tmp_path).folded == []           # one shard: nothing more to fold


def _history_shards(out: Path) -> None:
    """One key checked with answer A, then B, then A twice: compaction keeps
    the first and last row of each answer (done.dedupe_history)."""
    a, b = "a" * 64, "b" * 64
    for i, (verdict, answer) in enumerate([("OK", a), ("FAIL", b), ("OK", a), ("OK", a)], 1):
        pq.write_table(rows_to_table([dataclasses.replace(row("hist", verdict=verdict, finished=i),
                                                          answer_sha256=answer)]),
                       out / "shards" / f"h-{i:06d}.parquet")


def test_a_fold_keeps_what_scan_reads_and_leaves_the_unreadable_for_quarantine(tmp_path):
    """Today's shards, an older one without the optional columns, one under
    a column's old name, a key's history, and three unreadable files (no
    verdict column, truncated, not Parquet), with one more listed but
    deleted before the fold reads it (another fold took it)."""
    paths = mixed_shards(tmp_path, modern=6)
    _history_shards(tmp_path)
    shards_dir = tmp_path / "shards"
    inputs = sorted(shards_dir.glob("*.parquet"))
    folded = compaction._fold(shards_dir, inputs + [shards_dir / "gone-000001.parquet"], 1)
    kept = pq.read_table(folded).to_pylist()
    assert sorted((r["problem_id"], r["verdict"], r["finished_at"].second) for r in kept
                  if r["problem_id"] == "hist") == [("hist", "FAIL", 2), ("hist", "OK", 1), ("hist", "OK", 4)]
    by_id = {r["problem_id"]: r for r in kept}
    assert sorted(by_id) == sorted([f"p{i:03d}" for i in range(6)] + ["old", "renamed", "hist"])
    assert by_id["old"]["verdict"] == "FAIL" and by_id["renamed"]["prover_build"] == "1.0"
    record = compaction.footer(folded)
    assert record["inputs"] == 6 + 2 + 4 and record["rows"] == len(kept) == 6 + 2 + 3
    # The folded inputs are deleted; the unreadable ones stay where they were.
    assert sorted(p.name for p in parquet_files(tmp_path)) == sorted(BAD | {folded.name})
    assert all(p.exists() for p in paths if p.name in BAD)
    s = scan(tmp_path)                           # repair: they go to quarantine
    assert sorted(p.name for p in s.quarantined) == sorted(BAD)
    assert len(s.done) == 6 + 2 + 1 and s.done[("hist", 0)]["finished_at"].second == 1


def test_a_fold_reads_its_inputs_together_never_one_by_one(tmp_path, monkeypatch):
    """Issue 33, point 9: compaction read each input through read_shard, as
    scan did before (1.2 ms a file); it reads them as scan does now, in one
    read_shards of all its inputs."""
    mixed_shards(tmp_path, modern=40)
    reads = []

    def one_by_one(*args, **kwargs):
        raise AssertionError("compaction read a shard by itself")

    def together(paths, *args, **kwargs):
        reads.append(len(paths))
        return shard_reads.read_shards(paths, *args, **kwargs)

    monkeypatch.setattr(done_module, "read_shard", one_by_one)
    monkeypatch.setattr(compaction, "read_shard", one_by_one, raising=False)
    monkeypatch.setattr(compaction, "read_shards", together, raising=False)
    (folded,) = compaction.compact(tmp_path, fan_in=32)
    assert reads == [40 + 5]
    assert compaction.footer(folded)["rows"] == 40 + 2


COMPACT_FOREVER = """
import sys, time
from runner.results import compaction
out, fan_in = sys.argv[1], int(sys.argv[2])
print("ready", flush=True)
t = time.perf_counter()
compaction.compact(out, fan_in=fan_in)
print("folded", time.perf_counter() - t, flush=True)
while True:
    compaction.compact(out, fan_in=fan_in)
"""


def _start(argv_tail: list[str], code: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code, *argv_tail], cwd=ROOT,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def _three_writers(out: Path) -> set[tuple[str, int]]:
    # One row per key per writer: the same key in three writers' shards is
    # the duplicate compaction must fold, with the earliest row kept.
    keys = set()
    for w in range(3):
        keys |= one_row_shards(out, 40, f"w{w}")
    return keys


def test_kill_9_during_compaction_loses_nothing_and_counts_nothing_twice(tmp_path):
    # How long one fold of these shards takes here and now (the machine is
    # shared): kills are spread over that span and a little beyond.
    _three_writers(tmp_path / "timing")
    child = _start([str(tmp_path / "timing"), "3"], COMPACT_FOREVER)
    span = float(child.stdout.readline().split()[1])
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    rng = random.Random(SEED)
    before = after = 0
    for k in range(KILLS):
        out = tmp_path / f"kill{k}"
        keys = _three_writers(out)
        child = _start([str(out), "3"], COMPACT_FOREVER)
        time.sleep(rng.uniform(0.0, 1.2 * span))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        folded = any(p.name.startswith(compaction.PREFIX) for p in parquet_files(out))
        after, before = after + folded, before + (not folded)
        s = scan(out, repair=False)
        assert set(s.done) == keys, f"kill {k}: rows lost"
        assert len(s.done) == len(keys)
        # The repair a resume runs, then merge: one line per key.
        merge(out)
        assert len((out / "results.csv").read_text().splitlines()) == len(keys) + 1
        assert len(scan(out).done) == len(keys)
    # The kills fell on both sides of the publish, not all before or after.
    assert before and after, (before, after)


COMPACT_WHILE_WRITING = """
import sys, datetime as dt
sys.path.insert(0, ".")
from runner.results import compaction
from runner.results.shards import ShardWriter
from tests.helpers import row
compaction.FAN_IN = 3
out = sys.argv[1]
print("ready", flush=True)
with ShardWriter(out, "live", flush_rows=1, flush_secs=0.02) as w:
    for i in range(100000):
        w.add(row(f"q{i:06d}", finished=i))
        print(i, flush=True)          # published: flush_rows=1 publishes on add
"""


def test_kill_9_of_a_writer_that_compacts(tmp_path):
    """The writer's timer thread compacts while the writer publishes; a kill
    keeps every row whose add had returned, and no key twice."""
    rng = random.Random(SEED + 1)
    for k in range(KILLS):
        out = tmp_path / f"kill{k}"
        child = _start([str(out)], COMPACT_WHILE_WRITING)
        time.sleep(rng.uniform(0.05, 0.8))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        acked = [int(line) for line in child.stdout.read().split()]
        s = scan(out, repair=False)
        got = {pid for pid, _ in s.done}
        wanted = {f"q{i:06d}" for i in range(len(acked))}
        assert wanted <= got, f"kill {k}: published rows lost"
        assert len(got - wanted) <= 1          # at most the add the kill cut short
        assert len(s.done) == len(got)


def test_readers_never_miss_a_row_while_compaction_runs(tmp_path):
    keys = one_row_shards(tmp_path, 150)
    child = _start([str(tmp_path), "3"], COMPACT_FOREVER)
    try:
        seen = []
        # Three seconds of reading once compaction has begun: on a loaded
        # host the child's start (Python, pyarrow) alone can take seconds.
        started, deadline = time.monotonic(), time.monotonic() + 3
        while time.monotonic() < deadline or (min(seen) >= 150 and time.monotonic() < started + 120):
            s = scan(tmp_path, repair=False)
            seen.append(len(parquet_files(tmp_path)))
            assert set(s.done) == keys and len(s.done) == len(keys)
            if seen[-1] >= 150:
                deadline = time.monotonic() + 3
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert min(seen) < 150                     # compaction did happen meanwhile
