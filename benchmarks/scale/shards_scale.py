"""Shards at scale: scan, status, report and merge of 100,000 and 1,000,000
result rows, in 5-row shards (a sweep of short checks flushing every 2 s)
and 200-row shards, with today's code beside the code before issue 16
(benchmarks/scale/shards_legacy.py: ``scan`` into row dicts, ``merge`` through the
csv module, ``status`` as a scan) measured in the same run.

Rows are synthetic, made with ``runner.results.rows.rows_to_table`` (32 attempts
per problem, every verdict; a block of 10,000 rows, repeated with its
problem ids, attempts, hashes and times shifted in Arrow) and written as ``OUT/shards/*.parquet``
with the options writers use (``runner.results.shards.WRITE_OPTIONS``). Each
configuration is written twice: as the raw shards a sweep without
compaction leaves (what the legacy code reads), and as the shards a sweep
leaves with compaction (``runner.results.compaction.compact`` called after every
32 shards, as writers do), what the new code reads. Each operation runs in
a fresh subprocess; its wall time is measured inside it (the operation) and
outside (the whole process, Python start-up included), and its peak memory
is the child's own high-water mark (VmHWM).

``report`` loads the report and computes every figure its renderers show
(beside runner/reporting/report.py before its figures were computed in Arrow, read
from git: ``legacy_report``); ``report-cli`` is ``proofbatch report OUT
--html PAGE`` whole, the terminal report and the page with its plots.

    nice .venv/bin/python benchmarks/scale/shards_scale.py --rows 100000 --shard-rows 5 200
    nice .venv/bin/python benchmarks/scale/shards_scale.py --rows 1000000 --shard-rows 200 --legacy-ops scan
    nice .venv/bin/python benchmarks/scale/shards_scale.py --measure COPY_OF_A_GENERATED_DIR --ops scan merge
    .venv/bin/python benchmarks/scale/shards_scale.py --generate-raw DIR --rows 100000 --shard-rows 5
    .venv/bin/python benchmarks/scale/shards_scale.py --measure DIR --ops report-cli scan scan-dataset \
        --legacy-ops none --readers previous one-by-one --repeat 3

On a shared machine read the CPU column (user+sys of the child during the
operation, all threads): wall times there measure the queue for a core.

Targets at 1,000,000 rows: scan <= 3 s, merge <= 15 s, status <= 1 s,
report (and report-cli) <= 10 s, peak memory <= 2 GiB.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # first: it puts the project root on sys.path
from common import ROOT  # noqa: E402

TARGETS = {"scan": 3.0, "merge": 15.0, "status": 1.0, "report": 10.0, "report-cli": 10.0}
# The last commit of runner/reporting/report.py before its figures were computed in
# Arrow: the report's baseline (``legacy_report``).
REPORT_BASELINE = "492b683"
# runner/results/shard_reads.py before each shard was read by Parquet's C++
# reader alone: a pq.ParquetFile per shard, on threads (``previous``); and
# its read_shard file by file (``one-by-one``, what scan did before issue 33).
READER_BASELINE = "698a40f"
READERS = ("previous", "one-by-one")
MEM_TARGET_MB = 2048
VERDICTS = ["OK", "FAIL", "TIMEOUT", "CHEATING", "ERROR", "MEMOUT"]
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _rows(lo: int, hi: int):
    from runner.results.rows import ResultRow

    return [ResultRow(
        problem_id=f"arm.bignum_problem_{i // 32:06d}", attempt=i % 32, category="generic",
        verdict=VERDICTS[i % 7 % 6], reason="proved" if i % 7 == 0 else f'Failure "tac, {i}"',
        prove_secs=0.25 + (i % 13) / 7 if i % 3 else None, wall_secs=0.5 + (i % 11) / 3,
        peak_rss_mb=None if i % 5 else 300.0 + i % 17, timeout_s=60.0, timeout_source="map",
        worker=f"node{i % 4}/123/w{i % 8}", host=f"node{i % 4}",
        started_at=T0 + dt.timedelta(seconds=i / 8), finished_at=T0 + dt.timedelta(seconds=i / 8 + 1),
        image_key=f"img{i % 40}", prover_build="2.0", mode="bytecode", exit_status="exited 0",
        answer_sha256=f"{i:064x}", run_id="bench-run") for i in range(lo, hi)]


BLOCK = 10000


def _block(template, lo: int):
    """The template's rows as rows lo .. lo+BLOCK: problem ids, attempts,
    hashes and timestamps shifted in Arrow, the rest as made."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = template.num_rows
    i = pa.array(range(lo, lo + n), pa.int64())
    pid = pc.binary_join_element_wise("arm.bignum_problem_", pc.utf8_lpad(
        pc.cast(pc.divide(i, 32), pa.string()), 6, "0"), "")
    shift = pa.scalar(dt.timedelta(seconds=lo / 8), pa.duration("us"))
    out = template
    for name, col in (("problem_id", pid), ("attempt", pc.cast(pc.bit_wise_and(i, 31), pa.int32())),
                      ("answer_sha256", pc.utf8_lpad(pc.cast(i, pa.string()), 64, "0")),
                      ("started_at", pc.add(template["started_at"], shift)),
                      ("finished_at", pc.add(template["finished_at"], shift))):
        out = out.set_column(out.schema.get_field_index(name), name, col)
    return out


def generate(out: Path, rows: int, per: int, *, compact: bool, options: dict | None = None) -> dict:
    """Write ``rows`` rows as ``per``-row shards, with the Parquet options
    writers use (``shards.WRITE_OPTIONS``) unless ``options`` are given;
    with ``compact``, fold as writers do (after every 32 shards). Returns
    timings."""
    import pyarrow.parquet as pq

    from runner.results import compaction, heartbeat, shards
    from runner.results.done import SHARDS_DIR
    from runner.results.rows import SCHEMA, rows_to_table

    d = out / SHARDS_DIR
    d.mkdir(parents=True, exist_ok=True)
    seq, compact_s, t = 0, 0.0, time.perf_counter()
    template = rows_to_table(_rows(0, min(rows, BLOCK)))
    for lo in range(0, rows, BLOCK):
        table = _block(template, lo).slice(0, rows - lo).cast(SCHEMA)
        for off in range(0, table.num_rows, per):
            seq += 1
            pq.write_table(table.slice(off, per), d / f"bench-w{seq % 8}-{seq // 8 + 1:06d}.parquet",
                           **(shards.WRITE_OPTIONS if options is None else options))
            if compact and seq % compaction.FAN_IN == 0:
                c = time.perf_counter()
                compaction.compact(out)
                compact_s += time.perf_counter() - c
    (out / "sweep.json").write_text(json.dumps({"checks": rows, "corpus": "/bench/corpus",
                                                "config": {"workers": 8}, "prover_build": "2.0"}))
    if compact:
        # What the runner leaves while it runs: its heartbeat (runner/results/heartbeat.py).
        done = shards.scan(out, repair=False).done
        heartbeat.Heartbeat(out, total=rows, done=done, skipped=0, workers=8,
                            resume="proofbatch run /bench/corpus --out OUT").publish("running")
    files = len(list(d.glob("*.parquet")))
    return {"generate_s": time.perf_counter() - t, "compact_s": compact_s, "files": files}


def legacy_report() -> types.ModuleType:
    """runner/reporting/report.py as it was before its figures were computed in Arrow
    (it turned every row into a dict), read from git; it reads the shards
    through ``runner.results.shards.read_results``, which ``op`` points at the legacy
    reader."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{REPORT_BASELINE}:runner/reporting/report.py"],
                            capture_output=True, text=True, check=True).stdout
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


def _print(m: dict) -> None:
    print(f"  {m['op']:10} {m['label']:16} {m['op_s']:8.2f} s op ({m['op_cpu_s']:6.2f} s CPU)  "
          f"{m['process_s']:8.2f} s process  {m['peak_mb']:7.0f} MB peak  ({m['rows']} rows)"
          f"  load {m['load_before']:.1f}-{m['load']:.1f}", flush=True)


def measure(name: str, impl: str, out: Path) -> dict:
    load = os.getloadavg()[0]
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, __file__, "--child", name, impl, str(out)],
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


def _medians(results: list[dict]) -> None:
    import statistics

    print("medians:")
    for name in dict.fromkeys(m["op"] for m in results):
        for label in dict.fromkeys(m["label"] for m in results if m["op"] == name):
            ms = [m for m in results if m["op"] == name and m["label"] == label and "error" not in m]
            if ms:
                loads = [m[k] for m in ms for k in ("load_before", "load")]
                print(f"  {name:10} {label:16} {statistics.median(m['op_s'] for m in ms):8.2f} s op "
                      f"({statistics.median(m['op_cpu_s'] for m in ms):6.2f} s CPU)  "
                      f"{statistics.median(m['process_s'] for m in ms):8.2f} s process "
                      f"({statistics.median(m['process_cpu_s'] for m in ms):6.2f} s CPU)  "
                      f"{len(ms)} runs, load {min(loads):.1f}-{max(loads):.1f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100000])
    ap.add_argument("--shard-rows", type=int, nargs="+", default=[5, 200])
    ap.add_argument("--no-legacy-above", type=int, default=10**9,
                    help="skip the legacy baseline above this many shard files (it takes minutes)")
    ap.add_argument("--ops", nargs="+", default=["scan", "status", "report", "report-cli", "merge"])
    ap.add_argument("--legacy-ops", nargs="+", default=["scan", "status", "report", "merge"],
                    help="the operations to measure the legacy baseline of (each takes minutes at 1M rows)")
    ap.add_argument("--dir", type=Path, help="where to write the shards (default: a temp dir)")
    ap.add_argument("--no-raw", action="store_true",
                    help="write only the compacted shards (no legacy baseline, no raw-shard figures)")
    ap.add_argument("--measure", type=Path, metavar="OUT",
                    help="only measure --ops on the shards already in OUT (e.g. a copy of a "
                    "generated directory); merge last, as it folds them")
    ap.add_argument("--generate-raw", type=Path, metavar="OUT",
                    help="only write --rows rows in --shard-rows-row shards to OUT, uncompacted, as a "
                    "live sweep or many array tasks leave them (issue 33: 100,000 rows in 20,000 "
                    "shards); then measure them with --measure OUT")
    ap.add_argument("--pyarrow-defaults", action="store_true",
                    help="with --generate-raw: write the shards with pyarrow's default options, as "
                    "writers did before shards.WRITE_OPTIONS")
    ap.add_argument("--readers", nargs="+", choices=READERS, default=[],
                    help=f"with --measure: also measure --ops with the shards read as at {READER_BASELINE} "
                    "(previous: a pq.ParquetFile per shard, on threads; one-by-one: its read_shard "
                    "for each file in turn, as before issue 33), the rest today's")
    ap.add_argument("--repeat", type=int, default=1,
                    help="with --measure: rounds, each measuring today's code and every baseline in "
                    "turn; then the medians")
    ap.add_argument("--json", action="store_true",
                    help="print one JSON object instead of the text report")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(op(args.child[0], args.child[1], Path(args.child[2]))))
        return 0
    with common.text_to_stderr(args):
        status, results = run(args)
    if args.json:
        print(json.dumps({"benchmark": "shards_scale", "measurements": results,
                          "result": "PASS" if status == 0 else "MISS"}))
    return status


def run(args) -> tuple[int, list[dict]]:
    """(exit status, every measurement) of the run ``args`` ask for."""
    results: list[dict] = []
    if args.generate_raw:
        g = generate(args.generate_raw, args.rows[0], args.shard_rows[0], compact=False,
                     options={} if args.pyarrow_defaults else None)
        print(f"{args.generate_raw}: {args.rows[0]} rows in {g['files']} files, {g['generate_s']:.0f} s")
        return 0, results
    if args.measure:
        # Shards written before (by --keep): each op, new code then the
        # baselines, alternated --repeat times.
        for _ in range(args.repeat):
            for name in args.ops:
                readers = args.readers if name in ("scan", "report", "report-cli", "merge") else []
                for impl in ["new", *readers] + (["legacy"] if name in args.legacy_ops else []):
                    m = measure(name, impl, args.measure)
                    m.update(label=impl)
                    results.append(m)
                    _print(m) if "error" not in m else print(m)
        if args.repeat > 1:
            _medians(results)
        return 0, results
    base = Path(tempfile.mkdtemp(prefix="proofbatch-bench-shards-", dir=args.dir))
    misses = []
    try:
        for rows in args.rows:
            for per in args.shard_rows:
                cfg = f"{rows} rows in {per}-row shards"
                new = base / f"new-{rows}-{per}"
                g = generate(new, rows, per, compact=True)
                print(f"{cfg}: compacted as written: {g['files']} files, generating took "
                      f"{g['generate_s']:.0f} s of which compaction {g['compact_s']:.1f} s", flush=True)
                raw = base / f"raw-{rows}-{per}"
                if args.no_raw:
                    g_raw = {"files": 10**12}
                    raw.mkdir()
                else:
                    g_raw = generate(raw, rows, per, compact=False)
                    print(f"{cfg}: raw: {g_raw['files']} files", flush=True)
                for name in args.ops:
                    pair = [("new", new)]
                    if name != "merge" and not args.no_raw:
                        pair.append(("new, raw shards", raw))
                    if g_raw["files"] <= args.no_legacy_above and name in args.legacy_ops:
                        pair.append(("legacy", raw))
                    for label, d in pair:
                        impl = "legacy" if label == "legacy" else "new"
                        if label == "new, raw shards" and name == "status":
                            continue        # no status.json there; legacy shows a scan
                        if label == "legacy" and name == "merge":
                            d = raw
                        m = measure(name, impl, d)
                        m.update(config=cfg, label=label)
                        results.append(m)
                        if "error" in m:
                            print(f"  {name:10} {label:16} ERROR {m['error']}", flush=True)
                            continue
                        _print(m)
                        if label == "new" and rows >= 1_000_000:
                            if m["op_s"] > TARGETS[name] or m["peak_mb"] > MEM_TARGET_MB:
                                misses.append(f"{cfg} {name}")
                # merge on raw shards last: the new merge folds the raw shards.
                if "merge" in args.ops and not args.no_raw:
                    m = measure("merge", "new", raw)
                    m.update(config=cfg, label="new, raw shards")
                    results.append(m)
                    _print(m)
                shutil.rmtree(new, ignore_errors=True)
                shutil.rmtree(raw, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(("MISS: " + ", ".join(misses)) if misses else "PASS (targets apply at 1,000,000 rows)")
    return (1 if misses else 0), results


if __name__ == "__main__":
    sys.exit(main())
