"""OCaml runtime settings for proof checking, measured ABBA against OCaml's defaults.

A check's proof CPU time depends on the garbage collector's settings as well
as on the proof (docs/native.md, "Runtime settings").
This script runs the same s2n-bignum ground truths natively (or, with
``--mode bytecode``, in HOL Light's bytecode toplevel) through the README's
commands: ``proofbatch serve`` keeps their images loaded (one server
per ``settle`` the grid names), and ``proofbatch run --server DIR --runtime
SETTING`` checks them in it, each check setting its own minor heap,
space_overhead and major increment as it starts. Loading the images once
for every setting is what makes a grid affordable here: an s2n-bignum
context takes minutes to load, a light proof seconds.

Two stages, each in palindromic order so that drift in the host's load
favours no setting: per round the defaults, every setting, every setting
again in reverse, the defaults (ABBA for each setting against the runs of
the defaults around it).
1. The screen: every setting of the grid on the light draw.
2. The finals: the ``--finalists`` best of the screen (verdicts kept, within
   the memory bound) on the light and the heavy draw together. With
   ``--heavy 0`` or ``--finalists 0`` there are none, and the screen is
   judged (for a bytecode grid: a bytecode proof takes 2.5-6x its native
   time, so a heavy one takes 5-16 min here, a round of the finals hours).
Per setting it records proof CPU and wall time against the defaults' (the
median of per-problem ratios, and the worst problem), peak memory per check
against the defaults', and whether any verdict changed. To see why a setting
wins, it also reports the garbage collector's counters each check records
over its proof (the rows' ``gc``: ``Gc.quick_stat`` before and after prove):
per setting and for the defaults beside it, the median per proof of minor
and major collections and promoted words, and the image's size after it
settled (its major heap and that heap's peak as a check forked from it
starts, plus the minor heap the setting asks for).

The grid (``--grid``, settings separated by ``;``): the minor heap ``s`` at
256k (the default), 1M, 4M and 16M words; ``space_overhead`` ``o`` at 80
(the default), 120 and 200; the major heap increment ``i``; and whether the
image collects (the default), compacts or neither before it serves. The
draw: ``--light`` ground truths of 1-``--light-max`` s (map time) from
``--files`` s2n-bignum files, half of each tree, and ``--heavy`` of
120-``--heavy-max`` s.

Goal: the best finalist saves at least 15% of proof CPU (median ratio
<= 0.85) with peak memory per check up by at most 256 MB and every verdict
unchanged.

It needs the trees ``benchmarks/s2n/heavy_tail.py`` (or s2n_readme_path.py)
leaves built under ``--work``:

    .venv/bin/python benchmarks/native/runtime_tuning.py --work ~/heavy \\
        --bench-map s2n-bignum-bench/timeout-map.json --seed 1
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
from common import ROOT, Goal, arg_parser, emit, log  # noqa: E402
from s2n_readme_path import PROOFBATCH, LoadSampler, read_rows, step  # noqa: E402
from loaded_host import Server  # noqa: E402

import record  # noqa: E402
from runner.provers.hol_light import runtime  # noqa: E402

GRID = "s=1M;s=4M;s=16M;o=120;o=200;s=16M,o=200;i=4M;settle=compact;settle=none"
MEM_GOAL_MB = 256.0
CPU_GOAL = 0.85
# The counters reported per setting (of the rows' gc, verdict_record.GC_FIELDS),
# and those that size the image a check forks from.
GC_SHOWN = ("minor_collections", "major_collections", "promoted_words")
GC_IMAGE = ("heap_words_before", "top_heap_words_before")
WORD = 8                    # bytes in an OCaml word on a 64-bit host
MINOR_DEFAULT = 256 << 10   # OCaml 4.13's minor heap, in words (s=256k)
SUFFIX = {"k": 1 << 10, "M": 1 << 20, "G": 1 << 30}     # OCAMLRUNPARAM's multipliers


def parse_args():
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True,
                        help="holds hol-light (the bench's checkout, built native) and s2n-bignum "
                        "(made, unopt and winobj too), as benchmarks/s2n/heavy_tail.py leaves them")
    parser.add_argument("--bench-map", type=Path, required=True, help="the bench's timeout-map.json")
    parser.add_argument("--seed", type=int, default=1, help="seed of the draw (default 1)")
    parser.add_argument("--light", type=int, default=20, help="ground truths of 1 s or more, at "
                        "least (default 20)")
    parser.add_argument("--light-max", type=float, default=30.0,
                        help="the light ones' map time at most, in seconds (default 30)")
    parser.add_argument("--files", type=int, default=6,
                        help="the light ones come from at least this many files, half of each tree "
                        "(default 6)")
    parser.add_argument("--heavy", type=int, default=3, help="ground truths of 120 s or more "
                        "(default 3)")
    parser.add_argument("--heavy-max", type=float, default=160.0,
                        help="the heavy ones' map time at most, in seconds (default 160)")
    parser.add_argument("--grid", default=GRID, help="settings to measure, separated by ';' "
                        f"(default: {GRID})")
    parser.add_argument("--finalists", type=int, default=2,
                        help="the screen's best settings measured on the heavy draw too (default 2)")
    parser.add_argument("--rounds", type=int, default=1, help="palindromic rounds per stage (default 1)")
    parser.add_argument("--workers", type=int, default=2, help="checks at once (default 2)")
    parser.add_argument("--mode", choices=("native", "bytecode"), default="native",
                        help="the checks' and the images' mode, as for run and serve (default native)")
    args = parser.parse_args()
    args.work, args.bench_map = args.work.resolve(), args.bench_map.resolve()
    return args


def draw(bench_map: list[dict], s2n: Path, args) -> tuple[list[dict], list[dict]]:
    """Seeded: ``--light`` ground truths (or a few more) of 1-``--light-max``
    s, the same share from each of ``--files`` files, half of each tree,
    among the files that hold that share (few files: each is an image every
    server keeps loaded); ``--heavy`` of 120-``--heavy-max`` s."""
    rng = random.Random(args.seed)
    light: dict[str, dict[str, list[dict]]] = {"arm": defaultdict(list), "x86": defaultdict(list)}
    heavy = []
    for e in sorted(bench_map, key=lambda e: e["problem_id"]):
        arch, stem, _ = e["problem_id"].split(".", 2)
        path = s2n / arch / "proofs" / f"{stem}.ml"
        if not path.is_file():
            continue
        secs = float(e["prove_secs"])
        if 1.0 <= secs <= args.light_max:
            light[arch][str(path)].append({**e, "file": str(path)})
        elif 120.0 <= secs <= args.heavy_max:
            heavy.append({**e, "file": str(path)})
    per = -(-args.light // args.files)
    chosen = []
    for arch, count in (("arm", -(-args.files // 2)), ("x86", args.files // 2)):
        roomy = sorted(f for f, problems in light[arch].items() if len(problems) >= per)
        for f in rng.sample(roomy, min(count, len(roomy))):
            chosen += rng.sample(light[arch][f], per)
    return chosen, rng.sample(heavy, min(args.heavy, len(heavy)))


class Servers:
    """One ``proofbatch serve`` per ``settle`` the settings name (loaded_host's
    Server), each started when first needed and stopped at the end; a check
    sets its own s, o and i in them (hol_check.ml), its settle is its images'."""

    def __init__(self, args):
        self.args, self.running, self.stack = args, {}, contextlib.ExitStack()

    def folder(self, setting: str) -> Path:
        settle = runtime.parse(setting).settle
        if settle not in self.running:
            folder = self.args.work / f"runtime-serve-{settle}"
            shutil.rmtree(folder, ignore_errors=True)
            # Every theorem of a file is a context of its own (the file up to
            # it): two dozen images for six files. An image evicted would load
            # again beside a measured check.
            self.running[settle] = self.stack.enter_context(Server(
                self.args, folder, "--max-images", "64", "--runtime", f"settle={settle}",
                mode=self.args.mode))
        return self.running[settle].dir

    def close(self):
        self.stack.close()


def sweep(args, servers: Servers, corpus: Path, chosen: Path, setting: str, tag: str,
          *extra) -> dict[str, dict]:
    """The chosen problems checked under ``setting``, in a cleared --out.
    The map's limits only stop a runaway check here, and a factor is kept
    per runtime setting (the grid's have none): they are taken as they are."""
    out = args.work / f"runtime-{tag}"
    shutil.rmtree(out, ignore_errors=True)        # never resume another run's rows
    step(PROOFBATCH + ["run", corpus, "--problems", f"@{chosen}", "--out", out,
                       "--server", servers.folder(setting), "--hol-light", args.work / "hol-light",
                       "--context-root", args.work / "s2n-bignum", "--context-proofs", "trust",
                       "--mode", args.mode, *(("--no-fallback",) if args.mode == "native" else ()),
                       "--workers", str(args.workers),
                       "--runtime", setting, *(extra or ("--timeout-map", args.bench_map, "--map-mode",
                                                         "native", "--host-factor", "1"))],
         cwd=ROOT)
    return read_rows(out)


def warm_up(args, servers: Servers, corpus: Path, chosen: Path, settings: list[str],
            stage: str) -> dict[str, int]:
    """Each server the defaults and ``settings`` use loads the images of the
    ``chosen`` problems before anything is measured (a check of a second's
    limit each; its verdict is not looked at): an image loading beside a
    measured check would take its cores. Wall seconds per server."""
    took = {}
    for settle in dict.fromkeys(runtime.parse(s).settle for s in ["default", *settings]):
        started = time.monotonic()
        sweep(args, servers, corpus, chosen, runtime.Runtime(settle=settle).key,
              f"{stage}-warm-{settle}", "--default-timeout", "1")
        took[settle] = round(time.monotonic() - started)
    return took


def palindrome(args, servers: Servers, corpus: Path, chosen: Path, settings: list[str],
               stage: str) -> tuple[dict[str, list], dict[str, list]]:
    """Per round: the defaults, each setting, each again in reverse, the
    defaults. Returns the defaults' runs by round and each setting's."""
    base, tried = defaultdict(list), defaultdict(list)
    for k in range(args.rounds):
        log(f"{stage}: round {k + 1} of {args.rounds}")
        base[k].append(sweep(args, servers, corpus, chosen, "default", f"{stage}-{k}-A0"))
        for i, setting in enumerate(settings + settings[::-1]):
            tried[setting].append((k, sweep(args, servers, corpus, chosen, setting,
                                            f"{stage}-{k}-B{i}")))
        base[k].append(sweep(args, servers, corpus, chosen, "default", f"{stage}-{k}-A1"))
    return base, tried


def stage_results(base, tried, ids: list[str]) -> dict[str, dict]:
    """Each setting against the defaults' runs of its rounds."""
    return {setting: compare([r for k in sorted({k for k, _ in runs}) for r in base[k]],
                             [r for _, r in runs], ids, setting)
            for setting, runs in tried.items()}


def cpu(row: dict) -> float:
    return float(row["prove_cpu_secs"] or row["cpu_secs"] or "nan")


def gc_of(row: dict) -> dict | None:
    """The counters a row's check recorded over its proof (None: none)."""
    return json.loads(row["gc"]) if row.get("gc") else None


def gc_medians(runs: list[dict[str, dict]], ids: list[str]) -> dict[str, float]:
    """Per counter, the median over proofs (OK, with counters) of each
    proof's median over the runs; {} when no row has counters."""
    per: dict[str, list[float]] = defaultdict(list)
    for pid in ids:
        got = [gc for r in runs if pid in r and r[pid]["verdict"] == "OK" and (gc := gc_of(r[pid]))]
        for name in (GC_SHOWN + GC_IMAGE if got else ()):
            per[name].append(statistics.median(gc[name] for gc in got))
    return {name: statistics.median(values) for name, values in per.items()}


def minor_heap_words(setting: str) -> int:
    """The minor heap a setting asks for, in words (OCaml's when it names none)."""
    value = dict(runtime.parse(setting).params).get("s")
    if value is None:
        return MINOR_DEFAULT
    return int(value[:-1]) * SUFFIX[value[-1]] if value[-1] in SUFFIX else int(value)


def image_mb(gc: dict[str, float], setting: str) -> dict[str, float | None]:
    """The image a check forks from, after it settled, in MB: its major heap
    and that heap's peak as the check starts (before prove: the image's,
    with the answer readied), and the minor heap the setting asks for."""
    mb = WORD / 2**20
    return {"major_heap_mb": gc["heap_words_before"] * mb if gc else None,
            "peak_heap_mb": gc["top_heap_words_before"] * mb if gc else None,
            "minor_heap_mb": minor_heap_words(setting) * mb}


def compare(base: list[dict[str, dict]], tried: list[dict[str, dict]], ids: list[str],
            setting: str = "default") -> dict:
    """A setting's runs against the defaults' runs beside them."""
    ratios, walls, mem, changed = [], [], [], []
    worst = (None, 0.0)
    for pid in ids:
        b = [runs[pid] for runs in base if pid in runs]
        t = [runs[pid] for runs in tried if pid in runs]
        if not b or not t:
            changed.append(f"{pid}: no row")
            continue
        if {r["verdict"] for r in b} != {r["verdict"] for r in t}:
            changed.append(f"{pid}: {b[0]['verdict']} -> {t[0]['verdict']}")
            continue
        if b[0]["verdict"] != "OK":
            continue
        ratio = statistics.median(cpu(r) for r in t) / statistics.median(cpu(r) for r in b)
        ratios.append(ratio)
        walls.append(statistics.median(float(r["prove_secs"]) for r in t)
                     / statistics.median(float(r["prove_secs"]) for r in b))
        mem.append(statistics.median(float(r["peak_rss_mb"]) for r in t)
                   - statistics.median(float(r["peak_rss_mb"]) for r in b))
        if ratio > worst[1]:
            worst = (pid, ratio)
    return {"cpu_ratio": statistics.median(ratios) if ratios else None,
            "wall_ratio": statistics.median(walls) if walls else None,
            "peak_mb_delta": statistics.median(mem) if mem else None,
            "peak_mb_delta_max": max(mem) if mem else None,
            "worst": worst, "proofs": len(ratios), "verdicts_changed": changed,
            "gc": (gc := gc_medians(tried, ids)), "gc_default": (gc0 := gc_medians(base, ids)),
            "image": image_mb(gc, setting), "image_default": image_mb(gc0, "default")}


def nan(x: float | None) -> float:
    return float("nan") if x is None else x


def gc_line(c: dict) -> str:
    """Why a setting wins, from the counters: per proof (median), the
    setting's against the defaults', and the image it forks from."""
    gc, gc0, im, im0 = c["gc"], c["gc_default"], c["image"], c["image_default"]
    if not gc or not gc0:
        return "    GC: no counters recorded (rows without gc)"
    counts = ", ".join(f"{name.replace('_', ' ')} {gc[name]:.0f} ({gc0[name]:.0f})" for name in GC_SHOWN)
    return (f"    GC per proof, median (defaults'): {counts}; image major heap "
            f"{nan(im['major_heap_mb']):.0f} MB ({nan(im0['major_heap_mb']):.0f}), peak "
            f"{nan(im['peak_heap_mb']):.0f} MB ({nan(im0['peak_heap_mb']):.0f}), minor heap "
            f"{im['minor_heap_mb']:.0f} MB ({im0['minor_heap_mb']:.0f})")


def setting_lines(setting: str, c: dict) -> list[str]:
    return [f"{setting:28} CPU {nan(c['cpu_ratio']):.3f}  wall {nan(c['wall_ratio']):.3f}  peak "
            f"{c['peak_mb_delta'] or 0:+.0f} MB (at most {c['peak_mb_delta_max'] or 0:+.0f})  worst "
            f"{c['worst'][0]} {c['worst'][1]:.3f}  {len(c['verdicts_changed'])} verdicts changed",
            gc_line(c)]


def judge(results: dict[str, dict]) -> tuple[str | None, list[str], list[Goal], dict[str, dict]]:
    """The best setting that kept every verdict within the memory bound, its
    line, the goal the run passes on, and every setting that kept them."""
    fit = {s: c for s, c in results.items() if c["cpu_ratio"] is not None and not c["verdicts_changed"]
           and (c["peak_mb_delta_max"] or 0) <= MEM_GOAL_MB and not math.isnan(c["cpu_ratio"])}
    best = min(fit, key=lambda s: fit[s]["cpu_ratio"]) if fit else None
    line = (f"best within {MEM_GOAL_MB:.0f} MB and unchanged verdicts: {best} "
            f"({fit[best]['cpu_ratio']:.3f} of the defaults' proof CPU)" if best else
            "no setting kept every verdict within the memory bound")
    goals = [Goal("best proof CPU ratio", None if best is None else round(fit[best]["cpu_ratio"], 4),
                  "<=", CPU_GOAL)]
    return best, [line], goals, fit


def main() -> int:
    args = parse_args()
    rec = record.current()
    s2n = args.work / "s2n-bignum"
    bench_map = json.loads(args.bench_map.read_text())
    light, heavy = draw(bench_map, s2n, args)
    light_ids, heavy_ids = [e["problem_id"] for e in light], [e["problem_id"] for e in heavy]
    ids = light_ids + heavy_ids
    files = sorted({e["file"] for e in light + heavy})
    rec.input("seed", args.seed)
    rec.input("ids", ids)
    rec.input("bench_map", path=args.bench_map)
    rec.input("grid", args.grid)
    rec.input("mode", args.mode)
    corpus = args.work / "runtime-corpus"
    shutil.rmtree(corpus, ignore_errors=True)
    step(PROOFBATCH + ["extract", *files, "--out", corpus, "--hol-light", args.work / "hol-light",
                       "--context-root", s2n], cwd=ROOT)
    chosen_light, chosen_all = args.work / "runtime-light.txt", args.work / "runtime-all.txt"
    chosen_light.write_text("".join(f"{i}\n" for i in light_ids))
    chosen_all.write_text("".join(f"{i}\n" for i in ids))
    grid = [s.strip() for s in args.grid.split(";") if s.strip()]
    servers = Servers(args)
    lines: list[str] = []
    try:
        with LoadSampler() as load:
            warm = warm_up(args, servers, corpus, chosen_light, grid, "screen")
            lines.append("images loaded (s): " + ", ".join(f"settle={k} {v}" for k, v in warm.items()))
            base, tried = palindrome(args, servers, corpus, chosen_light, grid, "screen")
            screen = stage_results(base, tried, light_ids)
            lines.append(f"screen: {len(light_ids)} light proofs of {len({e['file'] for e in light})} "
                         "files, each setting against the defaults")
            for setting in grid:
                lines += setting_lines(setting, screen[setting])
            fit = judge(screen)[3]
            finalists = sorted(fit, key=lambda s: fit[s]["cpu_ratio"])[:args.finalists]
            final, final_heavy, warm_final = screen, {}, {}
            if finalists and heavy_ids:
                warm_final = warm_up(args, servers, corpus, chosen_all, finalists, "final")
                lines.append("heavy images loaded (s): " + ", ".join(f"settle={k} {v}"
                                                                       for k, v in warm_final.items()))
                base, tried = palindrome(args, servers, corpus, chosen_all, finalists, "final")
                final = stage_results(base, tried, ids)
                final_heavy = stage_results(base, tried, heavy_ids)
                lines.append(f"finals: the light and {len(heavy_ids)} heavy proofs")
                for setting in finalists:
                    lines += setting_lines(setting, final[setting])
                    lines.append(f"    heavy alone: CPU {nan(final_heavy[setting]['cpu_ratio']):.3f}  "
                                 f"wall {nan(final_heavy[setting]['wall_ratio']):.3f}")
            else:
                finalists = []
                lines.append("no finals (no heavy draw or no finalists): the screen is judged")
    finally:
        servers.close()
    best, said, goals, _ = judge(final)
    lines += [*said, load.text()]
    figures = {"ids": ids, "light_ids": light_ids, "heavy_ids": heavy_ids, "files": files,
               "map_s": {e["problem_id"]: float(e["prove_secs"]) for e in light + heavy},
               "workers": args.workers, "mode": args.mode, "images_loaded_s": warm, "heavy_images_loaded_s": warm_final,
               "screen": screen,
               "finalists": finalists, "settings": final, "heavy": final_heavy, "best": best,
               "load": load.text()}
    return emit(args, "runtime_tuning", figures, lines,
                f"a setting at <= {CPU_GOAL} of the defaults' proof CPU, peak memory +{MEM_GOAL_MB:.0f} MB "
                "at most, verdicts unchanged", True, goals)


if __name__ == "__main__":
    sys.exit(main())
