"""docs/native.md's tables of native_tree.py (every context of s2n-bignum's
trees compiled natively), docs/profiles-and-timeout-maps.md's table of
regenerate_bench_map.py (the bench's map regenerated on this host) and
docs/sandbox.md's of sandbox_overhead.py, each cell formatted from the
newest record of its run (table_registry.TABLES holds them)."""

from __future__ import annotations

import math
import statistics
from typing import Callable

from table_cells import Row, Table
from table_measured import HEADER, _cmd

# -- native_tree.py: docs/native.md ------------------------------------------

TREE_HEADER = ("tree", "files", "problems' contexts that compile", "compile wall", "weak values carried")

# The seeds' runs, each of both trees (native_tree.py's default --trees): the
# seed and how many files of each tree it draws among those the bench's map
# lists (--bench-map).
SEED_RUNS = ((11, 2), (13, 3), (21, 8), (22, 20))

# The library files' runs, one or two files a run (--only), after extract gave
# them their loader's prefix: (tree, --only).
ONLY_RUNS = (("arm", "decode,arm"), ("arm", "instruction"), ("arm", "neon_helper"),
             ("x86", "x86"), ("x86", "decode"))

# native-tree-whole is the first run on whole trees, before extract gave a
# library file's problems their loader's prefix (issue 32): 139 contexts cut
# from library files failed then. Today's extract cannot make that run again.
WHOLE_BEFORE_FIX = ("the first whole-tree run, before extract gave a library file's problems their "
                    "loader's prefix (issue 32): today's extract cannot make it again")


def _files(tree: str) -> Callable[[dict], str]:
    """How many files the run drew, named when they are few."""
    def cell(f: dict) -> str:
        files = f[tree]["files"]
        names = f" ({', '.join(f'`{name}`' for name in files)})" if len(files) <= 3 else ""
        return f"{len(files)}{names}"
    return cell


def _compiled(tree: str, bold_when_all: bool = False) -> Callable[[dict], str]:
    def cell(f: dict) -> str:
        t = f[tree]
        text = f"{t['compile']:,} of {t['problems']:,}"
        return f"**{text}**" if bold_when_all and t["compile"] == t["problems"] else text
    return cell


def _wall(tree: str, with_load: bool = True) -> Callable[[dict], str]:
    def cell(f: dict) -> str:
        t = f[tree]
        return f"{t['compile_s']:,.0f} s" + (f" ({t['load']})" if with_load else "")
    return cell


def _weak(tree: str) -> Callable[[dict], str]:
    """The weakly typed values carried to the next unit, how many units were
    settled so, and how many were cut before a later type."""
    def cell(f: dict) -> str:
        w = f[tree]["weak"]
        if not w["values"] and not w["cuts"]:
            return "none"
        n = w["units_settled"]
        parts = [", ".join(f"`{v}`" for v in w["values"]), f"{n} unit{'s' if n != 1 else ''} settled"]
        if w["cuts"]:
            parts.append(f"{w['cuts']} cut before a later type")
        return ", ".join(p for p in parts if p)
    return cell


def _seed_row(seed: int, files: int, tree: str) -> Row:
    return Row(f"{seed}-{tree}", "native_tree", (
        "{seed}", tree, _files(tree), _compiled(tree), _wall(tree), _weak(tree)),
        args=("--files", str(files), "--seed", str(seed), "--bench-map"))


def _only_row(tree: str, only: str) -> Row:
    return Row(f"{tree}-{only.replace(',', '-')}", "native_tree", (
        tree, f"`{only}`", _compiled(tree), _wall(tree, with_load=False),
        lambda f: f[tree]["load"].removeprefix("load ")), args=("--trees", tree, "--only", only))


def _whole_row(tree: str) -> Row:
    return Row(tree, "native_tree", (
        tree, lambda f: f"{len(f[tree]['files']):,}", _compiled(tree, bold_when_all=True), _wall(tree),
        _weak(tree)), args=("--files", "0", "--seed", "0"))


def _native_tree_tables() -> tuple[Table, ...]:
    return (
        Table("native-tree-seeds", "docs/native.md", ("seed", *TREE_HEADER),
              tuple(_seed_row(seed, files, tree) for seed, files in SEED_RUNS for tree in ("arm", "x86"))),
        Table("native-tree-whole", "docs/native.md", scripts=("native_tree",), history=WHOLE_BEFORE_FIX),
        Table("native-tree-only", "docs/native.md",
              ("tree", "`--only`", "problems' contexts that compile", "compile wall", "load"),
              tuple(_only_row(tree, only) for tree, only in ONLY_RUNS)),
        Table("native-tree-whole-again", "docs/native.md", TREE_HEADER,
              tuple(_whole_row(tree) for tree in ("arm", "x86"))),
    )


# -- regenerate_bench_map.py: docs/profiles-and-timeout-maps.md ----------------

REGENERATED = ("--seed", "1")
# The times the table reads problems by: compare's --factor-min-s (a problem
# counts in the host factor from 0.5 s in both maps, runner/maps/compare.py)
# and regenerate_bench_map.py's heavy draw (HEAVY_S, bench times of 30 s up).
MIN_S, HEAVY_DRAW_S = 0.5, 30.0
# regenerate_bench_map.py finds a bench limit tight at this chance of a
# correct run here exceeding it, the pooled spread model's target.
TIGHT_P = "1e-4"
# How many of the largest deviations after the factor the table names.
DEVIATIONS_SHOWN = 3


def _name(pid: str) -> str:
    """A bench id's theorem (``arm.FILE.THEOREM``)."""
    return pid.split(".", 2)[-1]


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _there_here(i: int, there: float, here: float, fmt: str) -> str:
    """A problem's times in the bench's map and ours, said in full the first time."""
    return (f"({there:{fmt}} s there, {here:{fmt}} s here)" if i == 0 else f"({there:{fmt}} s, {here:{fmt}} s)")


def _sample(f: dict) -> str:
    heavy = sorted(s for s in f["bench_prove_secs"].values() if s >= HEAVY_DRAW_S)
    span = f": {heavy[0]:.1f}-{heavy[-1]:.1f} s" if heavy else ""
    # regenerate_bench_map.py's STRATA, the bands the rest is drawn from in turns.
    return (f"seed {f['seed']}: {f['problems']} problems of {len(f['files'])} arm files ({len(heavy)} of "
            f"{HEAVY_DRAW_S:g} s or more in the bench's map{span}; the rest drawn in turns from under "
            "1 s, 1-10 s and 10-30 s)")


def _profile(f: dict) -> str:
    checks, ok = sum(r["checks"] for r in f["per_run"]), sum(r["ok"] for r in f["per_run"])
    first = ("" if f["first_check_s"] is None else
             f" (the first {f['first_check_s']:,.0f} s, before any check, compiling the contexts natively "
             "into the cache)")
    return (f"{f['runs']} runs on Slurm, {f['nodes']} array tasks each, {checks} checks: **{ok} OK, "
            f"{f['defects']} defects**; {f['profile_wall_s']:,.0f} s wall in all{first}, {f['load']}")


def _run_time(f: dict) -> str:
    walls = [r["wall_s"] / 60 for r in f["per_run"]]
    proofs = [r["prove_s"] for r in f["per_run"]]
    return (f"{min(walls):.1f}-{max(walls):.1f} min of wall per run (first check to last verdict) for "
            f"{min(proofs):,.0f}-{max(proofs):,.0f} s of proofs: the rest is each task loading the images "
            f"of the {len(f['files'])} files' contexts, which a sample scattered over many files pays per "
            "run; a whole-tree profile spreads each file's image over its problems")


def _spreads(f: dict, min_s: float) -> dict[str, tuple[float, list[float]]]:
    """max/min of each problem's runs whose median is ``min_s`` or more."""
    return {pid: (max(t) / min(t), t) for pid, t in f["times_s"].items()
            if t and min(t) > 0 and statistics.median(t) >= min_s}


def _spread_what(f: dict) -> str:
    return f"run-to-run spread (max/min, the {len(_spreads(f, MIN_S))} problems of {MIN_S:g} s or more)"


def _spread(f: dict) -> str:
    timed = _spreads(f, MIN_S)
    pid, (worst, t) = max(timed.items(), key=lambda kv: kv[1][0])
    text = (f"median {statistics.median(s for s, _ in timed.values()):.3f}, largest {worst:.3f} "
            f"(`{_name(pid)}`, {min(t):.1f}-{max(t):.1f} s)")
    heavy = [s for s, _ in _spreads(f, HEAVY_DRAW_S).values()]
    if heavy:
        text += f"; the {len(heavy)} problems of {HEAVY_DRAW_S:g} s or more: {min(heavy):.3f}-{max(heavy):.3f}"
    return text


def _factor(f: dict) -> str:
    h = f["host_factor"]
    recorded = [c["factor"] for c in f["derived"]["compared_with"] if c.get("factor") is not None]
    said = (f"; the derived map's provenance records it (as {recorded[0]:.3f}, the bench's over ours) with "
            "the clock of each map" if recorded else "")
    return (f"**median {h['median']:.2f}**, quartiles {h['p25']:.2f}-{h['p75']:.2f}, over {h['used']} problems "
            f"of {h['min_s']:g} s or more{said}")


def _class_changes(f: dict) -> str:
    """The problems whose class differs (one way, or each named with its
    way), and whether the host factor alone carried each over the heavy line."""
    rows = [f["compared"][pid] for pid in f["class_changes"]]
    if not rows:
        return "none"
    ways = {f"{r['a_class']} -> {r['b_class']}" for r in rows}
    one_way = ways.pop() if len(ways) == 1 else None
    items = [f"`{_name(r['problem_id'])}` " + ("" if one_way else f"{r['a_class']} -> {r['b_class']} ")
             + _there_here(i, r["a_prove_secs"], r["b_prove_secs"], ".1f") for i, r in enumerate(rows)]
    lead = f"{len(rows)}" + (f", {'both ' if len(rows) == 2 else 'all ' if len(rows) > 2 else ''}{one_way}"
                             if one_way else "")
    # Carried by the factor: heavy by its time here, light by it moved to the bench's host.
    factor = f["host_factor"]["median"]
    carried = all(r["a_class"] == "light" and r["b_class"] == "heavy"
                  and r["b_prove_secs"] / factor < f["heavy_s"] <= r["b_prove_secs"] for r in rows)
    return (f"{lead}: {_and(items)}"
            + (f": the factor carries {'them' if len(rows) > 1 else 'it'} over the {f['heavy_s']:g} s line"
               if carried else ""))


def _deviations(f: dict) -> str:
    """The problems in the factor furthest from it (compare's deviations),
    then the span of every other."""
    rows = sorted((r for r in f["compared"].values() if r["in_factor"]),
                  key=lambda r: -abs(math.log(r["ratio_after_factor"])))
    shown, rest = rows[:DEVIATIONS_SHOWN], rows[DEVIATIONS_SHOWN:]
    items = [f"`{_name(r['problem_id'])}` x{r['ratio_after_factor']:.2f} "
             + _there_here(i, r["a_prove_secs"], r["b_prove_secs"], ".2f") for i, r in enumerate(shown)]
    text = ", ".join(items)
    if rest:
        ratios = [r["ratio_after_factor"] for r in rest]
        text += (f"; every other problem of {f['host_factor']['min_s']:g} s or more within "
                 f"x{min(ratios):.2f}-{max(ratios):.2f}")
    return text


def _tight(f: dict) -> str:
    factor = f["host_factor"]["median"]
    if not f["tight"]:
        # The bench's map steps its margins at 120 s (five times the time from
        # there): a draw held under it has none of that heavy tail.
        tail = ": the heavy tail was not in it" if f["max_heavy_s"] <= 120 else ""
        return (f"**none of these {f['problems']}** (a sample whose proofs take at most "
                f"{f['max_heavy_s']:g} s{tail}): no problem's chance of a correct run "
                f"here exceeding its bench limit times {factor:.2f} reaches {TIGHT_P} (the pooled spread "
                "model `timeout-map` derives limits with)")
    named = ", ".join(f"`{_name(pid)}` ({p:.2g})" for pid, p in f["tight"].items())
    return (f"**{len(f['tight'])} of these {f['problems']}**: the chance of a correct run here exceeding its "
            f"bench limit times {factor:.2f} reaches {TIGHT_P} (the pooled spread model `timeout-map` "
            f"derives limits with) for {named}")


def _below(f: dict) -> str:
    def names(ids: list[str]) -> str:
        return ", ".join(f"`{_name(pid)}`" for pid in ids) or "none"
    return f"{names(f['bench_limit_below_ours'])}; our limits below the bench's time: " \
        f"{names(f['ours_limit_below_bench'])}"


def _regenerated(f: dict) -> str:
    """Our map's limits: the heavy problems' margin (and the heaviest), the
    rest at the floor or their margin (its sidecar's rule per problem)."""
    d = f["derived"]
    floor = d["policy"]["floor_s"]
    heavy = {pid: p for pid, p in d["problems"].items() if p["class"] == "heavy"}
    light = [p for p in d["problems"].values() if p["class"] != "heavy"]
    at_floor = sum(p["rule"] == "floor" for p in light)
    rest = f"the {floor:g} s floor" + ("" if at_floor == len(light) else
                                        f" ({at_floor} of {len(light)}) or "
                                        f"{d['policy']['light_margin']:g}x their time or more")
    if not heavy:
        return f"no problem heavy: the {len(light)} get {rest}"
    margins = sorted({round(p["margin"], 2) for p in heavy.values()})
    margin = f"{margins[0]:g}x" if len(margins) == 1 else f"{margins[0]:g}-{margins[-1]:g}x"
    pid, top = max(heavy.items(), key=lambda kv: kv[1]["median_s"])
    bench = f["compared"].get(pid)
    there = f", the bench {bench['a_timeout_sec']:,.0f} s for {bench['a_prove_secs']:,.0f} s" if bench else ""
    return (f"heavy problems get {margin} their time (`{_name(pid)}` {top['timeout_sec']:,.0f} s for "
            f"{top['median_s']:,.0f} s measured{there}), the rest {rest}")


def _regenerated_table() -> Table:
    def row(key: str, what, figure) -> Row:
        return Row(key, "regenerate_bench_map", (what, figure), args=REGENERATED)

    return Table("timeout-map-regenerated", "docs/profiles-and-timeout-maps.md", ("what", "figure"), (
        row("sample", "sample", _sample),
        row("profile", "profile", _profile),
        row("run-time", "where a run's time went", _run_time),
        row("spread", _spread_what, _spread),
        row("factor", "host factor, ours (CPU) / the bench's `prove_secs` (wall)", _factor),
        row("class-changes", "class changes (bench -> ours)", _class_changes),
        row("deviations", "largest deviations after the factor", _deviations),
        row("tight", "the bench's limits our spread finds tight", _tight),
        row("below", "bench limits below our measured time, moved to the bench's host", _below),
        row("map", "the regenerated map", _regenerated)))


# -- sandbox_overhead.py: docs/sandbox.md --------------------------------------

def _sandbox_table() -> Table:
    return Table("sandbox-measured", "docs/sandbox.md", HEADER, (Row("sandbox", "sandbox_overhead", (
        "sandbox cost per check, {checks_per_session} trivial checks each with `--sandbox bwrap` and "
        "`none`, alternating (round trip − prove_secs)", _cmd("checks/sandbox_overhead"),
        "median {bwrap_overhead_median_ms:.1f} ms sandboxed vs {none_overhead_median_ms:.1f} ms "
        "unsandboxed: {ratio:.2f}× (p90 {bwrap_overhead_p90_ms:.1f} vs {none_overhead_p90_ms:.1f} ms)",
        "≤ 1.10×")),))


def native_tables() -> tuple[Table, ...]:
    return (*_native_tree_tables(), _regenerated_table(), _sandbox_table())
