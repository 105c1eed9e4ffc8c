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
/ estimated, and loads found nowhere). It exits 1 if a planned makespan is
above naive order's. With ``--json`` it prints one JSON object instead (every
simulation's figures; the table goes to stderr).

    .venv/bin/python benchmarks/planning/whole_trees.py --s2n-bignum /work/bench/s2n-bignum \\
        --bench-map /work/bench/bench/timeout-map.json --work /tmp/whole-trees
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # first: it puts the project root on sys.path

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


def extract(s2n: Path, bench_map: Path, work: Path, tree: str) -> Path:
    out = work / tree
    if not (out / "extract.json").is_file():
        started = time.monotonic()
        _run([str(PROOFBATCH), "extract", "--out", str(out), "--context-root", str(s2n),
              "--ids-from", str(bench_map), str(s2n / tree / "proofs")])
        print(f"extract {tree}: {time.monotonic() - started:.1f} s", flush=True)
    return out


def simulate(corpus: Path, bench_map: Path, s2n: Path, mode: str, choice: str, workers: int,
             nodes: int) -> dict:
    return json.loads(_run([
        str(PROOFBATCH), "simulate", "--timeout-map", str(bench_map), "--map-mode", "native",
        "--corpus", str(corpus), "--context-root", str(s2n), "--mode", mode,
        "--context-proofs", choice, "--workers", str(workers), "--nodes", str(nodes), "--json"]))


def row(tree: str, mode: str, choice: str, workers: int, d: dict) -> str:
    c = d["contexts"][choice]
    acc = c["account"] or {}
    said = (acc.get("by_mode") or {}).get(mode, {})
    measured = acc.get("measured_images", 0) + (acc.get("learned_images") or 0)
    durations = d["check_durations"]
    so = " (s.o.)" if d["submission_order"] else ""
    return (f"| {tree} | {mode} | {choice} | {workers} | {d['makespan_s']:,.0f}{so} / "
            f"{d['naive_makespan_s']:,.0f} | {c['context_image_core_hours']:,.2f} | "
            f"{c['proof_core_hours']:,.2f} | {d['image_rebuild_core_hours']:,.2f} / "
            f"{d['naive_image_rebuild_core_hours']:,.2f} | {durations['measured']}/"
            f"{durations['estimated']}/{durations['unknown']} | {measured}/"
            f"{said.get('images', 0) - measured}, {said.get('unknown_loads', 0)} |")


def main() -> int:
    ap = common.arg_parser(__doc__.split("\n\n")[0])
    ap.add_argument("--s2n-bignum", type=Path, required=True, help="an s2n-bignum checkout")
    ap.add_argument("--bench-map", type=Path, required=True, help="the bench's timeout-map.json")
    ap.add_argument("--work", type=Path, required=True, help="where the extracted trees go")
    ap.add_argument("--jobs", type=int, default=2, help="simulations at once")
    args = ap.parse_args()
    with common.text_to_stderr(args):
        runs, results, worse = measure(args)
    if args.json:
        print(json.dumps({"benchmark": "whole_trees",
                          "simulations": [{"tree": t, "mode": m, "choice": c, "workers": w, **d}
                                          for (t, m, c, w, _), d in zip(runs, results)],
                          "target": "planned makespan never above naive order's",
                          "result": "MISS" if worse else "PASS"}))
    return 1 if worse else 0


def measure(args):
    """(runs, their simulate --json, the runs planned above naive order)."""
    s2n, bench_map = args.s2n_bignum.resolve(), args.bench_map.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    corpora = {tree: extract(s2n, bench_map, args.work, tree) for tree in TREES}
    runs = [(t, m, c, w, n) for t in TREES for m in MODES for c in CHOICES for w, n in SHAPES]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda r: simulate(corpora[r[0]], bench_map, s2n, r[1], r[2], r[3], r[4]),
                                runs))
    print(f"{len(runs)} simulations in {time.monotonic() - started:.0f} s "
          f"(load {os.getloadavg()[0]:.1f})\n")
    print("| tree | mode | choice | workers | makespan planned / naive | image core-h | proof core-h "
          "| rebuilds core-h planned / naive | check durations m/e/u | images measured/estimated, "
          "loads unknown |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    worse = []
    for (t, m, c, w, _), d in zip(runs, results):
        print(row(t, m, c, w, d))
        if d["makespan_s"] > d["naive_makespan_s"] * (1 + 1e-9):
            worse.append(f"{t} {m} {c} {w}")
    cheapest = {}
    for (t, m, c, w, _), d in zip(runs, results):
        if w == 64:
            key = (t, c)
            if key not in cheapest or d["core_hours"] < cheapest[key][1]:
                cheapest[key] = (m, d["core_hours"])
    print("\ncheapest mode at 64 workers: " + "; ".join(
        f"{t} {c}: {m} ({h:,.1f} core-h)" for (t, c), (m, h) in sorted(cheapest.items())))
    if worse:
        print("planned makespan above naive order's: " + ", ".join(worse))
    else:
        print("the planned makespan is never above naive order's")
    return runs, results, worse


if __name__ == "__main__":
    sys.exit(main())
