"""The heavy tail of a sweep, as `report` shows it: its share of the cost,
the memory checks needed by time class, and the compute lost to reruns.

In s2n-bignum-bench's map, problems of 120 s or more are 9% of the problems
and 91% of the proof time: a sweep's cost is its heavy checks'. Their
memory decides how many fit a node (runner/maps/mem_needs.py estimates it
by the same time classes), and a heavy check cut short by a dying runner
costs its hours again (runner/results/lost.py).
"""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc

from ..maps.mem_needs import HEAVY_ESTIMATES
from ..results import lost
from .limits import plural

HEAVY_S = 120.0
COLUMNS = ("peak_rss_mb", "prove_cpu_secs", "prove_secs", "wall_secs", "problem_id", "verdict")
# The time classes of the heavy-tail issue: light, then mem_needs's heavy ones.
CLASSES = ((0.0, HEAVY_S),) + tuple((c.low_s, c.high_s) for c in HEAVY_ESTIMATES)


def proof_s(table: pa.Table) -> pa.ChunkedArray:
    """Each check's proof time: its CPU time where measured (the limit's
    clock by default), else its wall time inside prove."""
    cpu = table["prove_cpu_secs"] if "prove_cpu_secs" in table.column_names else None
    wall = pc.cast(table["prove_secs"], pa.float64())
    return wall if cpu is None else pc.coalesce(pc.cast(cpu, pa.float64()), wall)


def class_name(low: float, high: float) -> str:
    if low == 0:
        return f"under {high:,.0f} s"
    return f"{low:,.0f} s or more" if math.isinf(high) else f"{low:,.0f}-{high:,.0f} s"


def heavy_line(table: pa.Table, core_hours: float) -> str:
    """Count, core-hours and share of the sweep of the checks of 120 s or more."""
    secs = pc.fill_null(proof_s(table), 0.0)
    heavy = pc.greater_equal(secs, HEAVY_S)
    n = pc.sum(heavy).as_py() or 0
    if n == 0:
        return f"heavy checks ({HEAVY_S:.0f} s of proof time or more): none"
    spans = pc.fill_null(pc.cast(table["wall_secs"], pa.float64()), 0.0)
    hours = (pc.sum(pc.filter(spans, heavy)).as_py() or 0.0) / 3600
    proof_h = (pc.sum(pc.filter(secs, heavy)).as_py() or 0.0) / 3600
    all_proof_h = (pc.sum(secs).as_py() or 0.0) / 3600
    share = f"{100 * hours / core_hours:.0f}% of the sweep's {core_hours:,.2f} core-hours" \
        if core_hours > 0 else "of a sweep with no core-hours"
    return (f"heavy checks ({HEAVY_S:.0f} s of proof time or more): {n} of {table.num_rows}, "
            f"{hours:,.2f} core-hours from dispatch to verdict ({share}); "
            f"{proof_h:,.2f} of the {all_proof_h:,.2f} hours of proof time")


def memory_by_class(table: pa.Table) -> list[dict]:
    """Peak memory of the checks by their proof time's class."""
    if "peak_rss_mb" not in table.column_names:
        return []
    secs = pc.fill_null(proof_s(table), 0.0)
    peaks = pc.cast(table["peak_rss_mb"], pa.float64())
    out = []
    for low, high in CLASSES:
        inside = pc.and_(pc.greater_equal(secs, low), pc.less(secs, high))
        p = pc.drop_null(pc.filter(peaks, inside))
        if len(p) == 0:
            continue
        out.append({"class": class_name(low, high), "checks": len(p),
                    "median_mb": pc.approximate_median(p).as_py(), "max_mb": pc.max(p).as_py()})
    return out


def highest_peaks(table: pa.Table, n: int = 5) -> list[dict]:
    if "peak_rss_mb" not in table.column_names or table.num_rows == 0:
        return []
    t = table.append_column("proof_s", proof_s(table)).filter(pc.is_valid(table["peak_rss_mb"]))
    t = t.sort_by([("peak_rss_mb", "descending")]).slice(0, n)
    return t.select(["problem_id", "verdict", "peak_rss_mb", "proof_s"]).to_pylist()


def memory_lines(table: pa.Table) -> list[str]:
    classes = memory_by_class(table)
    if not classes:
        return ["peak memory: none recorded"]
    out = ["peak memory by proof time: " + "; ".join(
        f"{c['class']}: {plural(c['checks'], 'check')}, median {c['median_mb']:,.0f} MB, "
        f"highest {c['max_mb']:,.0f} MB" for c in classes)]
    tops = highest_peaks(table)
    out.append("highest peaks: " + "; ".join(
        f"{t['problem_id']} {t['peak_rss_mb']:,.0f} MB ({t['verdict']}"
        + ("" if t["proof_s"] is None else f", {t['proof_s']:,.0f} s") + ")" for t in tops))
    return out


def lost_lines(out) -> list[str]:
    """The compute lost to checks that ran again, by cause (OUT/lost/)."""
    costs = lost.by_cause(lost.read(out))
    if not costs:
        return ["lost to reruns: nothing (no check was cut short and run again)"]
    cpu = sum(c["cpu_core_hours"] for c in costs.values())
    lines = [f"lost to reruns: {cpu:,.3f} core-hours of CPU time in "
             f"{plural(sum(c['checks'] for c in costs.values()), 'check')} that ran again from their start"]
    lines += [f"  {c['cpu_core_hours']:,.3f} core-hours, {plural(c['checks'], 'check')}: {cause}"
              for cause, c in costs.items()]
    return lines
