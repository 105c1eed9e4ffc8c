"""Context costs in a plan: `proofbatch simulate --corpus` on s2n-bignum
problems with s2n-bignum-bench's own timeout map, under --context-proofs
replay and trust, at 8, 64 and 512 workers (nodes of 8 cores, 8 images
kept per node as a sweep's sessions do).

The corpus is cut from the real sources by s2n_cut.py, as the bench cuts its own
(collect-problems.py, retrieve-problem.py): s2n-bignum at the bench's pin
(51147aa) and HOL Light at its pin (5e62421), read from the bare mirrors.
A problem ``arm.<file>.<THM>[.N]`` of the map gets as ``setup.ml`` its
proof file ``arm/proofs/<file>.ml`` with every ``needs``/``loadt``/``loads``
inlined once (the shared library prefix), then the file's own phrases up to
the phrase that proves THM (its N-th such phrase for ``.N``). Earlier
theorems stay ``let THM = prove(...)`` phrases as written, so under replay a
context is charged the map's prove_secs of every earlier theorem that is a
problem of the map (runner/provers/hol_light/costs/context_costs.py). The bench's map was measured
natively; the per-phrase figure is Debian bytecode's (see context_costs).

Baseline, same run: the same map without --corpus, as `simulate
--timeout-map` alone plans it today (every check on the base image).

    nice .venv/bin/python benchmarks/planning/simulate_contexts.py [--files 30] [--seed 0]
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # first: it puts the project root on sys.path
import record  # noqa: E402
from s2n_cut import Inliner, cut_corpus, git_source  # noqa: E402

from runner.checks.context_proofs import ContextProofs  # noqa: E402
from runner.maps.provenance import load  # noqa: E402
from runner.planning.planner import PlanConfig, Workers  # noqa: E402
from runner.planning.inputs import plan_from_files, plans_from_files  # noqa: E402
from runner.provers.hol_light.costs.context_costs import estimate  # noqa: E402
from runner.provers.hol_light.costs.load_model import PHRASE_S  # noqa: E402
from runner.provers.hol_light.contexts import build_context_tree  # noqa: E402
from runner.provers.hol_light.costs.plans import SIMULATE_SALT  # noqa: E402
from runner.planning.simulate import simulate  # noqa: E402

MIRRORS = Path("/work/.mirror")
BENCH = MIRRORS / "kings-crown+s2n-bignum-bench" / "repo"
S2N = (MIRRORS / "awslabs+s2n-bignum" / "repo", "51147aa")
HOL = (MIRRORS / "jrh13+hol-light" / "repo", "5e62421")


def main() -> int:
    ap = common.arg_parser(__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=30, help="arm proof files, seeded sample")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    with common.text_to_stderr(args):
        figures = measure(args)
    lines = [f"{r['workers']:4d} workers: " + " | ".join(
        f"{c}: images {r[c]['image_core_hours']:.3f} / proofs {r[c]['proof_core_hours']:.3f} core-h = "
        f"{100 * r[c]['share']:.0f}%, makespan {r[c]['makespan_s']:,.0f} s" for c in ("replay", "trust"))
        for r in figures["rows"]]
    return common.emit(args, "simulate_contexts", figures, lines, "figures only (no target)", True)


def measure(args) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="proofbatch-simctx-"))
    tmap = tmp / "timeout-map.json"
    tmap.write_text(subprocess.run(["git", "-C", str(BENCH), "show", "HEAD:timeout-map.json"],
                                   capture_output=True, text=True, check=True).stdout)
    loaded = load(tmap, mode="native")
    by_file: dict[str, list[str]] = defaultdict(list)
    for pid in loaded.entries:
        if pid.startswith("arm."):
            by_file[pid.split(".")[1]].append(pid)
    files = sorted(by_file)
    chosen = sorted(random.Random(args.seed).sample(files, min(args.files, len(files))))
    t0 = time.monotonic()
    n, skipped, prefix_lines = cut_corpus({f: by_file[f] for f in chosen}, tmp / "corpus",
                                          Inliner(git_source(*S2N), git_source(*HOL)))
    print(f"corpus: {n} problems of {len(chosen)} arm files (seed {args.seed}), {skipped} map ids "
          f"not found as `let THM = prove` phrases; longest inlined prefix {prefix_lines:,} lines; "
          f"cut in {time.monotonic() - t0:.0f} s")
    # The tree and the estimates, once, for the account below.
    setups = {d.name: (d / "setup.ml").read_text() for d in (tmp / "corpus").iterdir()}
    tree = build_context_tree(setups, SIMULATE_SALT)
    costs = estimate(tree, loaded.prove_secs())
    del setups
    phrases = sum(c.phrases for c in costs.values())
    print(f"context tree: {len(costs)} images, {phrases:,} phrases; proofs in contexts "
          f"{sum(c.proofs for c in costs.values()):,}, priced from the map "
          f"{sum(len(c.priced) for c in costs.values()):,} ({sum(c.proof_s for c in costs.values()):,.0f} "
          f"s), unpriced {sum(c.unpriced for c in costs.values()):,}; phrase default {1000 * PHRASE_S:.1f} ms")
    root_child = [c for k, c in costs.items() if tree.nodes[k].parent == tree.base]
    for c in root_child:
        print(f"  first image below the base: {c.phrases:,} phrases, trust estimate "
              f"{c.build_s(ContextProofs.TRUST):.0f} s, replay {c.build_s(ContextProofs.REPLAY):.0f} s")
    # The baseline plans the same problems from the map alone.
    ours = {d.name for d in (tmp / "corpus").iterdir()}
    alone = dataclasses.replace(loaded, entries={k: v for k, v in loaded.entries.items() if k in ours})
    rows = []
    for workers in (8, 64, 512):
        w = Workers(workers // 8, 8, 8 * 6 * 2**30, images_per_node=8)
        base = simulate(plan_from_files(timeout_map=alone, profile=None, workers=w,
                                        config=PlanConfig()), keep_schedule=False)
        row = {"workers": workers, "baseline_image_core_hours": (base.build_s - base.boots_s) / 3600,
               "baseline_proof_core_hours": (base.busy_s - base.build_s) / 3600}
        t = time.monotonic()
        plans = plans_from_files(timeout_map=loaded, profile=None, workers=w, config=PlanConfig(),
                                 corpus=tmp / "corpus", choices=tuple(ContextProofs))
        for choice, plan in plans.items():
            p = simulate(plan, keep_schedule=False)
            proof_h, image_h = (p.busy_s - p.build_s) / 3600, (p.build_s - p.boots_s) / 3600
            row[str(choice)] = {"image_core_hours": image_h, "proof_core_hours": proof_h,
                                "rebuild_core_hours": p.rebuild_s / 3600,
                                "share": image_h / proof_h, "boot_core_hours": p.boots_s / 3600,
                                "makespan_s": p.makespan_s}
        row["plan_and_simulate_s"] = time.monotonic() - t
        rows.append(row)
        print(f"{workers:4d} workers: baseline (no corpus) context images "
              f"{row['baseline_image_core_hours']:.3f} core-h, proofs {row['baseline_proof_core_hours']:.3f}"
              f" core-h | " + " | ".join(
                  f"{c}: images {row[c]['image_core_hours']:.3f} core-h / proofs "
                  f"{row[c]['proof_core_hours']:.3f} core-h = {100 * row[c]['share']:.0f}% (rebuilds "
                  f"{row[c]['rebuild_core_hours']:.3f} core-h), makespan "
                  f"{row[c]['makespan_s']:,.0f} s" for c in ("replay", "trust")))
    shutil.rmtree(tmp, ignore_errors=True)
    record.current().input("bench_map", f"{BENCH}@HEAD:timeout-map.json")
    return {"files": len(chosen), "seed": args.seed, "problems": n, "skipped_ids": skipped,
            "prefix_lines": prefix_lines, "images": len(costs), "phrases": phrases, "rows": rows}


if __name__ == "__main__":
    sys.exit(main())
