"""Per-check overhead with a warm image, against the cold start it avoids.

Boots one session (the cold-start baseline: Popen of the HOL Light toplevel to
its READY line), then checks >= 200 trivial problems with an empty setup one
at a time through ``session.check``. A check's overhead is what the runner
adds around the proof: ``wall_secs`` (dispatch to recorded verdict) minus
``prove_secs`` (measured inside the prover, around ``prove`` only).

Target: median overhead <= 40 ms.
"""

from __future__ import annotations

import os
import sys
import time

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import (Spec, arg_parser, emit, limits, log, loadavg, median,
                    percentile, require_ok, start_session, temp_dir, write_corpus)

TARGET_MEDIAN_MS = 40.0


def trivial_problems(count: int, prefix: str) -> list[Spec]:
    """``x<i> + 0 = x<i>`` with a distinct variable per problem, alternating
    between a decision procedure and a single rewrite."""
    answers = ("ARITH_TAC", "REWRITE_TAC[ADD_CLAUSES]")
    return [Spec(f"{prefix}{i:04d}", f"`v{prefix}{i} + 0 = v{prefix}{i}`", answers[i % 2],
                 category="trivial") for i in range(count)]


def main() -> int:
    parser = arg_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200, help="trivial problems to time (>= 200)")
    parser.add_argument("--warmup", type=int, default=3,
                        help="checks run first and not counted (first fork after the boot)")
    args = parser.parse_args()
    if args.count < 200:
        parser.error("--count must be at least 200")
    load_start = loadavg()

    root = temp_dir("overhead")
    warm = write_corpus(trivial_problems(args.warmup, "w"), root / "corpus")
    problems = write_corpus(trivial_problems(args.count, "t"), root / "corpus2")

    log("booting HOL Light (the cold start)...")
    session, cold_start = start_session(root)
    log(f"booted in {cold_start:.1f} s; {args.warmup} warm-up checks, then {args.count} timed")
    session.prepare(warm + problems)
    lim = limits()
    for p in warm:
        session.check(p, lim)

    results, round_trips = [], []
    for p in problems:
        started = time.monotonic()
        r = session.check(p, lim)
        round_trips.append(time.monotonic() - started)
        results.append((p.problem_id, r))
    require_ok(results)

    walls = [r.wall_secs for _, r in results]
    proves = [r.prove_secs for _, r in results]
    over_ms = [(r.wall_secs - r.prove_secs) * 1000 for _, r in results]
    med, p99 = median(over_ms), percentile(over_ms, 99)
    med_wall = median(walls)
    figures = {
        "checks": len(results),
        "overhead_median_ms": round(med, 2),
        "overhead_p99_ms": round(p99, 2),
        "overhead_max_ms": round(max(over_ms), 2),
        "prove_median_ms": round(median(proves) * 1000, 2),
        "wall_median_ms": round(med_wall * 1000, 2),
        "round_trip_median_ms": round(median(round_trips) * 1000, 2),
        "cold_start_s": round(cold_start, 2),
        "warm_check_cheaper_x": round(cold_start / med_wall, 1),
        "cpus": os.cpu_count(),
        "loadavg_1m_start": load_start,
        "loadavg_1m_end": loadavg(),
    }
    lines = [
        f"checks timed: {len(results)} (trivial, empty setup, all OK), {args.warmup} warm-up not counted",
        f"overhead (wall_secs - prove_secs): median {med:.1f} ms, p99 {p99:.1f} ms, "
        f"max {max(over_ms):.1f} ms",
        f"prove_secs median {figures['prove_median_ms']:.2f} ms; wall_secs median "
        f"{figures['wall_median_ms']:.1f} ms; session.check round trip median "
        f"{figures['round_trip_median_ms']:.1f} ms (adds scratch setup, REAP, cleanup)",
        f"baseline, cold start (Popen to READY): {cold_start:.1f} s",
        f"a warm check (median wall {med_wall * 1000:.1f} ms) is "
        f"{figures['warm_check_cheaper_x']:,.0f}x cheaper than a cold start",
        f"host: {figures['cpus']} CPUs, 1-min load average {load_start} at start, "
        f"{figures['loadavg_1m_end']} at end",
    ]
    return emit(args, "overhead", figures, lines,
                f"median overhead <= {TARGET_MEDIAN_MS:g} ms (measured {med:.1f} ms)",
                med <= TARGET_MEDIAN_MS)


if __name__ == "__main__":
    sys.exit(main())
