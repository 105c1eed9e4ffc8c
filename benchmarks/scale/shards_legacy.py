"""The shard reader before issue 16, kept callable as the baseline of
benchmarks/scale/shards_scale.py (``scan`` into row dicts, ``merge`` through the
csv module). Not used by proofbatch itself; only what shards_scale.py swaps
in (``scan``, ``read_results``, ``merge``) and what they call is kept.

``scan`` reads every shard under ``OUT/shards/``: every key found in a
readable shard is done, a half-written shard is quarantined, and nothing is
counted twice. ``merge`` folds the shards into ``results.parquet``,
``results.csv`` and ``verdicts.csv``, each published whole or not at all.
"""

from __future__ import annotations

import csv
import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from runner.results.rows import COLUMNS, OPTIONAL_COLUMNS, SCHEMA

SHARDS_DIR = "shards"
QUARANTINE_DIR = "quarantine"


def _fsync_dir(directory: Path) -> None:
    # POSIX: a rename is only durable once the directory holding the entry is
    # fsynced; without it a power loss can bring back the old directory state.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _is_temp(name: str) -> bool:
    return name.startswith(".") and name.endswith(".tmp")


def publish(path: Path, write: Callable[[Path], None]) -> None:
    """Make ``path`` appear with the content ``write`` produces, or not at all.

    As submitit's ``temporary_save_path``: ``write`` fills a temp file in the
    same directory (``os.replace`` is atomic only within one filesystem), the
    temp file is fsynced (otherwise the rename can reach the disk before the
    data and a crash leaves a complete-looking empty file), renamed over
    ``path``, and the directory is fsynced. On failure the temp is removed.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


@dataclass
class ShardScan:
    """What ``scan`` found: done keys, readable shards, and what it cleaned up."""

    done: dict[tuple[str, int], dict] = field(default_factory=dict)
    shards: list[Path] = field(default_factory=list)
    quarantined: list[Path] = field(default_factory=list)
    temps_removed: list[Path] = field(default_factory=list)


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


def _read_shard(path: Path) -> pa.Table | None:
    """The shard's rows in SCHEMA, or None if it is unreadable or incomplete."""
    try:
        table = pq.ParquetFile(path).read()
        for name in OPTIONAL_COLUMNS:
            if name not in table.column_names:
                table = table.append_column(name, pa.nulls(len(table), SCHEMA.field(name).type))
        if any(c not in table.column_names for c in COLUMNS):
            return None
        return table.select(list(COLUMNS)).cast(SCHEMA)
    except (OSError, pa.ArrowException, ValueError):
        return None


def _finished_key(row: dict):
    ts = row.get("finished_at")
    return (ts is None, ts or dt.datetime.min.replace(tzinfo=dt.timezone.utc))


def scan(out_dir: Path, *, repair: bool = True) -> ShardScan:
    """Read all shards of ``out_dir`` and say which checks are done.

    With ``repair``, run it only when no writer is publishing into
    ``out_dir`` (at resume or merge): it deletes temp files, which are then
    only leftovers of killed writers, and moves unreadable shards (e.g.
    truncated by a crash without fsync, or by a full disk) to
    ``shards/quarantine/``; their checks count as not done. Without
    ``repair`` it only reads, and is safe while a sweep runs.
    A key in two shards keeps the row with the earliest ``finished_at``.
    """
    result = ShardScan()
    shards_dir = Path(out_dir) / SHARDS_DIR
    if not shards_dir.is_dir():
        return result
    for path in sorted(shards_dir.iterdir()):
        if not path.is_file():
            continue
        if _is_temp(path.name):
            if repair:
                path.unlink(missing_ok=True)
                result.temps_removed.append(path)
            continue
        if path.suffix != ".parquet":
            continue
        table = _read_shard(path)
        if table is None:
            if repair:
                result.quarantined.append(_quarantine(path))
            continue
        result.shards.append(path)
        for row in table.to_pylist():
            key = (row["problem_id"], int(row["attempt"]))
            kept = result.done.get(key)
            if kept is None or _finished_key(row) < _finished_key(kept):
                result.done[key] = row
    return result


def read_results(out_dir: Path, *, repair: bool = False) -> pa.Table:
    """The deduplicated rows of all shards, in SCHEMA, sorted by (problem_id, attempt).

    Read-only unless ``repair`` (see ``scan``): safe while a sweep runs."""
    done = scan(out_dir, repair=repair).done
    rows = [done[k] for k in sorted(done)]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _csv_cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:  # Arrow hands back naive values only if tz was lost
            value = value.replace(tzinfo=dt.timezone.utc)
        return value.astimezone(dt.timezone.utc).isoformat(timespec="microseconds")
    return str(value)


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    def write(tmp: Path) -> None:
        # newline="" as the csv module requires; quoting handles reasons with
        # commas, quotes and newlines.
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)
    publish(path, write)


def merge(out_dir: Path) -> pa.Table:
    """Write results.parquet, results.csv and verdicts.csv from the shards.

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
    publish(out_dir / "results.parquet", lambda tmp: pq.write_table(table, tmp))

    rows = table.to_pylist()
    _write_csv(out_dir / "results.csv", list(COLUMNS),
               [[_csv_cell(r[c]) for c in COLUMNS] for r in rows])

    # One verdict per problem: any OK, then any CHEATING, then the lowest attempt.
    def rank(r: dict) -> tuple:
        return (r["verdict"] != "OK", r["verdict"] != "CHEATING", r["attempt"])

    chosen: dict[str, dict] = {}
    for r in rows:
        cur = chosen.get(r["problem_id"])
        if cur is None or rank(r) < rank(cur):
            chosen[r["problem_id"]] = r
    verdicts = {p: r["verdict"] for p, r in chosen.items()}
    _write_csv(out_dir / "verdicts.csv", ["Problem", "Verdict"],
               [[p, verdicts[p]] for p in sorted(verdicts)])
    return table
