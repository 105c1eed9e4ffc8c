"""The recorded rows of a sweep as one Arrow table, one row per check.

``shards.scan`` reads every shard into one table; ``dedupe`` keeps one row
per (problem_id, attempt) in Arrow compute, and ``Done`` answers the resume,
status and Slurm paths (which keys are recorded, counts per verdict, solved
problems) without a Python pass over the rows.

A row is the verdict of the answer it checked (``answer_sha256``) on the
problem as it was then (``problem_sha256``: its setup, query and the files
its setup loads); the two make the row's *version* (``version``). When
either changes, a resume checks it again (runner/checks/attempts.py), and the
rows of the version it replaced stay in the shards as history: the
*current* row of a key is one of the version its latest row checked
(``dedupe``), and compaction keeps the history (``dedupe_history``). A row
written before problems were hashed has no problem part: it stands for its
answer whatever the problem is now.
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
# since an earlier run was checked again, later), and its current run the
# one that wrote that row: a check run again on purpose (`run --recheck`)
# supersedes the rows of earlier runs of the same answer, which stay as
# history. Of that run's rows of that answer the one that finished first is
# kept (a check run twice, e.g. by a process killed after publishing but
# before its bookkeeping, has its first verdict kept); exact ties fall back
# to run and worker, so the choice does not depend on which shard a row sits
# in after compaction.
_ORDER = [("problem_id", "ascending"), ("attempt", "ascending"), ("finished_at", "ascending"),
          ("run_id", "ascending"), ("worker", "ascending")]


# What the resume, status and Slurm paths need of each row: the key, the
# verdict, and what ``dedupe`` orders by. A tenth of a row's bytes (reasons
# and hashes are the bulk), so ``scan(columns=LIGHT)`` reads that much.
# The time limit too: a resume refuses limits other than those its rows ran under.
# The answer's hash too: a row is done only for the answer it checked, and
# the problem's: only for the problem as it was.
LIGHT: tuple[str, ...] = ("problem_id", "attempt", "verdict", "finished_at", "run_id", "worker",
                          "timeout_s", "answer_sha256", "problem_sha256")
HASH = "answer_sha256"
PROBLEM_HASH = "problem_sha256"


def version(answer_sha256: str | None, problem_sha256: str | None) -> str:
    """What a row settles: its answer's hash, and its problem's after a "/"
    when it has one (hex digests hold no "/")."""
    return f"{answer_sha256 or ''}/{problem_sha256}" if problem_sha256 else (answer_sha256 or "")


def row_version(row) -> str:
    """``version`` of a row, as a dict or a ResultRow."""
    get = row.get if isinstance(row, Mapping) else (lambda name: getattr(row, name, None))
    return version(get(HASH), get(PROBLEM_HASH))


def settles(recorded: str, wanted: str) -> bool:
    """Whether a row of version ``recorded`` settles a check of version
    ``wanted``: the same, or a row from before problems were hashed (no
    problem part) of the same answer."""
    return recorded == wanted or ("/" not in recorded and recorded == wanted.split("/", 1)[0])


def verdict_names(text: str) -> tuple[str, ...]:
    """``--recheck``'s value: verdict names separated by commas, in any case
    ("ERROR", "error,timeout"). Raises ValueError saying which name is no
    verdict, and the names there are."""
    names = tuple(dict.fromkeys(n.strip().upper() for n in str(text).split(",") if n.strip()))
    known = [v.value for v in Verdict]
    bad = [n for n in names if n not in known]
    if bad or not names:
        what = f"{', '.join(bad)} is no verdict" if bad else "no verdict given"
        raise ValueError(f"{what}; give one or more of {', '.join(known)}, separated by commas")
    return names


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
    table, plan = raw
    try:
        return conform(table, columns, plan.older)
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
    """Each row's ``version``, in Arrow."""
    if HASH not in table.column_names:
        return None
    answers = pc.fill_null(_flat(table[HASH]), "")
    if PROBLEM_HASH not in table.column_names:
        return answers
    problems = pc.fill_null(_flat(table[PROBLEM_HASH]), "")
    if not pc.any(pc.not_equal(problems, "")).as_py():
        return answers
    return pc.if_else(pc.equal(problems, ""), answers,
                      pc.binary_join_element_wise(answers, problems, "/"))


def _with_run(table: pa.Table, hashes: pa.Array) -> pa.Array:
    """Each row's version and run, joined: what ``dedupe`` tells apart."""
    runs = pc.fill_null(_flat(table["run_id"]), "")
    return _flat(pc.binary_join_element_wise(hashes, runs, "\x1e"))


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
            # current answer) and that row's run; rows of any other answer,
            # or of the answer in an earlier run, are history.
            hashes = _flat(pc.take(_with_run(table, hashes), order))
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
    """The rows compaction keeps: for each (problem_id, attempt, answer,
    run) the first and the last row to finish. ``dedupe`` of these is ``dedupe`` of
    ``table``, so folding shards changes no reader's answer, and the verdicts
    of answers since replaced stay as history."""
    n = table.num_rows
    hashes = _hashes(table)
    if n <= 1 or hashes is None:
        return dedupe(table)
    keys = table.select(["problem_id", "attempt"]).append_column("_hash", _with_run(table, hashes))
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
    def _wanted(keys: list[tuple[str, int]], hashes: list[str], legacy: bool = False) -> pa.Array:
        """Key and version strings of ``keys``; with ``legacy``, also those a
        row from before problems were hashed has (``settles``)."""
        wanted = key_strings(pa.array([k[0] for k in keys], pa.string()),
                             pa.array([k[1] for k in keys], pa.int32()))
        versions = pa.array(hashes, pa.string())
        full = pc.binary_join_element_wise(wanted, versions, "\x1f")
        if not legacy:
            return full
        answers = pc.list_element(pc.split_pattern(versions, "/", max_splits=1), 0)
        return pa.concat_arrays([_flat(full), _flat(pc.binary_join_element_wise(wanted, answers, "\x1f"))])

    def current(self, keys: list[tuple[str, int]], hashes: list[str]) -> list[bool]:
        """For each key, whether its current row checked the version of that
        hash (``version``; ``""``: no answer): only then is its check done."""
        if not keys:
            return []
        recorded = self._key_hash_strings()
        now = self._wanted(keys, hashes)
        answers_only = self._wanted(keys, [h.split("/", 1)[0] for h in hashes])
        return pc.or_(pc.is_in(now, value_set=recorded),
                      pc.is_in(answers_only, value_set=recorded)).to_pylist()

    def matching(self, keys: list[tuple[str, int]], hashes: list[str]) -> "Done":
        """These rows less those of ``keys`` that checked another version
        than ``hashes`` gives them (answers or problems changed since)."""
        if not keys or not len(self):
            return self
        wanted_keys = key_strings(pa.array([k[0] for k in keys], pa.string()),
                                  pa.array([k[1] for k in keys], pa.int32()))
        mask = pc.or_(pc.is_in(self._key_hash_strings(), value_set=self._wanted(keys, hashes, legacy=True)),
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

    def with_verdicts(self, verdicts: Iterable[str], problem_ids: Iterable[str]
                      ) -> dict[tuple[str, int], object]:
        """Key -> finished_at of the rows of ``problem_ids`` whose verdict is
        one of ``verdicts``: what `run --recheck` checks again."""
        mask = pc.and_(pc.is_in(self.table["verdict"], value_set=pa.array(sorted(verdicts), pa.string())),
                       pc.is_in(self.table["problem_id"],
                                value_set=pa.array(sorted(set(problem_ids)), pa.string())))
        hit = self.table.filter(mask).select(["problem_id", "attempt", "finished_at"])
        return {(pid, att): when for pid, att, when in zip(*(hit[c].to_pylist() for c in hit.column_names))}

    def since(self, cuts: Mapping[tuple[str, int], object]) -> "Done":
        """These rows less those of the keys of ``cuts`` that finished at or
        before the key's cut: a check asked to run again (`run --recheck`)
        is settled only by a row written after the one it rechecks."""
        if not cuts or not len(self):
            return self
        keys = list(cuts)
        cut = pa.table({"_key": key_strings(pa.array([k[0] for k in keys], pa.string()),
                                            pa.array([k[1] for k in keys], pa.int32())),
                        "_cut": pa.array([cuts[k] for k in keys], self.table.schema.field("finished_at").type)})
        mine = pa.table({"_key": self._key_strings(), "_row": pa.array(range(len(self)), pa.int64()),
                         "finished_at": self.table["finished_at"]})
        both = mine.join(cut, "_key", join_type="inner")
        old = both.filter(pc.less_equal(both["finished_at"], both["_cut"]))["_row"]
        if len(old) == 0:
            return self
        keep = pc.invert(pc.is_in(pa.array(range(len(self)), pa.int64()), value_set=old))
        return Done(self.table.filter(keep), self.paths)

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
