"""The same light sweep through the Slurm executor and the local executor.

Generates light problems (a few ms of proof work each, empty setup.ml) and
sweeps them twice from cold, each time with one worker that boots HOL Light
itself: once with ``LocalExecutor(workers=1)`` (the baseline) and once with
``SlurmExecutor`` on the dev cluster (slurm/start-dev-cluster.sh) as one
array task. Both runs pay one HOL Light boot; what Slurm adds is submission,
scheduling, the task's Python start and unpickling, polling and the merge.

Figures: wall time of each whole ``run_sweep`` call, the overhead ratio
(Slurm / local), and the per-task start cost: from sbatch accepting the
array to the task's share starting (the task prints that moment).

Target: per-task start cost <= 10 s.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import arg_parser, cpu_busy, emit, log, loadavg, temp_dir, write_corpus
from throughput import light_problems
from cluster.local import LocalExecutor
from cluster.slurm import Ledger, SlurmExecutor, SlurmOptions
from runner.planning.sweep_config import SweepConfig
from runner.sweep import prepare, run_sweep

TARGET_START_S = 10.0
STARTED = re.compile(r"proofbatch: share of \d+ checks started at ([0-9.]+)")


def sweep(root: Path, corpus: Path, name: str, executor, n: int) -> dict:
    out = root / f"out-{name}"
    prepared = prepare(SweepConfig(corpus=corpus, out=out, workers=1, context_root=root,
                                   default_timeout=60.0, mem_limit=2 * 2**30))
    busy0, ours0 = cpu_busy()
    started = time.monotonic()
    summary = run_sweep(prepared, executor)
    secs = time.monotonic() - started
    busy1, ours1 = cpu_busy()
    if summary.counts != Counter({"OK": n}):
        raise SystemExit(f"benchmark invalid: the {name} sweep gave {dict(summary.counts)}")
    return {"secs": secs, "other_cpu_s": max(0.0, (busy1 - busy0) - (ours1 - ours0)), "out": out}


def start_costs(out: Path) -> list[float]:
    costs = []
    for record in Ledger(out / "slurm" / "jobs.json").records:
        folder = Path(record.folder)
        for log_file in folder.glob(f"{record.job_id}_*log.out"):
            m = STARTED.search(log_file.read_text(errors="replace"))
            if m:
                costs.append(float(m.group(1)) - record.submitted)
    return costs


def main() -> int:
    parser = arg_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100, help="light problems per sweep")
    args = parser.parse_args()
    if subprocess.run(["scontrol", "ping"], capture_output=True, text=True).stdout.count("UP") == 0:
        raise SystemExit("no Slurm controller answers; run: bash slurm/start-dev-cluster.sh")
    load_start = loadavg()
    root = temp_dir("slurm-overhead")
    corpus = root / "corpus"
    write_corpus(light_problems(args.count, "s"), corpus)

    log(f"local executor, 1 worker, cold: {args.count} light problems ...")
    local = sweep(root, corpus, "local", LocalExecutor(workers=1), args.count)
    log(f"  {local['secs']:.1f} s")
    log("Slurm executor, 1 array task, cold ...")
    slurm = sweep(root, corpus, "slurm", SlurmExecutor(SlurmOptions(nodes=1, poll_s=1.0)), args.count)
    log(f"  {slurm['secs']:.1f} s")
    costs = start_costs(slurm["out"])
    if not costs:
        raise SystemExit("benchmark invalid: the array task's log has no start line")
    start = max(costs)
    ratio = slurm["secs"] / local["secs"]
    figures = {
        "checks_per_sweep": args.count,
        "local_s": round(local["secs"], 2),
        "slurm_s": round(slurm["secs"], 2),
        "overhead_ratio": round(ratio, 3),
        "slurm_extra_s": round(slurm["secs"] - local["secs"], 2),
        "task_start_s": round(start, 2),
        "other_cpu_s_local": round(local["other_cpu_s"], 1),
        "other_cpu_s_slurm": round(slurm["other_cpu_s"], 1),
        "cpus": os.cpu_count(),
        "loadavg_1m_start": load_start,
        "loadavg_1m_end": loadavg(),
    }
    lines = [
        f"{args.count} light problems, all OK, one worker booting HOL Light cold in each run",
        f"baseline, local executor: {local['secs']:.1f} s (other processes used "
        f"{local['other_cpu_s']:.0f} CPU-s meanwhile)",
        f"Slurm executor, 1 array task: {slurm['secs']:.1f} s (other processes used "
        f"{slurm['other_cpu_s']:.0f} CPU-s meanwhile)",
        f"overhead ratio {ratio:.2f}x ({slurm['secs'] - local['secs']:+.1f} s); "
        f"per-task start cost (sbatch accepted -> share started) {start:.2f} s",
        f"host: {os.cpu_count()} CPUs, 1-min load average {load_start} at start, "
        f"{figures['loadavg_1m_end']} at end",
    ]
    return emit(args, "slurm_overhead", figures, lines,
                f"per-task start cost <= {TARGET_START_S:g} s (measured {start:.2f})",
                start <= TARGET_START_S)


if __name__ == "__main__":
    sys.exit(main())
