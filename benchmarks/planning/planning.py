"""Planning and simulation on heavy-tailed synthetic workloads.

The workload follows the shape of s2n-bignum-bench's published timeout map
(../shared/notes/workload-and-anchors.md): of 2,622 problems, 1,647 prove in
under 1 s, 377 in 1-10 s, 246 in 10-60 s, 272 in 60-600 s, 70 in
600-3,600 s and 10 over 3,600 s (the longest 5,991 s). Each problem gets a
duration drawn log-uniformly inside its band, in those proportions, with one
problem pinned at the bench's maximum. Problems come from proof files of
about 25 problems, one context image per file (25 s to load, words.ml-sized)
on a 70 s base boot; heavy proofs (over 600 s) expect 5 GiB, the others 1 GiB
(the bench's advice); nodes have 32 cores and 4 GiB per core, except the
8-worker case (one node of 8 cores).

Prints, per worker count, the planned and the naive (submission order)
makespans against the lower bound max(work / workers, longest) with image
builds, measured in this run. Then times planning 100,000 problems and
simulating them on 512 workers. Exit status 0 when every target is met.
"""

from __future__ import annotations

import math
import random
import sys
import time

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import Goal, arg_parser, emit, loadavg, log

from runner.planning.planner import Image, PlanCheck, PlanConfig, Workers, make_plan
from runner.planning.simulate import simulate

BANDS = [((0.005, 1.0), 1647), ((1.0, 10.0), 377), ((10.0, 60.0), 246), ((60.0, 600.0), 272),
         ((600.0, 3600.0), 70), ((3600.0, 5991.0), 10)]
LONGEST_S = 5991.0
BASE_BUILD_S, CONTEXT_BUILD_S, PER_FILE = 70.0, 25.0, 25
GIB = 2**30
LAYOUTS = {8: (1, 8), 64: (2, 32), 512: (16, 32)}
TARGET_RATIO, PLAN_TARGET_S, SIM_TARGET_S = 1.03, 2.0, 10.0


def workload(n: int, seed: int) -> tuple[list[PlanCheck], dict[str, Image]]:
    """``n`` checks in submission order (proof file by proof file) and their images."""
    rng = random.Random(seed)
    total = sum(count for _, count in BANDS)
    durations: list[float] = []
    for (lo, hi), count in BANDS:
        k = round(count * n / total)
        durations += [math.exp(rng.uniform(math.log(lo), math.log(hi))) for _ in range(k)]
    durations = durations[:n] + [1.0] * (n - len(durations))
    durations[0] = LONGEST_S
    rng.shuffle(durations)
    images = {"base": Image("base", None, BASE_BUILD_S, "default")}
    checks = []
    for i, secs in enumerate(durations):
        key = f"file{i // PER_FILE}"
        images.setdefault(key, Image(key, "base", CONTEXT_BUILD_S, "default"))
        mem = 5 * GIB if secs > 600 else GIB
        limit = min(10800.0, max(120.0, 3 * secs))
        checks.append(PlanCheck(f"p{i:06d}", 0, "synthetic", secs, "map", mem, key, limit, i))
    return checks, images


def workers_for(count: int) -> Workers:
    nodes, cores = LAYOUTS.get(count, (max(1, count // 32), min(32, count)))
    return Workers(nodes, cores, cores * 4 * GIB)


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=2622,
                        help="problems in the makespan workloads (default 2622, the bench's size)")
    parser.add_argument("--seeds", type=int, default=3, help="workloads per worker count (default 3)")
    parser.add_argument("--scale", type=int, default=100_000, help="problems for the timing runs")
    args = parser.parse_args()

    lines, figures = [], {"makespan": []}
    for count in sorted(LAYOUTS):
        workers = workers_for(count)
        for seed in range(args.seeds):
            checks, images = workload(args.problems, seed)
            ours = simulate(make_plan(checks, images, "base", workers, PlanConfig(seed=seed)),
                            keep_schedule=False)
            naive = simulate(make_plan(checks, images, "base", workers,
                                       PlanConfig(policy="naive", seed=seed)), keep_schedule=False)
            ok = ours.ratio <= TARGET_RATIO
            figures["makespan"].append({
                "workers": count, "nodes": workers.nodes, "seed": seed,
                "lower_bound_s": round(ours.lower_bound_s, 1),
                "planned_s": round(ours.makespan_s, 1), "planned_ratio": round(ours.ratio, 4),
                "naive_s": round(naive.makespan_s, 1), "naive_ratio": round(naive.ratio, 4),
                "planned_core_hours": round(ours.core_hours, 1),
                "naive_core_hours": round(naive.core_hours, 1),
                "planned_image_build_core_hours": round(ours.build_s / 3600, 2),
                "naive_image_build_core_hours": round(naive.build_s / 3600, 2)})
            lines.append(f"{count:4} workers ({workers.nodes} x {workers.cores_per_node}), seed {seed}: "
                         f"bound {ours.lower_bound_s:8.0f} s  planned {ours.makespan_s:8.0f} s "
                         f"({ours.ratio:.3f}x)  naive {naive.makespan_s:8.0f} s ({naive.ratio:.3f}x)  "
                         f"image builds {ours.build_s / 3600:.1f} vs {naive.build_s / 3600:.1f} "
                         f"core-h{'' if ok else '  MISS'}")
            log(lines[-1])

    checks, images = workload(args.scale, 0)
    big = workers_for(512)
    # CPU time of this process is the figure: on a shared host, wall time also
    # counts the time other processes held the cores. Both are printed.
    load_before = loadavg()
    wall, cpu = time.perf_counter(), time.process_time()
    plan = make_plan(checks, images, "base", big, PlanConfig())
    bound = plan.lower_bound()
    plan_s, plan_wall = time.process_time() - cpu, time.perf_counter() - wall
    wall, cpu = time.perf_counter(), time.process_time()
    prediction = simulate(plan)
    sim_s, sim_wall = time.process_time() - cpu, time.perf_counter() - wall
    # At this scale the work, not the longest proof, sets the bound at 64 workers too.
    at64 = simulate(plan.with_workers(workers_for(64)), keep_schedule=False)
    figures.update(plan_cpu_secs=round(plan_s, 3), plan_wall_secs=round(plan_wall, 3),
                   simulate_cpu_secs=round(sim_s, 3), simulate_wall_secs=round(sim_wall, 3),
                   scale=args.scale, scale_ratio=round(prediction.makespan_s / bound, 4),
                   scale_ratio_64=round(at64.ratio, 4),
                   loadavg=[load_before, loadavg()])
    lines.append(f"planning {args.scale:,} problems: {plan_s:.2f} s CPU, {plan_wall:.2f} s wall "
                 f"(target < {PLAN_TARGET_S:g} s)")
    lines.append(f"simulating {args.scale:,} problems on 512 workers: {sim_s:.2f} s CPU, "
                 f"{sim_wall:.2f} s wall (target < {SIM_TARGET_S:g} s); makespan "
                 f"{prediction.makespan_s:.0f} s, {prediction.ratio:.3f}x the bound")
    lines.append(f"the same {args.scale:,} problems on 64 workers: makespan {at64.makespan_s:.0f} s, "
                 f"{at64.ratio:.3f}x the bound {at64.lower_bound_s:.0f} s")
    lines.append(f"load average {load_before} before, {loadavg()} after")
    target = (f"planned makespan <= {TARGET_RATIO} x lower bound at 8, 64, 512 workers (and for "
              f"{args.scale:,} problems on 64 and 512); planning "
              f"{args.scale:,} < {PLAN_TARGET_S:g} s; simulating them on 512 workers < {SIM_TARGET_S:g} s")
    worst = {c: max(m["planned_ratio"] for m in figures["makespan"] if m["workers"] == c) for c in LAYOUTS}
    goals = [*(Goal(f"worst planned / bound, {c} workers", worst[c], "<=", TARGET_RATIO) for c in sorted(worst)),
             Goal(f"planned / bound, {args.scale:,} problems on 512 workers", round(prediction.ratio, 4),
                  "<=", TARGET_RATIO),
             Goal(f"planned / bound, {args.scale:,} problems on 64 workers", round(at64.ratio, 4),
                  "<=", TARGET_RATIO),
             Goal(f"planning {args.scale:,} problems, CPU s", round(plan_s, 3), "<", PLAN_TARGET_S),
             Goal(f"simulating {args.scale:,} problems on 512 workers, CPU s", round(sim_s, 3), "<",
                  SIM_TARGET_S)]
    return emit(args, "planning", figures, lines, target, True, goals)


if __name__ == "__main__":
    sys.exit(main())
