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

import html
import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import pyarrow as pa
from rich.table import Table

from . import attempts, shards
from .errors import InputError
from .verdicts import Verdict


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


def tally(table: pa.Table, skipped: Iterable[tuple[str, int]] = ()) -> list[ProblemTally]:
    """Tally result rows (the runner.results contract) per problem; ``skipped``
    are the (problem_id, attempt) keys early stop skipped."""
    rows = table.select(["problem_id", "attempt", "category", "verdict", "wall_secs",
                         "dedup_of"]).to_pylist()
    by_problem: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_problem[r["problem_id"]].append(r)
    skips = Counter(pid for pid, _ in skipped if pid in by_problem)
    out = []
    for pid in sorted(by_problem):
        rs = by_problem[pid]
        verdicts = Counter(r["verdict"] for r in rs)
        out.append(ProblemTally(
            problem_id=pid, category=rs[0]["category"], n=len(rs) + skips[pid],
            ok=verdicts[Verdict.OK.value], cheating=verdicts[Verdict.CHEATING.value],
            checks=sum(r["dedup_of"] is None for r in rs), skipped=skips[pid],
            wall_secs=sum(r["wall_secs"] or 0.0 for r in rs)))
    return out


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


def tally_sweep(out: Path) -> list[ProblemTally]:
    """The tallies of the sweep directory ``out`` (read-only)."""
    out = Path(out)
    if not (out / "sweep.json").is_file():
        raise InputError(out, "not a sweep directory (no sweep.json)",
                         "pass the --out directory of a `proofbatch run`")
    tallies = tally(shards.read_results(out), attempts.read_skipped(out))
    if not tallies:
        raise InputError(out, "the sweep has no results yet", "run it first, or wait for a verdict")
    return tallies


@dataclass(frozen=True)
class PassAtK:
    ks: tuple[int, ...]
    problems: tuple[ProblemTally, ...]
    overall: dict[int, float]
    by_category: dict[str, dict[int, float]]
    cheat: dict[int, float]             # cheat@k: k attempts include a CHEATING one
    distribution: dict[int, int]        # OK attempts per problem -> problems
    image_secs: float

    @property
    def attempts(self) -> int:
        return sum(p.n for p in self.problems)

    @property
    def checks(self) -> int:
        return sum(p.checks for p in self.problems)

    @property
    def skipped(self) -> int:
        return sum(p.skipped for p in self.problems)

    @property
    def deduplicated(self) -> int:
        return self.attempts - self.checks - self.skipped

    @property
    def solved(self) -> int:
        return sum(p.ok > 0 for p in self.problems)

    @property
    def cheating_attempts(self) -> int:
        return sum(p.cheating for p in self.problems)

    @property
    def check_core_hours(self) -> float:
        return sum(p.wall_secs for p in self.problems) / 3600

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


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def compute(problems: Sequence[ProblemTally], ks: Sequence[int], *, image_secs: float = 0.0,
            where: str = "--k") -> PassAtK:
    """pass@k for each k in ``ks``; refuses (InputError) a k above some
    problem's number of attempts, since pass@k is then undefined."""
    if not problems:
        raise InputError(where, "no problems to compute pass@k over", "run a sweep first")
    ks = tuple(sorted(set(ks)))
    fewest = min(problems, key=lambda p: (p.n, p.problem_id))
    if fewest.n < ks[-1]:
        raise InputError(where, f"problem {fewest.problem_id} has {fewest.n} attempts, fewer than "
                         f"k={ks[-1]}, so pass@{ks[-1]} is undefined",
                         f"use k of at most {fewest.n}, or give every problem at least {ks[-1]} attempts")
    categories: dict[str, list[ProblemTally]] = defaultdict(list)
    for p in problems:
        categories[p.category].append(p)

    def figure(group: Sequence[ProblemTally], k: int, cheat: bool = False) -> float:
        return _mean([pass_at_k(p.n, p.cheating if cheat else p.ok, k) for p in group])

    return PassAtK(
        ks=ks, problems=tuple(problems),
        overall={k: figure(problems, k) for k in ks},
        by_category={c: {k: figure(g, k) for k in ks} for c, g in sorted(categories.items())},
        cheat={k: figure(problems, k, cheat=True) for k in ks},
        distribution=dict(sorted(Counter(p.ok for p in problems).items())),
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
    common = {p.problem_id for p in ta} & {p.problem_id for p in tb}
    if not common:
        raise InputError(out_b, f"has no problem in common with {out_a}",
                         "compare two runs over the same corpus")
    return Comparison(
        a=compute([p for p in ta if p.problem_id in common], ks, where=str(out_a)),
        b=compute([p for p in tb if p.problem_id in common], ks, where=str(out_b)),
        only_a=len(ta) - len(common), only_b=len(tb) - len(common))


# -- rendering ---------------------------------------------------------------------

def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def _rows(r: PassAtK) -> list[tuple[str, list[str]]]:
    sizes = Counter(p.category for p in r.problems)
    rows = [(f"all ({len(r.problems)} problems)", [_pct(r.overall[k]) for k in r.ks])]
    rows += [(f"{c} ({sizes[c]})", [_pct(v[k]) for k in r.ks]) for c, v in r.by_category.items()]
    rows.append((f"cheat@k ({r.cheating_attempts} CHEATING attempts, never a success)",
                 [_pct(r.cheat[k]) for k in r.ks]))
    return rows


def _cost_lines(r: PassAtK) -> list[str]:
    per = r.core_hours_per_solved
    lines = [f"{r.attempts} attempts: {r.checks} checked, {r.deduplicated} deduplicated "
             f"(same answer text), {r.skipped} skipped by early stop",
             f"solved {r.solved} of {len(r.problems)} problems; cost {r.check_core_hours:.4f} "
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
    table = Table(title=f"pass@k: {name_a} vs {name_b} over {len(cmp.a.problems)} common problems"
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
    """``fragment`` at the end of an HTML page's body (runner/report_html.page)."""
    head, sep, tail = page.rpartition("</body>")
    return head + fragment + sep + tail if sep else page + fragment


def comparison_html(cmp: Comparison, name_a: str = "A", name_b: str = "B") -> str:
    rows = [[f"pass@{k}", _pct(cmp.a.overall[k]), _pct(cmp.b.overall[k]),
             f"{100 * (cmp.b.overall[k] - cmp.a.overall[k]):+.2f} pts"] for k in cmp.a.ks]
    return ('<section class="passk-compare"><h2>pass@k compared</h2>'
            + _html_table(["k", name_a, name_b, "B - A"], rows) + "</section>")
