"""A host factor measured at the sweep's concurrency, against one measured a check at a time.

``proofbatch calibrate`` measures this host against a map on light ground
truths (1-60 s), one check at a time by default (``--workers 1``). A sweep
runs ``--workers`` checks at once, and checks that share a processor's
cores, caches and memory bus each take more CPU time than one alone. The
heavy-tail issue prices heavy checks by map time x factor, so a factor
measured alone can price a loaded sweep's checks low.

This script runs the README's calibrate once per ``--workers`` count, with
the flags benchmarks/s2n/heavy_tail.py calibrated with (``--map-mode native
--mode native --context-proofs trust``, and the runtime setting its sweep
ran under), each into its own cleared ``--out``:

    proofbatch calibrate CORPUS --timeout-map MAP ... --workers W --out WORK/calibrate-wW

and judges each factor on the heavy checks heavy_tail ran (WORK/out-SEED):
the planned proof time (map time x factor) against the CPU time each took,
as benchmarks/planning/heavy_pricing.py does. It also prints the window of
factors that would have priced every one of them within 15%.

calibrate keeps its factor for ``run --host-factor auto``; this script puts
the kept calibrations back as they were when it ends.

PASS: the factor measured at the sweep's worker count prices every heavy
check within 15% of its CPU time.

    .venv/bin/python benchmarks/planning/calibrate_workers.py --work ~/heavy \\
        --bench-map s2n-bignum-bench/timeout-map.json --seed 1
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
from common import ROOT, Goal, emit  # noqa: E402
from heavy_pricing import heavy_tail_args, heavy_tail_sweep  # noqa: E402
from s2n_readme_path import PROOFBATCH, LoadSampler, read_rows, step  # noqa: E402

import record  # noqa: E402
from runner.maps import host_factor  # noqa: E402

HEAVY_S = 120.0           # the heavy-tail issue's line: the map's prove_secs
TOLERANCE = 0.15          # planned proof time against measured CPU (heavy_pricing's)


def parse_args():
    return heavy_tail_args(__doc__, "1,2", "calibrate's --workers to measure at")


def kept() -> dict[Path, bytes]:
    """Every calibration this host keeps, by path."""
    folder = host_factor.cache_root()
    return {p: p.read_bytes() for p in folder.rglob("*.json")} if folder.is_dir() else {}


def put_back(before: dict[Path, bytes]) -> None:
    """The kept calibrations as they were: rewritten, and new ones removed."""
    for path in kept().keys() - before.keys():
        path.unlink()
    for path, data in before.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def heavy_checks(out: Path, map_s: dict[str, float]) -> dict[str, dict]:
    """heavy_tail's OK checks of 120 s or more: map time and CPU time."""
    return {pid: {"map_s": map_s[pid], "cpu_s": float(r["prove_cpu_secs"])}
            for pid, r in sorted(read_rows(out).items())
            if map_s.get(pid, 0) >= HEAVY_S and r["verdict"] == "OK"}


def worst_off(factor: float, checks: dict[str, dict]) -> float:
    """The largest |map time x factor / CPU - 1| over the checks."""
    return max(abs(c["map_s"] * factor / c["cpu_s"] - 1) for c in checks.values())


def main() -> int:
    args = parse_args()
    rec = record.current()
    out = heavy_tail_sweep(args)
    manifest = json.loads((out / "sweep.json").read_text())
    sweep_workers = int(manifest["config"]["workers"])
    setting = manifest.get("runtime") or "default"
    map_s = {e["problem_id"]: float(e["prove_secs"]) for e in json.loads(args.bench_map.read_text())}
    checks = heavy_checks(out, map_s)
    if not checks:
        raise SystemExit(f"{out}: no OK check of {HEAVY_S:g} s or more to price; run heavy_tail.py first")
    rec.input("bench_map", path=args.bench_map)
    rec.input("heavy_tail_sweep", str(out))
    rec.input("heavy_ids", sorted(checks))
    rec.input("workers", args.workers)
    rec.input("runtime", setting)
    # The factors that price every check within the tolerance: map x F / CPU
    # in [1 - t, 1 + t] for each, so F between the largest CPU/map x (1 - t)
    # and the smallest CPU/map x (1 + t).
    cpu_over_map = [c["cpu_s"] / c["map_s"] for c in checks.values()]
    window = (max(cpu_over_map) * (1 - TOLERANCE), min(cpu_over_map) * (1 + TOLERANCE))
    flags = ["--timeout-map", args.bench_map, "--map-mode", "native", "--mode", "native",
             "--context-proofs", "trust", "--hol-light", args.work / "hol-light",
             "--context-root", args.work / "s2n-bignum", "--runtime", setting]
    before = kept()
    measured = {}
    try:
        for w in args.workers:
            folder = args.work / f"calibrate-w{w}"
            shutil.rmtree(folder, ignore_errors=True)      # never resume another run's sample
            with LoadSampler() as load:
                secs = step(PROOFBATCH + ["calibrate", args.work / "corpus", *flags, "--workers", str(w),
                                          "--out", folder], cwd=ROOT)
            now = kept()
            written = [p for p in now if now[p] != before.get(p)]
            if len(written) != 1:
                raise SystemExit(f"calibrate --workers {w} kept {len(written)} calibrations, not one")
            cal = json.loads(now[written[0]])
            measured[w] = {"factor": cal["factor"], "low": cal["low"], "high": cal["high"],
                           "problems": cal["problems"], "ratios": cal["ratios"], "load": load.text(),
                           "mean_load": round(statistics.mean(load.samples), 2) if load.samples else None,
                           "secs": round(secs), "worst_off": round(worst_off(cal["factor"], checks), 3)}
    finally:
        put_back(before)
    lines = [f"heavy_tail's sweep {out}: {len(checks)} OK heavy checks, {sweep_workers} at once, "
             f"runtime {setting}; CPU / map {min(cpu_over_map):.3f}-{max(cpu_over_map):.3f}",
             f"factors pricing every one within {TOLERANCE:.0%}: {window[0]:.3f}-{window[1]:.3f}"
             + ("" if window[0] <= window[1] else " (none: the checks' spread is wider than the tolerance)")]
    for w, m in measured.items():
        lines.append(f"calibrate --workers {w}: factor {m['factor']} (quartiles {m['low']}-{m['high']}, "
                     f"{m['problems']} ground truths, {m['load']}, {m['secs']} s); worst heavy check "
                     f"{m['worst_off']:.3f} off its CPU time")
    at_sweep = measured.get(sweep_workers)
    figures = {"sweep": str(out), "sweep_workers": sweep_workers, "runtime": setting,
               "checks": checks, "cpu_over_map": [round(min(cpu_over_map), 3), round(max(cpu_over_map), 3)],
               "window": [round(window[0], 4), round(window[1], 4)], "calibrations": measured}
    goals = [Goal(f"worst |planned / CPU - 1| at --workers {sweep_workers}",
                  None if at_sweep is None else at_sweep["worst_off"], "<=", TOLERANCE)]
    return emit(args, "calibrate_workers", figures, lines,
                f"the factor measured at the sweep's {sweep_workers} workers prices every heavy check "
                f"within {TOLERANCE:.0%}", True, goals)


if __name__ == "__main__":
    sys.exit(main())
