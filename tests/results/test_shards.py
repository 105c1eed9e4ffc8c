"""Shards: a sweep killed at any moment resumes losing nothing and duplicating nothing."""

from __future__ import annotations

import csv
import datetime as dt
import os
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runner.results.compaction import compact
from runner.results.rows import COLUMNS, SCHEMA, rows_to_table
from runner.results.publish import publish
from runner.results.shards import ShardWriter, merge, read_results, scan

from ..helpers import T0, row


def shard_names(out):
    return sorted(p.name for p in (out / "shards").glob("*.parquet"))


def test_rows_written_then_scanned_back_equal(tmp_path):
    rows = [row(f"p{i}", finished=i) for i in range(5)] + [row("p0", 1, verdict="FAIL")]
    with ShardWriter(tmp_path, "w0", flush_rows=2, flush_secs=1e9) as w:
        for r in rows:
            w.add(r)
    assert shard_names(tmp_path) == ["w0-000001.parquet", "w0-000002.parquet", "w0-000003.parquet"]
    s = scan(tmp_path)
    assert s.done == {(r.problem_id, r.attempt): r.as_dict() for r in rows}
    assert s.quarantined == [] and s.temps_removed == []


def test_missing_shards_dir_is_empty_scan(tmp_path):
    s = scan(tmp_path / "nothing")
    assert (s.done, s.shards, s.quarantined, s.temps_removed) == ({}, [], [], [])
    assert read_results(tmp_path).num_rows == 0


def test_heavy_row_is_published_at_once(tmp_path):
    w = ShardWriter(tmp_path, "w0", flush_rows=1000, flush_secs=1e9, heavy_secs=5.0)
    w.add(row("cheap", wall=0.5))
    assert shard_names(tmp_path) == []  # cheap rows wait in the buffer
    w.add(row("heavy", wall=5.0))
    # Killed now, neither check is lost: the heavy row took the buffer with it.
    assert set(scan(tmp_path).done) == {("cheap", 0), ("heavy", 0)}
    w.close()
    assert shard_names(tmp_path) == ["w0-000001.parquet"]


def test_flush_after_flush_secs(tmp_path, monkeypatch):
    import runner.results.shards as shards
    now = [100.0]
    monkeypatch.setattr(shards.time, "monotonic", lambda: now[0])
    w = ShardWriter(tmp_path, "w0", flush_rows=1000, flush_secs=2.0)
    w.add(row("a"))
    assert shard_names(tmp_path) == []
    now[0] += 2.5
    w.add(row("b"))
    assert set(scan(tmp_path).done) == {("a", 0), ("b", 0)}


def test_resumed_writer_continues_sequence_and_never_overwrites(tmp_path):
    with ShardWriter(tmp_path, "w0", flush_rows=1) as w:
        w.add(row("a"))
        w.add(row("b"))
    first = {n: (tmp_path / "shards" / n).read_bytes() for n in shard_names(tmp_path)}
    assert list(first) == ["w0-000001.parquet", "w0-000002.parquet"]
    # Another writer's id sharing a prefix does not disturb the sequence.
    with ShardWriter(tmp_path, "w0-x", flush_rows=1) as other:
        other.add(row("z"))
    with ShardWriter(tmp_path, "w0", flush_rows=1) as w:
        w.add(row("c"))
    assert w.published == [tmp_path / "shards" / "w0-000003.parquet"]
    for name, data in first.items():
        assert (tmp_path / "shards" / name).read_bytes() == data
    assert set(scan(tmp_path).done) == {("a", 0), ("b", 0), ("c", 0), ("z", 0)}


def test_truncated_shard_is_quarantined_and_its_checks_redone(tmp_path):
    with ShardWriter(tmp_path, "good", flush_rows=1000) as w:
        w.add(row("kept1"))
        w.add(row("kept2"))
    with ShardWriter(tmp_path, "bad", flush_rows=1000) as w:
        w.add(row("lost1"))
        w.add(row("lost2"))
    bad = tmp_path / "shards" / "bad-000001.parquet"
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])  # a crash mid-write on a filesystem without fsync

    s = scan(tmp_path)
    assert set(s.done) == {("kept1", 0), ("kept2", 0)}
    assert s.shards == [tmp_path / "shards" / "good-000001.parquet"]
    moved = tmp_path / "shards" / "quarantine" / "bad-000001.parquet"
    assert s.quarantined == [moved]
    assert not bad.exists() and moved.read_bytes() == data[: len(data) // 2]  # kept, not deleted
    # The resumed writer does not reuse the quarantined name.
    with ShardWriter(tmp_path, "bad", flush_rows=1) as w:
        w.add(row("lost1"))
    assert w.published == [tmp_path / "shards" / "bad-000002.parquet"]
    assert ("lost1", 0) in scan(tmp_path).done


def test_shard_without_required_columns_is_quarantined(tmp_path):
    with ShardWriter(tmp_path, "w0") as w:
        w.add(row("a"))
    odd = tmp_path / "shards" / "odd-000001.parquet"
    pq.write_table(read_results(tmp_path).drop_columns(["verdict"]), odd)
    s = scan(tmp_path)
    assert set(s.done) == {("a", 0)}
    assert [p.name for p in s.quarantined] == ["odd-000001.parquet"]


def test_stray_temp_file_is_removed_and_ignored(tmp_path):
    with ShardWriter(tmp_path, "w0") as w:
        w.add(row("a"))
    stray = tmp_path / "shards" / ".w0-000002.parquet.4242.tmp"
    stray.write_bytes(b"PAR1 half a shard")
    s = scan(tmp_path)
    assert s.temps_removed == [stray] and not stray.exists()
    assert set(s.done) == {("a", 0)} and s.quarantined == []


def test_publish_failure_leaves_no_temp_and_no_target(tmp_path):
    target = tmp_path / "x.bin"

    def write(tmp):
        assert tmp.name == f".x.bin.{os.getpid()}.tmp" and tmp.parent == tmp_path
        tmp.write_bytes(b"partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        publish(target, write)
    assert list(tmp_path.iterdir()) == []
    publish(target, lambda tmp: tmp.write_bytes(b"whole"))
    assert target.read_bytes() == b"whole" and list(tmp_path.iterdir()) == [target]


def test_duplicate_key_across_shards_keeps_earliest(tmp_path):
    # A process died after publishing but before its bookkeeping, so the check ran twice.
    with ShardWriter(tmp_path, "a", flush_rows=1) as w:
        w.add(row("p", verdict="TIMEOUT", finished=50))
    with ShardWriter(tmp_path, "b", flush_rows=1) as w:
        w.add(row("p", verdict="OK", finished=10))
    s = scan(tmp_path)
    assert len(s.done) == 1
    assert s.done[("p", 0)]["verdict"] == "OK"
    assert s.done[("p", 0)]["finished_at"] == T0 + dt.timedelta(seconds=10)
    assert read_results(tmp_path).num_rows == 1


def test_merge_writes_three_files(tmp_path):
    with ShardWriter(tmp_path, "w0") as w:
        w.add(row("p2", 0, verdict="FAIL"))
        w.add(row("p1", 2, verdict="TIMEOUT"))
        w.add(row("p1", 1, verdict="OK"))
        w.add(row("p3", 1, verdict="ERROR"))
        w.add(row("p3", 0, verdict="CHEATING"))
    table = merge(tmp_path)
    assert table.schema == SCHEMA
    assert list(zip(table["problem_id"].to_pylist(), table["attempt"].to_pylist())) == [
        ("p1", 1), ("p1", 2), ("p2", 0), ("p3", 0), ("p3", 1)]
    assert pq.read_table(tmp_path / "results.parquet").equals(table)

    with open(tmp_path / "results.csv", newline="", encoding="utf-8") as fh:
        lines = list(csv.reader(fh))
    assert lines[0] == list(COLUMNS) and len(lines) == 6
    first = dict(zip(lines[0], lines[1]))
    assert first["peak_rss_mb"] == ""  # None is empty
    assert dt.datetime.fromisoformat(first["finished_at"]) == T0
    assert first["finished_at"].endswith("+00:00")

    assert (tmp_path / "verdicts.csv").read_text() == (
        "Problem,Verdict\np1,OK\np2,FAIL\np3,CHEATING\n")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_csv_round_trips_awkward_reason(tmp_path):
    reason = 'Failure "REAL_ARITH", then: côté ∀x. x ≥ 0 — 証明'
    with ShardWriter(tmp_path, "w0") as w:
        w.add(row("p", verdict="FAIL", reason=reason))
    merge(tmp_path)
    with open(tmp_path / "results.csv", newline="", encoding="utf-8") as fh:
        (got,) = list(csv.DictReader(fh))
    assert got["reason"] == reason
    assert pq.read_table(tmp_path / "results.parquet")["reason"].to_pylist() == [reason]


def test_two_threaded_writers_lose_nothing(tmp_path):
    n = 500
    barrier = threading.Barrier(4)

    def work(writer, tag, start):
        barrier.wait()
        for i in range(start, n, 2):  # two threads share each writer
            writer.add(row(f"{tag}{i:04d}", wall=2.0 if i % 97 == 0 else 0.01))

    with ShardWriter(tmp_path, "A", flush_rows=7) as a, ShardWriter(tmp_path, "B", flush_rows=11) as b:
        threads = [threading.Thread(target=work, args=(wr, tag, s))
                   for wr, tag in ((a, "a"), (b, "b")) for s in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    s = scan(tmp_path)
    assert set(s.done) == {(f"{t}{i:04d}", 0) for t in "ab" for i in range(n)}
    assert sum(pq.read_metadata(p).num_rows for p in s.shards) == 2 * n  # nothing duplicated
    assert s.quarantined == [] and s.temps_removed == []


def test_results_csv_bytes_are_what_the_csv_module_wrote(tmp_path):
    """results.csv is rendered in Arrow compute; it must stay the file the csv
    module wrote before (QUOTE_MINIMAL, empty cells for nulls, ISO UTC
    timestamps), so scripts that read it as text see no change."""
    awkward = ['plain', 'comma, inside', 'quote " inside', 'line\nbreak', '', ' lead',
               'côté ∀x — 証明']
    with ShardWriter(tmp_path, "w0", flush_rows=3) as w:
        for i, reason in enumerate(awkward):
            w.add(row(f"p,{i}" if i == 1 else f"p{i}", i % 2, reason=reason, finished=i * 1.25,
                      prove_secs=[None, 0.05, 60.0, 1e-3, 123.456, 2 / 3, 7.0, 0.1][i],
                      verdict=["OK", "FAIL", "CHEATING", "ERROR"][i % 4]))
    table = merge(tmp_path)

    def cell(v):
        if v is None:
            return ""
        if isinstance(v, dt.datetime):
            return v.astimezone(dt.timezone.utc).isoformat(timespec="microseconds")
        return str(v)

    import io
    expected = io.StringIO(newline="")
    w = csv.writer(expected, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows([[cell(r[c]) for c in COLUMNS] for r in table.to_pylist()])
    assert (tmp_path / "results.csv").read_bytes() == expected.getvalue().encode()


def test_a_carriage_return_in_a_reason_stays_in_its_cell(tmp_path):
    # Python 3.11's csv module left a lone \r unquoted with lineterminator
    # "\n", and csv.reader then split the row in two: it is quoted now.
    with ShardWriter(tmp_path, "w0") as w:
        w.add(row("p", verdict="FAIL", reason="cr\rhere"))
    merge(tmp_path)
    with open(tmp_path / "results.csv", newline="", encoding="utf-8") as fh:
        (got,) = list(csv.DictReader(fh))
    assert got["reason"] == "cr\rhere"


def test_an_old_shard_without_the_newer_columns_still_resumes(tmp_path):
    with ShardWriter(tmp_path, "w0") as w:
        w.add(row("new"))
    old = tmp_path / "shards" / "old-000001.parquet"
    from runner.results.rows import OPTIONAL_COLUMNS, rows_to_table
    pq.write_table(rows_to_table([row("old", verdict="FAIL")]).drop_columns(list(OPTIONAL_COLUMNS)), old)
    for columns in (None, ("problem_id", "attempt", "verdict")):
        s = scan(tmp_path, repair=False, columns=columns)
        assert set(s.done) == {("new", 0), ("old", 0)} and s.quarantined == []
        assert s.done.verdict_counts() == {"OK": 1, "FAIL": 1}
    assert scan(tmp_path).done[("old", 0)]["dedup_of"] is None


def test_shards_written_before_prover_build_are_read_merged_and_folded(tmp_path):
    """Rows written before the column was the prover's (``hol_build``, modes
    ``bytecode-fork``) are read as today's, beside new ones: resume, merge and
    compaction of a sweep begun by an older proofbatch lose nothing."""
    old = rows_to_table([row(f"old{i}", finished=i) for i in range(3)])
    old = old.rename_columns(["hol_build" if n == "prover_build" else n for n in old.column_names])
    old = old.set_column(old.column_names.index("mode"), "mode",
                         pa.array(["bytecode-fork"] * 3, pa.string()))
    (tmp_path / "shards").mkdir()
    pq.write_table(old, tmp_path / "shards" / "old-000001.parquet")
    with ShardWriter(tmp_path, "new", flush_rows=1, flush_secs=1e9) as w:
        for i in range(3):
            w.add(row(f"new{i}", finished=i))
    done = scan(tmp_path).done
    assert sorted(done) == sorted([(f"old{i}", 0) for i in range(3)] + [(f"new{i}", 0) for i in range(3)])
    assert {done[(f"old{i}", 0)]["prover_build"] for i in range(3)} == {"1.0"}
    table = merge(tmp_path)
    assert "hol_build" not in table.column_names and table.num_rows == 6
    assert set(table["prover_build"].to_pylist()) == {"1.0"}
    compact(tmp_path, fan_in=2)
    assert sorted(scan(tmp_path).done) == sorted(done)
