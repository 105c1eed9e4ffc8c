"""proofbatch report: where a sweep's time and money went; or two sweeps side by side."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..reporting import error_causes, heavy, limits, passk, html as report_html
from ..errors import InputError
from ..reporting.progress import STYLE
from ..reporting.compare import Comparison, compare
from ..reporting.report import PARTS, SweepReport, load
from ..verdicts import Verdict
from . import price_flag

NAME = "report"
HELP = "report a sweep's cost, throughput and verdicts (two sweeps: compare them)"


def add_arguments(p) -> None:
    p.add_argument("out", type=Path, nargs="+", metavar="OUT",
                   help="a sweep directory; give two to compare sweeps of the same corpus")
    p.add_argument("--html", type=Path, help="also write a self-contained HTML page with plots")
    p.add_argument("--core-hour-price", type=price_flag, help="price of one core-hour, for the cost")
    p.add_argument("--k", help="also pass@k for these k, e.g. 1,4,8 (every problem needs at "
                   "least k attempts; docs/pass-at-k.md)")


def run(args) -> int:
    if len(args.out) > 2:
        raise InputError(" ".join(map(str, args.out)), "more than two sweeps given",
                         "pass one sweep to report on, or two to compare")
    price = args.core_hour_price
    if args.html is not None:
        report_html.check_target(args.html)     # before minutes of loading a big sweep
    out = Console()
    reports = [load(d) for d in args.out]
    # pass@k is computed before anything is printed: a k it refuses is bad input.
    ks = passk.parse_ks(args.k) if args.k is not None else None
    if ks and len(reports) == 2:
        pk = passk.compare(args.out[0], args.out[1], ks)
        pk_tables, pk_html = [passk.comparison_table(pk)], passk.comparison_html(pk)
    elif ks:
        pk = passk.report_sweep(args.out[0], ks)
        pk_tables, pk_html = passk.tables(pk), passk.html_fragment(pk)
    if len(reports) == 2:
        comparison = compare(*reports)
        print_comparison(out, comparison, price)
        page = report_html.render_comparison(comparison, price)
    else:
        for section in TERMINAL:
            section(out, reports[0], price)
        page = report_html.render(reports[0], price)
    if ks:
        for renderable in pk_tables:
            out.print(renderable)
        page = passk.add_to_page(page, pk_html)
    if args.html:
        report_html.write(args.html, page)
        out.print(f"wrote {args.html}")
    return 0


def _hours(seconds: float) -> str:
    return report_html.hours(seconds)


def term_summary(out: Console, r: SweepReport, price: float | None) -> None:
    counts = r.verdicts()
    verdicts = "  ".join(f"[{STYLE[v.value]}]{v.value}[/] {counts[v.value]}" for v in Verdict
                         if counts[v.value])
    cost = f", cost {r.core_hours * price:,.2f}" if price is not None else ""
    out.print(f"[bold]{r.out}[/]: {r.checks} checks in {len(r.runs)} run(s), makespan "
              f"{r.makespan_s:,.1f} s, {_hours(r.core_hours * 3600)} core-hours{cost}  {verdicts}")


def term_cost(out: Console, r: SweepReport, price: float | None) -> None:
    table = Table(title="where the core-hours went")
    for name in ("", "core-hours", "share") + (("cost",) if price is not None else ()):
        table.add_column(name, justify="left" if not name else "right")
    total = sum(r.seconds.values()) or 1.0
    for part in PARTS:
        s = r.seconds[part]
        table.add_row(part, _hours(s), f"{100 * s / total:.1f}%",
                      *([f"{s / 3600 * price:,.2f}"] if price is not None else []))
    out.print(table)


def term_images(out: Console, r: SweepReport, price: float | None) -> None:
    c = r.image_counts()
    predicted = ("" if c["predicted_build_s"] is None
                 else f" (the plan predicted {_hours(c['predicted_build_s'])})")
    out.print(f"images: {c['builds']} builds of {c['images']} distinct images, "
              f"{_hours(c['build_s'])} core-hours{predicted}; {c['rebuilds']} rebuilt after an "
              f"eviction, {_hours(c['rebuild_s'])} core-hours")
    if c["compiles"]:
        out.print(f"native compiling: {c['compiles']} compiles of contexts and answers, "
                  f"{_hours(c['compile_s'])} core-hours (counted with image builds)")


def term_throughput(out: Console, r: SweepReport, price: float | None) -> None:
    points = r.throughput()
    if points:
        end = points[-1][0] or 1e-9
        out.print(f"throughput: {r.checks} verdicts in {end:,.1f} s, {r.checks / end:,.2f}/s")
    util = r.utilization()
    if util:
        out.print("utilization per worker: " + ", ".join(
            f"{w.split('/')[-1]} {100 * u:.0f}%" for w, u in util.items()))


def term_categories(out: Console, r: SweepReport, price: float | None) -> None:
    table = Table(title="verdicts per category")
    table.add_column("category")
    verdicts = [v.value for v in Verdict]
    for v in verdicts:
        table.add_column(f"[{STYLE[v]}]{v}[/]", justify="right")
    for category, counts in r.by_category().items():
        table.add_row(category, *[str(counts[v] or "") for v in verdicts])
    out.print(table)


def term_slowest(out: Console, r: SweepReport, price: float | None) -> None:
    table = Table(title="slowest checks")
    for name in ("problem", "verdict", "prove s", "wall s", "limit s"):
        table.add_column(name, justify="left" if name in ("problem", "verdict") else "right")
    for x in r.slowest():
        table.add_row(x["problem_id"] + (f" #{x['attempt']}" if x["attempt"] else ""),
                      f"[{STYLE[x['verdict']]}]{x['verdict']}[/]",
                      "" if x["prove_secs"] is None else f"{x['prove_secs']:.3f}",
                      f"{x['wall_secs']:.3f}", f"{x['timeout_s']:g}")
    out.print(table)


def term_prediction(out: Console, r: SweepReport, price: float | None) -> None:
    p = r.prediction()
    if p is None and r.plan is None:
        out.print("predicted against actual: no readable plan.json for this sweep's last run")
        return
    if p is None:
        out.print(f"predicted against actual: none: the run plan.json is of "
                  f"({r.plan.get('run_id') or '?'}) has no recorded checks")
        return
    sources = ", ".join(f"{k} {v}" for k, v in sorted(p["sources"].items()))
    out.print(f"predicted makespan {p['predicted_makespan_s']:,.2f} s, actual "
              f"{p['actual_makespan_s']:,.2f} s (expected durations from {sources})")
    costs = r.predicted_costs()
    if costs is not None:
        out.print(costs_table(costs))


def _error(predicted: float, measured: float) -> str:
    return "-" if measured <= 0 else f"{100 * (predicted - measured) / measured:+.0f}%"


def costs_table(c: dict) -> Table:
    """The plan's predicted core-hours against the measured ones, and image
    builds per class of image (runner.reporting.report.image_classes)."""
    table = Table(title="predicted against measured (the plan's run)")
    for name in ("", "predicted", "measured", "error"):
        table.add_column(name, justify="left" if not name else "right")
    for label, pred, meas in (
            ("image builds, core-h", c["predicted_image_core_hours"], c["measured_image_core_hours"]),
            ("proofs, core-h (wall)", c["predicted_proof_core_hours"], c["measured_proof_core_hours"]),
            ("proofs, core-h (CPU)", c["predicted_proof_core_hours"],
             c["measured_proof_cpu_core_hours"])):
        table.add_row(label, f"{pred:,.3f}", f"{meas:,.3f}", _error(pred, meas))
    for name, k in c["by_class"].items():
        # Measured: the median of each image's builds, each image counted once.
        table.add_row(f"  {name}, s to build each once: {limits.plural(k['images'], 'image')} "
                      f"({limits.plural(k['builds'], 'build')} measured)",
                      f"{k['predicted_s']:,.1f}", f"{k['measured_s']:,.1f}",
                      _error(k["predicted_s"], k["measured_s"]))
    if c.get("predicted_rebuild_core_hours"):
        table.add_row("  of the images, rebuilds predicted, core-h",
                      f"{c['predicted_rebuild_core_hours']:,.3f}", "", "")
    return table


def term_limits(out: Console, r: SweepReport, price: float | None) -> None:
    for line in limits.lines(limits.check(r.table, r.manifest)):
        out.print(line, markup=False)


def term_heavy(out: Console, r: SweepReport, price: float | None) -> None:
    """The heavy checks' share, memory by time class, and compute lost to reruns."""
    for line in [heavy.heavy_line(r.table, r.core_hours), *heavy.memory_lines(r.table),
                 *heavy.lost_lines(r.out)]:
        out.print(line, markup=False)


def term_errors(out: Console, r: SweepReport, price: float | None) -> None:
    """Last: the ERRORs by cause, so a sweep that failed for one reason ends saying it."""
    for line in error_causes.lines(error_causes.error_causes(r.table)):
        out.print(line, markup=False)


# One function per part of the terminal summary, in order; add one to add a part.
TERMINAL = [term_summary, term_cost, term_images, term_throughput, term_categories, term_slowest,
            term_limits, term_heavy, term_prediction, term_errors]


def print_comparison(out: Console, c: Comparison, price: float | None) -> None:
    table = Table(title="two sweeps of one corpus")
    table.add_column("")
    table.add_column(f"A {c.a.out}", justify="right")
    table.add_column(f"B {c.b.out}", justify="right")
    table.add_row("checks", str(c.a.checks), str(c.b.checks))
    table.add_row("makespan s", f"{c.a.makespan_s:,.1f}", f"{c.b.makespan_s:,.1f}")
    table.add_row("core-hours", _hours(c.a.core_hours * 3600), _hours(c.b.core_hours * 3600))
    if price is not None:
        table.add_row("cost", f"{c.a.core_hours * price:,.2f}", f"{c.b.core_hours * price:,.2f}")
    for v in Verdict:
        table.add_row(f"[{STYLE[v.value]}]{v.value}[/]", str(c.a.verdicts()[v.value]),
                      str(c.b.verdicts()[v.value]))
    out.print(table)
    out.print(f"solved by A only ({len(c.solved_only_a)}): {', '.join(c.solved_only_a) or '-'}")
    out.print(f"solved by B only ({len(c.solved_only_b)}): {', '.join(c.solved_only_b) or '-'}")
    if c.differences:
        out.print(f"the sweeps ran differently ({'; '.join(c.differences)}): a verdict change may "
                  "come from that, not from the answers", markup=False)
    out.print(f"verdict changes: {len(c.changes)}" + "".join(
        f"\n  {p}{f' #{k}' if k else ''}: {x} -> {y}" for p, k, x, y in c.changes))
    if c.only_in_a or c.only_in_b:
        out.print(f"checks only A has: {c.only_in_a}; only B has: {c.only_in_b}")
