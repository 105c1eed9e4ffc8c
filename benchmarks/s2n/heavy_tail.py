"""The README's s2n-bignum path on the bench's heavy tail: problems of 120 s or more.

91% of the bench's compute is in problems its map lists at 120 s or more.
This script draws such problems (seeded) from both of s2n-bignum's trees and
runs exactly the README's commands on them, through the CLI:

1. ``scripts/build-hol-light-checkout.sh SRC 5e62421 WORK/hol-light native`` and
   ``proofbatch build-native --hol-light WORK/hol-light``;
2. s2n-bignum at 51147aa and the builds its proofs read: ``make -C arm``,
   ``make -C arm unopt``, ``make -C x86`` and ``make -C x86 winobj``;
3. ``proofbatch extract FILES --out CORPUS --hol-light HOL --context-root S2N``
   (the ids are the bench's: ``arm.`` or ``x86.`` from the tree);
4. ``proofbatch calibrate CORPUS --timeout-map MAP --map-mode native --mode native
   --context-proofs trust ...``;
5. ``proofbatch run CORPUS --problems @DRAWN --mode native --context-proofs trust
   --no-fallback --timeout-map MAP --map-mode native --host-factor auto --workers W``,
   with the default clock (cpu) and niceness (auto).

The draw: ``--light`` problems of 120-1,000 s, one per file, from at least
``--files-per-arch`` files of each tree; ``--medium`` of 1,000-3,000 s; ``--long``
of 3,000 s or more. For each problem it prints the verdict, CPU and wall time
against the map, peak memory, the context's image build time and the limit's
headroom (limit / CPU), with the host's load and factor. PASS: every ground
truth OK.

The sweep is resumable, and a heavy draw takes longer than a session: run the
same command again and the sweep resumes (``proofbatch run`` refuses a resume
that would mix builds, modes or limits). Rows from an earlier invocation are
named in the record's ``reused``. ``--fresh`` clears the sweep first.

    .venv/bin/python benchmarks/s2n/heavy_tail.py --work ~/heavy \\
        --hol-light-src https://github.com/jrh13/hol-light.git \\
        --s2n-bignum-src https://github.com/awslabs/s2n-bignum.git \\
        --bench-map s2n-bignum-bench/timeout-map.json --seed 1
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
from common import ROOT, Goal, arg_parser, emit, log, sweep_host_factor  # noqa: E402
from s2n_readme_path import (PROOFBATCH, S2N_BIGNUM_PIN, HOL_LIGHT_PIN, LoadSampler,  # noqa: E402
                             build_inputs, read_rows, source_arguments, step)

import record  # noqa: E402

# The classes of the heavy-tail issue, in the map's prove_secs.
CLASSES = {"light": (120.0, 1000.0), "medium": (1000.0, 3000.0), "long": (3000.0, float("inf"))}


def parse_args():
    parser = arg_parser(__doc__.splitlines()[0])
    source_arguments(parser, bench_map=True)
    parser.add_argument("--seed", type=int, default=1, help="seed of the draw (default 1)")
    parser.add_argument("--light", type=int, default=12, help="problems of 120-1,000 s (default 12)")
    parser.add_argument("--files-per-arch", type=int, default=4,
                        help="the light problems come from at least this many files of each tree (default 4)")
    parser.add_argument("--medium", type=int, default=2, help="problems of 1,000-3,000 s (default 2)")
    parser.add_argument("--long", type=int, default=1, help="problems of 3,000 s or more (default 1)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="checks at once (default: this host's CPUs)")
    parser.add_argument("--fresh", action="store_true", help="clear the sweep and rerun every check")
    args = parser.parse_args()
    args.work, args.bench_map = args.work.resolve(), args.bench_map.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.light < 2 * args.files_per_arch:
        parser.error(f"--light {args.light} cannot come from {args.files_per_arch} files of each tree")
    return args


def draw(bench_map: list[dict], s2n: Path, args) -> dict[str, list[dict]]:
    """The seeded draw, by class: each entry the map's, with its file."""
    rng = random.Random(args.seed)
    by_class: dict[str, list[dict]] = defaultdict(list)
    for entry in sorted(bench_map, key=lambda e: e["problem_id"]):
        arch, stem, _ = entry["problem_id"].split(".", 2)
        path = s2n / arch / "proofs" / f"{stem}.ml"
        secs = float(entry["prove_secs"])
        for name, (lo, hi) in CLASSES.items():
            if lo <= secs < hi and path.is_file():
                by_class[name].append({**entry, "arch": arch, "file": str(path), "class": name})
    drawn: dict[str, list[dict]] = {}
    # Light: one problem per file, at least --files-per-arch files of each tree.
    files: dict[str, dict[str, list[dict]]] = {"arm": defaultdict(list), "x86": defaultdict(list)}
    for e in by_class["light"]:
        files[e["arch"]][e["file"]].append(e)
    per_arch = {"arm": args.light // 2, "x86": args.light - args.light // 2}
    drawn["light"] = []
    for arch in ("arm", "x86"):
        for f in rng.sample(sorted(files[arch]), per_arch[arch]):
            drawn["light"].append(rng.choice(files[arch][f]))
    for name in ("medium", "long"):
        drawn[name] = rng.sample(by_class[name], getattr(args, name))
    return drawn


def image_builds(out: Path) -> dict[str, float]:
    """Seconds each image (a loaded context) took to build, by image key."""
    secs: dict[str, float] = defaultdict(float)
    for path in sorted((out / "images").glob("*.json")):
        for b in json.loads(path.read_text()).get("builds", []):
            secs[b["key"]] += float(b["secs"])
    return secs


def table(drawn: dict[str, list[dict]], rows: dict[str, dict],
          builds: dict[str, float]) -> tuple[list[str], list[dict]]:
    """One line per drawn problem, and the same as records."""
    lines = [f"{'class':6} {'problem':62} {'map s':>7} {'verdict':7} {'cpu s':>7} {'cpu/map':>7} "
             f"{'wall/map':>8} {'peak MB':>8} {'image s':>7} {'limit s':>8} {'headroom':>8}"]
    out = []
    for name, entries in drawn.items():
        for e in entries:
            pid, want = e["problem_id"], float(e["prove_secs"])
            r = rows.get(pid)
            if r is None:
                lines.append(f"{name:6} {pid:62} {want:7.0f} {'-':7} (no row yet)")
                out.append({"class": name, "problem_id": pid, "map_s": want, "verdict": None})
                continue
            cpu = float(r["prove_cpu_secs"] or r["cpu_secs"] or "nan")
            wall = float(r["prove_secs"] or "nan")
            peak = float(r["peak_rss_mb"] or "nan")
            limit = float(r["timeout_s"])
            image = builds.get(r["image_key"], float("nan"))
            item = {"class": name, "problem_id": pid, "map_s": want, "verdict": r["verdict"],
                    "reason": r["reason"], "prove_cpu_s": cpu, "prove_s": wall, "cpu_ratio": cpu / want,
                    "wall_ratio": wall / want, "peak_rss_mb": peak, "image_build_s": image,
                    "timeout_s": limit, "timeout_source": r["timeout_source"], "headroom": limit / cpu,
                    "host_load": r.get("host_load"), "run_id": r["run_id"]}
            out.append(item)
            lines.append(f"{name:6} {pid:62} {want:7.0f} {r['verdict']:7} {cpu:7.0f} {cpu / want:7.2f} "
                         f"{wall / want:8.2f} {peak:8.0f} {image:7.0f} {limit:8.0f} {limit / cpu:8.2f}")
    return lines, out


def main() -> int:
    args = parse_args()
    rec = record.current()
    hol, s2n, build_secs = build_inputs(args, ("arm", "x86"))
    bench_map = json.loads(args.bench_map.read_text())
    drawn = draw(bench_map, s2n, args)
    ids = [e["problem_id"] for entries in drawn.values() for e in entries]
    files = sorted({e["file"] for entries in drawn.values() for e in entries})
    log(f"seed {args.seed}: " + "; ".join(f"{k}: {', '.join(e['problem_id'] for e in v)}"
                                          for k, v in drawn.items()))
    rec.input("seed", args.seed)
    rec.input("ids", ids)
    rec.input("bench_map", path=args.bench_map)
    rec.input("s2n_bignum", S2N_BIGNUM_PIN)
    rec.input("hol_light", HOL_LIGHT_PIN)

    corpus, chosen, out = args.work / "corpus", args.work / "drawn.txt", args.work / f"out-{args.seed}"
    if args.fresh:
        shutil.rmtree(out, ignore_errors=True)
    extract_s = step(PROOFBATCH + ["extract", *files, "--out", corpus, "--hol-light", hol,
                                   "--context-root", s2n], cwd=ROOT)
    missing = [i for i in ids if not (corpus / i / "setup.ml").is_file()]
    if missing:
        raise SystemExit(f"extract gave no problem for {', '.join(missing)}: the draw measures nothing")
    chosen.write_text("".join(f"{i}\n" for i in ids))
    common_flags = ["--hol-light", hol, "--context-root", s2n, "--context-proofs", "trust",
                    "--mode", "native", "--timeout-map", args.bench_map, "--map-mode", "native"]
    with LoadSampler() as cal_load:
        calibrate_s = step(PROOFBATCH + ["calibrate", corpus, *common_flags], cwd=ROOT)
    before = set(read_rows(out)) if (out / "results.csv").is_file() else set()
    with LoadSampler() as run_load:
        run_s = step(PROOFBATCH + ["run", corpus, "--problems", f"@{chosen}", "--out", out,
                                   *common_flags, "--no-fallback", "--host-factor", "auto",
                                   "--workers", str(args.workers)], cwd=ROOT)
    rows = read_rows(out)
    manifest = json.loads((out / "sweep.json").read_text())
    factor = sweep_host_factor(out)
    rec.set("host_factor", factor)
    rec.niceness("checks", (manifest.get("config") or {}).get("nice"))
    reused = sorted(before & set(ids))
    if reused:
        rec.reused("rows of an earlier invocation of the same sweep", None, out=str(out), ids=reused,
                   run_ids=sorted({rows[i]["run_id"] for i in reused if i in rows}))
    lines, items = table(drawn, rows, image_builds(out))
    ok = sum(1 for i in items if i["verdict"] == "OK")
    by_class = {}
    for name in drawn:
        ratios = [i["cpu_ratio"] for i in items if i["class"] == name and i["verdict"] == "OK"]
        peaks = [i["peak_rss_mb"] for i in items if i["class"] == name and i["verdict"] == "OK"]
        by_class[name] = {"ok": len(ratios), "drawn": len(drawn[name]),
                          "cpu_ratio_median": round(statistics.median(ratios), 3) if ratios else None,
                          "peak_rss_mb_max": round(max(peaks)) if peaks else None}
    header = [f"seed {args.seed}: {len(ids)} problems from {len(files)} files; host factor {factor} "
              f"(calibrate {calibrate_s:.0f} s, {cal_load.text()}); run {run_s:.0f} s, {run_load.text()}; "
              f"extract {extract_s:.0f} s; builds "
              + ", ".join(f"{k} {v:.0f}" for k, v in build_secs.items())]
    header += [f"{k}: {v['ok']} of {v['drawn']} OK, CPU / map median {v['cpu_ratio_median']}, "
               f"peak {v['peak_rss_mb_max']} MB" for k, v in by_class.items()]
    figures = {"seed": args.seed, "ids": ids, "host_factor": factor, "calibrate_s": round(calibrate_s),
               "run_s": round(run_s), "calibrate_load": cal_load.text(), "run_load": run_load.text(),
               **{k: round(v) for k, v in build_secs.items()}, "extract_s": round(extract_s),
               "by_class": by_class, "problems": items}
    return emit(args, "heavy_tail", figures, header + lines, "every drawn ground truth OK", True,
                [Goal("ground truths OK", ok, "==", len(ids))])


if __name__ == "__main__":
    sys.exit(main())
