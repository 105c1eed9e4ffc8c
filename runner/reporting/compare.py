"""Two sweeps of one corpus side by side (``proofbatch report A B``): who
solved what, which verdicts changed, and the report of each
(``runner.reporting.report.SweepReport``) for what each cost."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError
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


def _solved(table: pa.Table) -> pa.Array:
    return pc.unique(table.filter(pc.equal(table["verdict"], Verdict.OK.value))["problem_id"])


def _only(these: pa.Array, those: pa.Array) -> list[str]:
    return these.filter(pc.invert(pc.is_in(these, value_set=those))).sort().to_pylist()


def compare(a: SweepReport, b: SweepReport) -> Comparison:
    """Two sweeps of one corpus: who solved what, which verdicts changed, what each cost."""
    fa, fb = a.manifest.get("corpus_fingerprint"), b.manifest.get("corpus_fingerprint")
    if fa != fb:
        raise InputError(b.out / "sweep.json", f"a sweep of another corpus than {a.out} "
                         "(corpus fingerprints differ)", "compare two sweeps of the same corpus")
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
                      Counter((x, y) for _, _, x, y in changes))
