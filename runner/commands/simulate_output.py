"""What `proofbatch simulate` prints: its tables and the lines that say
what stands behind a prediction (measured, estimated, unknown)."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from ..planning.planner import Workers
from ..planning.simulate import Prediction, simulate
from ..settings import format_size


def duration_counts(sources: dict) -> dict:
    """Check durations by what stands behind them: measured (a map's or a
    profile's), estimated (the median of the problem's category), unknown
    (the default)."""
    return {"measured": sum(v for k, v in sources.items() if k in ("map", "profile")),
            "estimated": sources.get("category", 0),
            "unknown": sum(v for k, v in sources.items() if k not in ("map", "profile", "category"))}


def learned_line(said: dict | None) -> str:
    """How many image costs --costs-from measured, and what it left out."""
    if not said:
        return "image costs from --costs-from: none of its sweeps matched"
    line = (f"image costs measured by --costs-from: {said['measured']} of {said['images']} images "
            f"(from {len(said['sweeps'])} sweeps of this mode and choice)")
    if said["other_mode"]:
        line += f"; not used, another mode: {', '.join(said['other_mode'])}"
    if said["other_choice"]:
        line += f"; not used, another --context-proofs: {', '.join(said['other_choice'])}"
    return line


def account_line(acc: dict | None) -> str:
    """What the context images' estimates stand on, with counts: measured,
    estimated, unknown."""
    if not acc:
        return "no account"
    parts = [f"{acc.get('measured_images', 0)} images measured by the profile"
             + (f", {acc['learned_images']} by --costs-from (the estimates below are of "
                "all images, these among them)" if acc.get("learned_images") else "")]
    for m, t in acc["by_mode"].items():
        bits = [f"{m}: {t['images']} images estimated from {t['phrases']:,} phrases",
                f"loads: {t['files_loaded']} files found and priced by what they load "
                f"({t['files_measured']} measured whole by benchmarks/images/load_cost.py, "
                f"{t['files_loaded'] - t['files_measured']} estimated by phrase size), "
                f"{t['unknown_loads']} unknown (a stand-in each), {t['dropped_loads']} dropped"]
        if t["trusted_proofs"]:
            bits.append(f"proofs: {t['trusted_proofs']:,} trusted (their statements priced by size)")
        else:
            bits.append(f"proofs: {t['priced_proofs']:,} measured (the map's prove_secs, "
                        f"{t['priced_proofs_s']:,.0f} s in this mode), "
                        f"{t['proofs_in_measured_files']:,} inside files measured whole, "
                        f"{t['unpriced_proofs']:,} estimated by size")
        if t["compile_s"]:
            bits.append(f"native compile {t['compile_s']:,.0f} s (estimated by size)")
        parts.append("; ".join(bits))
    return " | ".join(parts) + f"; boot {acc['boot_s']:.0f} s"


def print_modes(out: Console, modes: dict, choice: str) -> None:
    table = Table(title=f"by --mode (context proofs {choice}, planned policy)")
    table.add_column("")
    for m in modes["by_mode"]:
        table.add_column(m + (" (cheapest)" if m == modes["cheapest"] else ""), justify="right")
    rows = [("boot, each node", lambda f: _duration(f["base_build_s"])),
            ("context image core-hours", lambda f: f"{f['context_image_core_hours']:,.2f}"),
            ("proof core-hours", lambda f: f"{f['proof_core_hours']:,.2f}"),
            ("makespan", lambda f: _duration(f["makespan_s"])),
            ("core-hours", lambda f: f"{f['core_hours']:,.2f}")]
    for label, fmt in rows:
        table.add_row(label, *(fmt(f) for f in modes["by_mode"].values()))
    out.print(table)


def image_class_figures(plan) -> dict:
    """The plan's images by their role in the tree (runner.reporting.report.image_classes:
    boot, library prefix, file head, chain image), each class's build seconds
    summed over its images once each, as `report` compares them with a
    sweep's measured builds."""
    from ..reporting.report import IMAGE_CLASSES, image_classes

    classes = image_classes({k: {"parent": i.parent} for k, i in plan.images.items()})
    out: dict[str, dict] = {}
    for key, image in plan.images.items():
        c = out.setdefault(classes[key], {"images": 0, "build_s": 0.0, "sources": {}})
        c["images"] += 1
        c["build_s"] += image.build_s
        c["sources"][image.source] = c["sources"].get(image.source, 0) + 1
    return {k: out[k] for k in IMAGE_CLASSES if k in out}


def context_figures(plan) -> dict:
    """Simulated image and proof core-hours of ``plan`` (the planned policy)."""
    p = simulate(plan, keep_schedule=False)
    images = [i for k, i in plan.images.items() if k != plan.base]
    proof_h = (p.busy_s - p.build_s) / 3600
    context_h = (p.build_s - p.boots_s) / 3600
    return {"images": len(images),
            "image_sources": {s: sum(1 for i in images if i.source == s)
                              for s in sorted({i.source for i in images})},
            "image_build_s_once": sum(i.build_s for i in images),
            "context_image_core_hours": context_h, "boot_core_hours": p.boots_s / 3600,
            "proof_core_hours": proof_h,
            "image_share_of_proofs": context_h / proof_h if proof_h > 0 else None,
            "rebuild_core_hours": p.rebuild_s / 3600,
            "makespan_s": p.makespan_s, "lower_bound_s": p.lower_bound_s,
            "core_hours": p.core_hours}


def print_contexts(out: Console, figures: dict) -> None:
    table = Table(title="context images by --context-proofs (planned policy)")
    table.add_column("")
    for choice in figures:
        table.add_column(choice, justify="right")
    rows = [("images (sources)", lambda f: f"{f['images']} ("
             + ", ".join(f"{k} {v}" for k, v in f["image_sources"].items()) + ")"),
            ("each built once", lambda f: _duration(f["image_build_s_once"])),
            ("context image core-hours", lambda f: f"{f['context_image_core_hours']:,.2f}"),
            ("proof core-hours", lambda f: f"{f['proof_core_hours']:,.2f}"),
            ("images / proofs", lambda f: "-" if f["image_share_of_proofs"] is None
             else f"{100 * f['image_share_of_proofs']:.1f}%"),
            ("of which rebuilds", lambda f: f"{f['rebuild_core_hours']:,.2f}"),
            ("makespan", lambda f: _duration(f["makespan_s"])),
            ("lower bound", lambda f: _duration(f["lower_bound_s"])),
            ("core-hours", lambda f: f"{f['core_hours']:,.1f}")]
    for label, fmt in rows:
        table.add_row(label, *(fmt(f) for f in figures.values()))
    out.print(table)


def print_prediction(out: Console, workers: Workers, sources: dict, ours: Prediction,
                     naive: Prediction, price: float | None) -> None:
    table = Table(title=f"{ours.checks} checks on {workers.nodes} x {workers.cores_per_node} workers, "
                        f"{format_size(workers.mem_per_node)} per node")
    table.add_column("")
    for name in (ours.policy, "naive (submission order)"):
        table.add_column(name, justify="right")
    rows = [("makespan", lambda p: _duration(p.makespan_s)),
            ("lower bound", lambda p: _duration(p.lower_bound_s)),
            ("makespan / bound", lambda p: f"{p.ratio:.3f}"),
            ("utilization", lambda p: f"{100 * p.utilization:.1f}%"),
            ("core-hours", lambda p: f"{p.core_hours:,.1f}"),
            ("of which image builds", lambda p: f"{p.build_s / 3600:,.2f}"),
            ("of which rebuilds", lambda p: f"{p.rebuild_s / 3600:,.2f}")]
    if price is not None:
        rows.append(("cost", lambda p: f"{p.core_hours * price:,.2f}"))
    for label, fmt in rows:
        table.add_row(label, fmt(ours), fmt(naive))
    out.print(table)
    out.print("expected durations from " + ", ".join(f"{k}: {v}" for k, v in sorted(sources.items())))


def bound_line(plan) -> str:
    """What sets the lower bound: all work over the workers, the memory the
    checks hold over the nodes', or the longest check, which no number of
    workers shortens (the bench's heavy tail at 512 workers)."""
    bound, terms, longest_id = plan.bound_terms()
    if not terms:
        return "lower bound: no checks"
    which = max(terms, key=terms.get)
    said = {"work": f"all work over {plan.workers.count} workers",
            "memory": "the memory the checks hold over the nodes' memory",
            "longest": f"the longest check, {longest_id} ({_duration(terms['longest'])} with its images)"}
    return (f"lower bound {_duration(bound)}, set by {said[which]}; work over the workers "
            f"{_duration(terms['work'])}, memory {_duration(terms['memory'])}, longest check "
            f"{_duration(terms['longest'])}")


def memory_figures(plan) -> dict:
    """What each check's memory guard would be under `run`'s defaults on
    these nodes (runner/maps/mem_needs.py): a check whose need was measured
    or estimated for its time class above what an unknown check is expected
    to need gets that need times the margin, not only the default share,
    and a node runs fewer such checks at once."""
    from ..maps import mem_needs
    from ..planning.sweep_config import SweepConfig, mem_share

    unknown = SweepConfig.__dataclass_fields__["expected_mem"].default
    w = plan.workers
    share = mem_share(w.mem_per_node, w.cores_per_node)
    limits = [mem_needs.mem_limit(None, (int(c.mem_bytes * mem_needs.MARGIN), c.mem_bytes)
                                  if c.mem_bytes > unknown else None, cap=None, default=share,
                                  node=w.mem_per_node, default_expected=unknown)
              for c in plan.checks]
    above = [m for m in limits if m.guard > share]
    top = max((m.expected for m in above), default=0)
    return {"default_share_bytes": share, "checks": len(limits), "above_share": len(above),
            "margin": mem_needs.MARGIN, "max_guard_bytes": max((m.guard for m in limits), default=0),
            "largest_at_once": max(1, w.mem_per_node // max(1, top)) if above else None,
            "mem_per_node": w.mem_per_node}


def memory_line(plan) -> str:
    """memory_figures in one line."""
    f = memory_figures(plan)
    if not f["above_share"]:
        return f"memory: every check under the default share of {format_size(f['default_share_bytes'])}"
    return (f"memory: {f['above_share']} of {f['checks']} checks get more than the default share of "
            f"{format_size(f['default_share_bytes'])} (their measured or estimated need x {f['margin']:g}, "
            f"up to {format_size(f['max_guard_bytes'])}); a node of {format_size(f['mem_per_node'])} "
            f"runs at most {f['largest_at_once']} of the largest at once")


def _duration(secs: float) -> str:
    """Seconds as the tables show them. Maps refuse times beyond a week
    (runner.maps.timeouts.MAX_PROVE_S), but a recorded plan is read as it
    was written: an infinite or enormous sum prints, never raises."""
    if math.isnan(secs):
        return "unknown"
    if math.isinf(secs):
        return "infinite"
    if secs >= 1e9:             # 31 years: whole hours would be a wall of digits
        return f"{secs:.3g} s"
    if secs < 120:
        return f"{secs:.1f} s"
    h, rest = divmod(int(round(secs)), 3600)
    return f"{h}h{rest // 60:02d}m ({secs:,.0f} s)"
