"""The measuring side of benchmarks/scale/shards_scale.py: one operation (scan,
scan-dataset, status, report, report-cli, merge) run in a fresh child
process, its wall and CPU time measured inside it (the operation) and
outside (the whole process, Python start-up included), and its peak memory
the child's own high-water mark (VmHWM); the figures of an operation's
rounds (their medians); and the baselines it swaps in: the report before its
figures were computed in Arrow and the shard reader before each shard was
read by Parquet's C++ reader alone, both read from git, and the shard
reader before issue 16 (shards_legacy.py).

The child is ``python benchmarks/scale/shards_scale.py --child OP IMPL OUT``:
``measure`` builds that command line, and the script's ``--child`` prints
``op``'s figures as JSON. A helper module, not run on its own.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import ROOT  # noqa: E402  (common puts the project root on sys.path)

# The script whose --child runs ``op`` in a fresh process.
SCRIPT = Path(__file__).resolve().with_name("shards_scale.py")

# The last commit of runner/reporting/report.py before its figures were computed in
# Arrow: the report's baseline (``legacy_report``).
REPORT_BASELINE = "492b683"
# It was runner/report.py then; the modules it imports relatively have moved
# since (into runner/results/ and runner/planning/): its imports of them, now.
REPORT_MOVED = {"from . import shards\n": "from runner.results import shards\n",
                "from .planner import PLAN_FILE\n": "from runner.planning.planner import PLAN_FILE\n"}
# runner/results/shard_reads.py before each shard was read by Parquet's C++
# reader alone: a pq.ParquetFile per shard, on threads (``previous``); and
# its read_shard file by file (``one-by-one``, what scan did before issue 33).
READER_BASELINE = "698a40f"
READERS = ("previous", "one-by-one")


# -- the baselines ---------------------------------------------------------------

def legacy_report() -> types.ModuleType:
    """runner/reporting/report.py as it was before its figures were computed in Arrow
    (it turned every row into a dict; then runner/report.py), read from git; it reads the shards
    through ``runner.results.shards.read_results``, which ``op`` points at the legacy
    reader."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{REPORT_BASELINE}:runner/report.py"],
                            capture_output=True, text=True, check=True).stdout
    for then, now in REPORT_MOVED.items():
        if then not in source:
            raise SystemExit(f"{REPORT_BASELINE}:runner/report.py no longer has {then!r}")
        source = source.replace(then, now)
    module = types.ModuleType("runner.report_legacy")
    module.__package__ = "runner"                # its relative imports: today's runner
    sys.modules[module.__name__] = module        # dataclasses look their module up
    exec(compile(source, "report_legacy.py", "exec"), module.__dict__)
    return module


def _from_git(commit: str, path: str, name: str) -> types.ModuleType:
    """``path`` as it was at ``commit``, as module ``name``; its relative
    imports are today's."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"],
                            capture_output=True, text=True, check=True).stdout
    module = types.ModuleType(name)
    module.__package__ = name.rsplit(".", 1)[0]
    sys.modules[name] = module                   # dataclasses look their module up
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def baseline_reader(impl: str):
    """``read_shards`` as ``impl`` (one of READERS) read shards."""
    import pyarrow as pa

    prev = _from_git(READER_BASELINE, "runner/results/shard_reads.py", "runner.results.shard_reads_previous")
    if impl == "previous":
        return prev.read_shards

    def one_by_one(paths, columns, threads=None):
        # read_shard at READER_BASELINE, for each file in turn.
        found, tables = prev.Read(), []
        for path in paths:
            raw, table = prev.read_raw(path, columns), None
            if raw == "gone":
                found.gone.append(path)
                continue
            if raw != "bad":
                try:
                    table = prev.conform(raw[0], columns, raw[1])
                except (pa.ArrowException, ValueError):
                    pass
            (found.unreadable if table is None else found.read).append(path)
            if table is not None:
                tables.append(table)
        found.table = pa.concat_tables(tables) if tables else None
        return found
    return one_by_one


# -- one operation ---------------------------------------------------------------

def op(name: str, impl: str, out: Path) -> dict:
    """Run one operation in this (fresh) process."""
    from runner import cli
    from runner.reporting import report
    from runner.results import shards
    from runner.results.done import LIGHT, SHARDS_DIR
    if impl in READERS:            # today's code but for how shards are read
        shards.read_shards = baseline_reader(impl)
        impl = "new"
    if impl == "legacy":
        import shards_legacy       # beside this script: the child runs it as a script too

        shards.scan, shards.read_results, shards.merge = (shards_legacy.scan, shards_legacy.read_results,
                                                           shards_legacy.merge)
    t, cpu = time.perf_counter(), time.process_time()
    if name == "scan":
        # As the resume, status and Slurm paths call it (the legacy scan
        # has no columns argument: it read whole rows).
        n = len(shards.scan(out, repair=False, **({} if impl == "legacy" else
                                                  {"columns": LIGHT})).done)
    elif name == "scan-dataset":
        # The alternative runner/results/shard_reads.py was measured against:
        # pyarrow.dataset over the same files, the columns a scan reads.
        import pyarrow.dataset as ds
        files = sorted(str(p) for p in (out / SHARDS_DIR).glob("*.parquet"))
        present = set(ds.dataset(files[:1], format="parquet").schema.names)
        n = ds.dataset(files, format="parquet").to_table(
            columns=[c for c in LIGHT if c in present]).num_rows
    elif name == "merge":
        n = shards.merge(out).num_rows
    elif name == "status":
        if impl == "legacy":    # status before issue 16: a scan, then a pass over its rows
            from collections import Counter
            done = shards.scan(out, repair=False).done
            n = sum(Counter(r["verdict"] for r in done.values()).values())
        else:
            from runner.reporting.status import read_status
            n = read_status(out).done
    elif name == "report":
        # Every figure the report shows, computed as its renderers ask.
        r = (legacy_report() if impl == "legacy" else report).load(out)
        r.verdicts(), r.by_category(), r.slowest(), r.throughput(), r.utilization()
        r.image_counts(), r.prediction()
        n = len(r.rows) if impl == "legacy" else r.checks
    elif name == "report-cli":
        # The command as a user runs it: the terminal report and the HTML page.
        printed = io.StringIO()
        with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(printed):
            status = cli.main(["report", str(out), "--html", str(Path(tmp) / "report.html")])
        if status != 0:
            raise SystemExit(f"proofbatch report exited {status}")
        n = int(re.search(r": (\d+) checks in", printed.getvalue()).group(1))
    else:
        raise SystemExit(f"unknown op {name}")
    elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
    # This process's own peak: ru_maxrss of a child also counts its parent's
    # memory at the fork, before the exec.
    hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
    return {"op_s": elapsed, "op_cpu_s": cpu, "rows": n, "hwm_mb": hwm / 1024,
            "load": os.getloadavg()[0]}


def measure(name: str, impl: str, out: Path) -> dict:
    """``op`` run in a fresh child (``shards_scale.py --child``): its figures,
    the whole process's wall and CPU time and the load before it, or its
    ``error``."""
    load = os.getloadavg()[0]
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, str(SCRIPT), "--child", name, impl, str(out)],
                         stdout=subprocess.PIPE, text=True, cwd=ROOT)
    text = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        return {"op": name, "impl": impl, "error": f"exit status {status}"}
    found = json.loads(text)
    return {"op": name, "impl": impl, **found, "process_s": wall, "load_before": load,
            "process_cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_mb": found["hwm_mb"], "ru_maxrss_mb": usage.ru_maxrss / 1024}


def measurement_line(m: dict) -> str:
    """One measurement as the report prints it."""
    if "error" in m:
        return f"  {m['op']:10} {m['label']:16} ERROR {m['error']}"
    return (f"  {m['op']:10} {m['label']:16} {m['op_s']:8.2f} s op ({m['op_cpu_s']:6.2f} s CPU)  "
            f"{m['process_s']:8.2f} s process  {m['peak_mb']:7.0f} MB peak  ({m['rows']} rows)"
            f"  load {m['load_before']:.1f}-{m['load']:.1f}")


# -- figures of an operation's rounds ---------------------------------------------

# A measurement's figures, medians over its runs: seconds, and MB of memory.
KEPT = ("op_s", "op_cpu_s", "process_s", "process_cpu_s", "peak_mb", "ru_maxrss_mb")


def entry(ms: list[dict]) -> dict:
    """The figures of one operation and label: its runs' medians (the run
    itself when there is one), the load around them, and each run when
    there are several."""
    import statistics

    ok = [m for m in ms if "error" not in m]
    errors = [m["error"] for m in ms if "error" in m]
    if not ok:
        return {"error": errors[0], "runs": 0}
    loads = [m[k] for m in ok for k in ("load_before", "load")]
    out = {k: round(statistics.median(m[k] for m in ok), 3) for k in KEPT}
    out.update(rows=max(m["rows"] for m in ok), load_min=round(min(loads), 2),
               load_max=round(max(loads), 2), runs=len(ok))
    if len(ok) > 1:
        out["each"] = [{**{k: round(m[k], 3) for k in KEPT}, "load_min": round(m["load_before"], 2),
                        "load_max": round(m["load"], 2)} for m in ok]
    if errors:
        out["errors"] = errors
    return out


def median_lines(runs: dict[tuple[str, str], list[dict]]) -> list[str]:
    """The report's lines of the medians of each (operation, label)'s rounds."""
    import statistics

    lines = ["medians:"]
    for (name, label), ms in runs.items():
        ms = [m for m in ms if "error" not in m]
        if ms:
            loads = [m[k] for m in ms for k in ("load_before", "load")]
            lines.append(f"  {name:10} {label:16} {statistics.median(m['op_s'] for m in ms):8.2f} s op "
                         f"({statistics.median(m['op_cpu_s'] for m in ms):6.2f} s CPU)  "
                         f"{statistics.median(m['process_s'] for m in ms):8.2f} s process "
                         f"({statistics.median(m['process_cpu_s'] for m in ms):6.2f} s CPU)  "
                         f"{len(ms)} runs, load {min(loads):.1f}-{max(loads):.1f}")
    return lines
