"""Reading many shards at once: what ``shards.scan`` does with a sweep
directory of thousands of small files (a live sweep before compaction folds
them, or many array tasks).

Read one by one (``done.read_shard``), 20,000 five-row shards took 27 s of
``report``'s 30 s: each file's footer, the schema check, the rename, the
null columns and the cast, in Python, per file. Here each file is opened
once, without pre-buffering, for only the columns asked for, on a thread
per core (Parquet decoding releases the GIL; on a host whose cores others
keep busy the threads gain nothing, and lose nothing either); files of the
same physical schema are then concatenated and made to fit ``SCHEMA`` once
per group.

A file whose columns are older than today's (a column renamed since,
``rows.RENAMED``; an optional column it predates, ``rows.OPTIONAL_COLUMNS``)
reads as ``read_shard`` reads it; one that lacks a required column or cannot
be read is reported unreadable, and one deleted since it was listed (a
compaction folded it) is reported gone, so that ``scan`` lists again.

``pyarrow.dataset`` over the same files is no faster: about 0.7-0.8 ms of
CPU a file against this reader's 0.5 (``benchmarks/shards_scale.py --ops
scan scan-dataset``). What is left is Parquet's own cost per file, its
footer and a page per column, whoever reads it.
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


def read_raw(path: Path, columns: tuple[str, ...]) -> tuple[pa.Table, tuple, tuple] | str:
    """The shard's ``columns`` as written, its renames ((new, old) pairs)
    and the names it read them under; ``"bad"`` if it is unreadable or lacks
    a column of SCHEMA (other than OPTIONAL_COLUMNS); ``"gone"`` if it no
    longer exists."""
    try:
        with pq.ParquetFile(path, pre_buffer=False) as pf:
            present = set(pf.schema_arrow.names)
            # An older shard's name for a column renamed since (rows.RENAMED).
            older = {new: old for new, old in RENAMED.items() if new not in present and old in present}
            present |= set(older)
            if any(c not in present and c not in OPTIONAL_COLUMNS for c in COLUMNS):
                return _BAD
            names = tuple(older.get(c, c) for c in columns if c in present)
            table = pf.read(columns=list(names), use_threads=False)
        return table, tuple(sorted(older.items())), names
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
    # Grouped by the names read (hashing a schema cost 50 us a file); a group
    # whose types differ fails to concatenate and is read file by file.
    groups: dict[tuple, list[tuple[int, pa.Table]]] = {}
    read: list[int] = []
    for i, raw in enumerate(raws):
        if isinstance(raw, str):
            (found.gone if raw == _GONE else found.unreadable).append(paths[i])
        else:
            table, older, names = raw
            groups.setdefault((names, older), []).append((i, table))
    tables = []
    for (_, older), members in groups.items():
        try:
            whole = pa.concat_tables([t for _, t in members]).combine_chunks()
            tables.append(conform(whole, columns, older))
            read += [i for i, _ in members]
            continue
        except (pa.ArrowException, ValueError):
            pass
        for i, table in members:              # a value one file cannot cast: find it
            try:
                tables.append(conform(table, columns, older))
                read.append(i)
            except (pa.ArrowException, ValueError):
                found.unreadable.append(paths[i])
    found.read = [paths[i] for i in sorted(read)]   # in the order given
    if tables:
        found.table = pa.concat_tables(tables)
    return found
