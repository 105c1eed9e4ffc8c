"""How fast `proofbatch` answers: --version, --help and status, each against
a bare `python -c pass` measured in the same run (issue 24: --version took
2.3-3.5 s on a loaded host, because building the parser imported every
subcommand, report's matplotlib included).

    python benchmarks/checks/startup.py [--runs N]

Each command runs N times in a fresh interpreter (`python -m runner.cli`,
as the `proofbatch` entry point does); the table gives the median and the
best wall time, and the median less bare Python's: what proofbatch itself
costs. The targets on a quiet host: --version and --help within 0.3 s,
status within 0.5 s, each a goal of the run's record that gates its exit
status (1 when a median is over). tests/test_startup.py checks the cause
(no heavy import), never a time.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import ROOT, Goal, arg_parser, emit  # puts the project root on sys.path

TARGETS = {"--version": 0.3, "--help": 0.3, "status": 0.5}


def a_sweep(where: Path) -> Path:
    """A sweep directory as a stopped sweep leaves it."""
    from runner.results import heartbeat
    from runner.results.done import Done

    out = where / "out"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"checks": 3, "corpus": str(where / "c"),
                                                "config": {}, "prover": "hol-light"}))
    heartbeat.Heartbeat(out, total=3, done=Done(None), skipped=0, workers=1,
                        resume="proofbatch run c --out out").publish("stopped")
    return out


def timed(argv: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        times.append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each command (default 15)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = a_sweep(Path(tmp))
        cli = [sys.executable, "-m", "runner.cli"]
        cases = {"python -c pass": [sys.executable, "-c", "pass"],
                 "--version": cli + ["--version"], "--help": cli + ["--help"],
                 "status": cli + ["status", str(out)]}
        results = {name: timed(argv, args.runs) for name, argv in cases.items()}
    bare = statistics.median(results["python -c pass"])
    lines = [f"{'command':<16} {'median s':>9} {'best s':>8} {'over bare s':>12} {'target s':>9}"]
    figures, goals = {"runs": args.runs}, []
    for name, times in results.items():
        median = statistics.median(times)
        target = TARGETS.get(name)
        figures[name] = {"median_s": round(median, 3), "best_s": round(min(times), 3),
                         "over_bare_s": round(median - bare, 3)}
        lines.append(f"{name:<16} {median:>9.3f} {min(times):>8.3f} {median - bare:>12.3f} "
                     f"{'' if target is None else f'{target:.1f}':>9}")
        if target is not None:
            goals.append(Goal(f"{name} median s", round(median, 3), "<=", target))
    return emit(args, "startup", figures, lines,
                ", ".join(f"{n} within {t:g} s" for n, t in TARGETS.items()) + " (median)",
                True, goals)


if __name__ == "__main__":
    sys.exit(main())
