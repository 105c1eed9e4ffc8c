"""The bench's whole heavy tail priced before it runs, and the price checked on the checks that ran.

``proofbatch simulate`` prices the map's problems of 120 s or more (both
trees: 242 in the bench's map) with this host's factor, as a user would
before renting a cluster:

1. ``proofbatch extract`` of every file that holds one (the corpus gives
   simulate each problem's context, so image builds are priced too);
2. ``proofbatch simulate --timeout-map MAP --map-mode native --mode native
   --context-proofs trust --corpus CORPUS --problems @HEAVY --host-factor F
   --costs-from OUT --workers W --json`` at each of ``--workers`` (64 and 512),
   and on one 32-core node of 128 GB (``--nodes 1 --cores-per-node 32
   --mem-per-node 128G``), the node the bench's README sizes (cores = RAM / 4-6);
3. the prediction against what benchmarks/s2n/heavy_tail.py measured: for each of
   its checks, the planned proof time simulate lists (``planned_checks``: map
   time x factor) against the CPU and wall time it took.

F is the factor heavy_tail's sweep ran with (its sweep.json), and OUT that
sweep, whose measured image builds price the images.

One factor from light proofs prices a heavy check within 15% only by chance:
here the heavy checks' own CPU / map ratios spread 0.92-1.22
(docs/heavy-tail.md). With ``--profile DIR``, a ``proofbatch profile`` of
heavy_tail's checks taken on this host, the script also prices them as a user
who profiled here would:

4. ``proofbatch timeout-map DIR --out WORK/host-map.json``, then
   ``proofbatch simulate --timeout-map WORK/host-map.json --corpus WORK/corpus
   --problems @WORK/heavy-tail-ids.txt --host-factor 1 --workers W`` (W:
   heavy_tail's workers), and each check's planned time against what
   heavy_tail measured.

PASS: every planned proof time of the heavy_tail checks is within 15% of the
measured CPU time (from the host's profile when ``--profile`` is given, else
from the bench's map x F), and no measured peak is above the memory guard
simulate gives its class.

    .venv/bin/python benchmarks/planning/heavy_pricing.py --work ~/heavy \\
        --bench-map s2n-bignum-bench/timeout-map.json --seed 1 [--profile DIR]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
from common import ROOT, Goal, arg_parser, emit, log, sweep_host_factor  # noqa: E402
from s2n_readme_path import PROOFBATCH, read_rows, step  # noqa: E402

import record  # noqa: E402
from runner.maps import mem_needs  # noqa: E402

HEAVY_S = 120.0           # the heavy-tail issue's line: the map's prove_secs
TOLERANCE = 0.15          # planned proof time against measured CPU
# The map's time classes the heavy-tail issue counts compute in (seconds).
BANDS = ((0.0, 120.0), (120.0, 300.0), (300.0, 1000.0), (1000.0, 3000.0), (3000.0, float("inf")))


def shares(map_s: dict[str, float]) -> list[dict]:
    """Problems and core-hours of the map in each band, and the band's share of the whole."""
    total = sum(map_s.values())
    out = []
    for lo, hi in BANDS:
        secs = [t for t in map_s.values() if lo <= t < hi]
        out.append({"band": f"{lo:,.0f}-{hi:,.0f} s" if hi != float("inf") else f"{lo:,.0f} s or more",
                    "problems": len(secs), "core_hours": round(sum(secs) / 3600, 1),
                    "share": round(sum(secs) / total, 3)})
    return out


def heavy_tail_args(doc: str, workers: str, workers_help: str, extra=None):
    """The flags of a script that reads what benchmarks/s2n/heavy_tail.py left
    under --work (its trees, corpus and sweep), with --workers a list;
    ``extra(parser)`` adds the script's own."""
    parser = arg_parser(doc.splitlines()[0])
    if extra is not None:
        extra(parser)
    parser.add_argument("--work", type=Path, required=True,
                        help="benchmarks/s2n/heavy_tail.py's --work: its trees, corpus and sweep out-SEED")
    parser.add_argument("--bench-map", type=Path, required=True, help="the bench's timeout-map.json")
    parser.add_argument("--seed", type=int, default=1, help="heavy_tail's seed: its sweep is WORK/out-SEED")
    parser.add_argument("--workers", default=workers, help=f"{workers_help} (default {workers})")
    args = parser.parse_args()
    args.work, args.bench_map = args.work.resolve(), args.bench_map.resolve()
    args.workers = [int(w) for w in args.workers.split(",")]
    return args


def heavy_tail_sweep(args) -> Path:
    """heavy_tail.py's sweep under --work for --seed; none stops the script."""
    out = args.work / f"out-{args.seed}"
    if not (out / "sweep.json").is_file():
        raise SystemExit(f"{out}: no sweep; run benchmarks/s2n/heavy_tail.py --work {args.work} first")
    return out


def parse_args():
    def profile(parser):
        parser.add_argument("--profile", type=Path,
                            help="a `proofbatch profile` of heavy_tail's checks taken on this host: "
                                 "price them from the map derived from it, at factor 1")
    return heavy_tail_args(__doc__, "64,512", "worker counts to price", profile)


def planned_times(priced: dict) -> dict[str, float]:
    """Each problem's planned proof time as simulate priced it (its first answer)."""
    return {c["problem_id"]: c["expected_s"] for c in priced["planned_checks"] if c["attempt"] == 0}


def host_priced(args, out: Path, ids: list[str], hol: Path, s2n: Path, rec) -> tuple[dict, dict]:
    """heavy_tail's checks priced from --profile: the map `timeout-map` derives
    from it, at factor 1 and heavy_tail's worker count. (simulate's figures,
    the planned time of each.)"""
    host_map, listed = args.work / "host-map.json", args.work / "heavy-tail-ids.txt"
    step(PROOFBATCH + ["timeout-map", args.profile.resolve(), "--out", host_map], cwd=ROOT)
    listed.write_text("".join(f"{p}\n" for p in ids))
    rec.input("profile", str(args.profile.resolve()))
    rec.input("host_map", path=host_map)
    workers = json.loads((out / "sweep.json").read_text())["config"]["workers"]
    priced = simulate(["--timeout-map", host_map, "--mode", "native", "--context-proofs", "trust",
                       "--corpus", args.work / "corpus", "--problems", f"@{listed}", "--host-factor", 1,
                       "--costs-from", out, "--hol-light", hol, "--context-root", s2n, "--workers", workers])
    sidecar = json.loads(host_map.with_name("host-map.meta.json").read_text())
    priced["profile_runs"] = min((p["runs"] for p in sidecar["problems"].values()), default=0)
    return priced, planned_times(priced)


def simulate(flags: list) -> dict:
    argv = [str(a) for a in PROOFBATCH + ["simulate", *flags, "--json"]]
    log("$ " + " ".join(argv))
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"simulate failed with exit {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main() -> int:
    args = parse_args()
    rec = record.current()
    out = heavy_tail_sweep(args)
    factor = sweep_host_factor(out)
    if factor is None:
        raise SystemExit(f"{out}/sweep.json: no host factor resolved; run heavy_tail.py to its end first")
    bench_map = json.loads(args.bench_map.read_text())
    heavy = sorted(e["problem_id"] for e in bench_map if float(e["prove_secs"]) >= HEAVY_S)
    map_s = {e["problem_id"]: float(e["prove_secs"]) for e in bench_map}
    s2n, hol = args.work / "s2n-bignum", args.work / "hol-light"
    files = sorted({str(s2n / p.split(".")[0] / "proofs" / f"{p.split('.')[1]}.ml") for p in heavy})
    corpus, ids = args.work / "heavy-corpus", args.work / "heavy-ids.txt"
    shutil.rmtree(corpus, ignore_errors=True)
    extract_s = step(PROOFBATCH + ["extract", *files, "--out", corpus, "--hol-light", hol,
                                   "--context-root", s2n], cwd=ROOT)
    ids.write_text("".join(f"{p}\n" for p in heavy))
    rec.input("ids", heavy)
    rec.input("bench_map", path=args.bench_map)
    rec.input("heavy_tail_sweep", str(out))
    rec.set("host_factor", factor)
    base = ["--timeout-map", args.bench_map, "--map-mode", "native", "--mode", "native",
            "--context-proofs", "trust", "--corpus", corpus, "--problems", f"@{ids}",
            "--host-factor", factor, "--costs-from", out, "--hol-light", hol, "--context-root", s2n]
    priced = {w: simulate(base + ["--workers", w]) for w in args.workers}
    node = simulate(base + ["--nodes", 1, "--cores-per-node", 32, "--mem-per-node", "128G"])

    # The prediction against the checks heavy_tail ran.
    rows = {pid: r for pid, r in sorted(read_rows(out).items())
            if map_s.get(pid, 0) >= HEAVY_S and r["verdict"] == "OK"}
    planned = planned_times(priced[args.workers[0]])
    host = host_priced(args, out, list(rows), hol, s2n, rec) if args.profile else None
    checks = []
    for pid, r in rows.items():
        cpu, wall = float(r["prove_cpu_secs"]), float(r["prove_secs"])
        limit = mem_needs.mem_limit(map_s[pid] * factor, None, cap=None,
                                    default=node["memory"]["default_share_bytes"],
                                    node=node["memory"]["mem_per_node"], default_expected=0)
        checks.append({"problem_id": pid, "map_s": map_s[pid], "planned_s": round(planned[pid], 1),
                       "cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
                       "planned_over_cpu": round(planned[pid] / cpu, 3),
                       "planned_over_wall": round(planned[pid] / wall, 3),
                       "peak_rss_mb": float(r["peak_rss_mb"]), "guard_on_32_core_node_mb": limit.guard // 2**20,
                       "guard_source": limit.source})
        if host is not None:
            checks[-1]["host_planned_s"] = round(host[1][pid], 1)
            checks[-1]["host_planned_over_cpu"] = round(host[1][pid] / cpu, 3)
    worst = max((abs(c["planned_over_cpu"] - 1) for c in checks), default=None)
    host_worst = None if host is None else max(abs(c["host_planned_over_cpu"] - 1) for c in checks)
    over_guard = [c["problem_id"] for c in checks if c["peak_rss_mb"] > c["guard_on_32_core_node_mb"]]

    lines = [f"{len(heavy)} problems of {HEAVY_S:g} s or more in {len(files)} files; host factor {factor} "
             f"(heavy_tail's sweep {out}); extract {extract_s:.0f} s"]
    for w, f in priced.items():
        lines.append(f"{w:4} workers: makespan {f['makespan_s']:,.0f} s, lower bound {f['lower_bound_s']:,.0f} s "
                     f"(set by {f['longest_check']}), {f['core_hours']:.1f} core-hours, of which images "
                     f"{f['image_build_core_hours']:.2f}, utilization {f['utilization']:.1%}")
    m = node["memory"]
    lines.append(f"one 32-core node of 128 GB: makespan {node['makespan_s']:,.0f} s; default share "
                 f"{m['default_share_bytes'] / 2**30:.1f} GiB; {m['above_share']} of {m['checks']} checks get "
                 f"more (up to {m['max_guard_bytes'] / 2**30:.1f} GiB); {m['largest_at_once']} of the "
                 "largest fit at once")
    if host is not None:
        lines.append(f"heavy_tail's {len(checks)} checks priced from this host's profile {args.profile} "
                     f"({host[0]['profile_runs']} runs each, factor 1, {host[0]['workers']} workers): "
                     f"makespan {host[0]['makespan_s']:,.0f} s")
    for c in checks:
        lines.append(f"  {c['problem_id']:62} planned {c['planned_s']:7.0f} s, CPU {c['cpu_s']:7.0f} s "
                     f"({c['planned_over_cpu']:.3f}), wall {c['wall_s']:7.0f} s ({c['planned_over_wall']:.3f}); "
                     f"peak {c['peak_rss_mb']:.0f} MB, guard on the node {c['guard_on_32_core_node_mb']} MB"
                     + (f"; from the profile {c['host_planned_s']:7.0f} s ({c['host_planned_over_cpu']:.3f})"
                        if host is not None else ""))
    bands = shares(map_s)
    lines[1:1] = [f"  map {b['band']:>15}: {b['problems']:5} problems, {b['core_hours']:5.1f} core-hours "
                  f"({b['share']:.0%})" for b in bands]
    figures = {"problems": len(heavy), "files": len(files), "host_factor": factor, "map_bands": bands,
               "map_core_hours": round(sum(map_s.values()) / 3600, 1),
               "priced": {str(w): {k: f[k] for k in ("makespan_s", "lower_bound_s", "lower_bound_terms",
                                                     "longest_check", "core_hours", "image_build_core_hours",
                                                     "utilization", "naive_makespan_s")}
                          for w, f in priced.items()},
               "node_32_128g": {"makespan_s": node["makespan_s"], "memory": m},
               "checks": checks, "worst_planned_over_cpu_off": worst, "over_guard": over_guard,
               "extract_s": round(extract_s)}
    if host is not None:
        figures["host_profile"] = {"makespan_s": host[0]["makespan_s"], "workers": host[0]["workers"],
                                   "runs": host[0]["profile_runs"],
                                   "worst_planned_over_cpu_off": round(host_worst, 3)}
        lines.append(f"worst planned / CPU off: {worst:.3f} from the bench's map x {factor} (not a goal: "
                     "one factor prices a heavy check within 15% only by chance)")
    judged, whence = (worst, "map x factor") if host is None else (host_worst, "this host's profile")
    goals = [Goal("heavy_tail checks compared", len(checks), ">=", 1),
             Goal(f"worst |planned / CPU - 1|, {whence}", None if judged is None else round(judged, 3),
                  "<=", TOLERANCE),
             Goal("peaks above the node's guard", len(over_guard), "==", 0)]
    return emit(args, "heavy_pricing", figures, lines,
                f"planned proof time within {TOLERANCE:.0%} of measured CPU; no peak above its guard", True, goals)


if __name__ == "__main__":
    sys.exit(main())
