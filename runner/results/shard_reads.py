"""Reading many shards at once: what ``shards.scan`` does with a sweep
directory of thousands of small files (a live sweep before compaction folds
them, or many array tasks).

Read one by one (``done.read_shard``), 20,000 five-row shards took 27 s of
``report``'s 30 s: each file's footer, the schema check, the rename, the
null columns and the cast, in Python, per file. Here each file is opened
once, without pre-buffering, for only the columns asked for, on a thread
per core (Parquet decoding releases the GIL); files of the same physical
schema are then concatenated and made to fit ``SCHEMA`` once per group.

A file whose columns are older than today's (a column renamed since,
``rows.RENAMED``; an optional column it predates, ``rows.OPTIONAL_COLUMNS``)
reads as ``read_shard`` reads it; one that lacks a required column or cannot
be read is reported unreadable, and one deleted since it was listed (a
compaction folded it) is reported gone, so that ``scan`` lists again.

``pyarrow.dataset`` over the same files was measured and is no faster: its
per-fragment cost was about twice this reader's (benchmarks/shards_scale.py).
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


def read_raw(path: Path, columns: tuple[str, ...]) -> tuple[pa.Table, tuple] | str:
    """The shard's ``columns`` as written, and its renames ((new, old)
    pairs); ``"bad"`` if it is unreadable or lacks a column of SCHEMA (other
    than OPTIONAL_COLUMNS); ``"gone"`` if it no longer exists."""
    try:
        pf = pq.ParquetFile(path, pre_buffer=False)
        present = set(pf.schema_arrow.names)
        # An older shard's name for a column renamed since (rows.RENAMED).
        older = {new: old for new, old in RENAMED.items() if new not in present and old in present}
        present |= set(older)
        if any(c not in present and c not in OPTIONAL_COLUMNS for c in COLUMNS):
            return _BAD
        table = pf.read(columns=[older.get(c, c) for c in columns if c in present], use_threads=False)
        return table, tuple(sorted(older.items()))
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
    if threads > 1:
        # A few batches per thread: a future per file cost 2 s in 20,000.
        size = -(-len(paths) // (threads * 4))
        batches = [paths[i:i + size] for i in range(0, len(paths), size)]
        with ThreadPoolExecutor(threads, thread_name_prefix="shard-read") as pool:
            raws = [r for batch in pool.map(lambda b: [read_raw(p, columns) for p in b], batches)
                    for r in batch]
    else:
        raws = [read_raw(p, columns) for p in paths]
    found = Read()
    # Grouped by column names (hashing a schema cost 50 us a file); a group
    # whose types differ fails to concatenate and is read file by file.
    groups: dict[tuple, list[tuple[Path, pa.Table]]] = {}
    for path, raw in zip(paths, raws):
        if isinstance(raw, str):
            (found.gone if raw == _GONE else found.unreadable).append(path)
        else:
            table, older = raw
            groups.setdefault((tuple(table.column_names), older), []).append((path, table))
    tables = []
    for (_, older), members in groups.items():
        try:
            whole = pa.concat_tables([t for _, t in members]).combine_chunks()
            tables.append(conform(whole, columns, older))
            found.read += [p for p, _ in members]
            continue
        except (pa.ArrowException, ValueError):
            pass
        for path, table in members:           # a value one file cannot cast: find it
            try:
                tables.append(conform(table, columns, older))
                found.read.append(path)
            except (pa.ArrowException, ValueError):
                found.unreadable.append(path)
    if tables:
        found.table = pa.concat_tables(tables)
    return found
