"""pass@k over many attempts per problem, for `proofbatch report`.

pass@k is the chance that at least one of k attempts drawn without
replacement from a problem's n attempts is OK, averaged over problems. With
c OK attempts out of n, the unbiased estimator (Chen et al. 2021, "Evaluating
Large Language Models Trained on Code") is ``1 - C(n-c, k) / C(n, k)``;
math.comb gives both binomials exactly, and Python divides two ints with
correct rounding, so no product form is needed for stability.

CHEATING is never a success. It has its own figure, cheat@k: the same
estimator over the CHEATING attempts, the chance that k attempts include one.

With ``--stop-on-first-ok`` the attempts after the first OK are never
checked (OUT/skipped.csv). c then counts only the OK attempts that ran, so
every pass@k with k < n is a lower bound (the report says so); pass@n, solved
or not, is exact.

Cost is core-hours: each check holds one core for its ``wall_secs``;
building the loaded contexts (OUT/images/*.json) is counted apart.
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from rich.table import Table

from ..checks import attempts
from ..results import shards
from ..errors import InputError
from ..verdicts import Verdict


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k) / C(n, k): the chance that k of n attempts, c of them
    successes, include a success. Raises ValueError when n < k."""
    if not 0 <= c <= n:
        raise ValueError(f"successes c={c} must be between 0 and n={n}")
    if k < 1:
        raise ValueError(f"k={k} must be at least 1")
    if n < k:
        raise ValueError(f"n={n} attempts are fewer than k={k}: pass@{k} is undefined")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def parse_ks(text: str) -> tuple[int, ...]:
    """``--k 1,4,8`` as (1, 4, 8); raises InputError on anything else."""
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        ks = []
    if not ks or ks[0] < 1:
        raise InputError("--k", f"{text!r} is not a list of whole numbers of at least 1",
                         "pass e.g. --k 1,4,8")
    return tuple(ks)


@dataclass(frozen=True)
class ProblemTally:
    """One problem's attempts in a sweep."""

    problem_id: str
    category: str
    n: int              # attempts: checked, deduplicated or skipped
    ok: int
    cheating: int
    checks: int         # attempts really checked (not deduplicated, not skipped)
    skipped: int        # never checked: early stop
    wall_secs: float    # of its checks


# A ProblemTally per row: what ``tally`` returns and ``compute`` reads.
TALLY = pa.schema([("problem_id", pa.string()), ("category", pa.string()), ("n", pa.int64()),
                   ("ok", pa.int64()), ("cheating", pa.int64()), ("checks", pa.int64()),
                   ("skipped", pa.int64()), ("wall_secs", pa.float64())])
# What a tally reads of each result row.
COLUMNS = ("problem_id", "attempt", "category", "verdict", "wall_secs", "dedup_of")


def _is(values, verdict: Verdict):
    return pc.cast(pc.equal(values, verdict.value), pa.int64())


def tally(table: pa.Table, skipped: Iterable[tuple[str, int]] = ()) -> pa.Table:
    """Tally result rows (the runner.results.rows contract) per problem, in Arrow:
    one row per problem in TALLY, sorted by problem_id; a problem's category
    is that of its first row. ``skipped`` are the (problem_id, attempt) keys
    early stop skipped."""
    verdict = table["verdict"]
    per_row = pa.table({"problem_id": table["problem_id"], "category": table["category"],
                        "ok": _is(verdict, Verdict.OK), "cheating": _is(verdict, Verdict.CHEATING),
                        "checks": pc.cast(pc.is_null(table["dedup_of"]), pa.int64()),
                        "wall_secs": pc.fill_null(table["wall_secs"], 0.0)})
    sums = per_row.group_by("problem_id", use_threads=False).aggregate(
        [("category", "first"), ([], "count_all")]
        + [(c, "sum") for c in ("ok", "cheating", "checks", "wall_secs")])
    skips = pa.table({"problem_id": pa.array([pid for pid, _ in skipped], pa.string())}).group_by(
        "problem_id").aggregate([([], "count_all")]).rename_columns(["problem_id", "skipped"])
    sums = sums.join(skips, "problem_id", join_type="left outer")
    skipped_n = pc.fill_null(sums["skipped"], 0)
    return pa.table([sums["problem_id"], sums["category_first"],
                     pc.add(sums["count_all"], skipped_n), sums["ok_sum"], sums["cheating_sum"],
                     sums["checks_sum"], skipped_n, sums["wall_secs_sum"]],
                    schema=TALLY).sort_by("problem_id")


def tallies_table(problems: Sequence[ProblemTally] | pa.Table) -> pa.Table:
    """``problems`` as a TALLY table (a table is returned as it is)."""
    if isinstance(problems, pa.Table):
        return problems
    return pa.Table.from_pylist([dataclasses.asdict(p) for p in problems], schema=TALLY)


def image_build_secs(out: Path) -> float:
    """Seconds spent building loaded contexts, from OUT/images/*.json."""
    total = 0.0
    for path in sorted((Path(out) / "images").glob("*.json")):
        try:
            total += sum(b["secs"] for b in json.loads(path.read_text())["builds"])
        except (OSError, ValueError, KeyError, TypeError):
            raise InputError(path, "unreadable image build record",
                             "restore it, or delete it to leave image builds out of the cost") from None
    return total


def tally_sweep(out: Path) -> pa.Table:
    """The tallies of the sweep directory ``out`` (read-only)."""
    out = Path(out)
    if not (out / "sweep.json").is_file():
        raise InputError(out, "not a sweep directory (no sweep.json)",
                         "pass the --out directory of a `proofbatch run`")
    rows = shards.scan(out, repair=False, columns=COLUMNS).done.table
    tallies = tally(rows, attempts.read_skipped(out))
    if not tallies.num_rows:
        raise InputError(out, "the sweep has no results yet", "run it first, or wait for a verdict")
    return tallies


@dataclass(frozen=True)
class PassAtK:
    ks: tuple[int, ...]
    tallies: pa.Table                   # TALLY: one row per problem
    overall: dict[int, float]
    by_category: dict[str, dict[int, float]]
    cheat: dict[int, float]             # cheat@k: k attempts include a CHEATING one
    distribution: dict[int, int]        # OK attempts per problem -> problems
    image_secs: float

    @cached_property
    def problems(self) -> tuple[ProblemTally, ...]:
        """One ProblemTally per problem, made when asked for (a pass over them)."""
        return tuple(ProblemTally(**row) for row in self.tallies.to_pylist())

    def _sum(self, column: str):
        return pc.sum(self.tallies[column]).as_py() or 0

    @property
    def attempts(self) -> int:
        return self._sum("n")

    @property
    def checks(self) -> int:
        return self._sum("checks")

    @property
    def skipped(self) -> int:
        return self._sum("skipped")

    @property
    def deduplicated(self) -> int:
        return self.attempts - self.checks - self.skipped

    @property
    def solved(self) -> int:
        return self.tallies.filter(pc.greater(self.tallies["ok"], 0)).num_rows

    @property
    def cheating_attempts(self) -> int:
        return self._sum("cheating")

    @property
    def check_core_hours(self) -> float:
        return self._sum("wall_secs") / 3600

    @property
    def image_core_hours(self) -> float:
        return self.image_secs / 3600

    @property
    def core_hours_per_solved(self) -> float | None:
        if not self.solved:
            return None
        return (self.check_core_hours + self.image_core_hours) / self.solved

    @property
    def lower_bound(self) -> bool:
        """Early stop skipped attempts: pass@k for k < n is a lower bound."""
        return self.skipped > 0


def _means(tallies: pa.Table, ks: tuple[int, ...], successes: str,
           by: tuple[str, ...] = ()) -> dict[tuple, dict[int, float]]:
    """The mean over problems of pass@k, c being the ``successes`` column
    (ok, or cheating for cheat@k), per group of the ``by`` columns (the key
    () without any). A sweep can hold a million problems but few distinct
    (n, c): pass_at_k runs once per distinct pair, weighted by its problems."""
    counts = tallies.group_by([*by, "n", successes]).aggregate([([], "count_all")])
    sums: dict[tuple, dict[int, float]] = defaultdict(lambda: dict.fromkeys(ks, 0.0))
    sizes: Counter = Counter()
    for row in counts.to_pylist():
        key = tuple(row[c] for c in by)
        sizes[key] += row["count_all"]
        for k in ks:
            sums[key][k] += row["count_all"] * pass_at_k(row["n"], row[successes], k)
    return {key: {k: total / sizes[key] for k, total in per_k.items()}
            for key, per_k in sums.items()}


def compute(problems: Sequence[ProblemTally] | pa.Table, ks: Sequence[int], *,
            image_secs: float = 0.0, where: str = "--k") -> PassAtK:
    """pass@k for each k in ``ks``, over ProblemTally or a TALLY table;
    refuses (InputError) a k above some problem's number of attempts, since
    pass@k is then undefined."""
    tallies = tallies_table(problems)
    if not tallies.num_rows:
        raise InputError(where, "no problems to compute pass@k over", "run a sweep first")
    ks = tuple(sorted(set(ks)))
    fewest = tallies.take(pc.select_k_unstable(
        tallies, k=1, sort_keys=[("n", "ascending"), ("problem_id", "ascending")])).to_pylist()[0]
    if fewest["n"] < ks[-1]:
        raise InputError(where, f"problem {fewest['problem_id']} has {fewest['n']} attempts, fewer "
                         f"than k={ks[-1]}, so pass@{ks[-1]} is undefined",
                         f"use k of at most {fewest['n']}, or give every problem at least "
                         f"{ks[-1]} attempts")
    distribution = tallies.group_by("ok").aggregate([([], "count_all")])
    return PassAtK(
        ks=ks, tallies=tallies,
        overall=_means(tallies, ks, "ok")[()],
        by_category={c: v for (c,), v in sorted(_means(tallies, ks, "ok", ("category",)).items())},
        cheat=_means(tallies, ks, "cheating")[()],
        distribution=dict(sorted(zip(distribution["ok"].to_pylist(),
                                     distribution["count_all"].to_pylist()))),
        image_secs=image_secs)


def report_sweep(out: Path, ks: Sequence[int]) -> PassAtK:
    """pass@k of the sweep directory ``out``."""
    return compute(tally_sweep(out), ks, image_secs=image_build_secs(out), where=str(out))


@dataclass(frozen=True)
class Comparison:
    """Two runs' pass@k over the problems both have."""

    a: PassAtK
    b: PassAtK
    only_a: int
    only_b: int


def compare(out_a: Path, out_b: Path, ks: Sequence[int]) -> Comparison:
    ta, tb = tally_sweep(out_a), tally_sweep(out_b)
    common_a = ta.filter(pc.is_in(ta["problem_id"], value_set=tb["problem_id"]))
    common_b = tb.filter(pc.is_in(tb["problem_id"], value_set=ta["problem_id"]))
    if not common_a.num_rows:
        raise InputError(out_b, f"has no problem in common with {out_a}",
                         "compare two runs over the same corpus")
    return Comparison(
        a=compute(common_a, ks, where=str(out_a)), b=compute(common_b, ks, where=str(out_b)),
        only_a=ta.num_rows - common_a.num_rows, only_b=tb.num_rows - common_b.num_rows)


# -- rendering ---------------------------------------------------------------------

def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def _rows(r: PassAtK) -> list[tuple[str, list[str]]]:
    counts = pc.value_counts(r.tallies["category"])
    sizes = dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))
    rows = [(f"all ({r.tallies.num_rows} problems)", [_pct(r.overall[k]) for k in r.ks])]
    rows += [(f"{c} ({sizes[c]})", [_pct(v[k]) for k in r.ks]) for c, v in r.by_category.items()]
    rows.append((f"cheat@k ({r.cheating_attempts} CHEATING attempts, never a success)",
                 [_pct(r.cheat[k]) for k in r.ks]))
    return rows


def _cost_lines(r: PassAtK) -> list[str]:
    per = r.core_hours_per_solved
    lines = [f"{r.attempts} attempts: {r.checks} checked, {r.deduplicated} deduplicated "
             f"(same answer text), {r.skipped} skipped by early stop",
             f"solved {r.solved} of {r.tallies.num_rows} problems; cost {r.check_core_hours:.4f} "
             f"core-hours of checks + {r.image_core_hours:.4f} of image builds = "
             + (f"{per:.4f} core-hours per solved problem" if per is not None else
                "nothing solved")]
    if r.lower_bound:
        lines.append(f"early stop skipped {r.skipped} attempts: pass@k for k below a problem's "
                     "attempt count is a lower bound")
    return lines


def tables(r: PassAtK, title: str = "pass@k") -> list:
    """The report as rich renderables: pass@k table, distribution, cost."""
    main = Table(title=title)
    main.add_column("problems")
    for k in r.ks:
        main.add_column(f"pass@{k}" + ("*" if r.lower_bound else ""), justify="right")
    for label, cells in _rows(r):
        main.add_row(label, *cells)
    dist = Table(title="OK attempts per problem")
    dist.add_column("OK attempts", justify="right")
    dist.add_column("problems", justify="right")
    for c, count in r.distribution.items():
        dist.add_row(str(c), str(count))
    return [main, dist, *_cost_lines(r)]


def comparison_table(cmp: Comparison, name_a: str = "A", name_b: str = "B") -> Table:
    table = Table(title=f"pass@k: {name_a} vs {name_b} over {cmp.a.tallies.num_rows} common problems"
                  + (f" ({cmp.only_a} only in A, {cmp.only_b} only in B)"
                     if cmp.only_a or cmp.only_b else ""))
    for col in ("k", name_a, name_b, "B - A"):
        table.add_column(col, justify="right")
    for k in cmp.a.ks:
        a, b = cmp.a.overall[k], cmp.b.overall[k]
        table.add_row(f"pass@{k}", _pct(a), _pct(b), f"{100 * (b - a):+.2f} pts")
    for k in cmp.a.ks:
        table.add_row(f"cheat@{k}", _pct(cmp.a.cheat[k]), _pct(cmp.b.cheat[k]),
                      f"{100 * (cmp.b.cheat[k] - cmp.a.cheat[k]):+.2f} pts")
    return table


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_fragment(r: PassAtK) -> str:
    """The report as an HTML fragment (a section), for report.html."""
    parts = ['<section class="passk"><h2>pass@k</h2>',
             _html_table(["problems"] + [f"pass@{k}" for k in r.ks],
                         [[label, *cells] for label, cells in _rows(r)]),
             "<h3>OK attempts per problem</h3>",
             _html_table(["OK attempts", "problems"], [[str(c), str(n)] for c, n in r.distribution.items()])]
    parts += [f"<p>{html.escape(line)}</p>" for line in _cost_lines(r)]
    return "\n".join(parts + ["</section>"])


def add_to_page(page: str, fragment: str) -> str:
    """``fragment`` at the end of an HTML page's body (runner/reporting/html.page)."""
    head, sep, tail = page.rpartition("</body>")
    return head + fragment + sep + tail if sep else page + fragment


def comparison_html(cmp: Comparison, name_a: str = "A", name_b: str = "B") -> str:
    rows = [[f"pass@{k}", _pct(cmp.a.overall[k]), _pct(cmp.b.overall[k]),
             f"{100 * (cmp.b.overall[k] - cmp.a.overall[k]):+.2f} pts"] for k in cmp.a.ks]
    return ('<section class="passk-compare"><h2>pass@k compared</h2>'
            + _html_table(["k", name_a, name_b, "B - A"], rows) + "</section>")
