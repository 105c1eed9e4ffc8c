"""How long deriving a timeout map takes: a 3-run profile of 100,000 problems.

The profile is synthetic, shaped like s2n-bignum-bench's published map (the
table in ../shared/notes/workload-and-anchors.md: 63% under a second, a tail
of hours), with 10% log-normal run-to-run noise. It is written as a profile
directory, then read back, derived and written as a map and sidecar, exactly
as `proofbatch timeout-map PROFILE --out MAP` does. The baseline, in the same
run, is the bench's method alone (pooled spread model off).

    .venv/bin/python benchmarks/limits/timeout_map.py [--problems N] [--runs N] [--json]

Target: under 5 s for 100,000 problems: one goal, the pooled-spread map's
read + derive + write wall seconds, gates PASS (at any --problems, as before).
The profile and maps go to a fresh temporary folder, removed before the
report: nothing of an earlier run is read.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import Goal, arg_parser, emit  # first: it puts the project root on sys.path
import record  # noqa: E402

from runner.maps.profile_data import ProblemRuns, load_profile, write_profile  # noqa: E402
from runner.maps.timeout_map import MapPolicy, derive, write_map  # noqa: E402

# (low, high) seconds and share of problems: the bench's 2,622 problems.
SHAPE = [((0.001, 1), 1647), ((1, 10), 377), ((10, 60), 246), ((60, 600), 272),
         ((600, 3600), 70), ((3600, 6000), 10)]
TARGET_S = 5.0
SEED = 0
NAMES = {"pooled": "pooled spread (ours)", "bench_method": "bench method alone"}


def synthetic_profile(path: Path, problems: int, runs: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shares = np.array([n for _, n in SHAPE], float)
    band = rng.choice(len(SHAPE), size=problems, p=shares / shares.sum())
    lo = np.log([SHAPE[b][0][0] for b in band])
    hi = np.log([SHAPE[b][0][1] for b in band])
    centre = np.exp(rng.uniform(lo, hi))
    times = centre[:, None] * np.exp(rng.normal(0, 0.1, (problems, runs)))
    rss = 400 + 4000 * rng.random((problems, runs))
    write_profile(path, [ProblemRuns(f"synthetic.p{i:06d}", "generic", tuple(times[i].tolist()),
                                     peak_rss_mb=tuple(rss[i].tolist()), image_key=f"k{i % 500}")
                         for i in range(problems)], {"corpus": "synthetic"})


def timed(profile_dir: Path, out: Path, policy: MapPolicy) -> dict:
    t0 = time.perf_counter()
    profile = load_profile(profile_dir)
    t1 = time.perf_counter()
    derived = derive(profile.runs, policy)
    t2 = time.perf_counter()
    write_map(out, derived, {"profile": str(profile_dir)})
    t3 = time.perf_counter()
    return {"total_s": round(t3 - t0, 4), "read_s": round(t1 - t0, 4), "derive_s": round(t2 - t1, 4),
            "write_s": round(t3 - t2, 4), "clipped": len(derived.clipped),
            "expected_false_timeouts": derived.expected_false_timeouts}


def judge(pooled: dict, problems: int, runs: int) -> Goal:
    """The docstring's target: the map `proofbatch timeout-map` writes (the
    pooled-spread model on) in under TARGET_S wall seconds, read to written."""
    return Goal(f"pooled-spread map of {problems:,} problems x {runs} runs, wall s",
                pooled["total_s"], "<", TARGET_S)


def report(figures: dict) -> list[str]:
    lines = []
    for key, name in NAMES.items():
        r = figures[key]
        lines.append(f"{name:22s} {r['total_s']:.2f} s = read {r['read_s']:.2f} + derive "
                     f"{r['derive_s']:.2f} + write {r['write_s']:.2f}; {r['clipped']} clipped at the cap"
                     + ("" if r["expected_false_timeouts"] is None
                        else f"; expected false timeouts {r['expected_false_timeouts']:.3g}"))
    return lines


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    # A profile with no problem or no run has no times to derive limits from.
    if args.problems < 1 or args.runs < 1:
        parser.error("--problems and --runs must be at least 1")
    rec = record.current()
    for name, value in (("problems", args.problems), ("runs", args.runs), ("seed", SEED)):
        rec.input(name, value)
    work = Path(tempfile.mkdtemp(prefix="pb-bench-map-"))
    try:
        synthetic_profile(work / "profile", args.problems, args.runs, seed=SEED)
        ours = timed(work / "profile", work / "ours.json", MapPolicy())
        bench = timed(work / "profile", work / "bench.json", MapPolicy(target_false_timeout=0))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures = {"problems": args.problems, "runs": args.runs, "seed": SEED, "pooled": ours,
               "bench_method": bench}
    target = (f"{args.problems:,} problems x {args.runs} runs: the pooled-spread map read, derived and "
              f"written in < {TARGET_S:g} s (the target is for 100,000 x 3)")
    return emit(args, "timeout_map", figures, report(figures), target, True,
                [judge(ours, args.problems, args.runs)])


if __name__ == "__main__":
    sys.exit(main())
