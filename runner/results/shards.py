"""Checkpointed Parquet shards: how a sweep survives ``kill -9``.

Workers buffer result rows and publish them as small immutable shards under
``OUT/shards/``. Each shard appears whole or not at all (``publish``), so a
sweep killed at any instant resumes from ``scan``: every key found in a
readable shard is done, a half-written shard is quarantined and its checks are
redone, and nothing is counted twice. Small shards are folded into larger ones
as the sweep runs (runner/results/compaction.py). ``scan`` reads them as one Arrow
table, de-duplicated by key in Arrow compute (``Done``), and ``merge`` writes
``results.parquet``, ``results.csv`` and ``verdicts.csv`` from it
(runner/results/csv_table.py) without a Python pass over the rows.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import compaction, csv_table as results_csv
from .done import LIGHT, SHARDS_DIR, Done, dedupe, dedupe_history
from .publish import _fsync_dir, publish
from .rows import COLUMNS, ResultRow, rows_to_table
from .shard_reads import read_shards

QUARANTINE_DIR = "quarantine"
# How a writer's shard is written. It holds a few rows (a flush every 2 s)
# and every scan reads it until compaction folds it, so it is written for
# reading: without dictionary, compression or statistics (work per column
# for each reader, and nothing gained on a few rows) and without a copy of
# the Arrow schema in its footer (Parquet's own types read back as SCHEMA's).
# Readers take shards written either way (runner/results/shard_reads.py).
WRITE_OPTIONS = {"use_dictionary": False, "compression": "none", "write_statistics": False,
                 "store_schema": False}


def _is_temp(name: str) -> bool:
    return name.startswith(".") and name.endswith(".tmp")


class ShardWriter:
    """Buffers rows of one writer and publishes them as numbered shards.

    Shards are ``OUT/shards/{writer_id}-{seq:06d}.parquet``. The sequence
    resumes after the highest one already on disk for ``writer_id`` (quarantined
    ones included), so a restarted worker never overwrites an earlier shard.
    Rows are published when an expensive one arrives, when ``flush_rows``
    are pending, and at the latest ``flush_secs`` after they were added (a
    timer thread does that, so rows finished just before a long check are
    not held back for its whole duration). The same timer thread folds small
    shards into larger ones once enough of them accumulate (``compact``;
    runner/results/compaction.py), so a sweep of short checks does not leave a
    reader 200,000 five-row files. Call ``close`` (or use ``with``)
    when done. Thread-safe. Two live writers must not share a ``writer_id``.
    """

    def __init__(self, out_dir: Path, writer_id: str, *, flush_rows: int = 200,
                 flush_secs: float = 2.0, heavy_secs: float = 1.0, compact: bool = True):
        if not writer_id or "/" in writer_id or writer_id.startswith("."):
            raise ValueError(f"bad writer_id {writer_id!r}")
        self.dir = Path(out_dir) / SHARDS_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.writer_id = writer_id
        self.flush_rows, self.flush_secs, self.heavy_secs = flush_rows, flush_secs, heavy_secs
        self._lock = threading.Lock()
        self._pending: list[ResultRow] = []
        self._last_flush = time.monotonic()
        self._closed = False
        self._compact, self._unfolded = compact, False
        self.published: list[Path] = []
        self._seq = self._highest_seq() + 1
        self._wake = threading.Event()
        self._timer = threading.Thread(target=self._flush_when_due, daemon=True,
                                       name=f"shards-{writer_id}")
        self._timer.start()

    def _flush_when_due(self) -> None:
        while not self._wake.wait(self.flush_secs / 2):
            with self._lock:
                if self._closed:
                    return
                if self._pending and time.monotonic() - self._last_flush >= self.flush_secs:
                    try:
                        self._flush_locked()
                    except OSError:
                        pass    # kept pending; the next add or close reports it
                unfolded, self._unfolded = self._unfolded, False
            if unfolded and self._compact:
                try:        # outside the lock: workers keep adding rows meanwhile
                    compaction.compact(self.dir.parent)
                except (OSError, pa.ArrowException):
                    pass    # an optimisation: its inputs stay, the next round retries

    def _highest_seq(self) -> int:
        pattern = re.compile(re.escape(self.writer_id) + r"-(\d+)\.parquet")
        # Compacted shards record the highest sequence they absorbed per
        # writer: a name is never reused after its shard was folded away.
        seqs = [compaction.absorbed_seq(self.dir, self.writer_id)]
        for d in (self.dir, self.dir / QUARANTINE_DIR):
            if d.is_dir():
                seqs += [int(m.group(1)) for p in d.iterdir() if (m := pattern.fullmatch(p.name))]
        return max(seqs)

    def add(self, row: ResultRow) -> None:
        """Buffer ``row``; publish at once if it was expensive or the buffer is due."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"ShardWriter {self.writer_id} is closed")
            self._pending.append(row)
            # An expensive check must never be lost to a kill: redoing it costs
            # more than one extra small shard.
            if (row.wall_secs >= self.heavy_secs
                    or len(self._pending) >= self.flush_rows
                    or time.monotonic() - self._last_flush >= self.flush_secs):
                self._flush_locked()

    def flush(self) -> Path | None:
        """Publish pending rows as a new shard; return its path (None if nothing pending)."""
        with self._lock:
            return self._flush_locked()

    def _flush_locked(self) -> Path | None:
        self._last_flush = time.monotonic()
        if not self._pending:
            return None
        table = rows_to_table(self._pending)
        path = self.dir / f"{self.writer_id}-{self._seq:06d}.parquet"
        while path.exists():  # belt and braces: os.replace would overwrite silently
            self._seq += 1
            path = self.dir / f"{self.writer_id}-{self._seq:06d}.parquet"
        publish(path, lambda tmp: pq.write_table(table, tmp, **WRITE_OPTIONS))
        # Only forget rows once their shard is durable; a failed publish keeps
        # them pending for the next flush.
        self._pending.clear()
        self._seq += 1
        self.published.append(path)
        self._unfolded = True
        return path

    def close(self) -> None:
        self._wake.set()
        if self._timer is not threading.current_thread():
            self._timer.join()      # a compaction under way ends before close returns
        with self._lock:
            if not self._closed:
                self._flush_locked()
                self._closed = True

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, *exc) -> None:
        # Flush even on error: rows already added are finished checks.
        self.close()


@dataclass
class ShardScan:
    """What ``scan`` found: done keys, readable shards, and what it cleaned up."""

    done: Done = field(default_factory=Done)
    shards: list[Path] = field(default_factory=list)
    quarantined: list[Path] = field(default_factory=list)
    unreadable: list[Path] = field(default_factory=list)  # left in place: a scan without repair
    temps_removed: list[Path] = field(default_factory=list)
    folded: list[Path] = field(default_factory=list)    # compacted shards ``repair`` wrote


def _quarantine(path: Path) -> Path:
    qdir = path.parent / QUARANTINE_DIR
    qdir.mkdir(exist_ok=True)
    dest, n = qdir / path.name, 1
    while dest.exists():  # never overwrite (that would delete) an earlier one
        dest, n = qdir / f"{path.name}.{n}", n + 1
    os.rename(path, dest)
    _fsync_dir(qdir)
    _fsync_dir(path.parent)
    return dest


def scan(out_dir: Path, *, repair: bool = True, columns: tuple[str, ...] | None = None) -> ShardScan:
    """Read all shards of ``out_dir`` and say which checks are done.

    With ``repair``, run it only when no writer is publishing into
    ``out_dir`` (at resume or merge): it deletes temp files, which are then
    only leftovers of killed writers, moves unreadable shards (e.g.
    truncated by a crash without fsync, or by a full disk) to
    ``shards/quarantine/`` (their checks count as not done), and folds the
    shards into one when there are many (runner/results/compaction.py). Without
    ``repair`` it only reads, and is safe while a sweep runs and compacts.
    A key in two shards keeps the row with the earliest ``finished_at``.
    ``columns`` (default: all) reads only those, plus ``LIGHT``: the resume
    and status paths pass ``LIGHT`` (``Done.rows`` reads whole rows of the
    few keys it is asked for); only a whole read folds shards.
    """
    cols = COLUMNS if columns is None else tuple(c for c in COLUMNS if c in set(columns) | set(LIGHT))
    result = ShardScan()
    shards_dir = Path(out_dir) / SHARDS_DIR
    if not shards_dir.is_dir():
        return result
    tables: list[pa.Table] = []
    seen: set[str] = set()
    again = True
    while again:
        # A compaction publishes its shard before it deletes its inputs: an
        # input gone between listing and reading is in a shard a new
        # listing shows.
        again = False
        with os.scandir(shards_dir) as it:
            entries = sorted((e.name, e.is_file()) for e in it if e.name not in seen)
        listed: list[Path] = []
        for name, is_file in entries:
            path = shards_dir / name
            if not is_file:
                continue
            if _is_temp(name):
                if repair:
                    path.unlink(missing_ok=True)
                    result.temps_removed.append(path)
                continue
            if name.endswith(".parquet"):
                listed.append(path)
        # All at once (runner/results/shard_reads.py): 20,000 shards one by
        # one took 27 s of a report's 30.
        found = read_shards(listed, cols)
        again = bool(found.gone)
        seen.update(p.name for p in found.read + found.unreadable)
        if repair:
            result.quarantined += [_quarantine(p) for p in sorted(found.unreadable)]
        else:
            result.unreadable += sorted(found.unreadable)
        # Listed in name order; a second listing's come after the first's.
        result.shards += found.read
        if found.table is not None:
            tables.append(found.table)
    if not tables:
        return result
    table = pa.concat_tables(tables).combine_chunks()
    history = dedupe_history(table) if repair and cols == COLUMNS else table
    table = dedupe(history)
    result.done = Done(table, list(result.shards))
    if repair and cols == COLUMNS:
        # Folded with the rows of answers since replaced: they stay as history.
        folded = compaction.fold_all(shards_dir, result.shards, history)
        if folded is not None:
            result.folded, result.shards = [folded], [folded]
    return result


def read_results(out_dir: Path, *, repair: bool = False) -> pa.Table:
    """The deduplicated rows of all shards, in SCHEMA, sorted by (problem_id, attempt).

    Read-only unless ``repair`` (see ``scan``): safe while a sweep runs."""
    return scan(out_dir, repair=repair).done.table


def current_attempts(table: pa.Table, checks: Iterable[tuple[str, int]]) -> pa.Table:
    """``table`` without the rows of attempts that ``checks`` (a sweep's
    (problem, attempt) checks now) no longer give their problems: an answer
    deleted for good, or a problem's "no answer given" attempt 0 once it is
    answered from attempt 1 on. They stay in the shards, as history. Rows of
    problems ``checks`` does not name (another --problems selection) stay."""
    checks = list(checks)
    if not checks or table.num_rows == 0:
        return table
    problems = pa.array(sorted({p for p, _ in checks}), pa.string())
    keys = pa.array(sorted({f"{p}\x00{a}" for p, a in checks}), pa.string())
    row_keys = pc.binary_join_element_wise(table["problem_id"], pc.cast(table["attempt"], pa.string()),
                                           "\x00")
    stale = pc.and_(pc.is_in(table["problem_id"], value_set=problems),
                    pc.invert(pc.is_in(row_keys, value_set=keys)))
    return table.filter(pc.invert(stale))


def merge(out_dir: Path, checks: Iterable[tuple[str, int]] | None = None) -> pa.Table:
    """Write results.parquet, results.csv and verdicts.csv from the shards:
    the rows of ``checks`` (see current_attempts) when given, else every one.

    ``verdicts.csv`` follows s2n-bignum-bench's collect-verdicts output:
    ``Problem,Verdict``, one line per problem. With one attempt per problem
    that is its verdict. With several (pass@k) it is the problem's outcome:
    OK if any attempt is OK; else CHEATING if any attempt cheated (never
    hidden behind a FAIL); else the verdict of attempt 0, or of the lowest
    attempt. Per-attempt verdicts are in results.csv.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = read_results(out_dir, repair=True)
    if checks is not None:
        table = current_attempts(table, checks)
    publish(out_dir / "results.parquet", lambda tmp: pq.write_table(table, tmp))
    publish(out_dir / "results.csv", lambda tmp: results_csv.write_results(table, tmp))
    publish(out_dir / "verdicts.csv", lambda tmp: results_csv.write_verdicts(table, tmp))
    return table
