"""One proof, run again and again through the bench's own program and through
a ``proofbatch run`` check, alternating, each beside the same load on the
other core: what a check costs against the bench's harness, paired in time.

``vs_bench_harness.py`` compares whole flows minutes apart, and this host's
speed drifts 5-10 % over minutes; its other core also runs different work in
each flow (the bench's other program loads a context; proofbatch's other
worker builds images or checks). Here the two arms take turns (ABBA) a minute
apart, and each phase holds the other core's work fixed:

- ``bench``: the bench's own program for the same file, in a loop (what the
  other worker of the bench's flow runs);
- ``proofbatch``: ``proofbatch run`` of the same problem, in a loop (what
  the other worker of proofbatch's flow runs);
- ``proving``: ``proofbatch run`` of the same problem with 20 attempts (the
  answer behind 1 to 20 ``ALL_TAC THEN``, so none is a repeat), so the other
  core proves most of the time, as when two checks run at once;
- ``none``: nothing (one core idle; a reference).

Arm (a) is the program the bench's ``combine-answer-and-setup.py`` writes for
the proof file with only this problem's ``bench_run`` inserted, compiled by
its ``run-answers.sh`` (``vs_bench_harness.bench_inputs`` builds its inputs
from s2n-bignum, as there); each run is that executable, started as
``compile_and_run`` starts it, and its measure is the ``PROFILE`` line.
Arm (b) is the README's ``proofbatch run`` of that one problem, native,
trusted context, ``--workers 1``; its measure is ``prove_secs``.

The figure per phase is the median over pairs of prove_secs / PROFILE, each
pair two adjacent runs. The goal, as the issue's: <= 1.05 in every phase
whose two arms run beside the same load.

    .venv/bin/python benchmarks/s2n/paired_proof.py --work /work/build/paired \\
        --hol-light /work/build/hol-light --s2n-bignum /work/build/s2n-bignum \\
        --bench-repo /work/.mirror/kings-crown+s2n-bignum-bench/repo \\
        --bench-map /work/build/timeout-map.json --pairs 4
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
from common import ROOT, arg_parser, emit, log
from s2n_readme_path import PROOFBATCH, LoadSampler, step
from vs_bench_harness import PROFILE, bench_arguments, bench_inputs, run_bench, run_proofbatch

PHASES = ("none", "bench", "proofbatch", "proving")
ATTEMPTS = 20


class Background:
    """One command run again and again until stopped, in its own session so
    that stopping it stops everything it started."""

    def __init__(self, argv: list, cwd: Path, before=None):
        self.argv, self.cwd, self.before = [str(a) for a in argv], cwd, before
        self.runs = 0
        self._proc: subprocess.Popen | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self.before:
                self.before()
            self._proc = subprocess.Popen(self.argv, cwd=self.cwd, start_new_session=True,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self._proc.wait()
            self.runs += 1

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        self._thread.join()


def utc_now() -> str:
    """The time, as vs_bench_harness.py stamps a flow's end."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def bench_once(exe: Path, objfiles: Path, pid: str) -> float:
    """One run of the bench's program as ``compile_and_run`` starts it (in
    objfiles); the problem's PROFILE seconds."""
    r = subprocess.run([str(exe)], cwd=objfiles, capture_output=True, text=True)
    for m in PROFILE.finditer(r.stdout):
        if m.group(1) == pid:
            if m.group(3) != "OK":
                raise SystemExit(f"the bench's program gave {m.group(3)} for {pid}: {exe}")
            return float(m.group(2))
    raise SystemExit(f"no PROFILE line for {pid} from {exe} (exit {r.returncode}): "
                     f"{r.stderr.strip()[-300:]}")


def report(pid: str, want: float, pairs: int, results: dict) -> tuple[dict, list[str], bool]:
    """The figures, the report's lines and whether every phase met the goal.
    ``results`` holds each phase's runs; ``want`` is the map's seconds."""
    med = statistics.median
    lines = [f"{pid}: ground truth; map {want:.2f} s; {pairs} pairs per phase, ABBA; "
             f"{os.cpu_count()} cores"]
    for phase, r in results.items():
        lines += [
            f"beside {phase} ({r['background_runs']} background runs, {r['load']}):",
            f"  bench PROFILE s      {' '.join(f'{x:6.2f}' for x in r['bench'])}",
            f"  proofbatch prove_s   {' '.join(f'{x:6.2f}' for x in r['pb'])}",
            f"  proofbatch cpu_s     {' '.join(f'{x:6.2f}' for x in r['pb_cpu'])}",
            f"  pair ratio           {' '.join(f'{x:6.3f}' for x in r['ratios'])}  "
            f"median {med(r['ratios']):.3f} [goal <= 1.05: "
            f"{'met' if med(r['ratios']) <= 1.05 else 'MISSED'}]",
            f"  host factor, bench PROFILE / map: {med(r['bench']) / want:.2f}"]
    every = [x for r in results.values() for x in r["ratios"]]
    lines.append(f"all phases: pair ratio median {med(every):.3f} over {len(every)} pairs")
    if "bench" in results and "proofbatch" in results:
        own = med(results["proofbatch"]["pb"]) / med(results["bench"]["bench"])
        lines.append(f"each beside its own flow's other worker (proofbatch beside proofbatch / "
                     f"bench beside bench, medians): {own:.3f}")
    figures = {"problem": pid, "map_s": want, "pairs": pairs,
               "ratio_median_all": round(med(every), 4),
               "attempts": ATTEMPTS,     # the proving phase's attempts (docs/s2n.md names them)
               "phases": {p: {**r, "ratio_median": round(med(r["ratios"]), 4)}
                          for p, r in results.items()}}
    return figures, lines, all(med(r["ratios"]) <= 1.05 for r in results.values())


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    bench_arguments(parser)
    parser.add_argument("--problem", default="arm.bignum_mul_p25519.BIGNUM_MUL_P25519_CORRECT",
                        help="an arm problem of the bench's map, proved by its ground truth "
                        "(long enough that the clock's noise does not matter)")
    parser.add_argument("--pairs", type=int, default=4, help="pairs of runs per phase")
    parser.add_argument("--phases", default="bench,proofbatch",
                        help=f"what the other core runs, in order: a list of {', '.join(PHASES)}")
    args = parser.parse_args()
    phases = args.phases.split(",")
    bad = [p for p in phases if p not in PHASES]
    if bad or args.pairs < 1:
        parser.error(f"--phases takes {', '.join(PHASES)} (got {', '.join(bad)}); --pairs >= 1")
    for name in ("work", "hol_light", "s2n_bignum", "bench_repo", "bench_map"):
        setattr(args, name, getattr(args, name).resolve())
    args.work.mkdir(parents=True, exist_ok=True)
    args.workers = 1
    hol, s2n, pid = args.hol_light, args.s2n_bignum, args.problem
    arch, stem, _ = pid.split(".", 2)
    if arch != "arm":
        parser.error(f"--problem {pid}: the bench's inputs are built for arm problems only")

    corpus = args.work / "corpus"
    shutil.rmtree(corpus, ignore_errors=True)
    extract_s = step(PROOFBATCH + ["extract", s2n / "arm/proofs" / f"{stem}.ml", "--out", corpus,
                                   "--prefix", "arm", "--hol-light", hol], cwd=ROOT)
    if not (corpus / pid / "answer.txt").is_file():
        raise SystemExit(f"{pid}: not extracted from arm/proofs/{stem}.ml")
    answer = (corpus / pid / "answer.txt").read_text().strip()
    chosen = args.work / "problems.txt"
    chosen.write_text(pid + "\n")
    answers_csv = args.work / "answers.csv"
    with open(answers_csv, "w", newline="") as f:
        csv.writer(f).writerows([["problem_id", "answer"], [pid, answer]])

    # The bench's flow once: writes and compiles the program (and runs it: a warm-up).
    bench = bench_inputs(args, hol, s2n, [stem], [pid], corpus)
    first = run_bench(args, bench, {pid: answer}, "build")
    exes = sorted(Path(first["evaldir"]).glob("*.exe"))
    if first["verdicts"].get(pid) != "OK" or len(exes) != 1:
        raise SystemExit(f"the bench's flow gave {first['verdicts']} and {len(exes)} programs: "
                         f"see {first['evaldir']}")
    exe, objfiles = exes[0], bench / "objfiles"
    # proofbatch once: fills the native cache with this context's pieces (a warm-up).
    run_proofbatch(args, corpus, chosen, answers_csv, hol, s2n, extract_s, "build")

    def bench_arm() -> float:
        return bench_once(exe, objfiles, pid)

    def pb_arm() -> tuple[float, float]:
        got = run_proofbatch(args, corpus, chosen, answers_csv, hol, s2n, extract_s, "paired")
        row = got["rows"][pid]
        if row["verdict"] != "OK":
            raise SystemExit(f"proofbatch gave {row['verdict']} for {pid}: {row.get('reason')}")
        return float(row["prove_secs"]), float(row["prove_cpu_secs"])

    attempts_csv = args.work / "attempts.csv"
    with open(attempts_csv, "w", newline="") as f:
        csv.writer(f).writerows([["problem_id", "attempt", "answer"]] +
                                [[pid, k, "ALL_TAC THEN " * (k + 1) + f"({answer})"]
                                 for k in range(ATTEMPTS)])
    bg_out = args.work / "out-background"

    def pb_loop(answers: Path) -> Background:
        return Background(
            PROOFBATCH + ["run", corpus, "--problems", f"@{chosen}", "--answers", answers,
                          "--out", bg_out, "--workers", "1", "--hol-light", hol,
                          "--context-root", s2n, "--context-proofs", "trust", "--mode", "native",
                          "--no-fallback", "--timeout-map", args.bench_map, "--map-mode", "native"],
            ROOT, before=lambda: shutil.rmtree(bg_out, ignore_errors=True))

    backgrounds = {"bench": lambda: Background([exe], objfiles),
                   "proofbatch": lambda: pb_loop(answers_csv),
                   "proving": lambda: pb_loop(attempts_csv)}
    results = {}
    for phase in phases:
        # When the phase ran (UTC): docs/s2n.md gives each phase's window, as the
        # host's speed drifts over minutes.
        runs = {"bench": [], "pb": [], "pb_cpu": [], "started": utc_now()}
        log(f"phase {phase}: {args.pairs} pairs")
        with LoadSampler() as load:
            bg = backgrounds[phase]() if phase != "none" else None
            with bg or contextlib.nullcontext():
                if bg:
                    time.sleep(20)     # the other core at work before the first run
                for i in range(args.pairs):
                    for arm in (("bench", "pb") if i % 2 == 0 else ("pb", "bench")):
                        if arm == "bench":
                            runs["bench"].append(bench_arm())
                        else:
                            secs, cpu = pb_arm()
                            runs["pb"].append(secs)
                            runs["pb_cpu"].append(cpu)
                        log(f"  pair {i + 1} {arm}: {runs[arm][-1]:.2f} s")
        runs["ended"] = utc_now()
        runs["ratios"] = [p / b for p, b in zip(runs["pb"], runs["bench"])]
        runs["load"] = load.text()
        runs["background_runs"] = bg.runs if bg else 0
        results[phase] = runs

    want = next(float(e["prove_secs"]) for e in json.loads(args.bench_map.read_text())
                if e["problem_id"] == pid)
    figures, lines, met = report(pid, want, args.pairs, results)
    return emit(args, "paired_proof", figures, lines,
                "proofbatch's proof time within 5% of the bench's program beside the same load", met)


if __name__ == "__main__":
    sys.exit(main())
