"""The README's path for s2n-bignum, run as a bench user runs it.

Every step is a command the README documents, run through the CLI on inputs
as users have them; nothing is cut, inlined or fixed by hand here:

1. ``scripts/build-hol-light-checkout.sh SRC 5e62421 WORK/hol-light native``
   (the bench's pinned HOL Light, built as the bench builds it), then
   ``proofbatch build-native --hol-light WORK/hol-light``;
2. s2n-bignum cloned at 51147aa, ``make -C arm`` and ``make -C arm unopt``
   (its proofs read the object files, 15 arm files the unoptimised ones
   under ``arm/*/unopt/``, which plain ``make`` does not build); with
   ``--arch x86``, ``make -C x86`` and ``make -C x86 winobj`` (the
   ``WINDOWS_SUBROUTINE`` lemmas read the ``.obj`` files);
3. ``--files`` proof files of ``ARCH/proofs`` chosen at random (the seed is
   printed) among those the bench's ``timeout-map.json`` lists, whose
   problems' listed ``prove_secs`` add up to at most ``--max-file-secs``;
4. ``proofbatch extract <files> --out CORPUS --prefix ARCH --hol-light WORK/hol-light``
   (the bench's ids; loads checked against that checkout);
5. ``proofbatch run CORPUS --problems @LISTED ... --context-proofs trust --mode native
   --no-fallback --timeout-map MAP --map-mode native``, then the same with
   ``--mode bytecode``; LISTED names the extracted problems the map lists.

It then checks each sweep's ``results.csv`` against the bench's map: every
ground truth OK in both modes, every native check run natively (no
fallback), every bytecode limit converted from the map's native one, and it
prints each problem's native prove_secs against the map's with the host's
load while the sweep ran (a loaded host inflates every ratio).

    .venv/bin/python benchmarks/s2n/s2n_readme_path.py --work /tmp/s2n \\
        --hol-light-src https://github.com/jrh13/hol-light.git \\
        --s2n-bignum-src https://github.com/awslabs/s2n-bignum.git \\
        --bench-map s2n-bignum-bench/timeout-map.json --seed 1
"""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
from common import ROOT, Goal, arg_parser, emit, log  # noqa: E402
from runner.provers.hol_light.costs.map_modes import RATIO_MAX  # noqa: E402

HOL_LIGHT_PIN = "5e62421"        # the bench's setup.sh
S2N_BIGNUM_PIN = "51147aa"       # the tree the bench's map was checked against here
# The installed command, as users run it (scripts/setup.sh installs it into .venv).
PROOFBATCH = [str(Path(sys.executable).parent / "proofbatch")]


class LoadSampler:
    """The host's 1-minute load average, sampled every 10 s while a step runs."""

    def __init__(self):
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(10):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def text(self) -> str:
        return f"load {min(self.samples):.1f}-{max(self.samples):.1f}" if self.samples else "load ?"


def step(argv: list[str], cwd: Path | None = None, env: dict | None = None) -> float:
    """Run one documented command, echoing it; its wall seconds. A command
    that fails stops the benchmark: what follows would measure nothing."""
    log("$ " + " ".join(str(a) for a in argv))
    started = time.monotonic()
    # Their output is progress: stderr, so that stdout is the report (or --json).
    r = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, stdout=sys.stderr)
    if r.returncode != 0:
        raise SystemExit(f"step failed with exit {r.returncode}: {' '.join(map(str, argv))}")
    return time.monotonic() - started


def built_work_arguments(parser) -> None:
    """``--work`` (the trees this script leaves built), ``--bench-map`` and
    ``--seed``: the options of the scripts that run on those trees."""
    parser.add_argument("--work", type=Path, required=True,
                        help="holds hol-light (the bench's checkout, built native) and s2n-bignum "
                        "(made), as benchmarks/s2n/s2n_readme_path.py leaves them")
    parser.add_argument("--bench-map", type=Path, required=True, help="the bench's timeout-map.json")
    parser.add_argument("--seed", type=int, default=1)


def use_built_work(args) -> Path:
    """Resolve ``--work`` and ``--bench-map``, put s2n-bignum at its pin and
    make sure the checkout's native build is cached; the s2n-bignum tree."""
    args.work, args.bench_map = args.work.resolve(), args.bench_map.resolve()
    s2n = args.work / "s2n-bignum"
    step(["git", "-C", s2n, "checkout", "-q", S2N_BIGNUM_PIN])
    step(PROOFBATCH + ["build-native", "--hol-light", args.work / "hol-light"], cwd=ROOT)
    return s2n


# What each tree's proofs read besides its objects (the bench's setup.sh):
# arm's unopt objects, x86's Windows .obj files.
S2N_TARGETS = {"arm": ("", "unopt"), "x86": ("", "winobj")}


def build_inputs(args, arches: tuple[str, ...] | None = None) -> tuple[Path, Path, dict[str, float]]:
    """The checkout and s2n-bignum tree, with every object the proofs of
    ``arches`` (default: ``--arch``) read; wall seconds of each build."""
    work = args.work
    arches = arches or (getattr(args, "arch", "arm"),)
    # Resolved: WORK may link to trees built elsewhere.
    hol, s2n = (work / "hol-light").resolve(), (work / "s2n-bignum").resolve()
    secs = {"hol_light_build_s": step(["bash", ROOT / "scripts/build-hol-light-checkout.sh",
                                       args.hol_light_src, HOL_LIGHT_PIN, hol, "native"])}
    secs["build_native_s"] = step(PROOFBATCH + ["build-native", "--hol-light", hol], cwd=ROOT)
    if not (s2n / ".git").is_dir():
        step(["git", "clone", "-q", args.s2n_bignum_src, s2n])
    step(["git", "-C", s2n, "checkout", "-q", S2N_BIGNUM_PIN])
    for arch in arches:
        for target in S2N_TARGETS[arch]:
            key = f"s2n_{target or 'make'}_s"
            secs[key] = secs.get(key, 0.0) + step(["make", "-C", s2n / arch, *([target] if target else []),
                                                   f"-j{os.cpu_count() or 1}"])
    return hol, s2n, secs


def choose_files(bench_map: list[dict], s2n: Path, seed: int, count: int,
                 max_file_secs: float, arch: str = "arm") -> list[str]:
    """``count`` proof files of ``arch`` the map lists, light enough, at random."""
    total: dict[str, float] = defaultdict(float)
    for entry in bench_map:
        tree, stem, _ = entry["problem_id"].split(".", 2)
        if tree == arch:
            total[stem] += float(entry["prove_secs"])
    pool = sorted(stem for stem, secs in total.items()
                  if secs <= max_file_secs and (s2n / arch / "proofs" / f"{stem}.ml").is_file())
    return sorted(random.Random(seed).sample(pool, count))


def read_rows(out: Path) -> dict[str, dict]:
    with open(out / "results.csv", newline="") as f:
        return {row["problem_id"]: row for row in csv.DictReader(f)}


def sweep(args, mode: str, corpus: Path, chosen: Path, hol: Path,
          s2n: Path) -> tuple[dict[str, dict], float, str]:
    """``proofbatch run`` of the ``chosen`` problems in ``mode``, as the
    README documents it, into a fresh folder: ``run`` resumes a folder
    it finds, and an earlier run's rows would be reported as this one's."""
    out = args.work / f"out-{tag(args)}-{mode}"
    shutil.rmtree(out, ignore_errors=True)
    argv = PROOFBATCH + ["run", corpus, "--problems", f"@{chosen}", "--out", out,
                         "--hol-light", hol, "--context-root", s2n,
                         "--context-proofs", "trust", "--mode", mode, "--workers", str(args.workers),
                         "--timeout-map", args.bench_map, "--map-mode", "native"]
    if mode == "native":
        argv.append("--no-fallback")
    with LoadSampler() as load:
        wall = step(argv, cwd=ROOT)
    return read_rows(out), wall, load.text()


def tag(args) -> str:
    """Names of a run's folders: the seed, after the tree when it is not arm."""
    return str(args.seed) if args.arch == "arm" else f"{args.arch}-{args.seed}"


def converted(map_timeout: float) -> float:
    """The bytecode limit the README promises for a native map's limit."""
    return max(1.0, round(map_timeout * RATIO_MAX, 1))


def sample_arguments(parser) -> None:
    """The bench's map and how real problems are drawn from it and swept:
    the options this benchmark shares with predictions.py."""
    parser.add_argument("--bench-map", type=Path, required=True, help="the bench's timeout-map.json")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 10000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--max-file-secs", type=float, default=20.0,
                        help="skip files whose problems the map lists at more prove_secs in all")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--modes", default="native,bytecode")


def source_arguments(parser, bench_map: bool = False) -> None:
    """``--work`` and what build_inputs clones (and ``--bench-map``): the
    options of the scripts that build the trees themselves."""
    parser.add_argument("--work", type=Path, required=True, help="folder for the builds and sweeps")
    parser.add_argument("--hol-light-src", required=True, help="what `git clone` takes for HOL Light")
    parser.add_argument("--s2n-bignum-src", required=True, help="what `git clone` takes for s2n-bignum")
    if bench_map:
        parser.add_argument("--bench-map", type=Path, required=True, help="the bench's timeout-map.json")


def parse_args():
    """The command line's flags, --work and --bench-map resolved and --work made."""
    parser = arg_parser(__doc__.splitlines()[0])
    source_arguments(parser)
    parser.add_argument("--arch", choices=("arm", "x86"), default="arm",
                        help="the s2n-bignum tree whose proof files are drawn")
    parser.add_argument("--file", action="append", metavar="STEM",
                        help="run this proof file of ARCH/proofs (e.g. bignum_mul_p521) instead of "
                        "a draw; repeatable. Every problem of it the map lists is swept, however long")
    sample_arguments(parser)
    args = parser.parse_args()
    args.work, args.bench_map = args.work.resolve(), args.bench_map.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    return args


def extract_corpus(args, s2n: Path, files: list[str],
                   listed: dict[str, dict]) -> tuple[Path, Path, list[str], list[str], float]:
    """``proofbatch extract`` of the files: the corpus, the file naming the
    problems to sweep, the extracted ids, those the map lists, and the
    extract's wall seconds."""
    corpus = args.work / f"corpus-{tag(args)}"
    extract_s = step(PROOFBATCH + ["extract", *[s2n / args.arch / "proofs" / f"{f}.ml" for f in files],
                                   "--out", corpus, "--prefix", args.arch,
                                   "--hol-light", (args.work / "hol-light").resolve()], cwd=ROOT)
    extracted = sorted(p.name for p in corpus.iterdir() if (p / "setup.ml").is_file())
    # The bench's problems of these files, as a bench user sweeps them: the
    # rest (SUBROUTINE_CORRECT corollaries and the like) the map does not list.
    ids = [i for i in extracted if i in listed]
    chosen = args.work / f"problems-{tag(args)}.txt"
    chosen.write_text("".join(f"{i}\n" for i in ids))
    return corpus, chosen, extracted, ids, extract_s


def judge_mode(mode: str, rows: dict[str, dict], ids: list[str],
               listed: dict[str, dict]) -> tuple[str, list[str], Goal]:
    """One mode's verdict counts and how many ran in another mode, as its
    line's tail; what the mode did not meet; and its goal: every ground
    truth OK, in this mode, each problem swept (and in bytecode under the
    limit converted from the map's)."""
    verdicts = defaultdict(int)
    for row in rows.values():
        verdicts[row["verdict"]] += 1
    not_ok = [f"{pid} {r['verdict']} {r['reason']}" for pid, r in rows.items() if r["verdict"] != "OK"]
    wrong_mode = [pid for pid, r in rows.items() if r["mode"] != mode]
    missing = [pid for pid in ids if pid not in rows]
    short = {pid for pid, r in rows.items() if r["verdict"] != "OK"} | set(wrong_mode) | set(missing)
    tail = (" ".join(f"{v} {n}" for v, n in sorted(verdicts.items()))
            + f"; {len(wrong_mode)} ran in another mode")
    fails = [f"{mode}: {x}" for x in not_ok]
    fails += [f"{mode}: {pid} ran in {rows[pid]['mode']}" for pid in wrong_mode]
    fails += [f"{mode}: {pid} has no row" for pid in missing]
    if mode == "bytecode":
        for pid, r in rows.items():
            if pid in listed and float(r["timeout_s"]) != converted(listed[pid]["timeout_sec"]):
                short.add(pid)
                fails.append(f"bytecode: {pid} ran under {r['timeout_s']} s "
                             f"({r['timeout_source']}), not the converted "
                             f"{converted(listed[pid]['timeout_sec'])} s")
    goal = Goal(f"{mode}: problems not OK, not swept, run in another mode or under another limit",
                len(short), "==", 0)
    return tail, fails, goal


def sweep_modes(args, corpus: Path, chosen: Path, hol: Path, s2n: Path, ids: list[str],
                listed: dict[str, dict]) -> tuple[dict[str, dict[str, dict]], list[str], list[str],
                                                  dict, list[Goal]]:
    """A sweep in each mode: {mode: rows}, a line per mode, what was not
    met, each mode's wall seconds and load, and each mode's goal."""
    runs: dict[str, dict[str, dict]] = {}
    lines: list[str] = []
    fails: list[str] = []
    figures: dict = {}
    goals: list[Goal] = []
    for mode in args.modes.split(","):
        rows, wall, load = sweep(args, mode, corpus, chosen, hol, s2n)
        runs[mode] = rows
        tail, mode_fails, goal = judge_mode(mode, rows, ids, listed)
        goals.append(goal)
        lines.append(f"{mode}: wall {wall:.0f} s, {load}; " + tail)
        fails += mode_fails
        figures[f"{mode}_wall_s"] = round(wall, 1)
        figures[f"{mode}_load"] = load
    return runs, lines, fails, figures, goals


def against_map(runs: dict[str, dict[str, dict]], ids: list[str],
                listed: dict[str, dict]) -> tuple[list[str], list[float]]:
    """Each problem's native prove_secs (and bytecode's) against the map's:
    the table, and the ratios of the problems the map lists at 0.5 s or more."""
    ratios = []
    lines = [f"{'problem':60} {'map s':>8} {'native s':>9} {'ratio':>6}"
             + (f" {'bytecode s':>10}" if "bytecode" in runs else "")]
    for pid in ids:
        row = runs["native"].get(pid)
        if pid not in listed or row is None or not row["prove_secs"]:
            continue
        want, got = float(listed[pid]["prove_secs"]), float(row["prove_secs"])
        ratio = got / want if want > 0 else float("nan")
        if want >= 0.5:          # below that the ratio shows the clock, not the proof
            ratios.append(ratio)
        byte = runs.get("bytecode", {}).get(pid, {}).get("prove_secs", "")
        lines.append(f"{pid:60} {want:8.2f} {got:9.2f} {ratio:6.2f}"
                     + (f" {float(byte):10.2f}" if byte else ""))
    return lines, ratios


def main() -> int:
    args = parse_args()
    hol, s2n, build_secs = build_inputs(args)
    bench_map = json.loads(args.bench_map.read_text())
    listed = {e["problem_id"]: e for e in bench_map}
    files = args.file or choose_files(bench_map, s2n, args.seed, args.files, args.max_file_secs,
                                      args.arch)
    if missing := [f for f in files if not (s2n / args.arch / "proofs" / f"{f}.ml").is_file()]:
        raise SystemExit(f"--file: no {args.arch}/proofs/{missing[0]}.ml in {s2n}")
    log(f"{args.arch} seed {args.seed}: {', '.join(files)}")
    corpus, chosen, extracted, ids, extract_s = extract_corpus(args, s2n, files, listed)

    lines = [f"{args.arch} seed {args.seed}: files {', '.join(files)}; {len(extracted)} problems extracted "
             f"in {extract_s:.1f} s, {len(ids)} of them in the bench's map (swept)",
             "builds: " + ", ".join(f"{k} {v:.0f}" for k, v in build_secs.items())]
    figures: dict = {"arch": args.arch, "seed": args.seed, "files": files, "problems": len(ids), **build_secs}
    runs, mode_lines, problems_fail, mode_figures, goals = sweep_modes(args, corpus, chosen, hol, s2n,
                                                                       ids, listed)
    lines += mode_lines
    figures.update(mode_figures)
    if "native" in runs:
        table, ratios = against_map(runs, ids, listed)
        lines += table
        if ratios:
            figures["native_ratio_median"] = round(statistics.median(ratios), 2)
            figures["native_ratio_count"] = len(ratios)
            lines.append(f"native prove_secs / map: median {statistics.median(ratios):.2f} over "
                         f"{len(ratios)} problems of at least 0.5 s ({figures['native_load']})")
    lines += ["not met: " + x for x in problems_fail[:40]]
    figures["failures"] = len(problems_fail)
    return emit(args, "s2n_readme_path", figures, lines,
                f"every ground truth OK in {' and '.join(args.modes.split(','))}, no fallback "
                "natively, bytecode limits converted from the map", True,
                [Goal("problems swept (the map's, of the files drawn)", len(ids), ">", 0), *goals])


if __name__ == "__main__":
    sys.exit(main())
