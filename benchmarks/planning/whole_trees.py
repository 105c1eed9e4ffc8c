"""Budgets for whole s2n-bignum trees, as a cluster user plans a full sweep.

Through the installed CLI only, on s2n-bignum's tree and the bench's map as
users have them:

1. ``proofbatch extract TREE/arm/proofs --out WORK/arm --context-root TREE
   --ids-from MAP`` (and the same for x86): every file of the tree, the ids
   as the bench's map keeps them;
2. ``proofbatch simulate --timeout-map MAP --map-mode native --corpus
   WORK/<tree> --mode <mode> --context-proofs <choice> --workers N --nodes M
   --json`` for both trees, both modes, both choices and 8 (1 node), 64
   (2 x 32) and 512 (16 x 32) workers.

It prints one table row per simulation: the planned makespan against naive
order (the baseline, simulated in the same run on the same plan; "(s.o.)":
the plan dispatches in submission order, which simulated faster), image and
proof core-hours, rebuilds, and what the figures stand on (check durations
measured by the map / estimated / unknown; images measured by --costs-from
/ estimated, and loads found nowhere). PASS: no planned makespan is above
naive order's. The extracted trees under --work are cut afresh each run.

    .venv/bin/python benchmarks/planning/whole_trees.py --s2n-bignum /work/bench/s2n-bignum \\
        --bench-map /work/bench/bench/timeout-map.json --work /tmp/whole-trees
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # first: it puts the project root on sys.path
from common import Goal, emit  # noqa: E402
from vs_bench_flows import git_rev  # noqa: E402

import record  # noqa: E402

PROOFBATCH = Path(sys.executable).with_name("proofbatch")
TREES = ("arm", "x86")
MODES = ("native", "bytecode")
CHOICES = ("trust", "replay")
SHAPES = ((8, 1), (64, 2), (512, 16))


def _run(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def extract(s2n: Path, bench_map: Path, work: Path, tree: str) -> tuple[Path, float]:
    """The tree cut afresh into WORK/TREE (a corpus left by another commit or
    map would be priced as this run's); its wall seconds."""
    out = work / tree
    shutil.rmtree(out, ignore_errors=True)
    started = time.monotonic()
    _run([str(PROOFBATCH), "extract", "--out", str(out), "--context-root", str(s2n),
          "--ids-from", str(bench_map), str(s2n / tree / "proofs")])
    took = time.monotonic() - started
    common.log(f"extract {tree}: {took:.1f} s")
    return out, took


def simulate(corpus: Path, bench_map: Path, s2n: Path, mode: str, choice: str, workers: int,
             nodes: int) -> dict:
    return json.loads(_run([
        str(PROOFBATCH), "simulate", "--timeout-map", str(bench_map), "--map-mode", "native",
        "--corpus", str(corpus), "--context-root", str(s2n), "--mode", mode,
        "--context-proofs", choice, "--workers", str(workers), "--nodes", str(nodes), "--json"]))


def figures_of(tree: str, mode: str, choice: str, workers: int, nodes: int, d: dict) -> dict:
    """One simulation's figures, as the record keeps them."""
    c = d["contexts"][choice]
    acc = c["account"] or {}
    said = (acc.get("by_mode") or {}).get(mode, {})
    measured = acc.get("measured_images", 0) + (acc.get("learned_images") or 0)
    return {"tree": tree, "mode": mode, "choice": choice, "workers": workers, "nodes": nodes,
            "makespan_s": d["makespan_s"], "naive_makespan_s": d["naive_makespan_s"],
            "submission_order": d["submission_order"], "core_hours": d["core_hours"],
            "image_core_hours": c["context_image_core_hours"], "proof_core_hours": c["proof_core_hours"],
            "rebuild_core_hours": d["image_rebuild_core_hours"],
            "naive_rebuild_core_hours": d["naive_image_rebuild_core_hours"],
            "check_durations": d["check_durations"], "images_measured": measured,
            "images_estimated": said.get("images", 0) - measured,
            "unknown_loads": said.get("unknown_loads", 0)}


def row(s: dict) -> str:
    so = " (s.o.)" if s["submission_order"] else ""
    durations = s["check_durations"]
    return (f"| {s['tree']} | {s['mode']} | {s['choice']} | {s['workers']} | {s['makespan_s']:,.0f}{so} / "
            f"{s['naive_makespan_s']:,.0f} | {s['image_core_hours']:,.2f} | "
            f"{s['proof_core_hours']:,.2f} | {s['rebuild_core_hours']:,.2f} / "
            f"{s['naive_rebuild_core_hours']:,.2f} | {durations['measured']}/"
            f"{durations['estimated']}/{durations['unknown']} | {s['images_measured']}/"
            f"{s['images_estimated']}, {s['unknown_loads']} |")


def main() -> int:
    ap = common.arg_parser(__doc__.split("\n\n")[0])
    ap.add_argument("--s2n-bignum", type=Path, required=True, help="an s2n-bignum checkout")
    ap.add_argument("--bench-map", type=Path, required=True, help="the bench's timeout-map.json")
    ap.add_argument("--work", type=Path, required=True, help="where the extracted trees go")
    ap.add_argument("--jobs", type=int, default=2, help="simulations at once")
    args = ap.parse_args()
    s2n, bench_map = args.s2n_bignum.resolve(), args.bench_map.resolve()
    rec = record.current()
    rec.input("bench_map", path=bench_map)
    rec.input("s2n_bignum", str(s2n))
    rec.input("s2n_bignum_commit", git_rev(s2n))
    args.work.mkdir(parents=True, exist_ok=True)
    cut = {tree: extract(s2n, bench_map, args.work, tree) for tree in TREES}
    corpora = {tree: out for tree, (out, _) in cut.items()}
    said = {tree: json.loads((out / "extract.json").read_text()) for tree, out in corpora.items()}
    problems = {tree: len(d.get("problems", [])) for tree, d in said.items()}
    files = {tree: len(d.get("sources", [])) for tree, d in said.items()}
    runs = [(t, m, c, w, n) for t in TREES for m in MODES for c in CHOICES for w, n in SHAPES]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda r: simulate(corpora[r[0]], bench_map, s2n, r[1], r[2], r[3], r[4]),
                                runs))
    simulate_s = time.monotonic() - started
    sims = [figures_of(*r, d) for r, d in zip(runs, results)]
    worse = [f"{s['tree']} {s['mode']} {s['choice']} {s['workers']}" for s in sims
             if s["makespan_s"] > s["naive_makespan_s"] * (1 + 1e-9)]
    cheapest: dict[str, dict] = {}
    for s in sims:
        key = f"{s['tree']} {s['choice']}"
        if s["workers"] == 64 and (key not in cheapest or s["core_hours"] < cheapest[key]["core_hours"]):
            cheapest[key] = {"mode": s["mode"], "core_hours": s["core_hours"]}
    lines = ["extract: " + ", ".join(f"{t} {problems[t]:,} problems of {files[t]} files in {cut[t][1]:.0f} s"
                                      for t in TREES),
             f"{len(runs)} simulations in {simulate_s:.0f} s", "",
             "| tree | mode | choice | workers | makespan planned / naive | image core-h | proof core-h "
             "| rebuilds core-h planned / naive | check durations m/e/u | images measured/estimated, "
             "loads unknown |", "|---|---|---|---|---|---|---|---|---|---|",
             *(row(s) for s in sims), "",
             "cheapest mode at 64 workers: " + "; ".join(
                 f"{k}: {v['mode']} ({v['core_hours']:,.1f} core-h)" for k, v in sorted(cheapest.items()))]
    figures = {"problems": problems, "files": files, "extract_s": {t: round(cut[t][1], 1) for t in TREES},
               "simulate_s": round(simulate_s, 1), "simulations": sims, "cheapest_at_64": cheapest,
               "above_naive": worse}
    return emit(args, "whole_trees", figures, lines, "planned makespan never above naive order's", True,
                [Goal("simulations planned above naive order", len(worse), "==", 0)])


if __name__ == "__main__":
    sys.exit(main())
