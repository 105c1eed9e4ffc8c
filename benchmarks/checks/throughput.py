"""Sweep throughput of two local workers against one, on light problems.

Boots one session (not timed) and warms it with a few checks and two small
untimed sweeps, then sweeps >= 300 light problems (a few ms of real proof
work each: ARITH_TAC on small linear goals, MESON_TAC[] on small tautologies
and first-order facts, REWRITE_TAC) with ``run_sweep`` and
``LocalExecutor(workers=W, session=session)`` for W = 1 and W = 2, each into
a fresh --out directory. Rounds run in the order 1, 2, 2, 1, ... so that
drift in the host's load does not favour either side. Throughput is checks
per second of the whole ``run_sweep`` call (manifest, shards, merge included).

Target: speedup (2 workers over 1) >= 1.8.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter

# common first: it puts the checkout on sys.path for the imports below.
import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import (Spec, arg_parser, cpu_busy, emit, limits, log, loadavg, median,
                    require_ok, start_session, temp_dir, write_corpus)
from cluster.local import LocalExecutor
from runner.planning.sweep_config import SweepConfig
from runner.sweep import prepare, run_sweep

TARGET_SPEEDUP = 1.8


def light_problems(count: int, prefix: str) -> list[Spec]:
    """Distinct goals, each a few ms of proof work in bytecode HOL Light."""
    def make(i: int) -> Spec:
        n, pid = i + 2, f"{prefix}{i:04d}"
        kind = i % 5
        if kind == 0:
            return Spec(pid, f"`!a b c d. a <= b /\\ b <= c /\\ c <= d /\\ d <= {n} "
                             f"==> a + b + c + d <= {4 * n}`", "ARITH_TAC", category="arith")
        if kind == 1:
            return Spec(pid, f"`!x y. x + {n} <= y ==> x < y /\\ {n} <= y - x`", "ARITH_TAC",
                        category="arith")
        if kind == 2:
            return Spec(pid, f"`(p{i} ==> q{i}) /\\ (q{i} ==> r{i}) /\\ (r{i} ==> s{i}) "
                             f"==> (p{i} ==> s{i}) /\\ (~s{i} ==> ~p{i})`", "MESON_TAC[]",
                        category="logic")
        if kind == 3:
            return Spec(pid, f"`(!x:A. P{i} x ==> Q{i} x) /\\ (!x. Q{i} x ==> R{i} x) "
                             f"==> (?x. P{i} x) ==> (?x. R{i} x)`", "MESON_TAC[]",
                        category="logic")
        return Spec(pid, f"`(v{i} + 0) * 1 + {n} * 0 = v{i}`",
                    "REWRITE_TAC[ADD_CLAUSES; MULT_CLAUSES]", category="rewrite")
    return [make(i) for i in range(count)]


class TimedExecutor:
    """Wraps an executor to time ``execute`` alone (without manifest and merge)."""

    def __init__(self, inner):
        self.inner, self.secs = inner, 0.0

    def execute(self, job, on_row):
        started = time.monotonic()
        try:
            self.inner.execute(job, on_row)
        finally:
            self.secs = time.monotonic() - started

    def __getattr__(self, name):
        # The rest of the executor interface (cluster/base.py) is the wrapped one's.
        return getattr(self.inner, name)


def sweep(session, root, corpus, workers: int, n: int) -> dict:
    out = temp_dir(f"out-w{workers}")
    prepared = prepare(SweepConfig(corpus=corpus, out=out / "sweep", workers=workers,
                                   context_root=root, default_timeout=60.0))
    executor = TimedExecutor(LocalExecutor(workers=workers, session=session))
    busy0, ours0 = cpu_busy()
    started = time.monotonic()
    summary = run_sweep(prepared, executor)
    secs = time.monotonic() - started
    busy1, ours1 = cpu_busy()
    if summary.counts != Counter({"OK": n}) or summary.ran_now != n:
        raise SystemExit(f"benchmark invalid: sweep with {workers} worker(s) gave "
                         f"{dict(summary.counts)}, ran {summary.ran_now} of {n}")
    others = max(0.0, (busy1 - busy0) - (ours1 - ours0))
    return {"workers": workers, "secs": secs, "execute_secs": executor.secs,
            "checks_per_s": n / secs, "execute_checks_per_s": n / executor.secs,
            "our_cpu_s": ours1 - ours0, "other_cpu_s": others}


def main() -> int:
    parser = arg_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=300, help="light problems per sweep (>= 300)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="sweeps per worker count, interleaved 1,2,2,1,...")
    args = parser.parse_args()
    if args.count < 300:
        parser.error("--count must be at least 300")
    load_start = loadavg()

    root = temp_dir("throughput")
    warm = write_corpus(light_problems(5, "w"), root / "warm")
    corpus = root / "corpus"
    write_corpus(light_problems(args.count, "t"), corpus)

    log("booting HOL Light (not timed)...")
    session, boot = start_session(root)
    log(f"booted in {boot:.1f} s; warming with {len(warm)} checks and two untimed sweeps")
    session.prepare(warm)
    require_ok([(p.problem_id, session.check(p, limits())) for p in warm])
    for workers in (1, 2):     # first-call costs of the sweep machinery (imports, Parquet)
        sweep(session, root, root / "warm", workers, len(warm))

    order = [w for r in range(args.rounds) for w in ((1, 2) if r % 2 == 0 else (2, 1))]
    runs = []
    for workers in order:
        run = sweep(session, root, corpus, workers, args.count)
        log(f"workers={workers}: {run['checks_per_s']:.1f} checks/s "
            f"({run['secs']:.2f} s; other processes used {run['other_cpu_s']:.1f} CPU-s)")
        runs.append(run)

    def rate(w: int, key: str) -> float:
        return median([r[key] for r in runs if r["workers"] == w])

    one, two = rate(1, "checks_per_s"), rate(2, "checks_per_s")
    speedup = two / one
    ex_speedup = rate(2, "execute_checks_per_s") / rate(1, "execute_checks_per_s")
    figures = {
        "checks_per_sweep": args.count,
        "rounds": args.rounds,
        "checks_per_s_1_worker": round(one, 2),
        "checks_per_s_2_workers": round(two, 2),
        "speedup": round(speedup, 3),
        "execute_only_speedup": round(ex_speedup, 3),
        "boot_s": round(boot, 2),
        "runs": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}
                 for r in runs],
        "cpus": os.cpu_count(),
        "loadavg_1m_start": load_start,
        "loadavg_1m_end": loadavg(),
    }
    lines = [f"{args.count} light problems per sweep, all OK; boot {boot:.1f} s (not timed); "
             f"{args.rounds} sweep(s) per worker count"]
    for r in runs:
        lines.append(f"workers={r['workers']}: {r['secs']:.2f} s, {r['checks_per_s']:.1f} checks/s "
                     f"(execute only {r['execute_checks_per_s']:.1f}/s); CPU-s ours "
                     f"{r['our_cpu_s']:.1f}, other processes {r['other_cpu_s']:.1f}")
    lines += [
        f"baseline, 1 worker: {one:.1f} checks/s (median of its sweeps)",
        f"2 workers: {two:.1f} checks/s; speedup {speedup:.2f}x "
        f"(execute phase alone {ex_speedup:.2f}x)",
        f"host: {os.cpu_count()} CPUs, 1-min load average {load_start} at start, "
        f"{figures['loadavg_1m_end']} at end",
    ]
    return emit(args, "throughput", figures, lines,
                f"speedup >= {TARGET_SPEEDUP:g} (measured {speedup:.2f})",
                speedup >= TARGET_SPEEDUP)


if __name__ == "__main__":
    sys.exit(main())
