"""Two sweeps of one corpus side by side (``proofbatch report A B``): who
solved what, which verdicts changed, and the report of each
(``runner.reporting.report.SweepReport``) for what each cost.

Two sweeps are of one corpus when their corpus fingerprints agree, or,
when they checked different selections of it (the runs of one profile: a
ground truth that fails in run 1 is left out of run 2, issue 46), when
every problem both checked has the same setup, query and category in both
(each row's ``problem_sha256`` and ``category``). Settings that change
verdicts without any answer changing (the clock limits counted, the host
factor, the niceness, the mode, the slack) are named when they differ.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError
from ..results import shards
from ..verdicts import Verdict
from .report import SweepReport


@dataclass(frozen=True)
class Comparison:
    a: SweepReport
    b: SweepReport
    solved_only_a: list[str]
    solved_only_b: list[str]
    changes: list[tuple[str, int, str, str]]          # problem, attempt, verdict in a, in b
    only_in_a: int = 0                                # checks one sweep has and the other lacks
    only_in_b: int = 0
    transitions: Counter = field(default_factory=Counter)
    differences: list[str] = field(default_factory=list)   # settings that differ, one phrase each


def _solved(table: pa.Table) -> pa.Array:
    return pc.unique(table.filter(pc.equal(table["verdict"], Verdict.OK.value))["problem_id"])


def _only(these: pa.Array, those: pa.Array) -> list[str]:
    return these.filter(pc.invert(pc.is_in(these, value_set=those))).sort().to_pylist()


def _problems(r: SweepReport) -> pa.Table:
    """One row per problem of a sweep: its id, category and problem_sha256
    (read here: a one-sweep report never needs the hashes)."""
    table = shards.scan(r.out, repair=False, columns=("category", "problem_sha256")).done.table
    if "problem_sha256" not in table.column_names:
        table = table.append_column("problem_sha256", pa.nulls(table.num_rows, pa.string()))
    return table.group_by("problem_id", use_threads=False).aggregate(
        [("category", "min"), ("problem_sha256", "min"), ("problem_sha256", "max")])


def _same_corpus(a: SweepReport, b: SweepReport) -> None:
    """Refuse two sweeps that are not of one corpus, in one line."""
    if a.manifest.get("corpus_fingerprint") == b.manifest.get("corpus_fingerprint"):
        return
    where = b.out / "sweep.json"
    pa_, pb = _problems(a), _problems(b)
    both = pa_.join(pb, "problem_id", right_suffix="_b", join_type="inner")
    if both.num_rows == 0:
        raise InputError(where, f"a sweep of another corpus than {a.out}: the two share no "
                         "problem", "compare two sweeps of the same corpus")
    shas = [both[c].to_pylist() for c in ("problem_sha256_min", "problem_sha256_max",
                                          "problem_sha256_min_b", "problem_sha256_max_b")]
    categories = zip(both["category_min"].to_pylist(), both["category_min_b"].to_pylist())
    unknown, differ = [], []
    for pid, lo, hi, lo_b, hi_b, (cat, cat_b) in zip(both["problem_id"].to_pylist(), *shas,
                                                     categories):
        if not lo or not lo_b:
            unknown.append(pid)               # rows written before problem hashes were kept
        elif lo != hi or lo_b != hi_b or lo != lo_b or cat != cat_b:
            differ.append(pid)
    if differ:
        raise InputError(where, f"a sweep of another corpus than {a.out}: {len(differ)} of the "
                         f"{both.num_rows} problems both checked differ in setup, query or "
                         f"category (e.g. {sorted(differ)[0]})",
                         "compare two sweeps of the same corpus")
    if unknown:
        raise InputError(where, f"a sweep of another corpus than {a.out} (corpus fingerprints "
                         "differ, and rows written before problem hashes were kept cannot show "
                         f"that the {len(unknown)} problems both checked are the same)",
                         "compare two sweeps of the same corpus")


def _clock(m: dict) -> str:
    # Sweeps written before the clock was chosen counted wall time.
    return "CPU" if (m.get("limit_clock") or "wall") == "cpu" else "wall"


def differences(a: dict, b: dict) -> list[str]:
    """What differs between two sweeps' settings that changes verdicts of
    the same answers (``a``, ``b``: their sweep.json), one phrase each."""
    out = []
    if _clock(a) != _clock(b):
        out.append(f"A's limits counted {_clock(a)} time, B's {_clock(b)} time")
    fa, fb = a.get("host_factor"), b.get("host_factor")
    if (fa or 1.0) != (fb or 1.0):
        out.append(f"map limits x{max(1.0, fa or 1.0):.2f} in A, x{max(1.0, fb or 1.0):.2f} in B")
    if a.get("nice") != b.get("nice") and None not in (a.get("nice"), b.get("nice")):
        out.append(f"checks at niceness {a['nice']} in A, {b['nice']} in B")
    if a.get("mode") and b.get("mode") and a["mode"] != b["mode"]:
        out.append(f"mode {a['mode']} in A, {b['mode']} in B")
    sa, sb = ((m.get("config") or {}).get("limit_slack") or 0 for m in (a, b))
    if sa != sb:
        out.append(f"--limit-slack {sa:g} s in A, {sb:g} s in B")
    return out


def compare(a: SweepReport, b: SweepReport) -> Comparison:
    """Two sweeps of one corpus: who solved what, which verdicts changed, what each cost."""
    _same_corpus(a, b)
    keys = ["problem_id", "attempt"]
    both = a.table.select([*keys, "verdict"]).join(
        b.table.select([*keys, "verdict"]).rename_columns([*keys, "verdict_b"]), keys=keys,
        join_type="inner")
    changed = both.filter(pc.not_equal(both["verdict"], both["verdict_b"])).sort_by(
        [(k, "ascending") for k in keys])
    changes = list(zip(*(changed[c].to_pylist() for c in (*keys, "verdict", "verdict_b"))))
    solved_a, solved_b = _solved(a.table), _solved(b.table)
    return Comparison(a, b, _only(solved_a, solved_b), _only(solved_b, solved_a), changes,
                      a.checks - both.num_rows, b.checks - both.num_rows,
                      Counter((x, y) for _, _, x, y in changes),
                      differences(a.manifest, b.manifest))
