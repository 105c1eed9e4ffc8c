"""Elastic Slurm: array tasks pulling from one pool against fixed shares, when
the plan's durations are wrong and when a task is cancelled halfway.

Workload: ``--problems`` (24) generated HOL Light problems on the base image,
whose proofs cost what we choose: problem i's answer is ``REPLICATE_TAC k_i
STEP THEN ARITH_TAC``, where STEP proves a linear fact by ``ARITH_TAC`` in a
discarded subgoal (4 variables in bytecode, 12 natively). Nominal durations
are drawn log-uniformly over a 16x range (seeded) and scaled to ``--work``
(480) seconds in all; k_i = nominal_i / STEP_S. ``--mode`` (bytecode) is the
HOL Light execution mode of every check: a native task boots in about 14 s
against about 65 s in bytecode, which is most of what a cancel costs. The
plan is made from a timeout map (declared in that mode) whose
``prove_secs`` are the nominal durations times a
seeded factor drawn log-uniformly in [0.5, 2] per problem: the planner is
wrong by up to 2x either way. True durations are measured in the run: each check's
``prove_secs`` in the sweep's own rows.

Four sweeps on the dev cluster (slurm/start-dev-cluster.sh), each into a
fresh OUT with 2 array tasks of 1 CPU that each boot HOL Light, in the order
wrong/pulling, wrong/fixed, cancel/fixed, cancel/pulling (so drift in the
host's load favours neither):
- **pulling**: ``SlurmExecutor(SlurmOptions(nodes=2))``, the project's
  executor: both tasks claim problems from one pool in plan order.
- **fixed shares** (the baseline; benchmarks/slurm/elastic_fixed.py): the
  planner's split of the same plan over the 2 tasks
  (``cluster.shares.planned_shares``), one array task per share submitted
  with submitit, each running ``LocalExecutor(workers=1)`` over exactly its
  share; a task that ends with checks of its share unrecorded has them sent
  to one new job, as cluster/slurm.py did before pulling (commit fb7dbc0).
- **cancel**: once the rows recorded hold half the sweep's nominal work,
  the first array task is scancelled. Pulling: the driver gives its claims
  back and submits a task that pulls from all that is left, beside the
  other task. Fixed: the rest of its share goes to a new job.

Figures per sweep: the makespan, from sbatch accepting the array to the last
verdict (Slurm's scheduling and the tasks' start-up included), and the
planner's prediction with true durations: ``runner.planning.simulate`` on the same
checks, planned afresh with each check's measured ``prove_secs`` and the
measured boot (the mean of the two tasks' HOL Light boots) on 2 nodes x 1
core. For the cancel scenario the prediction is of the sweep as planned,
with no cancel: what pulling is held to. Beside it, roughly the best that
cancel allows: the proof work recorded after it (R), from the moment of the
cancel (T), done by the surviving task alone or shared with a task that
joins after a boot as long as the first ones (B): T + min(R, (R + B) / 2).

Target: pulling within 1.10x of the prediction with true durations, in each
scenario; fixed shares are shown beside it, with no target.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import Spec, arg_parser, emit, log, loadavg, temp_dir, write_corpus
from elastic_fixed import LEDGER as FIXED_LEDGER
from elastic_fixed import FixedShares
from cluster.slurm import Ledger, SlurmExecutor, SlurmOptions
from runner.results import shards
from runner.results.done import LIGHT, SHARDS_DIR
from runner.planning.planner import make_plan
from runner.planning.simulate import simulate
from runner.planning.sweep_config import SweepConfig
from runner.sweep import prepare, run_sweep

TARGET_RATIO = 1.10
NODES = 2

# (one step's tactic, its seconds on a quiet core here), per execution mode.
# Bytecode: 5.6 ms (REPLICATE_TAC of 50 to 2,000 steps: linear); 18-30 ms with
# the host's load average at 7-8. Natively the 4-variable step takes 1.1 ms at
# 2,000 steps but 1.5 ms at 50,000 (a long proof's state slows every step), so
# the native step is a 12-variable fact: 3.3-3.4 ms from 100 to 8,000 steps,
# and the longest nominal proof stays under 20,000 steps.
STEPS = {
    "bytecode": ("SUBGOAL_THEN `!a b c d. a <= b /\\ c <= d ==> a + c <= b + d + 1` (K ALL_TAC) "
                 "THENL [ARITH_TAC; ALL_TAC]", 0.0056),
    "native": ("SUBGOAL_THEN `!a b c d e f g h i j k l. a <= b /\\ c <= d /\\ e <= f /\\ g <= h "
               "/\\ i <= j /\\ k <= l ==> a + c + e + g + i + k <= b + d + f + h + j + l + 1` "
               "(K ALL_TAC) THENL [ARITH_TAC; ALL_TAC]", 0.0033),
}
SPREAD = 16.0               # longest nominal proof / shortest
CHECK_MEM = 2 * 2**30       # --mem-limit per check, as slurm_overhead.py
SWEEPS = [("wrong", "pulling"), ("wrong", "fixed"), ("cancel", "fixed"), ("cancel", "pulling")]


# -- the workload ----------------------------------------------------------------

def workload(root: Path, problems: int, work_s: float, seed: int, hol_mode: str) -> dict:
    """The corpus, its wrong timeout map, and each problem's nominal seconds
    in ``hol_mode``."""
    step, step_s = STEPS[hol_mode]
    rng = random.Random(seed)
    raw = [math.exp(rng.uniform(0, math.log(SPREAD))) for _ in range(problems)]
    scale = work_s / sum(raw)
    specs, nominal, factor, entries = [], {}, {}, []
    for i, r in enumerate(raw):
        pid = f"elastic.p{i:03d}"
        k = max(1, round(r * scale / step_s))
        nominal[pid] = k * step_s
        factor[pid] = 2 ** rng.uniform(-1, 1)
        specs.append(Spec(pid, f"`v{i} + 0 = v{i}`", f"REPLICATE_TAC {k} ({step}) THEN ARITH_TAC"))
        # Limits far above any load seen here: a TIMEOUT would void the run.
        entries.append({"problem_id": pid, "prove_secs": round(nominal[pid] * factor[pid], 3),
                        "timeout_sec": round(20 * nominal[pid] + 120)})
    write_corpus(specs, root / "corpus")
    (root / "wrong-map.json").write_text(json.dumps(entries, indent=1) + "\n")
    return {"corpus": root / "corpus", "map": root / "wrong-map.json", "nominal": nominal,
            "factor": factor, "hol_mode": hol_mode}


# -- watching a sweep -----------------------------------------------------------

class Sampler(threading.Thread):
    """The 1-minute load average every 5 s while a sweep runs."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples, self.stop = [loadavg()], threading.Event()

    def run(self) -> None:
        while not self.stop.wait(5.0):
            self.samples.append(loadavg())

    def summary(self) -> dict:
        s = self.samples
        return {"mean": round(sum(s) / len(s), 2), "min": min(s), "max": max(s)}


def array_tasks(out: Path, mode: str) -> list[tuple[str, float]]:
    """(job id, submitted) of every job of the sweep so far, in submission order."""
    if mode == "pulling":
        path = out / "slurm" / "jobs.json"
        return [(r.job_id, r.submitted) for r in Ledger(path).records] if path.is_file() else []
    try:
        return [(r["job_id"], r["submitted"]) for r in json.loads((out / FIXED_LEDGER).read_text())]
    except (OSError, ValueError):
        return []


class Canceller(threading.Thread):
    """scancel the sweep's first array task once the recorded rows hold half
    of its nominal work."""

    def __init__(self, out: Path, mode: str, nominal: dict):
        super().__init__(daemon=True)
        self.out, self.mode, self.nominal = out, mode, nominal
        self.stop, self.victim, self.at = threading.Event(), None, None

    def run(self) -> None:
        half = sum(self.nominal.values()) / 2
        while not self.stop.wait(1.0):
            jobs = array_tasks(self.out, self.mode)
            if not jobs or not (self.out / SHARDS_DIR).is_dir():
                continue
            done = shards.scan(self.out, repair=False, columns=LIGHT).done
            if sum(self.nominal[pid] for pid, _ in done) >= half:
                self.victim, self.at = jobs[0][0], time.time()
                subprocess.run(["scancel", self.victim], check=True)
                return


def wait_for_queue(job_ids: list[str], timeout: float = 180.0) -> None:
    """Let the sweep's jobs leave Slurm before the next sweep starts; cancel stragglers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queued = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True,
                                text=True).stdout.split()
        left = [j for j in job_ids if j in queued]
        if not left:
            return
        time.sleep(2)
    subprocess.run(["scancel", *left], capture_output=True)


# -- one sweep --------------------------------------------------------------------

def run_one(root: Path, w: dict, scenario: str, mode: str) -> dict:
    out = root / f"out-{scenario}-{mode}"
    prepared = prepare(SweepConfig(corpus=w["corpus"], out=out, workers=1, context_root=root,
                                   timeout_map=w["map"], map_mode=w["hol_mode"],
                                   mode=w["hol_mode"], mem_limit=CHECK_MEM))
    executor = SlurmExecutor(SlurmOptions(nodes=NODES, poll_s=1.0)) if mode == "pulling" \
        else FixedShares(nodes=NODES)
    sampler = Sampler()
    sampler.start()
    canceller = Canceller(out, mode, w["nominal"]) if scenario == "cancel" else None
    if canceller:
        canceller.start()
    started = time.monotonic()
    try:
        summary = run_sweep(prepared, executor)
    except BaseException:
        # Jobs outlive their driver: a benchmark stopped midway cancels its own.
        subprocess.run(["scancel", *[j for j, _ in array_tasks(out, mode)]], capture_output=True)
        raise
    finally:
        sampler.stop.set()
        if canceller:
            canceller.stop.set()
    wall = time.monotonic() - started
    jobs = array_tasks(out, mode)
    wait_for_queue([j for j, _ in jobs])
    n = len(prepared.tasks)
    if summary.counts != Counter({"OK": n}):
        raise SystemExit(f"benchmark invalid: the {scenario}/{mode} sweep gave {dict(summary.counts)}")
    if canceller and canceller.victim is None:
        raise SystemExit(f"benchmark invalid: the {scenario}/{mode} sweep ended before half its work")
    rows = summary.table.select(["problem_id", "attempt", "prove_secs", "worker",
                                 "finished_at"]).to_pylist()
    return analyse(prepared, out, mode, rows, jobs, wall, sampler.summary(), canceller,
                   executor.shares if mode == "fixed" else None)


def base_boots(out: Path) -> list[tuple[float, float]]:
    """(seconds, finished at) of every HOL Light boot of the sweep, in order."""
    boots = []
    for path in sorted((out / "images").glob("*.json")):
        boots += [(b["secs"], b["finished_at"]) for b in json.loads(path.read_text())["builds"]
                  if b["parent"] is None]
    return sorted(boots, key=lambda b: b[1])


def predict_true(plan, true_s: dict, boot_s: float, mem_bytes: int):
    """The planner's simulation of ``plan``'s checks on NODES x 1 core,
    planned afresh with the true durations and the measured boot."""
    checks = [dataclasses.replace(c, expected_s=true_s[(c.problem_id, c.attempt)], source="measured")
              for c in plan.checks]
    images = {k: dataclasses.replace(i, build_s=boot_s, source="measured") if k == plan.base else i
              for k, i in plan.images.items()}
    workers = dataclasses.replace(plan.workers, nodes=NODES, cores_per_node=1, mem_per_node=mem_bytes)
    return simulate(make_plan(sorted(checks, key=lambda c: c.index), images, plan.base, workers,
                              plan.config, plan.prebuilt))


def analyse(prepared, out: Path, mode: str, rows: list[dict], jobs, wall: float, load: dict,
            canceller, shares) -> dict:
    t0 = jobs[0][1]
    true_s = {(r["problem_id"], r["attempt"]): r["prove_secs"] for r in rows}
    boots = base_boots(out)
    boot_s = sum(s for s, _ in boots[:NODES]) / len(boots[:NODES])
    mem = prepared.backend.allowances.image_bytes + CHECK_MEM
    prediction = predict_true(prepared.plan, true_s, boot_s, mem)
    planned = simulate(prepared.plan.with_workers(dataclasses.replace(
        prepared.plan.workers, nodes=NODES, cores_per_node=1, mem_per_node=mem)))
    end = max(r["finished_at"].timestamp() for r in rows)
    makespan = end - t0
    # A task's worker is host/pid/wN: one pid per array task incarnation.
    tasks: dict[str, list[dict]] = {}
    for r in rows:
        tasks.setdefault(r["worker"].rsplit("/", 1)[0], []).append(r)
    per_task = sorted(({"checks": len(rs), "work_s": round(sum(r["prove_secs"] for r in rs), 1),
                        "last_verdict_s": round(max(r["finished_at"].timestamp() for r in rs) - t0, 1)}
                       for rs in tasks.values()), key=lambda t: t["last_verdict_s"])
    result = {
        "makespan_s": round(makespan, 1), "run_sweep_s": round(wall, 1),
        "predicted_true_s": round(prediction.makespan_s, 1),
        "ratio": round(makespan / prediction.makespan_s, 3),
        "planned_s": round(planned.makespan_s, 1),
        "planned_boot_s": round(prepared.plan.images[prepared.plan.base].build_s, 1),
        "true_work_s": round(sum(true_s.values()), 1),
        "boots_s": [round(s, 1) for s, _ in boots],
        "boot_starts_s": [round(f - s - t0, 1) for s, f in boots],
        "jobs": len(jobs), "jobs_without_verdicts": len(jobs) - len(per_task),
        "tasks": per_task, "load": load,
    }
    if shares is not None:
        plan_s = {(c.problem_id, c.attempt): c.expected_s for c in prepared.plan.checks}
        result["shares"] = [{"planned_s": round(sum(plan_s[k] for k in s), 1),
                             "true_s": round(sum(true_s[k] for k in s), 1)} for s in shares]
    if canceller is not None:
        after = [r for r in rows if r["finished_at"].timestamp() > canceller.at]
        at, left = canceller.at - t0, sum(r["prove_secs"] for r in after)
        # Roughly the best a cancel at ``at`` allows: the work recorded after
        # it done by the surviving task alone, or shared with a task that
        # joins once it has booted (as long as the first boots took).
        # Approximate: checks running at the cancel count whole, and the
        # cancelled task's lost partial check not at all.
        best = at + min(left, (left + boot_s) / 2)
        result["cancel"] = {"victim": canceller.victim, "at_s": round(at, 1),
                            "work_after_s": round(left, 1), "checks_after": len(after),
                            "best_after_s": round(best, 1),
                            "best_ratio": round(best / prediction.makespan_s, 3)}
    return result


# -- the report -------------------------------------------------------------------

def describe(scenario: str, mode: str, r: dict) -> list[str]:
    lines = [f"{scenario}/{mode}: makespan {r['makespan_s']:.1f} s (sbatch -> last verdict; "
             f"run_sweep {r['run_sweep_s']:.1f} s), prediction with true durations "
             f"{r['predicted_true_s']:.1f} s: {r['ratio']:.3f}x",
             f"  the plan's own prediction (wrong durations, {r['planned_boot_s']:.0f} s boot) "
             f"{r['planned_s']:.1f} s; "
             f"true proof work {r['true_work_s']:.1f} s; {r['jobs']} jobs "
             f"({r['jobs_without_verdicts']} recorded no verdict); HOL Light boots "
             + ", ".join(f"{s:.1f} s from {t:.1f} s" for s, t in zip(r["boots_s"], r["boot_starts_s"])),
             "  tasks: " + "; ".join(f"{t['checks']} checks, {t['work_s']:.1f} s of proofs, last "
                                     f"verdict at {t['last_verdict_s']:.1f} s" for t in r["tasks"])]
    if "shares" in r:
        lines.append("  fixed shares (planned / true work): " + ", ".join(
            f"{s['planned_s']:.1f} / {s['true_s']:.1f} s" for s in r["shares"]))
    if "cancel" in r:
        c = r["cancel"]
        lines.append(f"  task {c['victim']} scancelled at {c['at_s']:.1f} s; {c['checks_after']} "
                     f"checks ({c['work_after_s']:.1f} s of proofs) recorded after that; at best "
                     f"about {c['best_after_s']:.1f} s ({c['best_ratio']:.3f}x) with that work left "
                     "to one task, or shared with one that boots first")
    lo = r["load"]
    lines.append(f"  load average {lo['mean']} ({lo['min']}-{lo['max']}) on {os.cpu_count()} CPUs")
    return lines


def main() -> int:
    parser = arg_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=24, help="generated problems per sweep")
    parser.add_argument("--work", type=float, default=480.0,
                        help="nominal proof seconds per sweep, on a quiet core")
    parser.add_argument("--seed", type=int, default=0, help="seeds durations and the plan's errors")
    parser.add_argument("--scenarios", default="wrong,cancel", help="wrong, cancel or both")
    parser.add_argument("--mode", choices=sorted(STEPS), default="bytecode",
                        help="HOL Light execution mode of the checks (native: built first if missing)")
    parser.add_argument("--keep", type=Path, default=None, help="keep corpus and sweeps in DIR")
    args = parser.parse_args()
    if subprocess.run(["scontrol", "ping"], capture_output=True, text=True).stdout.count("UP") == 0:
        raise SystemExit("no Slurm controller answers; run: bash slurm/start-dev-cluster.sh")
    scenarios = set(args.scenarios.split(","))
    if not scenarios <= {"wrong", "cancel"}:
        raise SystemExit(f"--scenarios: {args.scenarios!r}; pass wrong, cancel or wrong,cancel")
    root = args.keep or temp_dir("slurm-elastic")
    root.mkdir(parents=True, exist_ok=True)
    w = workload(root, args.problems, args.work, args.seed, args.mode)
    factors = list(w["factor"].values())
    log(f"{args.problems} problems, {sum(w['nominal'].values()):.0f} s nominal proof work; plan "
        f"wrong by x{min(factors):.2f}-x{max(factors):.2f}")
    results: dict = {}
    for scenario, mode in SWEEPS:
        if scenario not in scenarios:
            continue
        log(f"{scenario}/{mode} ...")
        r = results.setdefault(scenario, {})[mode] = run_one(root, w, scenario, mode)
        log(f"  makespan {r['makespan_s']} s, prediction {r['predicted_true_s']} s: {r['ratio']}x")
    passed = {s: results[s]["pulling"]["ratio"] <= TARGET_RATIO for s in results}
    figures = {"problems": args.problems, "nominal_work_s": round(sum(w["nominal"].values()), 1),
               "plan_factor_range": [round(min(factors), 3), round(max(factors), 3)],
               "seed": args.seed, "hol_mode": args.mode, "cpus": os.cpu_count(), "scenarios": results,
               "pulling_pass": passed}
    lines = [f"{args.problems} HOL Light problems, {figures['nominal_work_s']} s of nominal proof "
             f"work, planned from durations wrong by x{min(factors):.2f}-x{max(factors):.2f} "
             f"(seed {args.seed}); {NODES} array tasks of 1 CPU, each booting HOL Light "
             f"({args.mode})"]
    for scenario in ("wrong", "cancel"):
        for mode in ("pulling", "fixed"):
            if mode in results.get(scenario, {}):
                lines += describe(scenario, mode, results[scenario][mode])
        if scenario in results:
            r = results[scenario]
            lines.append(f"{scenario}: pulling {r['pulling']['ratio']:.3f}x, fixed shares "
                         f"{r['fixed']['ratio']:.3f}x of their predictions with true durations: "
                         f"{'PASS' if passed[scenario] else 'MISS'}")
    target = (f"pulling makespan <= {TARGET_RATIO:.2f}x the prediction with true durations in each "
              "scenario (" + ", ".join(f"{s} {results[s]['pulling']['ratio']:.3f}x"
                                       for s in results) + ")")
    return emit(args, "slurm_elastic", figures, lines, target, all(passed.values()))


if __name__ == "__main__":
    sys.exit(main())
