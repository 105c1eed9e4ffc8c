"""A sweep report as one self-contained HTML page: tables, and matplotlib
plots embedded as base64 PNGs, so the file can be mailed or archived alone.

Each section is a small function of the report returning an HTML fragment;
``SECTIONS`` lists them in page order, so one more section is one more
function.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")      # no display on cluster nodes and in CI
import matplotlib.pyplot as plt  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from ..results.publish import publish  # noqa: E402
from ..errors import InputError  # noqa: E402
from . import error_causes, heavy, limits  # noqa: E402
from .compare import Comparison  # noqa: E402
from .report import PARTS, SweepReport  # noqa: E402
from ..verdicts import Verdict  # noqa: E402

COLORS = {"OK": "#2e7d32", "FAIL": "#f9a825", "CHEATING": "#8e24aa", "TIMEOUT": "#c62828",
          "MEMOUT": "#ef6c00", "ERROR": "#424242"}
PART_COLORS = ["#2e7d32", "#1565c0", "#7e57c2", "#90a4ae", "#c62828", "#ef6c00", "#e0e0e0"]
# Plots are drawn this many inches wide at DPI: 1200 px, the page's width,
# so a plot reads at a glance without zooming.
WIDTH_IN, DPI = 12.0, 100
plt.rcParams.update({"font.size": 12, "axes.titlesize": 13, "legend.fontsize": 12})
STYLE = """body{font-family:sans-serif;max-width:1240px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px}
td.n{text-align:right}th{background:#f3f3f3}h2{border-bottom:2px solid #ddd;padding-bottom:3px}
img{max-width:100%}.note{color:#666;font-size:90%}"""


def _esc(value) -> str:
    return html.escape(str(value))


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _table(header: list[str] | None, rows: list[list], numeric_from: int = 1,
           numeric_to: int = 99) -> str:
    """A table; ``header`` None for a table of name-value rows, which has none."""
    head = "".join(f"<th>{_esc(h)}</th>" for h in header or [])
    body = "".join("<tr>" + "".join(
        f'<td class="n">{_esc(c)}</td>' if numeric_from <= i < numeric_to else f"<td>{_esc(c)}</td>"
        for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table>{f'<tr>{head}</tr>' if head else ''}{body}</table>"


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.4f}" if seconds < 36 else f"{seconds / 3600:,.2f}"


# -- sections of one sweep -----------------------------------------------------------

def section_summary(r: SweepReport, price: float | None) -> str:
    counts = r.verdicts()
    rows = [["checks", r.checks], ["runs", len(r.runs)],
            ["workers", ", ".join(str(x.workers) for x in r.runs) or "-"],
            ["makespan (s)", f"{r.makespan_s:,.1f}"], ["core-hours", hours(r.core_hours * 3600)]]
    if price is not None:
        rows.append(["cost", f"{r.core_hours * price:,.2f}"])
    rows += [[v.value, counts[v.value]] for v in Verdict if counts[v.value]]
    return f"<h2>Summary</h2>{_table(None, rows)}"


def section_cost(r: SweepReport, price: float | None) -> str:
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 2.6), layout="constrained")
    left = 0.0
    for part, color in zip(PARTS, PART_COLORS):
        ax.barh([0], [r.seconds[part] / 3600], left=[left], color=color, label=part)
        left += r.seconds[part] / 3600
    ax.set_yticks([])
    ax.set_xlabel("core-hours")
    fig.legend(ncol=len(PARTS), loc="outside lower center", frameon=False)
    total = sum(r.seconds.values()) or 1.0
    rows = [[p, hours(r.seconds[p]), f"{100 * r.seconds[p] / total:.1f}%"]
            + ([f"{r.seconds[p] / 3600 * price:,.2f}"] if price is not None else []) for p in PARTS]
    header = ["where the core-hours went", "core-hours", "share"] + (["cost"] if price is not None else [])
    return (f"<h2>Cost</h2>{_png(fig)}{_table(header, rows)}<p class=note>Paid: every worker "
            "of every run, from the boot of its prover to its last verdict. <b>waiting</b>: a "
            "worker waiting to start a check, for an image another worker was building or for "
            "memory. <b>dispatch overhead</b>: the rest of a check outside <code>prove</code> "
            "(fork, reading and typing the answer, the jail, the verdict). <b>idle</b>: paid "
            "time in none of these, such as the other workers during the boot.</p>")


def section_images(r: SweepReport, price: float | None) -> str:
    c = r.image_counts()
    rows = [["builds (base boots included)", c["builds"]], ["distinct images", c["images"]],
            ["core-hours building them", hours(c["build_s"])],
            ["rebuilds (built again after an eviction)", c["rebuilds"]],
            ["core-hours of rebuilds", hours(c["rebuild_s"])]]
    if c["predicted_build_s"] is not None:
        rows.append(["core-hours the plan predicted for builds", hours(c["predicted_build_s"])])
    return (f"<h2>Images</h2>{_table(None, rows)}<p class=note>A session keeps a limited "
            "number of images (--max-images); an image evicted while checks still needed it is "
            "built again, and each rebuild is paid again.</p>")


def section_throughput(r: SweepReport, price: float | None) -> str:
    points = r.throughput()
    if not points:
        return "<h2>Throughput</h2><p>No checks recorded.</p>"
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 4.5), layout="constrained")
    shown = set()
    for what, start, end in r.timeline():
        color = "#ffcc80" if what == "boot" else "#b39ddb"
        ax.axvspan(start, end, color=color, alpha=0.5, lw=0,
                   label=None if what in shown else what)
        shown.add(what)
    ax.step([0.0] + [t for t, _ in points], [0] + [n for _, n in points], where="post",
            color="#1565c0", label="verdicts recorded")
    ax.set_xlabel("seconds since the sweep began (its prover's boot)")
    ax.set_ylabel("verdicts recorded")
    ax.set_xlim(0, max(points[-1][0], 1e-9))
    ax.legend(loc="upper left")
    end = points[-1][0] or 1e-9
    return (f"<h2>Throughput</h2>{_png(fig)}<p>{r.checks} verdicts in {end:,.1f} s, the boot "
            f"and image builds included: {r.checks / end:,.2f} per second on average. Shaded: "
            "the boot, and image builds (overlapping ones darker).</p>")


def section_utilization(r: SweepReport, price: float | None) -> str:
    util = r.utilization()
    if not util:
        return ""
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.45 * len(util) + 1.4), layout="constrained")
    names = list(util)
    ax.barh(range(len(names)), [100 * util[n] for n in names], color="#1565c0")
    ax.set_yticks(range(len(names)), [n.split("/")[-1] if len(names) < 40 else "" for n in names])
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of its run (boot included) spent in checks")
    return (f"<h2>Utilization per worker</h2>{_png(fig)}"
            + _table(["worker", "busy"], [[n, f"{100 * u:.1f}%"] for n, u in util.items()])
            + "<p class=note>On the same span as the cost split: a worker's run from its "
            "prover's boot to its last verdict. Busy is its checks' spans, the image builds "
            "and waits inside them included; the rest is its share of idle.</p>")


def section_verdicts(r: SweepReport, price: float | None) -> str:
    cats = r.by_category()
    verdicts = [v.value for v in Verdict]
    rows = [[c] + [counts[v] for v in verdicts] + [sum(counts.values())] for c, counts in cats.items()]
    totals = r.verdicts()
    rows.append(["all"] + [totals[v] for v in verdicts] + [r.checks])
    return f"<h2>Verdicts per category</h2>{_table(['category', *verdicts, 'total'], rows)}"


def section_slowest(r: SweepReport, price: float | None) -> str:
    rows = [[x["problem_id"], x["attempt"], x["verdict"],
             "" if x["prove_secs"] is None else f"{x['prove_secs']:.3f}", f"{x['wall_secs']:.3f}",
             f"{x['timeout_s']:g}", x["reason"][:80]] for x in r.slowest()]
    header = ["problem", "attempt", "verdict", "prove s", "wall s", "limit s", "reason"]
    return f"<h2>Slowest checks</h2>{_table(header, rows, numeric_from=3, numeric_to=6)}"


def section_prediction(r: SweepReport, price: float | None) -> str:
    p = r.prediction()
    if p is None:
        return ("<h2>Predicted against actual</h2><p class=note>No prediction: the sweep has no "
                "plan.json from this proofbatch, or its plan was made for another run.</p>")
    ratio = p["actual_makespan_s"] / p["predicted_makespan_s"] if p["predicted_makespan_s"] else 0
    rows = [["makespan (s)", f"{p['predicted_makespan_s']:,.2f}", f"{p['actual_makespan_s']:,.2f}"],
            ["core-hours", hours(p["predicted_core_hours"] * 3600), hours(p["actual_core_hours"] * 3600)]]
    if (c := r.predicted_costs()) is not None:
        # CPU beside wall: on a loaded host proofs wait for their cores.
        for label, key in (("proofs, core-hours (wall)", "measured_proof_core_hours"),
                           ("proofs, core-hours (CPU)", "measured_proof_cpu_core_hours")):
            rows.append([label, hours(c["predicted_proof_core_hours"] * 3600), hours(c[key] * 3600)])
    sources = ", ".join(f"{k}: {v}" for k, v in sorted(p["sources"].items()))
    out = (f"<h2>Predicted against actual</h2>{_table(['', 'predicted', 'actual'], rows)}"
           f"<p>actual / predicted makespan: {ratio:.2f}. Expected durations from {_esc(sources)}.</p>")
    checks = p["checks"]
    # A log scale shows positive times only.
    pairs = checks.filter(pc.and_(pc.greater(checks["expected_s"], 0),
                                  pc.greater(checks["prove_secs"], 0)))
    if pairs.num_rows:
        fig, ax = plt.subplots(figsize=(WIDTH_IN * 0.75, WIDTH_IN * 0.5), layout="constrained")
        for v in pc.unique(pairs["verdict"]).to_pylist():
            these = pairs.filter(pc.equal(pairs["verdict"], v))
            ax.scatter(these["expected_s"].to_numpy(), these["prove_secs"].to_numpy(),
                       s=12, color=COLORS.get(v, "#000"), label=v)
        lo = min(pc.min(pairs[c]).as_py() for c in ("expected_s", "prove_secs"))
        hi = max(pc.max(pairs[c]).as_py() for c in ("expected_s", "prove_secs"))
        ax.plot([lo, hi], [lo, hi], color="#999", linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("expected s")
        ax.set_ylabel("measured prove s")
        ax.legend()
        out += _png(fig)
    return out


def _items(said: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{_esc(line)}</li>" for line in said) + "</ul>"


def section_limits(r: SweepReport, price: float | None) -> str:
    return "<h2>Limits</h2>" + _items(limits.lines(limits.check(r.table, r.manifest)))


def section_heavy(r: SweepReport, price: float | None) -> str:
    said = [heavy.heavy_line(r.table, r.core_hours), *heavy.memory_lines(r.table),
            *heavy.lost_lines(r.out)]
    return "<h2>Heavy checks, memory and reruns</h2>" + _items(said)


def section_errors(r: SweepReport, price: float | None) -> str:
    said = error_causes.lines(error_causes.error_causes(r.table))
    return f"<h2>ERRORs by cause</h2>{_items(said)}" if said else ""


Section = Callable[[SweepReport, "float | None"], str]
SECTIONS: list[Section] = [section_summary, section_cost, section_images, section_throughput,
                           section_utilization, section_verdicts, section_slowest, section_limits,
                           section_heavy, section_prediction, section_errors]


def page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_esc(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{_esc(title)}</h1>{body}</body></html>\n")


def render(report: SweepReport, price: float | None = None) -> str:
    return page(f"proofbatch report: {report.out}", "".join(s(report, price) for s in SECTIONS))


# -- two sweeps -------------------------------------------------------------------

def render_comparison(c: Comparison, price: float | None = None) -> str:
    a, b = c.a, c.b
    cost = [["checks", a.checks, b.checks],
            ["makespan (s)", f"{a.makespan_s:,.1f}", f"{b.makespan_s:,.1f}"],
            ["core-hours", hours(a.core_hours * 3600), hours(b.core_hours * 3600)]]
    if price is not None:
        cost.append(["cost", f"{a.core_hours * price:,.2f}", f"{b.core_hours * price:,.2f}"])
    for v in Verdict:
        cost.append([v.value, a.verdicts()[v.value], b.verdicts()[v.value]])
    body = f"<h2>Side by side</h2>{_table(['', 'A: ' + str(a.out), 'B: ' + str(b.out)], cost)}"
    if c.differences:
        body += (f"<p><b>The sweeps ran differently</b> ({_esc('; '.join(c.differences))}): a "
                 "verdict change may come from that, not from the answers.</p>")
    body += (f"<h2>Solved by one only</h2><p>A only ({len(c.solved_only_a)}): "
             f"{_esc(', '.join(c.solved_only_a) or '-')}</p><p>B only ({len(c.solved_only_b)}): "
             f"{_esc(', '.join(c.solved_only_b) or '-')}</p>")
    trans = [[f"{x} -> {y}", n] for (x, y), n in c.transitions.most_common()]
    body += f"<h2>Verdict changes</h2>{_table(['A -> B', 'checks'], trans)}"
    body += _table(["problem", "attempt", "A", "B"], [list(ch) for ch in c.changes], numeric_from=9)
    return page(f"proofbatch comparison: {a.out} vs {b.out}", body)


def check_target(path: Path) -> None:
    """Refuse a path the page cannot be written to, naming it (not the
    temp file the page is first written to)."""
    path = Path(path)
    if path.is_dir():
        raise InputError(path, "is a folder, not an HTML file",
                         f"pass the path of the page to write, e.g. {path / 'report.html'}")
    existing = next(p for p in [path.parent, *path.parent.parents] if p.exists())
    if not existing.is_dir():
        raise InputError(existing, f"is not a folder, so {path.name} cannot be written in it",
                         "pass an --html path in a folder")


def write(path: Path, text: str) -> None:
    path = Path(path)
    check_target(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        publish(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    except OSError as exc:
        raise InputError(path, f"cannot be written ({exc.strerror or exc})",
                         "pass an --html path that proofbatch can create and write") from None
