"""Verdicts that do not depend on the host: real bench proofs on a host loaded on purpose.

s2n-bignum-bench's map was measured on a faster, dedicated machine, and some
of its limits are under twice the measured time. This script takes the
bench's problems whose map time is 15-60 s and whose limit is under 3x that
time, draws ``--problems`` of them at random (the seed is printed) from at
least ``--min-files`` arm proof files, and runs them through the CLI as the
README documents it (natively, trusted contexts, the bench's map), every
sweep checking in the images of one ``proofbatch serve --mode native``
(loaded once, during the first run; docs/running.md):

1. on the host as it is (``quiet``; its load is printed), default clock;
2. ``proofbatch calibrate`` on the same corpus (a small sample), for
   ``--host-factor auto`` (skipped with ``--host-factor none``); every
   other sweep runs under the map's own limits (``--host-factor 1``);
3. with ``--busy`` processes per core spinning beside the workers, once with
   ``--limit-clock wall --limit-slack 30`` (the bench's alarm rule, a wall
   limit at the map's limit + 30 s, on proofbatch's checks: the baseline; not
   the bench's harness, whose flow is benchmarks/s2n/vs_bench_harness.py's)
   and once with the default clock and ``--host-factor`` (the factor it
   resolved is the record's ``host_factor``);
4. on the host as it is again (``quiet-again``): the CPU time of the same
   proof drifts on a shared VM with no load of ours (benchmarks/limits/cpu_drift.py
   measures it), so the quiet baseline is taken on both sides of the loaded
   runs, and its own drift is printed.

A check that shares its core with busy processes needs about 1.2x its quiet
CPU time on this project's VMs, whatever runs it (cpu_drift.py). The quiet,
default-clock and quiet-again runs (and calibrate) therefore run their
checks at run's default niceness, ``--nice auto`` (-10 as root under the
cpu clock, else 0), or at ``--check-nice`` if given; the wall run keeps
niceness 0, as the bench's harness runs its proofs.

It prints per problem the map's time and limit, and wall and CPU proof time
and verdict in each run, and exits 1 if the loaded default run gives any
verdict other than OK, or if its CPU proof times differ from the quiet runs'
(each problem's mean of the two) by more than 15% (median of the
per-problem ratios).

    .venv/bin/python benchmarks/limits/loaded_host.py --work /work/build \\
        --bench-map /work/build/timeout-map.json --seed 1
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
from common import ROOT, Goal, arg_parser, emit, log, sweep_host_factor  # noqa: E402
import record  # noqa: E402
from s2n_readme_path import (PROOFBATCH, LoadSampler, built_work_arguments, read_rows,  # noqa: E402
                             step, use_built_work)

BAND_S, MAX_MARGIN = (15.0, 60.0), 3.0
DRIFT_GOAL = 0.15      # loaded CPU proof time within 15% of the quiet runs' (median)
SPIN = "while True: pass"


def eligible(bench_map: list[dict], s2n: Path) -> dict[str, list[dict]]:
    """The map's arm problems in the band with a limit under MAX_MARGIN x
    their time, by proof file (those s2n-bignum has)."""
    by_file: dict[str, list[dict]] = defaultdict(list)
    for e in bench_map:
        arch, stem, _ = e["problem_id"].split(".", 2)
        secs, limit = float(e["prove_secs"]), float(e["timeout_sec"])
        if arch == "arm" and BAND_S[0] <= secs <= BAND_S[1] and limit < MAX_MARGIN * secs \
                and (s2n / "arm/proofs" / f"{stem}.ml").is_file():
            by_file[stem].append(e)
    return by_file


def draw(by_file: dict[str, list[dict]], seed: int, count: int, min_files: int) -> list[dict]:
    """``count`` problems at random, from at least ``min_files`` files."""
    rng = random.Random(seed)
    every = sorted((e for es in by_file.values() for e in es), key=lambda e: e["problem_id"])
    for _ in range(1000):
        chosen = rng.sample(every, min(count, len(every)))
        if len({e["problem_id"].split(".")[1] for e in chosen}) >= min_files:
            return sorted(chosen, key=lambda e: e["problem_id"])
    raise SystemExit(f"cannot draw {count} problems from {min_files} files")


class Busy:
    """``n`` processes spinning on the CPU, as other jobs on a shared node."""

    def __init__(self, n: int):
        self.n, self.procs = n, []

    def __enter__(self):
        # Each a session of its own, as other users' jobs are: where the
        # kernel groups sessions (sched_autogroup), each gets a group's share.
        self.procs = [subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True)
                      for _ in range(self.n)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.send_signal(signal.SIGKILL)
            p.wait()


class Server:
    """``proofbatch serve --mode native`` (or ``mode``) for the script's
    sweeps: each sweep pays the proofs, not the loading of their contexts
    again (up to 3,183 s of image loads per sweep here, most of each sweep).
    ``extra``: serve's flags besides the mode, context proofs and the trees
    under ``--work``."""

    def __init__(self, args, folder: Path, *extra, mode: str = "native"):
        self.args, self.dir, self.log, self.extra = args, folder, folder.with_suffix(".log"), extra
        self.mode = mode

    def __enter__(self) -> "Server":
        argv = PROOFBATCH + ["serve", self.dir, "--mode", self.mode, "--context-proofs", "trust",
                             "--hol-light", self.args.work / "hol-light",
                             "--context-root", self.args.work / "s2n-bignum", *self.extra]
        log("$ " + " ".join(map(str, argv)) + f" 2> {self.log}")
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen([str(a) for a in argv], cwd=ROOT, stderr=err,
                                         start_new_session=True)
        while "serving HOL Light images" not in self.log.read_text():
            if self.proc.poll() is not None:
                raise SystemExit(f"proofbatch serve ended with exit {self.proc.returncode}: {self.log}")
            time.sleep(1)
        return self

    def __exit__(self, *exc):
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def serve_dir(args) -> Path:
    """The server's folder (its log beside it, as ``.log``)."""
    return args.work / f"loaded-{args.seed}-serve"


def sweep(args, name: str, corpus: Path, chosen: Path, *extra) -> tuple[dict, float, str]:
    out = args.work / f"loaded-{args.seed}-{name}"
    argv = PROOFBATCH + ["run", corpus, "--problems", f"@{chosen}", "--out", out,
                         "--server", serve_dir(args),
                         "--hol-light", args.work / "hol-light", "--context-root", args.work / "s2n-bignum",
                         "--context-proofs", "trust", "--mode", "native", "--no-fallback",
                         "--workers", str(args.workers), "--timeout-map", args.bench_map,
                         "--map-mode", "native", *extra]
    with LoadSampler() as load:
        wall = step(argv, cwd=ROOT)
    return read_rows(out), wall, load.text()


def num(row: dict | None, key: str) -> float | None:
    value = (row or {}).get(key)
    return float(value) if value not in (None, "") else None


def parse_args():
    parser = arg_parser(__doc__.splitlines()[0])
    built_work_arguments(parser)
    parser.add_argument("--problems", type=int, default=12)
    parser.add_argument("--min-files", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--busy", type=int, default=3, help="spinning processes per core while loaded")
    parser.add_argument("--max-images", type=int, default=32,
                        help="images the server keeps loaded (every context of the draw, so none loads twice)")
    parser.add_argument("--check-nice", type=int, default=None,
                        help="`run --nice` for every run but the wall one (default: none given, so "
                             "run's own default, auto: -10 on the cpu clock as root, else 0)")
    parser.add_argument("--host-factor", default="auto",
                        help="for the loaded default run: auto (calibrate first), none (the map's "
                             "limits, as the other runs get), or a number")
    return parser.parse_args()


def corpus_of(args, s2n: Path) -> tuple[list[dict], list[str], Path, Path]:
    """The drawn map entries, their files, the corpus extracted from those
    files as a user extracts it, and the file naming the drawn problems."""
    bench_map = json.loads(args.bench_map.read_text())
    picked = draw(eligible(bench_map, s2n), args.seed, args.problems, args.min_files)
    files = sorted({e["problem_id"].split(".")[1] for e in picked})
    log(f"seed {args.seed}: {len(picked)} problems from {len(files)} files: {', '.join(files)}")
    corpus = args.work / f"loaded-corpus-{args.seed}"
    shutil.rmtree(corpus, ignore_errors=True)
    step(PROOFBATCH + ["extract", *[s2n / "arm/proofs" / f"{f}.ml" for f in files], "--out", corpus,
                       "--prefix", "arm"], cwd=ROOT)
    chosen = args.work / f"loaded-problems-{args.seed}.txt"
    chosen.write_text("".join(e["problem_id"] + "\n" for e in picked))
    # Fresh folders: a sweep or calibration resumed from an earlier run of
    # this script would report that run's rows as this one's.
    for name in ("quiet", "wall", "cpu", "quiet-again", "calibrate", "serve"):
        shutil.rmtree(args.work / f"loaded-{args.seed}-{name}", ignore_errors=True)
    return picked, files, corpus, chosen


def run_all(args, s2n: Path, corpus: Path, chosen: Path, busy: int) -> tuple[dict, object, str]:
    """The four sweeps (and calibrate) of the docstring, in one server's
    images: {run name: (rows, wall s, load)}, the niceness run resolved
    for the checks (sweep.json's), and how it was asked."""
    runs = {}
    nice = [] if args.check_nice is None else ["--nice", str(args.check_nice)]
    # The bench's map has no sidecar, so `run` takes --host-factor auto by
    # default and scales its limits by this host's cached calibration: the
    # baselines and the alarm rule run under the map's own limits, said.
    as_map = ["--host-factor", "1"]
    with Server(args, serve_dir(args), "--no-fallback", "--max-images", str(args.max_images)):
        runs["quiet"] = sweep(args, "quiet", corpus, chosen, *as_map, *nice)
        check_nice = json.loads((args.work / f"loaded-{args.seed}-quiet" / "sweep.json").read_text()
                                ).get("nice")
        factor = as_map           # --host-factor none: the map's limits as they are
        if args.host_factor == "auto":
            step(PROOFBATCH + ["calibrate", corpus, "--timeout-map", args.bench_map, "--map-mode",
                               "native", "--mode", "native", "--context-proofs", "trust", "--hol-light",
                               args.work / "hol-light", "--context-root", s2n, "--sample", "4",
                               "--budget", "90", "--out", args.work / f"loaded-{args.seed}-calibrate",
                               *nice],
                 cwd=ROOT)
            factor = ["--host-factor", "auto"]
        elif args.host_factor != "none":
            factor = ["--host-factor", args.host_factor]
        with Busy(busy):
            # The bench's alarm rule on proofbatch's checks (not its harness): a
            # wall limit at the map's limit + 30 s, at niceness 0.
            runs["wall"] = sweep(args, "wall", corpus, chosen, "--limit-clock", "wall",
                                 "--limit-slack", "30", *as_map)
            runs["cpu"] = sweep(args, "cpu", corpus, chosen, *factor, *nice)
        runs["quiet-again"] = sweep(args, "quiet-again", corpus, chosen, *as_map, *nice)
    return runs, check_nice, " ".join(nice) or "run's default, --nice auto"


def run_figures(rows: dict[str, dict]) -> dict:
    """One sweep's verdicts counted and the range of its checks' CPU and
    clock proof seconds and limits: what the docs' table of runs gives."""
    def span(key: str) -> list[float] | None:
        values = [v for r in rows.values() if (v := num(r, key)) is not None]
        return [round(min(values), 1), round(max(values), 1)] if values else None

    return {"verdicts": dict(Counter(r["verdict"] for r in rows.values())),
            "cpu_s": span("prove_cpu_secs"), "clock_s": span("prove_secs"), "limit_s": span("timeout_s")}


def problem_figures(picked: list[dict], runs: dict) -> list[dict]:
    """Per drawn problem, in the draw's order (by id): the map's time and
    limit, and in each sweep its verdict, clock and CPU proof seconds, the
    limit it ran under and the host's load when it ended (its row's
    ``host_load``; None where the sweep has no row or the row no value).
    docs/limits.md's table of problems gives these, and the docs' tables are
    written from the record's figures alone (benchmarks/tables.py)."""
    def each(row: dict | None) -> dict:
        return {"verdict": (row or {}).get("verdict"), "clock_s": num(row, "prove_secs"),
                "cpu_s": num(row, "prove_cpu_secs"), "limit_s": num(row, "timeout_s"),
                "load": num(row, "host_load")}

    return [{"problem_id": e["problem_id"], "map_s": float(e["prove_secs"]),
             "map_limit_s": float(e["timeout_sec"]),
             "runs": {name: each(rows.get(e["problem_id"])) for name, (rows, _, _) in runs.items()}}
            for e in picked]


def record_figures(seed: int, picked: list[dict], files: list[str], check_nice, factor: float | None,
                   busy: int, runs: dict, judged: dict) -> dict:
    """The run's record's figures: the draw, the checks' niceness, the host
    factor of the loaded default-clock run, each sweep summed up
    (run_figures), judge's figures, each sweep's wall seconds and load, and
    each problem in each sweep (problem_figures)."""
    return {"seed": seed, "problems": len(picked), "files": files, "check_nice": check_nice,
            "cpu_host_factor": factor, "spinners": busy,
            "runs": {name: run_figures(rows) for name, (rows, _, _) in runs.items()},
            **judged, **{f"{k}_wall_s": round(v[1], 1) for k, v in runs.items()},
            **{f"{k}_load": v[2] for k, v in runs.items()},
            "per_problem": problem_figures(picked, runs)}


def judge(picked: list[dict], runs: dict) -> tuple[list[str], list[str], dict, list[Goal]]:
    """Per problem the map's time and limit and each run's times and
    verdicts; what was not met; the figures; and the goals the run passes
    on: every loaded default-clock verdict OK, its CPU proof times within
    DRIFT_GOAL of the quiet runs' (median)."""
    lines = [f"{'problem':52} {'map s':>6} {'limit':>6} | {'quiet cpu':>9} {'again':>6} | "
             f"{'wall: wall s':>12} {'cpu s':>6} {'verdict':>8} | {'cpu: wall s':>11} {'cpu s':>6} "
             f"{'limit':>6} {'verdict':>8}"]
    failures, ratios, quiet_drifts, wall_false, closest = [], [], [], [], []
    for e in picked:
        pid = e["problem_id"]
        q, w, c, q2 = (runs[k][0].get(pid) for k in ("quiet", "wall", "cpu", "quiet-again"))
        lines.append(f"{pid[:52]:52} {e['prove_secs']:6.1f} {e['timeout_sec']:6.0f} | "
                     f"{num(q, 'prove_cpu_secs') or 0:9.1f} {num(q2, 'prove_cpu_secs') or 0:6.1f} | "
                     f"{num(w, 'prove_secs') or 0:12.1f} "
                     f"{num(w, 'prove_cpu_secs') or 0:6.1f} {(w or {}).get('verdict', '-'):>8} | "
                     f"{num(c, 'prove_secs') or 0:11.1f} {num(c, 'prove_cpu_secs') or 0:6.1f} "
                     f"{num(c, 'timeout_s') or 0:6.0f} {(c or {}).get('verdict', '-'):>8}")
        if (c or {}).get("verdict") != "OK":
            failures.append(f"{pid}: {(c or {}).get('verdict', 'no row')} "
                            f"{(c or {}).get('reason', '')} under the default clock, loaded")
        quiet_cpu = [num(r, "prove_cpu_secs") for r in (q, q2) if num(r, "prove_cpu_secs")]
        if num(c, "prove_cpu_secs") and quiet_cpu:
            ratios.append(num(c, "prove_cpu_secs") / statistics.mean(quiet_cpu))
        if len(quiet_cpu) == 2:
            quiet_drifts.append(quiet_cpu[1] / quiet_cpu[0])
        if (w or {}).get("verdict") == "TIMEOUT":
            wall_false.append(pid)
        elif num(w, "prove_secs"):
            closest.append(num(w, "prove_secs") / float(w["timeout_s"]))
    drift = statistics.median(ratios) if ratios else float("nan")
    if not ratios or abs(drift - 1) > DRIFT_GOAL:
        failures.append(f"loaded CPU proof times / quiet: median {drift:.2f}, outside "
                        f"{1 - DRIFT_GOAL:.2f}-{1 + DRIFT_GOAL:.2f}")
    lines.append(f"wall clock, loaded: {len(wall_false)} of {len(picked)} correct proofs TIMEOUT"
                 + (f"; the closest OK used {max(closest):.0%} of its limit" if closest else ""))
    quiet_drift = statistics.median(quiet_drifts) if quiet_drifts else float("nan")
    lines.append(f"default clock, loaded: CPU proof time / quiet runs' mean: median {drift:.3f} "
                 f"over {len(ratios)} problems")
    lines.append(f"quiet again / quiet, no load of ours: median {quiet_drift:.3f} "
                 f"over {len(quiet_drifts)} problems (the host's own drift)")
    figures = {"wall_false_timeouts": len(wall_false), "cpu_drift_median": round(drift, 3),
               "quiet_drift_median": round(quiet_drift, 3)}
    not_ok = sum((runs["cpu"][0].get(e["problem_id"]) or {}).get("verdict") != "OK" for e in picked)
    off = None if not ratios else round(abs(drift - 1), 3)
    goals = [Goal("ground truths not OK under the default clock, loaded", not_ok, "==", 0),
             Goal("|loaded CPU proof time / quiet - 1| (median)", off, "<=", DRIFT_GOAL)]
    return lines, failures, figures, goals


def main() -> int:
    args = parse_args()
    s2n = use_built_work(args)
    picked, files, corpus, chosen = corpus_of(args, s2n)
    busy = args.busy * (os.cpu_count() or 1)
    runs, check_nice, asked = run_all(args, s2n, corpus, chosen, busy)
    lines = [f"seed {args.seed}: {len(picked)} problems of {len(files)} arm files "
             f"({', '.join(files)}), {args.workers} workers on {os.cpu_count()} CPUs",
             f"checks at niceness {check_nice} ({asked}) in every run but the wall one (0 there)"]
    for name, (_, wall, load) in runs.items():
        lines.append(f"{name}: wall {wall:.0f} s, {load}"
                     + (f", {busy} spinning processes beside the workers" if name in ("wall", "cpu") else ""))
    table, failures, judged, goals = judge(picked, runs)
    lines += table + ["not met: " + f for f in failures]
    # The factor the default-clock run scaled the map's limits by (its sweep.json).
    factor = sweep_host_factor(args.work / f"loaded-{args.seed}-cpu")
    record.current().set("host_factor", factor)
    figures = record_figures(args.seed, picked, files, check_nice, factor, busy, runs, judged)
    return emit(args, "loaded_host", figures, lines,
                "every ground truth OK under the default clock on a loaded host, its CPU proof "
                "times within 15% (median) of the quiet runs'", True, goals)


if __name__ == "__main__":
    sys.exit(main())
