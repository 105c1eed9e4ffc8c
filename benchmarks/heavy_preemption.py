"""What a lost heavy check costs: a Slurm task requeued halfway through a check of 300 s or more.

A check whose runner dies runs again from its start, so a preemption halfway
through an hour-long proof costs that half hour twice. This script measures it
once for real, on the dev Slurm (slurm/start-dev-cluster.sh), through the
README's commands:

1. what benchmarks/heavy_tail.py left in ``--work``: its builds, its corpus
   (``WORK/corpus``) and its calibration (``proofbatch calibrate``, the same
   command, so the kept one);
2. ``proofbatch run CORPUS --problems ID --cluster slurm --mode native
   --context-proofs trust --no-fallback --timeout-map MAP --map-mode native
   --host-factor auto``;
3. once the running check's guard has published ``--at`` (default 0.5) of its
   expected CPU time (map time x host factor), ``scontrol requeue JOB``: what
   Slurm does to a job it preempts under ``PreemptMode=REQUEUE`` (SIGTERM,
   then SIGKILL after ``KillWait``, then the job queued again under its id);
   ``--how cancel`` scancels the task instead, and the driver submits a new one;
4. the driver goes on to the end; ``proofbatch report`` then names the loss.

The problem: ``--problem``, or a seeded draw among the corpus's problems the
map times at ``--min-secs`` to 1.33 x ``--min-secs``. PASS: the check's verdict is OK, the
loss is recorded under ``OUT/lost/`` with a cause, and the report prints it.

    .venv/bin/python benchmarks/heavy_preemption.py --work ~/heavy \\
        --hol-light-src https://github.com/jrh13/hol-light.git \\
        --s2n-bignum-src https://github.com/awslabs/s2n-bignum.git \\
        --bench-map s2n-bignum-bench/timeout-map.json
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import common  # noqa: F401  (puts the project root on sys.path)
from common import ROOT, Goal, arg_parser, emit, log  # noqa: E402
from s2n_readme_path import (PROOFBATCH, S2N_BIGNUM_PIN, HOL_LIGHT_PIN, LoadSampler,  # noqa: E402
                             build_inputs, read_rows, step)

import record  # noqa: E402
from cluster.claims import Pool  # noqa: E402
from cluster.slurm import Ledger  # noqa: E402
from runner.reporting.status import read_status  # noqa: E402
from runner.results import lost  # noqa: E402


def parse_args():
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="folder for the builds and the sweep")
    parser.add_argument("--hol-light-src", required=True, help="what `git clone` takes for HOL Light")
    parser.add_argument("--s2n-bignum-src", required=True, help="what `git clone` takes for s2n-bignum")
    parser.add_argument("--bench-map", type=Path, required=True, help="the bench's timeout-map.json")
    parser.add_argument("--problem", help="the check to preempt (default: a seeded draw, see --min-secs)")
    parser.add_argument("--min-secs", type=float, default=300.0,
                        help="draw among the map's problems of this many seconds up to 1.33x it (default 300)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the draw (default 1)")
    parser.add_argument("--at", type=float, default=0.5,
                        help="preempt once the check has used this share of its expected CPU (default 0.5)")
    parser.add_argument("--how", choices=("requeue", "cancel"), default="requeue",
                        help="scontrol requeue (Slurm's preemption with PreemptMode=REQUEUE) or scancel")
    args = parser.parse_args()
    args.work, args.bench_map = args.work.resolve(), args.bench_map.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    return args


def choose(bench_map: list[dict], corpus: Path, args) -> dict:
    """The map's entry of the problem to preempt, which the corpus holds."""
    held = [e for e in sorted(bench_map, key=lambda e: e["problem_id"])
            if (corpus / e["problem_id"] / "setup.ml").is_file()]
    if args.problem:
        found = [e for e in held if e["problem_id"] == args.problem]
        if not found:
            raise SystemExit(f"{corpus}: no problem {args.problem} the map times; run "
                             "benchmarks/heavy_tail.py first, or name one of its corpus")
        return found[0]
    pool = [e for e in held if args.min_secs <= float(e["prove_secs"]) < 1.33 * args.min_secs]
    if not pool:
        raise SystemExit(f"{corpus}: no problem the map times at {args.min_secs:g}-"
                         f"{1.33 * args.min_secs:g} s; run benchmarks/heavy_tail.py first, or pass --problem")
    return random.Random(args.seed).choice(pool)


def wait_for(predicate, timeout: float, what: str, driver: subprocess.Popen, poll: float = 2.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if driver.poll() is not None:
            raise SystemExit(f"the driver ended (exit {driver.returncode}) while waiting for {what}")
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


def running_cpu(out: Path, pid: str) -> float | None:
    """The CPU seconds the running check's guard last published (every 10 s)."""
    try:
        status = read_status(out)
    except Exception:                   # the sweep is still preparing its files
        return None
    for r in status.running:
        if r.problem_id == pid and r.cpu_s is not None:
            return float(r.cpu_s)
    return None


def sweep_factor(out: Path) -> float | None:
    """The host factor the sweep resolved: sweep.json's own ``host_factor``
    (its config keeps what was asked: auto)."""
    try:
        value = json.loads((out / "sweep.json").read_text()).get("host_factor")
        return None if value is None else float(value)
    except (OSError, ValueError, TypeError):
        return None


def main() -> int:
    args = parse_args()
    rec = record.current()
    hol, s2n, build_secs = build_inputs(args, ("arm", "x86"))
    corpus, out = args.work / "corpus", args.work / f"preempt-{args.how}"
    entry = choose(json.loads(args.bench_map.read_text()), corpus, args)
    pid, map_s = entry["problem_id"], float(entry["prove_secs"])
    rec.input("ids", [pid])
    rec.input("bench_map", path=args.bench_map)
    rec.input("s2n_bignum", S2N_BIGNUM_PIN)
    rec.input("hol_light", HOL_LIGHT_PIN)
    rec.input("how", args.how)
    rec.input("at", args.at)
    step(["bash", ROOT / "slurm/start-dev-cluster.sh"])

    shutil.rmtree(out, ignore_errors=True)        # a rerun measures afresh: nothing is resumed
    common_flags = ["--hol-light", hol, "--context-root", s2n, "--context-proofs", "trust",
                    "--mode", "native", "--timeout-map", args.bench_map, "--map-mode", "native"]
    calibrate_s = step(PROOFBATCH + ["calibrate", corpus, *common_flags], cwd=ROOT)
    argv = [*PROOFBATCH, "run", corpus, "--problems", pid, "--out", out, *common_flags,
            "--no-fallback", "--host-factor", "auto", "--cluster", "slurm"]
    log("$ " + " ".join(map(str, argv)))
    started = time.monotonic()
    with LoadSampler() as load:
        driver = subprocess.Popen([str(a) for a in argv], cwd=ROOT, stdout=sys.stderr)
        try:
            factor = wait_for(lambda: sweep_factor(out), 3 * 3600, "the sweep's host factor", driver)
            target = args.at * map_s * float(factor)
            cpu_at_cut = wait_for(lambda: (c := running_cpu(out, pid)) is not None and c >= target and c,
                                  3 * 3600, f"{pid} to use {target:.0f} s of CPU", driver, poll=5.0)
            # The array task that claimed the check (the others of its array idle).
            pool = Pool(out / "slurm", "observer")
            [job] = [r for r in Ledger(out / "slurm" / "jobs.json").records
                     if r.settled is None and pid in pool.ever_held_by(r.job_id)]
            command = ["scontrol", "requeue", job.job_id] if args.how == "requeue" else ["scancel", job.job_id]
            log(f"{pid} at {cpu_at_cut:.0f} s of CPU (target {target:.0f} s): $ {' '.join(command)}")
            cut_at = time.monotonic()
            subprocess.run(command, check=True)
            driver.wait()
        finally:
            if driver.poll() is None:
                driver.terminate()
                driver.wait()
    end = time.monotonic()
    if driver.returncode != 0:
        raise SystemExit(f"the driver ended with exit {driver.returncode}: nothing to measure")
    row = read_rows(out)[pid]
    losses = [loss for loss in lost.read(out) if loss.problem_id == pid]
    report = subprocess.run(PROOFBATCH + ["report", str(out)], cwd=ROOT, capture_output=True, text=True)
    # The report's lines on the loss: its total (not "nothing") and one per cause.
    lost_lines = [line.strip() for line in report.stdout.splitlines()
                  if ("lost to reruns" in line and "nothing" not in line)
                  or any(loss.cause in line for loss in losses)]
    lost_cpu = sum(loss.cpu_s for loss in losses)
    final_cpu = float(row["prove_cpu_secs"] or row["cpu_secs"])
    figures = {"problem_id": pid, "map_s": map_s, "host_factor": factor, "how": args.how,
               "cpu_at_cut_s": round(cpu_at_cut), "lost_cpu_s": round(lost_cpu, 1),
               "lost_wall_s": round(sum(loss.wall_s for loss in losses), 1),
               "causes": sorted({loss.cause for loss in losses}), "verdict": row["verdict"],
               "reason": row["reason"], "final_cpu_s": round(final_cpu, 1),
               "final_wall_s": round(float(row["prove_secs"]), 1), "attempt_run_id": row["run_id"],
               "cut_to_end_s": round(end - cut_at), "run_s": round(end - started),
               "calibrate_s": round(calibrate_s), "load": load.text(), "report_lines": lost_lines,
               "extra_cpu_share": round(lost_cpu / final_cpu, 3) if final_cpu else None,
               **{k: round(v) for k, v in build_secs.items()}}
    lines = [f"{pid} (map {map_s:.0f} s, host factor {factor}, {load.text()}): {args.how} at "
             f"{cpu_at_cut:.0f} s of CPU; the rerun gave {row['verdict']} in {final_cpu:.0f} s of CPU",
             f"lost: {lost_cpu:.0f} s of CPU, {figures['lost_wall_s']:.0f} s of wall, cause "
             f"{'; '.join(figures['causes']) or 'none recorded'} ({figures['extra_cpu_share']} of the "
             f"check's own CPU again); {end - cut_at:.0f} s from the {args.how} to the sweep's end",
             *[f"report: {line}" for line in lost_lines]]
    goals = [Goal("verdict OK", 1 if row["verdict"] == "OK" else 0, "==", 1),
             Goal("losses recorded", len(losses), ">=", 1),
             Goal("report lines naming the loss", len(lost_lines), ">=", 1)]
    return emit(args, "heavy_preemption", figures, lines, "OK after the preemption, the loss reported", True,
                goals)


if __name__ == "__main__":
    sys.exit(main())
