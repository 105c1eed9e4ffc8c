"""The planning benchmarks' tables: planning.py and simulate_contexts.py in
docs/planning.md's Measured table, whole_trees.py's budgets for whole
s2n-bignum trees (the README's table at 64 workers, docs/planning.md's at
every size) and the README's row of predictions.py, each cell formatted
from the newest record of its script (of each run, for a pooled row)."""

from __future__ import annotations

from table_cells import Row, Table

HEADER = ("what", "command", "figure", "target")
TREES, MODES, CHOICES, SHAPES = ("arm", "x86"), ("native", "bytecode"), ("trust", "replay"), (8, 64, 512)


def _planning_ratios(f: dict) -> str:
    by: dict[int, list[dict]] = {}
    for m in f["makespan"]:
        by.setdefault(m["workers"], []).append(m)
    parts = []
    for count, runs in sorted(by.items()):
        naive = [m["naive_ratio"] for m in runs]
        shape = f"({runs[0]['nodes']}×{count // runs[0]['nodes']})"
        parts.append(f"{count}{' workers' if not parts else ''} {shape}: "
                     f"{max(m['planned_ratio'] for m in runs):.3f} (naive {min(naive):.2f}–{max(naive):.2f})")
    big = by[max(by)]
    ours = [m["planned_image_build_core_hours"] for m in big]
    naive = [m["naive_image_build_core_hours"] for m in big]
    return (f"{'; '.join(parts)}, image builds {min(ours):.1f}–{max(ours):.1f} vs "
            f"{min(naive):.1f}–{max(naive):.1f} core-h; {f['scale']:,} problems: "
            f"{f['scale_ratio_64']:.3f} on 64 workers, {f['scale_ratio']:.3f} on 512")


def _planning_what(f: dict) -> str:
    seeds = len({m["seed"] for m in f["makespan"]})
    return (f"planned makespan / lower bound, bench-shaped workloads (2,622 problems, 25 per context, "
            f"{seeds} seeds each)")


def _contexts_what(f: dict) -> str:
    proofs = f["rows"][0]["baseline_proof_core_hours"]
    alone = max(r["baseline_image_core_hours"] for r in f["rows"])
    return (f"`simulate --corpus`: the bench's map (declared native) with {f['problems']} problems cut from "
            f"{f['files']} arm proof files at the bench's pins; context-image core-hours as a share of proof "
            f"core-hours ({proofs:.3f} core-h), replay / trust; baseline `simulate --timeout-map` alone "
            f"predicts {alone:.3f}")


def _contexts(f: dict) -> str:
    parts = []
    for r in f["rows"]:
        replay, trust = r["replay"], r["trust"]
        parts.append(f"{r['workers']}{' workers' if not parts else ''}: {100 * replay['share']:.0f}% / "
                     f"{100 * trust['share']:.0f}% (rebuilds {replay['rebuild_core_hours']:.3f} / "
                     f"{trust['rebuild_core_hours']:.3f} core-h)")
    spans = {c: sorted({round(r[c]["makespan_s"]) for r in f["rows"]}) for c in ("replay", "trust")}
    span = {c: f"{v[0]:,}" if len(v) == 1 else f"{v[0]:,}–{v[-1]:,}" for c, v in spans.items()}
    same = " at each size" if all(len(v) == 1 for v in spans.values()) else ""
    return f"{'; '.join(parts)}; makespan {span['replay']} s replay, {span['trust']} s trust{same}"


def _simulation(tree: str, mode: str, choice: str, workers: int):
    """The figures of one of whole_trees.py's simulations."""
    def of(f: dict) -> dict:
        return next(s for s in f["simulations"] if (s["tree"], s["mode"], s["choice"], s["workers"])
                    == (tree, mode, choice, workers))
    return of


def _makespans(s: dict) -> str:
    return (f"{s['makespan_s']:,.0f}{' (s.o.)' if s['submission_order'] else ''} / "
            f"{s['naive_makespan_s']:,.0f}")


def _whole_row(tree: str, mode: str, choice: str, workers: int, readme: bool) -> Row:
    of = _simulation(tree, mode, choice, workers)

    def cell(fmt):
        return lambda f: fmt(of(f))

    common = (tree, mode, choice) + (() if readme else (str(workers),))
    cells = (*common, cell(_makespans), cell(lambda s: f"{s['image_core_hours']:,.2f}"),
             cell(lambda s: f"{s['proof_core_hours']:,.2f}"))
    if not readme:
        d = lambda s: s["check_durations"]  # noqa: E731
        cells += (cell(lambda s: f"{s['rebuild_core_hours']:,.2f} / {s['naive_rebuild_core_hours']:,.2f}"),
                  cell(lambda s: f"{d(s)['measured']}/{d(s)['estimated']}/{d(s)['unknown']}"),
                  cell(lambda s: f"{s['images_measured']}/{s['images_estimated']}, {s['unknown_loads']}"))
    return Row(f"{tree}-{mode}-{choice}" + ("" if readme else f"-{workers}"), "whole_trees", cells)


# predictions.py's runs: the kept-out seeds on a warm native cache, then seed
# 5 on a cold one (run first, so that the newest --seed 5 record is warm).
PREDICTIONS = (("--seed", "5"), ("--seed", "9"), ("--cold-cache",))
IMAGE_CLASSES = ("boot", "library prefix", "file head", "chain image")   # runner/reporting/report.py's
IMAGE_GOAL = 0.25                                                          # predictions.py's targets
MAKESPAN_GOAL = 0.15


def _error(predicted: float, measured: float) -> float | None:
    return (predicted - measured) / measured if measured > 0 else None


def _class_errors(r: dict) -> dict[str, tuple[float, float, float | None] | None]:
    out = {}
    for cls in IMAGE_CLASSES:
        p, m = r["predicted"]["classes"].get(cls), r["measured"]["classes"].get(cls)
        ps, ms = (p or {}).get("build_s", 0.0), (m or {}).get("build_s", 0.0)
        out[cls] = None if p is None and m is None else (ps, ms, _error(ps, ms))
    return out


def predictions_headline(fs: list[dict]) -> str:
    """The README's row: predictions.py's three runs (PREDICTIONS), pooled."""
    results = [r for f, args in zip(fs, PREDICTIONS) for r in f["results"]
               if "--cold-cache" not in args or r["mode"] == "native"]
    for f, args in zip(fs, PREDICTIONS):
        if "--cold-cache" not in args and any(r["cache_modules_added"] for r in f["results"]):
            raise ValueError(f"seed {f['seed']}'s newest record ran on a cold cache: rerun it warm")
    spans, totals, within = [], [], 0
    for r in results:
        spans.append(_error(r["predicted"]["makespan_s"], r["measured"]["makespan_s"]))
        errors = [e for e in _class_errors(r).values() if e is not None]
        totals.append(_error(sum(p for p, _, _ in errors), sum(m for _, m, _ in errors)))
        within += all(e is not None and abs(e) <= IMAGE_GOAL for _, _, e in errors)
    classes = ("every image class within 25%" if within == len(results)
               else f"every image class within 25% in {within} of {len(results)} sweeps")
    def span(values: list[float]) -> str:
        lo, hi = f"{100 * min(values):+.0f}%", f"{100 * max(values):+.0f}%"
        return lo if lo == hi else f"{lo} to {hi}"

    return (f"makespan {span(spans)}, image builds {span(totals)}, {classes}, in both modes and on "
            "a cold native cache (`benchmarks/planning/predictions.py`)")


def _of_mode(f: dict, mode: str, warm: bool) -> dict:
    """One mode's result of a predictions.py record; a warm row refuses a run
    that compiled library modules into the cache (a cold one)."""
    result = next(r for r in f["results"] if r["mode"] == mode)
    if warm and mode == "native" and result["cache_modules_added"]:
        raise ValueError(f"seed {f['seed']}'s newest record ran on a cold cache: rerun it warm")
    return result


def _pair(p: float, m: float, e: float | None) -> str:
    return f"{p:.1f} / {m:.1f}, " + ("–" if e is None else f"{100 * e:+.0f}%")


def _within(r: dict) -> bool:
    classes = [e for e in _class_errors(r).values() if e is not None]
    makespan = _error(r["predicted"]["makespan_s"], r["measured"]["makespan_s"])
    return all(e is not None and abs(e) <= IMAGE_GOAL for _, _, e in classes) and \
        makespan is not None and abs(makespan) <= MAKESPAN_GOAL


def _prediction_row(key: str, label: str, mode: str, args: tuple[str, ...]) -> Row:
    """docs/planning.md's row of one predictions.py run in one mode: each
    image class's core-seconds and the makespan, predicted / measured."""
    warm = "--cold-cache" not in args

    def class_cell(cls: str):
        def cell(f: dict) -> str:
            e = _class_errors(_of_mode(f, mode, warm))[cls]
            return "(none)" if e is None else _pair(*e)
        return cell

    def makespan(f: dict) -> str:
        r = _of_mode(f, mode, warm)
        p, m = r["predicted"]["makespan_s"], r["measured"]["makespan_s"]
        return _pair(p, m, _error(p, m))

    return Row(key, "predictions", (
        label, mode, *(class_cell(c) for c in IMAGE_CLASSES), makespan,
        lambda f: "within" if _within(_of_mode(f, mode, warm)) else "outside"), args=args)


def planning_tables() -> tuple[Table, ...]:
    return (
        Table("planning-measured", "docs/planning.md", HEADER, (
            Row("ratios", "planning", (_planning_what, "`.venv/bin/python benchmarks/planning/planning.py`",
                                       _planning_ratios, "≤ 1.03")),
            Row("speed", "planning", (
                "planning / simulating {scale:,} problems on 512 workers", "same",
                "{plan_cpu_secs:.2f} s / {simulate_cpu_secs:.2f} s CPU ({plan_wall_secs:.2f} s / "
                "{simulate_wall_secs:.2f} s wall)", "< 2 s / < 10 s")),
            Row("simulate_contexts", "simulate_contexts", (
                _contexts_what, "`nice .venv/bin/python benchmarks/planning/simulate_contexts.py --files 30`",
                _contexts, "–")))),
        Table("readme-whole-trees", "README.md",
              ("tree", "mode", "context proofs", "makespan", "image core-h", "proof core-h"),
              tuple(_whole_row(t, m, c, 64, True) for t in TREES for m in MODES for c in CHOICES)),
        Table("planning-whole-trees", "docs/planning.md",
              ("tree", "mode", "choice", "workers", "makespan planned / naive", "image core-h",
               "proof core-h", "rebuilds core-h planned / naive", "check durations m/e/u",
               "images measured/estimated, loads unknown"),
              tuple(_whole_row(t, m, c, w, False) for t in TREES for m in MODES for c in CHOICES
                    for w in SHAPES)),
        _predictions_table(),
    )


def _predictions_table() -> Table:
    """docs/planning.md's predictions against real sweeps: the runs of
    PREDICTIONS, one row a mode."""
    return Table("planning-predictions", "docs/planning.md",
                 ("seed", "mode", "boot", "library prefix", "file heads", "chain image", "makespan",
                  "verdict"),
                 (_prediction_row("5-native", "5", "native", ("--seed", "5")),
                  _prediction_row("5-bytecode", "5", "bytecode", ("--seed", "5")),
                  _prediction_row("9-native", "9", "native", ("--seed", "9")),
                  _prediction_row("9-bytecode", "9", "bytecode", ("--seed", "9")),
                  _prediction_row("5-cold-native", "5, cold cache", "native", ("--cold-cache",))))
