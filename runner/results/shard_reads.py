"""Reading many shards at once: what ``shards.scan`` does with a sweep
directory of thousands of small files (a live sweep before compaction folds
them, or many array tasks), and compaction with the shards it folds.

Read one by one through ``pq.ParquetFile``, 20,000 five-row shards took
most of a report's time: per file, besides Parquet's own work (the footer,
a page per column), the Python around it: ``ParquetFile``'s map of every
column path, each column's name looked up, the schema's names checked
against SCHEMA's, all holding the GIL, so that a thread per core gained
nothing. Here each file costs two calls into Parquet's C++ reader, both
without the GIL (open, read the columns by index), and one comparison of
its schema with those already seen: what a schema means (which columns,
under which older names, whether it can be read at all) is worked out once
per distinct schema (``_Plan``), not once per file. Files of one schema are
concatenated and made to fit ``SCHEMA`` once.

A file whose columns are older than today's (a column renamed since,
``rows.RENAMED``; an optional column it predates, ``rows.OPTIONAL_COLUMNS``)
reads as ``done.read_shard`` reads it; one that lacks a required column or
cannot be read is reported unreadable, and one deleted since it was listed
(a compaction folded it) is reported gone, so that ``scan`` lists again.

Per file, at load 1.4-4 on 2 cores: 0.35-0.42 ms of CPU here against
0.49-0.56 through ``pq.ParquetFile``; ``pyarrow.dataset`` over the same
files costs more, 0.75-0.9 ms (``benchmarks/scale/shards_scale.py --ops
scan-dataset``). What is left is Parquet's own work on each file.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .rows import COLUMNS, OPTIONAL_COLUMNS, RENAMED, SCHEMA

# Below this many files, threads cost more than they save.
THREADS_FROM = 64
MAX_THREADS = 8

_GONE, _BAD = "gone", "bad"


@dataclass(frozen=True)
class _Plan:
    """How to read a file of one schema: the Parquet column indices of
    ``names`` (the columns asked for, under the names this file gives them),
    its renames ((new, old) pairs); ``indices`` None if it cannot be read."""
    indices: tuple[int, ...] | None
    older: tuple = ()
    names: tuple[str, ...] = ()


def _plan(reader: pq.ParquetReader, schema: pa.Schema, columns: tuple[str, ...]) -> _Plan:
    if any(pa.types.is_nested(f.type) for f in schema):
        return _Plan(None)             # never a shard's: its column indices are not its fields'
    present = set(schema.names)
    # An older shard's name for a column renamed since (rows.RENAMED).
    older = {new: old for new, old in RENAMED.items() if new not in present and old in present}
    present |= set(older)
    if any(c not in present and c not in OPTIONAL_COLUMNS for c in COLUMNS):
        return _Plan(None)
    names = tuple(older.get(c, c) for c in columns if c in present)
    return _Plan(tuple(reader.column_name_idx(n) for n in names), tuple(sorted(older.items())), names)


def _open(path: Path) -> pq.ParquetReader:
    reader = pq.ParquetReader()
    # Without pre-buffering: a shard is a few KB, and pre-buffering reads
    # them through Arrow's I/O threads, which costs more than it saves.
    reader.open(str(path), pre_buffer=False)
    return reader


def read_raw(path: Path, columns: tuple[str, ...]) -> tuple[pa.Table, _Plan] | str:
    """One shard's ``columns`` as written and the plan they were read by;
    ``"bad"`` if it is unreadable or lacks a column of SCHEMA (other than
    OPTIONAL_COLUMNS); ``"gone"`` if it no longer exists."""
    return _read(path, columns, [])


def _read(path: Path, columns: tuple[str, ...], plans: list[tuple[pa.Schema, _Plan]]):
    """``read_raw``, with ``plans``: the (schema, plan) pairs worked out so
    far, shared by the files of one read; a new schema's plan is added."""
    try:
        reader = _open(path)
        try:
            schema = reader.schema_arrow
            plan = next((p for s, p in plans if s.equals(schema)), None)
            if plan is None:
                plan = _plan(reader, schema, columns)
                plans.append((schema, plan))      # atomic: the threads share the list
            if plan.indices is None:
                return _BAD
            return reader.read_all(column_indices=list(plan.indices), use_threads=False), plan
        finally:
            reader.close()
    except FileNotFoundError:
        return _GONE
    except (OSError, pa.ArrowException, ValueError):
        return _BAD


def conform(table: pa.Table, columns: tuple[str, ...], older: tuple = ()) -> pa.Table:
    """``table`` (as ``read_raw`` read it) in SCHEMA's names, order and
    types: renamed columns under today's names, the optional columns it
    lacks as nulls. Raises pa.ArrowException or ValueError if it cannot."""
    newer = {old: new for new, old in older}
    table = table.rename_columns([newer.get(n, n) for n in table.column_names])
    for name in columns:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(len(table), SCHEMA.field(name).type))
    return table.select(list(columns)).cast(pa.schema([SCHEMA.field(c) for c in columns]))


@dataclass
class Read:
    """What ``read_shards`` found."""
    table: pa.Table | None = None                  # every readable shard's rows, in SCHEMA
    read: list[Path] = field(default_factory=list)  # the shards those rows came from
    unreadable: list[Path] = field(default_factory=list)
    gone: list[Path] = field(default_factory=list)  # deleted since listed: list again


def read_shards(paths: list[Path], columns: tuple[str, ...] = COLUMNS,
                threads: int | None = None) -> Read:
    """Read ``paths`` (shard files) as one table of ``columns``."""
    paths = list(paths)
    if threads is None:
        threads = min(MAX_THREADS, len(os.sched_getaffinity(0))) if len(paths) >= THREADS_FROM else 1
    plans: list[tuple[pa.Schema, _Plan]] = []

    def batch(b: list[Path]) -> list:
        return [_read(p, columns, plans) for p in b]

    if threads > 1:
        # A few batches per thread: a future per file cost 2 s in 20,000.
        size = -(-len(paths) // (threads * 4))
        with ThreadPoolExecutor(threads, thread_name_prefix="shard-read") as pool:
            raws = [r for b in pool.map(batch, [paths[i:i + size] for i in range(0, len(paths), size)])
                    for r in b]
    else:
        raws = batch(paths)
    found = Read()
    groups: dict[_Plan, list[tuple[int, pa.Table]]] = {}
    for i, raw in enumerate(raws):
        if isinstance(raw, str):
            (found.gone if raw == _GONE else found.unreadable).append(paths[i])
        else:
            groups.setdefault(raw[1], []).append((i, raw[0]))
    tables, read = [], []
    for plan, members in groups.items():
        try:
            whole = pa.concat_tables([t for _, t in members]).combine_chunks()
            tables.append(conform(whole, columns, plan.older))
            read += [i for i, _ in members]
            continue
        except (pa.ArrowException, ValueError):
            pass
        for i, table in members:              # a value one file cannot cast: find it
            try:
                tables.append(conform(table, columns, plan.older))
                read.append(i)
            except (pa.ArrowException, ValueError):
                found.unreadable.append(paths[i])
    found.read = [paths[i] for i in sorted(read)]   # in the order given
    if tables:
        found.table = pa.concat_tables(tables)
    return found
