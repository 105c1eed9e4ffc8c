"""The recorded rows of a sweep as one Arrow table, one row per check.

``shards.scan`` reads every shard into one table; ``dedupe`` keeps one row
per (problem_id, attempt) in Arrow compute, and ``Done`` answers the resume,
status and Slurm paths (which keys are recorded, counts per verdict, solved
problems) without a Python pass over the rows.

A row is the verdict of the answer it checked (``answer_sha256``). When an
answer changes, a resume checks it again (runner/checks/attempts.py), and the rows
of the answer it replaced stay in the shards as history: the *current* row
of a key is one of the answer its latest row checked (``dedupe``), and
compaction keeps the history (``dedupe_history``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from .rows import COLUMNS, SCHEMA
from .shard_reads import conform, read_raw, read_shards
from ..verdicts import Verdict

# A key's current answer is the one its latest row checked (an answer changed
# since an earlier run was checked again, later). Of the rows of that answer
# the one that finished first is kept (a check run twice, e.g. by a process
# killed after publishing but before its bookkeeping, has its first verdict
# kept); exact ties fall back to run and worker, so the choice does not
# depend on which shard a row sits in after compaction.
_ORDER = [("problem_id", "ascending"), ("attempt", "ascending"), ("finished_at", "ascending"),
          ("run_id", "ascending"), ("worker", "ascending")]


# What the resume, status and Slurm paths need of each row: the key, the
# verdict, and what ``dedupe`` orders by. A tenth of a row's bytes (reasons
# and hashes are the bulk), so ``scan(columns=LIGHT)`` reads that much.
# The time limit too: a resume refuses limits other than those its rows ran under.
# The answer's hash too: a row is done only for the answer it checked.
LIGHT: tuple[str, ...] = ("problem_id", "attempt", "verdict", "finished_at", "run_id", "worker",
                          "timeout_s", "answer_sha256")
HASH = "answer_sha256"


SHARDS_DIR = "shards"       # OUT/shards: where every writer publishes its shards


def read_shard(path: Path, columns: tuple[str, ...] = COLUMNS) -> pa.Table | None:
    """The shard's ``columns`` in SCHEMA, or None if it is unreadable or
    lacks a column of SCHEMA (other than OPTIONAL_COLUMNS).

    Raises FileNotFoundError if it is gone: a compaction folded it into a
    shard published before it was deleted (``scan`` then lists again)."""
    # One reading of a shard for both (runner/results/shard_reads.py reads many at once).
    raw = read_raw(path, columns)
    if raw == "gone":
        raise FileNotFoundError(path)
    if raw == "bad":
        return None
    table, older = raw
    try:
        return conform(table, columns, older)
    except (pa.ArrowException, ValueError):
        return None


def _flat(array) -> pa.Array:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def _starts(*columns: pa.Array) -> pa.Array:
    """True where a run of equal values (over all ``columns``) begins."""
    n = len(columns[0])
    if n <= 1:
        return pa.array([True] * n, pa.bool_())
    changed = None
    for c in columns:
        c = pc.fill_null(c, "") if pa.types.is_string(c.type) else c
        step = pc.not_equal(c.slice(1), c.slice(0, n - 1))
        changed = step if changed is None else pc.or_(changed, step)
    return pa.concat_arrays([pa.array([True]), changed])


def _hashes(table: pa.Table) -> pa.Array | None:
    if HASH not in table.column_names:
        return None
    return pc.fill_null(_flat(table[HASH]), "")


def dedupe(table: pa.Table) -> pa.Table:
    """One row per (problem_id, attempt), sorted by key: of the rows of the
    answer the key's latest row checked, the first finished; see ``_ORDER``."""
    n = table.num_rows
    if n == 0:
        return table
    # Nulls sort last by default: a row without finished_at loses.
    order = pc.sort_indices(table.select([k for k, _ in _ORDER]), sort_keys=_ORDER)
    if n > 1:
        pid = _flat(pc.take(table["problem_id"], order))
        att = _flat(pc.take(table["attempt"], order))
        first = _starts(pid, att)
        hashes = _hashes(table)
        if hashes is not None:
            # Per key, the hash of its last row in finishing order (the
            # current answer); rows of any other answer are history.
            hashes = _flat(pc.take(hashes, order))
            group = pc.subtract(pc.cumulative_sum(pc.cast(first, pa.int64())), 1)
            last = pc.indices_nonzero(pa.concat_arrays([first.slice(1), pa.array([True])]))
            current = pc.take(pc.take(hashes, last), group)
            keep = pc.equal(hashes, current)
            if not pc.all(keep).as_py():
                order, pid, att = (pc.filter(a, keep) for a in (order, pid, att))
                first = _starts(pid, att)
        order = order.filter(first)
    return table.take(order)


def dedupe_history(table: pa.Table) -> pa.Table:
    """The rows compaction keeps: for each (problem_id, attempt, answer) the
    first and the last row to finish. ``dedupe`` of these is ``dedupe`` of
    ``table``, so folding shards changes no reader's answer, and the verdicts
    of answers since replaced stay as history."""
    n = table.num_rows
    hashes = _hashes(table)
    if n <= 1 or hashes is None:
        return dedupe(table)
    keys = table.select(["problem_id", "attempt"]).append_column("_hash", hashes)
    keys = keys.append_column("finished_at", table["finished_at"])
    for name in ("run_id", "worker"):
        keys = keys.append_column(name, table[name])
    sort = [("problem_id", "ascending"), ("attempt", "ascending"), ("_hash", "ascending")] + _ORDER[2:]
    order = pc.sort_indices(keys, sort_keys=sort)
    cols = [_flat(pc.take(keys[c], order)) for c in ("problem_id", "attempt", "_hash")]
    first = _starts(*cols)
    last = pa.concat_arrays([first.slice(1), pa.array([True])])
    return table.take(order.filter(pc.or_(first, last)))


def key_strings(problem_ids, attempts) -> pa.Array:
    """``problem_id`` and ``attempt`` joined into one string per key, for
    membership tests in Arrow compute."""
    return pc.binary_join_element_wise(problem_ids, pc.cast(attempts, pa.string()), "\x1f")


class Done(Mapping):
    """The recorded rows, one per key, as an Arrow table sorted by key.

    Callers on the resume and status paths use its columnar answers
    (``has``, ``verdict_counts``, ``solved``, ``rows_per_problem``, ``table``).
    It is also a read-only mapping from (problem_id, attempt) to the row as a
    dict, as ``scan`` returned before; building that index is a pass over
    every key, so hot paths do not use it."""

    def __init__(self, table: pa.Table | None = None, paths: list[Path] | None = None):
        self.table = SCHEMA.empty_table() if table is None else table
        self.paths = paths or []      # the shards read: whole rows on demand (``rows``)
        self._index: dict[tuple[str, int], int] | None = None

    @classmethod
    def from_rows(cls, rows: Iterable[dict]) -> "Done":
        return cls(dedupe(pa.Table.from_pylist(list(rows), schema=SCHEMA)))

    def _keys(self) -> dict[tuple[str, int], int]:
        if self._index is None:
            keys = zip(self.table["problem_id"].to_pylist(), self.table["attempt"].to_pylist())
            self._index = dict(zip(keys, range(self.table.num_rows)))
        return self._index

    def __len__(self) -> int:
        return self.table.num_rows

    def __iter__(self):
        return iter(self._keys())

    def __contains__(self, key) -> bool:
        return key in self._keys()

    def __getitem__(self, key) -> dict:
        return self.table.slice(self._keys()[key], 1).to_pylist()[0]

    def items(self):
        return list(zip(self._keys(), self.table.to_pylist()))

    def values(self):
        return self.table.to_pylist()

    def __or__(self, other: Mapping) -> "Done":
        """These rows and ``other``'s (a mapping of key -> row dict), deduplicated."""
        extra = pa.Table.from_pylist(list(other.values()), schema=SCHEMA)
        extra = extra.select(self.table.column_names)
        return Done(dedupe(pa.concat_tables([self.table, extra])), self.paths)

    def _key_strings(self) -> pa.Array:
        keys = key_strings(self.table["problem_id"], self.table["attempt"])
        return keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys

    def has(self, keys: list[tuple[str, int]]) -> list[bool]:
        """For each key, whether it has a row."""
        if not keys:
            return []
        wanted = key_strings(pa.array([k[0] for k in keys], pa.string()),
                             pa.array([k[1] for k in keys], pa.int32()))
        return pc.is_in(wanted, value_set=self._key_strings()).to_pylist()

    def _key_hash_strings(self) -> pa.Array:
        hashes = _hashes(self.table)
        if hashes is None:
            hashes = pa.array([""] * self.table.num_rows, pa.string())
        return _flat(pc.binary_join_element_wise(self._key_strings(), hashes, "\x1f"))

    @staticmethod
    def _wanted(keys: list[tuple[str, int]], hashes: list[str]) -> pa.Array:
        wanted = key_strings(pa.array([k[0] for k in keys], pa.string()),
                             pa.array([k[1] for k in keys], pa.int32()))
        return pc.binary_join_element_wise(wanted, pa.array(hashes, pa.string()), "\x1f")

    def current(self, keys: list[tuple[str, int]], hashes: list[str]) -> list[bool]:
        """For each key, whether its current row checked the answer of that
        hash (``""``: no answer): only then is its check done."""
        if not keys:
            return []
        return pc.is_in(self._wanted(keys, hashes), value_set=self._key_hash_strings()).to_pylist()

    def matching(self, keys: list[tuple[str, int]], hashes: list[str]) -> "Done":
        """These rows less those of ``keys`` that checked another answer
        than ``hashes`` gives them (answers changed since)."""
        if not keys or not len(self):
            return self
        wanted_keys = key_strings(pa.array([k[0] for k in keys], pa.string()),
                                  pa.array([k[1] for k in keys], pa.int32()))
        mask = pc.or_(pc.is_in(self._key_hash_strings(), value_set=self._wanted(keys, hashes)),
                      pc.invert(pc.is_in(self._key_strings(), value_set=wanted_keys)))
        if pc.all(mask).as_py():
            return self
        return Done(self.table.filter(mask), self.paths)

    def rows(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], dict]:
        """The whole rows of the few ``keys`` given (those recorded), as
        dicts; read again from the shards if this scan read only some columns."""
        if not keys or not len(self):
            return {}
        if self.table.num_columns < len(COLUMNS):
            whole = read_shards([p for p in self.paths if p.exists()]).table
            return Done(dedupe(whole)).rows(keys) if whole is not None else {}
        wanted = key_strings(pa.array([k[0] for k in keys], pa.string()),
                             pa.array([k[1] for k in keys], pa.int32()))
        mask = pc.is_in(key_strings(self.table["problem_id"], self.table["attempt"]),
                        value_set=wanted)
        return {(r["problem_id"], r["attempt"]): r for r in self.table.filter(mask).to_pylist()}

    def verdict_counts(self) -> Counter:
        counts = pc.value_counts(self.table["verdict"])
        return Counter(dict(zip(counts.field("values").to_pylist(),
                                counts.field("counts").to_pylist())))

    def solved(self) -> set[str]:
        """Problems with an OK row."""
        ok = self.table.filter(pc.equal(self.table["verdict"], Verdict.OK.value))
        return set(pc.unique(ok["problem_id"]).to_pylist())

    def rows_per_problem(self) -> Counter:
        counts = pc.value_counts(self.table["problem_id"])
        return Counter(dict(zip(counts.field("values").to_pylist(),
                                counts.field("counts").to_pylist())))
