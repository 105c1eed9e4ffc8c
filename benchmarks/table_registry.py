"""Which records give each marked table of the docs, and how its cells are
formatted: the registry benchmarks/tables.py renders and checks from.

A ``Row`` names a script (its records under benchmarks/results/<script>/)
and a format per column; a ``Table`` with ``scripts=`` only has no formats
yet: it is kept as written until its script has a record. Add a table here
and its marker in the page at once (benchmarks/README.md says how).
"""

from __future__ import annotations

import statistics
from typing import Callable

from table_cells import Figure, Row, Table, fig  # noqa: F401  (Figure, Row, Table: tables.py's)
from table_limits import limits_tables
from table_measured import measured_tables
from table_planning import planning_tables
from table_s2n import s2n_tables
from table_native import native_tables
from table_readme import readme_figures, readme_tables, vs_bench_cells


def _item(i: int, key: str, fmt: str = "") -> Callable[[dict], str]:
    return fig(f"problems/{i}/{key}", fmt)


# heavy_tail.py's seed-1 draw: 12 light, 2 medium, 1 long (issue 44's size).
HEAVY_DRAWN = 15


def _heavy_problems() -> tuple[Row, ...]:
    return tuple(Row(f"p{i}", "heavy_tail", (
        _item(i, "class"), lambda f, i=i: f"`{f['problems'][i]['problem_id']}`", _item(i, "map_s", ",.0f"),
        _item(i, "verdict"), _item(i, "prove_cpu_s", ",.0f"), _item(i, "cpu_ratio", ".2f"),
        _item(i, "wall_ratio", ".2f"), _item(i, "peak_rss_mb", ",.0f"), _item(i, "image_build_s", ",.0f"),
        _item(i, "headroom", ".1f"))) for i in range(HEAVY_DRAWN))


def _heavy_classes() -> tuple[Row, ...]:
    return tuple(Row(name, "heavy_tail", (
        name, "{by_class[%s][ok]} of {by_class[%s][drawn]}" % (name, name),
        fig(f"by_class/{name}/cpu_ratio_median", ".2f"), fig(f"by_class/{name}/peak_rss_mb_max", ",.0f")))
        for name in ("light", "medium", "long"))


def _priced(workers: str) -> Row:
    return Row(f"w{workers}", "heavy_pricing", (
        workers, fig(f"priced/{workers}/makespan_s", ",.0f"), fig(f"priced/{workers}/lower_bound_s", ",.0f"),
        lambda f: f"`{f['priced'][workers]['longest_check']}`", fig(f"priced/{workers}/core_hours", ".1f"),
        fig(f"priced/{workers}/image_build_core_hours", ".2f"), fig(f"priced/{workers}/utilization", ".1%")))


def _calibrated_at(workers: str) -> Row:
    """calibrate_workers.py's factor at one --workers, judged on heavy_tail's checks."""
    return Row(f"w{workers}", "calibrate_workers", (
        f"`--workers {workers}`",
        lambda f: "{factor} ({low}-{high})".format(**f["calibrations"][workers]),
        fig(f"calibrations/{workers}/problems"), fig(f"calibrations/{workers}/load"),
        fig(f"calibrations/{workers}/worst_off", ".3f"),
        lambda f: f"{f['window'][0]:.3f}-{f['window'][1]:.3f}"))


def _planned_against_measured(f: dict) -> str:
    cpu = [c["planned_over_cpu"] for c in f["checks"]]
    wall = [c["planned_over_wall"] for c in f["checks"]]
    return (f"{len(cpu)} checks: planned / CPU median {statistics.median(cpu):.2f} "
            f"({min(cpu):.2f}-{max(cpu):.2f}), planned / wall median {statistics.median(wall):.2f}")


def _priced_from(source: str) -> Row:
    """heavy_pricing.py's heavy_tail checks priced from the bench's map x the
    host factor (``map``) or from this host's profile (``profile``), one run
    of the script with --profile giving both."""
    key = "planned_over_cpu" if source == "map" else "host_planned_over_cpu"

    def ratios(f: dict) -> list[float]:
        return [c[key] for c in f["checks"]]

    def what(f: dict) -> str:
        if source == "map":
            return f"the bench's map × {f['host_factor']} (`calibrate`)"
        runs = f["host_profile"]["runs"]
        return f"this host's `profile` of the same problems ({runs} run{'s' if runs != 1 else ''}), × 1"

    return Row(source, "heavy_pricing", (
        what, lambda f: str(len(f["checks"])),
        lambda f: f"{statistics.median(ratios(f)):.3f} ({min(ratios(f)):.3f}-{max(ratios(f)):.3f})",
        lambda f: f"{max(abs(r - 1) for r in ratios(f)):.3f}",
        lambda f: f"{sum(abs(r - 1) <= 0.15 for r in ratios(f))} of {len(ratios(f))}"),
        args=("--profile",))


def _vs_bench_heavy() -> Row:
    """vs_bench_harness.py --only on heavy proofs: each flow's proof CPU as
    docs/native.md gives it beside the bench's program."""
    def problems(f: dict) -> str:
        seen = {p["problem"]: p["map_s"] for p in f["per_problem"] if p["round"] == 1}
        return ", ".join(f"`{pid.split('.', 2)[2]}` ({secs:,.0f} s)" for pid, secs in seen.items())

    return Row("heavy", "vs_bench_harness", (
        problems, vs_bench_cells()[2],
        lambda f: f"{f['proof_cpu_ratio_median']:.3f} over {f['ratio_checks']}",
        fig("proof_cpu_ratio_default_median", ".3f"), fig("bench_tuned_gain_median", ".3f"),
        fig("proof_cpu_ratio_vs_tuned_bench_median", ".3f"), fig("host_factor", ".2f")),
        args=("--only",))


# runtime_tuning.py's grid (its GRID) and how many of it go to the finals;
# its bytecode grid's settings (the --grid of its run with --seed 2).
RUNTIME_SCREENED, RUNTIME_FINALISTS, RUNTIME_BYTECODE = 9, 2, 2


def _runtime_row(stage: str, i: int, args: tuple[str, ...] = ("--seed", "1")) -> Row:
    """One setting of runtime_tuning.py: the ``i``-th of the screen (light
    proofs) or of the finals (light and heavy), against the defaults, of
    the run whose command holds ``args`` (the native grid: --seed 1)."""
    def one(f: dict) -> tuple[str, dict]:
        name = list(f["screen"])[i] if stage == "screen" else f["finalists"][i]
        return name, (f["screen"] if stage == "screen" else f["settings"])[name]

    def gc(c: dict, key: str) -> str:
        g = c[key]
        return (f"{g['minor_collections']:,.0f} / {g['major_collections']:,.0f} / "
                f"{g['promoted_words'] / 1e6:.1f}M" if g else "—")

    def cpu(f: dict) -> str:
        name, c = one(f)
        ratio = "—" if c["cpu_ratio"] is None else f"{c['cpu_ratio']:.3f}"
        if stage == "final" and f["heavy"][name]["cpu_ratio"] is not None:
            ratio += f" (heavy {f['heavy'][name]['cpu_ratio']:.3f})"
        return ratio

    def image(f: dict) -> str:
        im = one(f)[1]["image"]
        return "—" if im["major_heap_mb"] is None else \
            f"{im['major_heap_mb']:.0f} / {im['peak_heap_mb']:.0f} / {im['minor_heap_mb']:.0f}"

    return Row(f"{stage}-{i}", "runtime_tuning", (
        lambda f: f"`{one(f)[0]}`", "screen: light" if stage == "screen" else "finals: light + heavy",
        cpu, lambda f: "—" if one(f)[1]["worst"][0] is None else
        f"`{one(f)[1]['worst'][0]}` {one(f)[1]['worst'][1]:.3f}",
        lambda f: f"{round(one(f)[1]['peak_mb_delta'] or 0):+d} (at most "
                  f"{round(one(f)[1]['peak_mb_delta_max'] or 0):+d})",
        image, lambda f: f"{gc(one(f)[1], 'gc')} ({gc(one(f)[1], 'gc_default')})",
        lambda f: str(len(one(f)[1]["verdicts_changed"]))), args=args)


def _heavy_tables() -> tuple[Table, ...]:
    gib = 2 ** 30
    return (
        Table("heavy-map-bands", "docs/heavy-tail.md", ("map time", "problems", "core-hours", "share"),
              tuple(Row(f"b{i}", "heavy_pricing", (
                  fig(f"map_bands/{i}/band"), fig(f"map_bands/{i}/problems", ","),
                  fig(f"map_bands/{i}/core_hours", ".1f"), fig(f"map_bands/{i}/share", ".0%")))
                  for i in range(5))),
        Table("heavy-tail-problems", "docs/heavy-tail.md",
              ("class", "problem", "map s", "verdict", "CPU s", "CPU / map", "wall / map", "peak MB",
               "image s", "headroom"), _heavy_problems()),
        Table("heavy-tail-classes", "docs/heavy-tail.md",
              ("class", "OK", "CPU / map, median", "highest peak MB"), _heavy_classes()),
        Table("heavy-preemption", "docs/heavy-tail.md",
              ("problem", "map s", "requeued at CPU s", "lost CPU s", "rerun", "rerun CPU s",
               "lost / rerun CPU", "cut to end s"),
              (Row("requeue", "heavy_preemption", (
                  lambda f: f"`{f['problem_id']}`", "{map_s:,.0f}", "{cpu_at_cut_s:,}", "{lost_cpu_s:,.0f}",
                  "{verdict}", "{final_cpu_s:,.0f}", "{extra_cpu_share:.2f}", "{cut_to_end_s:,}"),
                  args=()),)),        # requeue is heavy_preemption's default: no --how in its command
        Table("heavy-pricing", "docs/heavy-tail.md",
              ("workers", "makespan s", "lower bound s", "set by", "core-hours", "of which images",
               "utilization"), (_priced("64"), _priced("512"))),
        Table("heavy-pricing-node", "docs/heavy-tail.md",
              ("node", "default share", "checks above it", "largest guard", "largest at once",
               "planned against measured"),
              (Row("node", "heavy_pricing", (
                  "32 cores, 128 GB",
                  lambda f: f"{f['node_32_128g']['memory']['default_share_bytes'] / gib:.1f} GiB",
                  lambda f: f"{f['node_32_128g']['memory']['above_share']} of {f['node_32_128g']['memory']['checks']}",
                  lambda f: f"{f['node_32_128g']['memory']['max_guard_bytes'] / gib:.1f} GiB",
                  fig("node_32_128g/memory/largest_at_once"), _planned_against_measured)),)),
        Table("heavy-pricing-profile", "docs/heavy-tail.md",
              ("priced from", "checks", "planned / CPU, median (range)", "worst off", "within 15%"),
              (_priced_from("map"), _priced_from("profile"))),
        Table("heavy-calibrate-workers", "docs/heavy-tail.md",
              ("calibrate", "factor (quartiles)", "ground truths", "load", "worst heavy check off its CPU",
               "factors within 15% of every one"), (_calibrated_at("1"), _calibrated_at("2"))),
    )


# docs/s2n.md's tables of vs_bench_harness.py describe runs of its seed-1
# draw made before records began; a record of another draw is not theirs.
SEED_1 = ("--seed", "1")

# Where a docs table names several scripts, its rows came from each of them.
TABLES: dict[str, Table] = {t.name: t for t in (
    *readme_tables(),
    *limits_tables(),
    *s2n_tables(),
    *native_tables(),
    Table("native-runtime", "docs/native.md",
          ("setting", "stage", "proof CPU / default, median", "worst problem",
           "peak MB / check vs default", "image MB (major heap, peak, minor)",
           "minor / major collections / promoted words per proof, median (default's)",
           "verdicts changed"),
          tuple(_runtime_row("screen", i) for i in range(RUNTIME_SCREENED))
          + tuple(_runtime_row("final", i) for i in range(RUNTIME_FINALISTS))),
    Table("native-runtime-bytecode", "docs/native.md",
          ("setting", "stage", "proof CPU / default, median", "worst problem",
           "peak MB / check vs default", "image MB (major heap, peak, minor)",
           "minor / major collections / promoted words per proof, median (default's)",
           "verdicts changed"),
          tuple(_runtime_row("screen", i, ("--mode", "bytecode")) for i in range(RUNTIME_BYTECODE))),
    Table("native-vs-bench-heavy", "docs/native.md",
          ("problems (map time)", "verdicts", "proof CPU / bench `PROFILE`, tuned",
           "under `--runtime default`", "bench's program tuned / its own", "proofbatch tuned / bench tuned",
           "bench `PROFILE` / map"), (_vs_bench_heavy(),)),
    Table("s2n-heap-fix", "docs/s2n.md", scripts=("vs_bench_harness",),
          history="its before columns ran code before b61a2d8 (the image's Gc.full_major), its "
                  "after columns hand `proofbatch run --workers 1` lines"),
    Table("s2n-rounds-before", "docs/s2n.md", scripts=("vs_bench_harness",),
          history="vs_bench_harness.py --rounds 4 at d9d118f on the earlier machine; s2n-rounds "
                  "is the same command at today's code"),
    *_heavy_tables(),
    *measured_tables(),
    *planning_tables(),
)}

# Figures in prose (``<!-- figure: NAME -->TEXT<!-- /figure -->``): one
# figure each, no record cell (the sentence around it says what ran).
FIGURES: dict[str, Figure] = {f.name: f for f in (
    *readme_figures(),
)}
