"""Many shards read at once (issue 33, point 9): a report of 100,000 rows in
20,000 shards spent 27 s of its 30 reading them one by one. Read together,
on a thread per core, they give exactly the rows ``read_shard`` gives each,
older shards included, and the unreadable ones are still named."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runner.results import done as done_module, shard_reads
from runner.results.done import LIGHT, read_shard
from runner.results.rows import COLUMNS, OPTIONAL_COLUMNS, SCHEMA, rows_to_table
from runner.results.shard_reads import THREADS_FROM, read_shards
from runner.results.shards import ShardWriter, scan

from ..helpers import row


def mixed_shards(root, modern: int = THREADS_FROM + 6):
    """``modern`` one-row shards of today, and one of each kind an older or
    damaged sweep leaves: without the optional columns, with the renamed
    column's old name, without a required column, truncated, not Parquet."""
    shards = root / "shards"
    shards.mkdir(parents=True)
    for i in range(modern):
        pq.write_table(rows_to_table([row(f"p{i:03d}", finished=i)]), shards / f"w-{i:06d}.parquet")
    pq.write_table(rows_to_table([row("old", verdict="FAIL")]).drop_columns(list(OPTIONAL_COLUMNS)),
                   shards / "old-000001.parquet")
    renamed = rows_to_table([row("renamed")])
    pq.write_table(renamed.rename_columns(["hol_build" if n == "prover_build" else n
                                           for n in renamed.column_names]),
                   shards / "renamed-000001.parquet")
    pq.write_table(rows_to_table([row("noverdict")]).drop_columns(["verdict"]),
                   shards / "noverdict-000001.parquet")
    good = (shards / "w-000000.parquet").read_bytes()
    (shards / "truncated-000001.parquet").write_bytes(good[:len(good) // 2])
    (shards / "text-000001.parquet").write_text("not parquet\n")
    return sorted(shards.glob("*.parquet"))


BAD = {"noverdict-000001.parquet", "truncated-000001.parquet", "text-000001.parquet"}


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("columns", [COLUMNS, LIGHT], ids=["all", "light"])
def test_many_shards_read_together_as_each_alone(tmp_path, threads, columns):
    paths = mixed_shards(tmp_path)
    cols = tuple(c for c in COLUMNS if c in columns)
    found = read_shards(paths, cols, threads=threads)
    assert sorted(p.name for p in found.unreadable) == sorted(BAD)
    assert found.gone == []
    alone = {p: read_shard(p, cols) for p in paths}
    assert {p for p, t in alone.items() if t is None} == set(found.unreadable)
    assert sorted(found.read) == sorted(p for p, t in alone.items() if t is not None)
    expected = pa.concat_tables([t for t in alone.values() if t is not None])
    assert found.table.schema == expected.schema
    key = [("problem_id", "ascending")]
    assert found.table.sort_by(key).to_pylist() == expected.sort_by(key).to_pylist()
    by_id = {r["problem_id"]: r for r in found.table.to_pylist()}
    assert by_id["old"]["verdict"] == "FAIL"
    if "prover_build" in cols:
        assert by_id["renamed"]["prover_build"] == "1.0"


def test_a_shard_gone_since_it_was_listed_is_said_gone(tmp_path):
    paths = mixed_shards(tmp_path, modern=3)
    found = read_shards(paths + [tmp_path / "shards" / "folded-000009.parquet"], COLUMNS, threads=2)
    assert [p.name for p in found.gone] == ["folded-000009.parquet"]


def test_scan_reads_its_shards_together_never_one_by_one(tmp_path, monkeypatch):
    """Today's scan called read_shard for each file: 1.2 ms each."""
    mixed_shards(tmp_path)
    expected = {p: t for p in sorted((tmp_path / "shards").glob("*.parquet"))
                if (t := read_shard(p)) is not None}

    def one_by_one(*args, **kwargs):
        raise AssertionError("scan read a shard by itself")

    monkeypatch.setattr(done_module, "read_shard", one_by_one)
    s = scan(tmp_path, repair=False, columns=LIGHT)
    assert s.shards == sorted(expected)
    assert len(s.done) == THREADS_FROM + 6 + 2
    s = scan(tmp_path)                         # repair: the unreadable ones quarantined
    assert sorted(p.name for p in s.quarantined) == sorted(BAD)
    assert len(s.done) == THREADS_FROM + 6 + 2


def test_many_shards_cost_parquet_alone_their_schemas_are_worked_out_once(tmp_path, monkeypatch):
    """Issue 33, point 9, as it stood after the threads: 20,000 shards still
    took 15 s of a report, for on each one ``pq.ParquetFile``'s set-up (a
    map of every column path, each column's name looked up) and the schema's
    names checked against SCHEMA's, all in Python under the GIL, so that the
    threads gained nothing. Now each file is opened and read by index in
    Parquet's C++ reader, and what a schema means is worked out once for
    all the files that have it."""
    paths = mixed_shards(tmp_path)
    wrappers, plans = [], []
    real_file, real_plan = pq.ParquetFile, getattr(shard_reads, "_plan", None)

    def parquet_file(*args, **kwargs):
        wrappers.append(args[0])
        return real_file(*args, **kwargs)

    def plan(reader, schema, columns):
        plans.append(schema.names)
        return real_plan(reader, schema, columns)

    monkeypatch.setattr(pq, "ParquetFile", parquet_file)
    monkeypatch.setattr(shard_reads, "_plan", plan, raising=False)
    found = read_shards(paths, COLUMNS, threads=1)
    assert wrappers == []
    # Today's, without the optional columns, under the old name, without
    # verdict: four schemas; the truncated file and the text have none.
    assert len(plans) == 4 and len(found.read) == THREADS_FROM + 6 + 2
    assert sorted(p.name for p in found.unreadable) == sorted(BAD)
    plans.clear()
    found = read_shards(paths, LIGHT, threads=4)
    assert wrappers == [] and 4 <= len(plans) <= 4 * 4   # threads may race to the same plan
    assert len(found.read) == THREADS_FROM + 6 + 2


def test_a_writers_shard_reads_back_as_written_without_a_cast(tmp_path):
    """Writers write their shards for reading (shards.WRITE_OPTIONS): no
    dictionary, compression, statistics or stored Arrow schema. Parquet's
    own types must then give SCHEMA's exactly, time zone included, and
    every value, nulls too, come back as written."""
    rows = [row("p1", finished=1), row("p2", attempt=3, verdict="FAIL", prove_secs=None, finished=2,
                                       reason='Failure "a,\nb"')]
    with ShardWriter(tmp_path, "w", flush_rows=10**6, flush_secs=3600) as writer:
        for r in rows:
            writer.add(r)
    (path,) = writer.published
    assert pq.read_schema(path).remove_metadata() == SCHEMA
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).statistics is None
    assert read_shard(path).to_pylist() == rows_to_table(rows).to_pylist()
    assert scan(tmp_path).done.table.to_pylist() == rows_to_table(rows).to_pylist()
