"""`proofbatch extract` of many one-theorem files: today's code beside the
code before issue 33's point 4 (extract.py and load_graph.py read from git
at EXTRACT_BASELINE, which walked every file for each file), measured in
the same run on the same files.

Each size gets that many generated files (``let Tk = prove (`k + 0 = k`,
ARITH_TAC);;``), extracted into a fresh corpus: wall time and this
process's CPU time of ``extract`` (reading, cutting, following loads,
listing, writing the corpus). On a shared host read the CPU column: wall
time there measures the queue for a core.

    .venv/bin/python benchmarks/scale/extract_scale.py                      # 200 and 2,000 files
    .venv/bin/python benchmarks/scale/extract_scale.py --sizes 50 100 200 --legacy-sizes 50 100 200
    .venv/bin/python benchmarks/scale/extract_scale.py --legacy-sizes 200 2000   # the old 2,000: minutes

Target: linear, the CPU time per file of the largest size at most twice
that of the smallest (the old code's grows with the file count).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import time
import types
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # first: it puts the project root on sys.path
from common import ROOT  # noqa: E402
# The files the test of linear growth makes (tests/hol_light/test_extract_scale.py).
from tests.hol_light.test_extract_scale import one_theorem_files  # noqa: E402

# The last commit before extract indexed the loads once.
EXTRACT_BASELINE = "a5d6e6c"
PER_FILE_GROWTH = 2.0


# Where the names the baseline's extract.py and load_graph.py imported from
# their flat package live today (the package was grouped since, issue 35).
TODAY = {"split_phrases": "ocaml_lexer", "classify": "ocaml_lexer", "strip_phrase": "ocaml_lexer",
         "resolve": "load_graph", "DROPPED_LOADS": "load_graph", "LoadGraph": "load_graph"}
MOVED = {"extract_scan": "extract.", "extract_model": "extract.", "extract_out": "extract."}


def today_imports(source: str) -> str:
    """``source`` with each ``from .module import names`` of the flat package
    made an import of each name from its module today."""
    lines = source.splitlines(keepends=True)
    for node in reversed(ast.parse(source).body):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            new = "".join(f"from .{TODAY.get(a.name) or MOVED.get(node.module, '') + node.module} "
                          f"import {a.name}\n" for a in node.names)
            lines[node.lineno - 1:node.end_lineno] = [new]
    return "".join(lines)


def legacy_extract():
    """extract as it was at EXTRACT_BASELINE: its extract.py and load_graph.py
    from git, with today's modules for the rest (they did not change)."""
    def module(rel: str, name: str) -> types.ModuleType:
        source = subprocess.run(["git", "-C", str(ROOT), "show", f"{EXTRACT_BASELINE}:{rel}"],
                                capture_output=True, text=True, check=True).stdout
        mod = types.ModuleType(name)
        mod.__package__ = "runner.provers.hol_light"       # relative imports: today's package
        source = today_imports(source)
        sys.modules[name] = mod                              # dataclasses look their module up
        exec(compile(source, rel, "exec"), mod.__dict__)
        return mod

    graph = module("runner/provers/hol_light/load_graph.py", "runner.provers.hol_light.load_graph_legacy")
    old = module("runner/provers/hol_light/extract.py", "runner.provers.hol_light.extract_legacy")
    old.LoadGraph = graph.LoadGraph
    return old.extract


def measure(extract, paths: list[Path], out: Path) -> dict:
    from runner.provers.hol_light.extract.extract_model import ExtractConfig
    from runner.provers.hol_light.install import DEBIAN_DIR

    cfg = ExtractConfig(files=tuple(paths), out=out, hol_dir=DEBIAN_DIR if DEBIAN_DIR.is_dir() else None)
    t, cpu = time.perf_counter(), time.process_time()
    result = extract(cfg)
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    if len(result.problems) != len(paths):
        raise SystemExit(f"benchmark invalid: {len(result.problems)} problems from {len(paths)} files")
    return {"files": len(paths), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def main() -> int:
    parser = common.arg_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--legacy-sizes", type=int, nargs="*", default=[200],
                        help="sizes the old code runs too (2,000 files take it minutes)")
    args = parser.parse_args()
    from runner.provers.hol_light.extract.extract import extract

    old = legacy_extract() if args.legacy_sizes else None
    tmp = common.temp_dir("extract")
    load_start = common.loadavg()
    today, legacy = [], []
    for n in sorted(set(args.sizes) | set(args.legacy_sizes)):
        paths = one_theorem_files(tmp / f"files-{n}", n)
        if n in args.sizes:
            common.log(f"today's extract of {n} files")
            today.append(measure(extract, paths, tmp / f"today-{n}"))
        if n in args.legacy_sizes:
            common.log(f"the old extract ({EXTRACT_BASELINE}) of {n} files")
            legacy.append(measure(old, paths, tmp / f"legacy-{n}"))
    lines = [f"load average {load_start} at start, {common.loadavg()} at end"]
    for label, rows in (("today", today), (f"before ({EXTRACT_BASELINE})", legacy)):
        for r in rows:
            lines.append(f"{label:>18}: {r['files']:>6} files  wall {r['wall_s']:7.2f} s  "
                         f"CPU {r['cpu_s']:7.2f} s  ({1000 * r['cpu_s'] / r['files']:.2f} ms CPU a file)")
    small, large = today[0], today[-1]
    growth = (large["cpu_s"] / large["files"]) / max(small["cpu_s"] / small["files"], 1e-9)
    lines.append(f"CPU a file at {large['files']} files / at {small['files']}: {growth:.2f}")
    figures = {"today": today, "legacy": legacy, "per_file_growth": round(growth, 2),
               "baseline_commit": EXTRACT_BASELINE}
    with common.text_to_stderr(args):
        return common.emit(args, "extract_scale", figures, lines,
                           f"CPU a file grows at most {PER_FILE_GROWTH}x from the smallest size to "
                           "the largest (linear)", True,
                           [common.Goal(f"CPU a file at {large['files']:,} files / at {small['files']:,}",
                                        round(growth, 2), "<=", PER_FILE_GROWTH)])


if __name__ == "__main__":
    sys.exit(main())
