"""What the guard costs the runner per second of a long check.

The guard (runner/checks/guard.py) samples each running check's process
tree from the runner; on a full node that CPU time comes out of the checks'
wall time. This runs ``enforce``, the loop every prover's checks run under,
on a spinning process for ``--seconds``, twice: with the guard's policy
(every 2% of the check's age, 20 ms to 0.5 s; descendants listed every
0.5 s) and with the policy before it as the baseline (every 20 ms
throughout; descendants listed every 8th sample), in the same run. It
prints the runner's CPU time per second watched and the number of samples.

Target: the runner's CPU per second of a 30 s check at most a quarter of
the baseline's.

    .venv/bin/python benchmarks/checks/guard_cost.py --seconds 30
"""

from __future__ import annotations

import dataclasses
import resource
import subprocess
import sys
import time

import psutil

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
from common import arg_parser, emit, loadavg  # noqa: E402

from runner.checks import guard  # noqa: E402
from runner.verdicts import Termination  # noqa: E402


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return r.ru_utime + r.ru_stime


def watch(seconds: float, limits: guard.GuardLimits) -> tuple[float, int]:
    """(runner CPU seconds per second watched, samples) for one spinning check."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    samples = 0
    try:
        started = time.monotonic()

        def wait(s: float) -> bool:
            nonlocal samples
            samples += 1
            time.sleep(s)
            return time.monotonic() - started >= seconds

        c0 = own_cpu()
        guard.enforce(psutil.Process(spinner.pid), limits, started, Termination(), wait=wait,
                      kill=spinner.kill, timeout_reason="limit")
        return (own_cpu() - c0) / (time.monotonic() - started), samples
    finally:
        spinner.kill()
        spinner.wait()


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="how long each check is watched")
    args = parser.parse_args()
    limits = guard.GuardLimits(time_s=3600.0, mem_bytes=1 << 40, clock="wall")
    baseline = dataclasses.replace(limits, max_poll_s=limits.poll_s, list_s=8 * limits.poll_s)
    load0 = loadavg()
    new_cpu, new_n = watch(args.seconds, limits)
    old_cpu, old_n = watch(args.seconds, baseline)
    load = f"load {load0:.1f}-{loadavg():.1f}, {len(psutil.pids())} processes on the host"
    ratio = new_cpu / old_cpu
    lines = [f"a {args.seconds:g} s check, {load}",
             f"guard: {new_n} samples, runner CPU {100 * new_cpu:.2f}% of a core",
             f"baseline (50 Hz throughout): {old_n} samples, runner CPU {100 * old_cpu:.2f}% of a core",
             f"guard / baseline: {ratio:.2f}"]
    return emit(args, "guard_cost", {"seconds": args.seconds, "samples": new_n, "cpu_share": new_cpu,
                                     "baseline_samples": old_n, "baseline_cpu_share": old_cpu,
                                     "ratio": ratio, "load": load},
                lines, "the guard's CPU per second of a 30 s check <= 1/4 of the baseline's", ratio <= 0.25)


if __name__ == "__main__":
    sys.exit(main())
