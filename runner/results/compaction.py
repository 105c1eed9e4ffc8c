"""Compaction: small shards folded into larger ones while a sweep runs.

A sweep of short checks flushes a five-row shard every two seconds per
worker; a million rows would be 200,000 files, and reading a Parquet file
costs about 0.7 ms however small it is. So shards are folded by levels, as
in a log-structured merge tree: once ``FAN_IN`` shards of one level exist
(a writer's own shards are level 0), they are read, de-duplicated by key and
published as one shard of the next level, ``compact-L{level}-….parquet``.
Each row is rewritten once per level (log base ``FAN_IN`` of the row count),
and a directory holds at most about ``FAN_IN`` shards per level.

Crash safety rests on one order: the compacted shard is published whole
(``publish``: temp file, fsync, rename, fsync of the directory)
before any of its inputs is deleted. A ``kill -9`` at any instant leaves
either the inputs alone, or the compacted shard beside some of its inputs,
whose rows it repeats: every reader de-duplicates by key (``done.dedupe``),
so no row is lost and none counts twice, and the next compaction folds the
leftovers. A reader that lists an input and finds it gone lists again and
finds the compacted shard (``shards.scan``). One compaction at a time runs
per shards directory (an ``flock``, which the kernel releases when its
holder dies); a writer that finds it taken skips its turn.

Each compacted shard records in its footer the highest sequence number it
absorbed per writer id, so a restarted writer never reuses the name of a
shard that was folded away (``ShardWriter._highest_seq``), and its row count
and counts per verdict, which ``proofbatch status`` may read without the rows.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .done import SHARDS_DIR, Done, dedupe_history
from .publish import _fsync_dir, publish
from .shard_reads import read_shards

FAN_IN = 32
PREFIX = "compact-L"
META_KEY = b"proofbatch.compaction"
LOCK = ".compact.lock"
_COMPACTED = re.compile(r"compact-L(\d+)-.*\.parquet")
_WRITER = re.compile(r"(.+)-(\d+)\.parquet")


def level_of(name: str) -> int:
    m = _COMPACTED.fullmatch(name)
    return int(m.group(1)) if m else 0


def footer(path: Path) -> dict:
    """The compaction record of a compacted shard ({} for a writer's shard or
    an unreadable one)."""
    try:
        meta = pq.read_schema(path).metadata or {}
        return json.loads(meta.get(META_KEY, b"{}"))
    except (OSError, pa.ArrowException, ValueError):
        return {}


def absorbed_seq(shards_dir: Path, writer_id: str) -> int:
    """The highest sequence of ``writer_id`` folded into a compacted shard."""
    best = 0
    if Path(shards_dir).is_dir():
        for path in Path(shards_dir).glob(f"{PREFIX}*.parquet"):
            best = max(best, int(footer(path).get("writer_seqs", {}).get(writer_id, 0)))
    return best


def _writer_seqs(paths: list[Path]) -> dict[str, int]:
    seqs: dict[str, int] = {}
    for path in paths:
        if _COMPACTED.fullmatch(path.name):
            found = footer(path).get("writer_seqs", {})
        else:
            m = _WRITER.fullmatch(path.name)
            found = {m.group(1): int(m.group(2))} if m else {}
        for writer, seq in found.items():
            seqs[writer] = max(seqs.get(writer, 0), int(seq))
    return seqs


@contextlib.contextmanager
def _try_lock(shards_dir: Path):
    """True while this process holds the directory's compaction lock, False
    if another holds it."""
    fd = os.open(shards_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)      # releases the lock


def _publish_folded(shards_dir: Path, inputs: list[Path], table: pa.Table, level: int) -> Path:
    """Publish ``table`` (the de-duplicated rows of ``inputs``) as one shard
    of ``level``, then delete the inputs."""
    counts = Done(table).verdict_counts()
    record = {"level": level, "rows": table.num_rows, "inputs": len(inputs),
              "counts": dict(counts), "writer_seqs": _writer_seqs(inputs)}
    path = shards_dir / f"{PREFIX}{level}-{socket.gethostname()}-{os.getpid()}-{time.time_ns()}.parquet"
    stamped = table.replace_schema_metadata({META_KEY: json.dumps(record).encode()})
    publish(path, lambda tmp: pq.write_table(stamped, tmp))
    # Only now: until this point a kill leaves the inputs, and afterwards
    # the new shard, or both (readers dedupe).
    for p in inputs:
        p.unlink(missing_ok=True)
    _fsync_dir(shards_dir)
    return path


def _fold(shards_dir: Path, inputs: list[Path], level: int) -> Path | None:
    # All at once (runner/results/shard_reads.py), as scan reads them, but
    # on one thread: a fold runs in a writer's timer thread beside its
    # worker's checks, which more reading threads would take CPU from. A
    # shard gone since it was listed is no input; an unreadable one is
    # left in place for repair's quarantine.
    found = read_shards(inputs, threads=1)
    if not found.read:
        return None
    # Rows of answers since replaced stay, as history (runner/results/done.py).
    table = dedupe_history(found.table.combine_chunks())
    return _publish_folded(shards_dir, found.read, table, level)


def _by_level(shards_dir: Path) -> dict[int, list[Path]]:
    levels: dict[int, list[Path]] = {}
    with os.scandir(shards_dir) as it:
        for e in it:
            if e.name.endswith(".parquet") and not e.name.startswith(".") and e.is_file():
                levels.setdefault(level_of(e.name), []).append(Path(e.path))
    return {k: sorted(v) for k, v in levels.items()}


def compact(out_dir: Path, *, fan_in: int | None = None) -> list[Path]:
    """Fold each level that has ``fan_in`` shards or more into one shard of
    the next level; returns the shards written. Safe while writers publish
    and readers scan; does nothing if another compaction holds the lock."""
    fan_in = fan_in or FAN_IN
    shards_dir = Path(out_dir) / SHARDS_DIR
    if not shards_dir.is_dir():
        return []
    made: list[Path] = []
    with _try_lock(shards_dir) as mine:
        if not mine:
            return []
        level = 0
        while True:
            levels = _by_level(shards_dir)
            if not levels or level > max(levels):
                return made
            group = levels.get(level, [])
            if len(group) >= fan_in and (path := _fold(shards_dir, group, level + 1)):
                made.append(path)
            level += 1


def fold_all(shards_dir: Path, inputs: list[Path], table: pa.Table, *,
             fan_in: int | None = None) -> Path | None:
    """At a repair scan (no writer running): when more than ``fan_in``
    shards were read, publish their de-duplicated rows ``table`` as one
    shard above every level present and delete them."""
    if len(inputs) <= (fan_in or FAN_IN):
        return None
    with _try_lock(shards_dir) as mine:
        if not mine:
            return None
        level = max(level_of(p.name) for p in inputs) + 1
        return _publish_folded(shards_dir, inputs, table, level)
