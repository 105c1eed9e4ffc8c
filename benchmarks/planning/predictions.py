"""Predictions against what happened: simulate, then sweep, real s2n-bignum problems.

Issue 25's first "Done when": on the real client (the bench's pinned HOL
Light, s2n-bignum at the pin, problems of several arm files) a plan's
predicted image core-seconds are within 25% of the measured ones per image
class, and its makespan within 15%, natively and in bytecode. Everything
goes through the installed CLI, as a cluster user would:

1. ``--files`` arm proof files at random (the seed is printed), as
   s2n_readme_path.py picks them, ``proofbatch extract``-ed, the problems the
   bench's map lists selected (``--problems @FILE``);
2. per mode, *before* the sweep: ``proofbatch simulate --corpus ... --problems
   @FILE --mode M --context-proofs trust --workers W --json``: its image build
   seconds per image class (``image_classes``) and its makespan;
3. ``proofbatch run`` of the same problems, same mode, choice and workers;
4. measured: each planned image's build seconds from ``OUT/images/*.json``
   (natively with the compiles of its context, ``native-compile:KEY``, and of
   its problems' answers, ``native-compile:answers:KEY``, as the model prices
   them: what the image needs before its checks run), classed by the sweep's own
   ``OUT/plan.json`` tree; the makespan as ``proofbatch report`` states it
   (the boot, then first dispatch to last verdict), and the run's wall.

Native figures depend on the compile cache (``PROOFBATCH_CACHE``, default
``~/.cache/proofbatch/native``): the report says how many library modules the
sweep added to it (0: a warm cache, as every sweep after a user's first
meets it). ``--cold-cache`` runs the native sweep on a copy of the build
with an empty library cache, as a user's first sweep meets it.

    .venv/bin/python benchmarks/planning/predictions.py --work /tmp/pred --seed 5 \\
        --hol-light /work/bench/hol-light --s2n-bignum /work/bench/s2n-bignum \\
        --bench-map /work/bench/bench/timeout-map.json
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
from common import ROOT, Goal, arg_parser, emit, log  # noqa: E402
from runner.reporting.report import IMAGE_CLASSES, image_classes  # noqa: E402
from s2n_readme_path import (PROOFBATCH, LoadSampler, choose_files, sample_arguments,  # noqa: E402
                             step)

IMAGE_TARGET = 0.25       # issue 25: image core-seconds within 25% of measured
MAKESPAN_TARGET = 0.15    # and the makespan within 15%
COMPILE = "native-compile:"
ANSWERS = COMPILE + "answers:"


def cli_json(argv: list, env: dict | None = None) -> dict:
    log("$ " + " ".join(str(a) for a in argv))
    r = subprocess.run([str(a) for a in argv], cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"step failed with exit {r.returncode}: {' '.join(map(str, argv))}")
    return json.loads(r.stdout)


def report_makespan(out: Path) -> float:
    """The makespan ``proofbatch report`` states on its first line."""
    argv = PROOFBATCH + ["report", str(out)]
    r = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                       env={**os.environ, "COLUMNS": "200"})
    m = re.search(r"makespan ([\d.]+) s", r.stdout)
    if r.returncode != 0 or m is None:
        raise SystemExit(f"proofbatch report {out} gave no makespan (exit {r.returncode})")
    return float(m.group(1))


def measured_classes(out: Path) -> tuple[dict[str, dict], dict]:
    """Each image class's measured build seconds (each planned image once:
    the median of its builds, plus the compiles of its context and its
    answers), and the rest: rebuilds, builds the plan did not know."""
    plan = json.loads((out / "plan.json").read_text())
    planned = {i["key"]: i for i in plan["images"]}
    classes = image_classes(planned)
    builds: dict[str, list[float]] = defaultdict(list)
    for f in sorted((out / "images").glob("*.json")):
        for b in json.loads(f.read_text())["builds"]:
            builds[b["key"]].append(float(b["secs"]))
    per: dict[str, dict] = {}
    other = {"answer_compile_s": 0.0, "rebuild_s": 0.0, "unplanned_s": 0.0, "compile_s": 0.0}
    for key, secs in builds.items():
        if key.startswith(COMPILE):
            ctx = key[len(ANSWERS if key.startswith(ANSWERS) else COMPILE):]
            if key.startswith(ANSWERS):
                other["answer_compile_s"] += sum(secs)
            if ctx in classes:
                c = per.setdefault(classes[ctx], {"images": 0, "build_s": 0.0, "compile_s": 0.0})
                c["build_s"] += statistics.median(secs)
                c["compile_s"] += statistics.median(secs)
                other["compile_s"] += sum(secs)
            else:
                other["unplanned_s"] += sum(secs)
        elif key in classes:
            c = per.setdefault(classes[key], {"images": 0, "build_s": 0.0, "compile_s": 0.0})
            c["images"] += 1
            c["build_s"] += statistics.median(secs)
            other["rebuild_s"] += sum(secs) - statistics.median(secs) if len(secs) > 1 else 0.0
        else:
            other["unplanned_s"] += sum(secs)
    return {k: per[k] for k in IMAGE_CLASSES if k in per}, other


def error(predicted: float, measured: float) -> float | None:
    return (predicted - measured) / measured if measured > 0 else None


def cache_modules(cache: Path) -> int:
    """Library modules compiled into the native cache (its builds' libs/)."""
    return sum(1 for _ in cache.glob("native/*/libs/*.cmxs")) if cache.is_dir() else 0


def cold_cache(work: Path) -> Path:
    """A PROOFBATCH_CACHE holding the native builds without their compiled
    libraries: a user's first sweep of these contexts."""
    src = Path(os.environ.get("PROOFBATCH_CACHE") or Path.home() / ".cache/proofbatch")
    dst = work / "cold-cache"
    shutil.rmtree(dst, ignore_errors=True)
    for build in (src / "native").glob("*/build.json"):
        shutil.copytree(build.parent, dst / "native" / build.parent.name,
                        ignore=lambda d, names: ["libs"] if Path(d) == build.parent else [])
        (dst / "native" / build.parent.name / "libs").mkdir()
    return dst


def one_mode(args, mode: str, corpus: Path, chosen: Path) -> dict:
    out = args.work / f"pred-{args.seed}-{mode}"
    shutil.rmtree(out, ignore_errors=True)      # this benchmark's own sweep: measured afresh
    common_args = ["--hol-light", args.hol_light, "--context-root", args.s2n_bignum,
                   "--context-proofs", "trust", "--mode", mode, "--problems", f"@{chosen}",
                   "--timeout-map", args.bench_map, "--map-mode", "native"]
    env = dict(os.environ)
    if mode == "native" and args.cold_cache:
        env["PROOFBATCH_CACHE"] = str(cold_cache(args.work))
    # The plan, before the sweep, from the same cache the sweep will meet.
    sim = cli_json(PROOFBATCH + ["simulate", "--corpus", corpus, "--workers", str(args.workers),
                                 "--json"] + common_args, env)
    cache = Path(env.get("PROOFBATCH_CACHE") or Path.home() / ".cache/proofbatch")
    before = cache_modules(cache)
    argv = PROOFBATCH + ["run", corpus, "--out", out, "--workers", str(args.workers)] + common_args
    if mode == "native":
        argv.append("--no-fallback")
    with LoadSampler() as load:
        wall = step(argv, cwd=ROOT, env=env)
    measured, other = measured_classes(out)
    return {"mode": mode, "out": str(out), "wall_s": wall, "load": load.text(),
            "cache_modules_added": cache_modules(cache) - before,
            "predicted": {"makespan_s": sim["makespan_s"], "classes": sim["image_classes"],
                          "checks": sim["checks"]},
            "measured": {"makespan_s": report_makespan(out), "classes": measured, **other}}


def judge(result: dict, lines: list[str]) -> list[Goal]:
    """Table lines for one mode; its goals: each image class's core-seconds
    within IMAGE_TARGET of the measured (relative error; none measured
    misses it), its makespan within MAKESPAN_TARGET."""
    mode, pred, meas = result["mode"], result["predicted"], result["measured"]
    goals = []
    lines.append(f"{mode}: {pred['checks']} checks, wall {result['wall_s']:.0f} s, {result['load']}"
                 + (f", {result['cache_modules_added']} library modules compiled into the cache "
                    f"({'cold' if result['cache_modules_added'] else 'warm'})"
                    if mode == "native" else ""))
    lines.append(f"  {'image class':16} {'n':>3} {'predicted s':>12} {'measured s':>11} {'error':>8}")
    total_p = total_m = 0.0
    for cls in IMAGE_CLASSES:
        p, m = pred["classes"].get(cls), meas["classes"].get(cls)
        if p is None and m is None:
            continue
        ps, ms = (p or {}).get("build_s", 0.0), (m or {}).get("build_s", 0.0)
        total_p, total_m = total_p + ps, total_m + ms
        e = error(ps, ms)
        goals.append(Goal(f"{mode} {cls} image core-s |predicted / measured - 1|",
                          None if e is None else round(abs(e), 4), "<=", IMAGE_TARGET))
        ok = goals[-1].met
        lines.append(f"  {cls:16} {(p or m)['images']:3d} {ps:12.1f} {ms:11.1f} "
                     f"{'-' if e is None else f'{100 * e:+.0f}%':>8} {'PASS' if ok else 'FAIL'}"
                     + (f"  (compile {m['compile_s']:.1f})" if m and m.get("compile_s") else ""))
    e = error(total_p, total_m)
    lines.append(f"  {'all images':16} {'':3} {total_p:12.1f} {total_m:11.1f} "
                 f"{'-' if e is None else f'{100 * e:+.0f}%':>8}"
                 + (f"  (answer compiles {meas['answer_compile_s']:.1f} s, rebuilds "
                    f"{meas['rebuild_s']:.1f} s, unplanned {meas['unplanned_s']:.1f} s)"))
    e = error(pred["makespan_s"], meas["makespan_s"])
    goals.append(Goal(f"{mode} makespan |predicted / measured - 1|",
                      None if e is None else round(abs(e), 4), "<=", MAKESPAN_TARGET))
    ok = goals[-1].met
    lines.append(f"  {'makespan':16} {'':3} {pred['makespan_s']:12.1f} {meas['makespan_s']:11.1f} "
                 f"{'-' if e is None else f'{100 * e:+.0f}%':>8} {'PASS' if ok else 'FAIL'}  "
                 f"(run wall {result['wall_s']:.1f} s)")
    # Not judged: other work on the host stretches every build alike, which no
    # plan knows; the library prefix, the largest build, shows by how much, and
    # the rest set against it shows what is the model's own error.
    p_lib = pred["classes"].get("library prefix", {}).get("build_s")
    m_lib = meas["classes"].get("library prefix", {}).get("build_s")
    if p_lib and m_lib:
        slow = m_lib / p_lib
        rest = [(cls, pred["classes"][cls]["build_s"], meas["classes"][cls]["build_s"] / slow)
                for cls in ("file head", "chain image")
                if cls in pred["classes"] and cls in meas["classes"]]
        rest.append(("makespan", pred["makespan_s"], meas["makespan_s"] / slow))
        lines.append(f"  (not judged) library prefix measured/predicted x{slow:.2f}; the others "
                     "divided by it: " + ", ".join(f"{c} {100 * error(p, m):+.0f}%" for c, p, m in rest))
    return goals


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="folder for the corpus and sweeps")
    parser.add_argument("--hol-light", type=Path, required=True,
                        help="the bench's HOL Light checkout, built (s2n_readme_path.py builds one)")
    parser.add_argument("--s2n-bignum", type=Path, required=True,
                        help="s2n-bignum at the pin with `make -C arm` done (the context root)")
    sample_arguments(parser)
    parser.add_argument("--cold-cache", action="store_true",
                        help="native: compile the libraries afresh (a copy of the build, empty libs/)")
    args = parser.parse_args()
    for name in ("work", "hol_light", "s2n_bignum", "bench_map"):
        setattr(args, name, getattr(args, name).resolve())
    args.work.mkdir(parents=True, exist_ok=True)
    bench_map = json.loads(args.bench_map.read_text())
    listed = {e["problem_id"] for e in bench_map}
    files = choose_files(bench_map, args.s2n_bignum, args.seed, args.files, args.max_file_secs)
    log(f"seed {args.seed}: {', '.join(files)}")
    corpus = args.work / f"corpus-{args.seed}"
    shutil.rmtree(corpus, ignore_errors=True)
    step(PROOFBATCH + ["extract", *[args.s2n_bignum / "arm/proofs" / f"{f}.ml" for f in files],
                       "--out", corpus, "--prefix", "arm"], cwd=ROOT)
    ids = sorted(p.name for p in corpus.iterdir() if (p / "setup.ml").is_file() and p.name in listed)
    chosen = args.work / f"problems-{args.seed}.txt"
    chosen.write_text("".join(f"{i}\n" for i in ids))

    lines = [f"seed {args.seed}: files {', '.join(files)}; {len(ids)} problems the bench's map "
             f"lists; {args.workers} workers; --context-proofs trust; "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]
    goals, results = [], []
    for mode in args.modes.split(","):
        result = one_mode(args, mode, corpus, chosen)
        results.append(result)
        goals += judge(result, lines)
    figures = {"seed": args.seed, "files": files, "problems": len(ids), "results": results,
               "missed": [g.name for g in goals if not g.met]}
    return emit(args, "predictions", figures, lines,
                f"image core-s per class within {IMAGE_TARGET:.0%}, makespan within "
                f"{MAKESPAN_TARGET:.0%}, each mode", True, goals)


if __name__ == "__main__":
    sys.exit(main())
