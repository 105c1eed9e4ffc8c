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
is the child's own high-water mark (VmHWM). That measuring side (the child
this script's ``--child`` runs, the baselines read from git, the medians of
rounds) is benchmarks/scale/shards_measure.py.

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

Every run but ``--generate-raw`` writes a record (benchmarks/record.py) of
every figure it prints, each configuration under ``configurations``; PASS
gates on one goal per target the run measured, and on every operation
having run and, for generated shards, read every row. ``--generate-raw``
only writes shards: no record, exit status 0. Goals are judged on CPU time,
the column to read on a shared machine; wall time is printed and recorded
beside it (on a quiet host, the time a user waits). They judge today's code
only: on the compacted shards (generated runs), or on OUT's shards
(``--measure``, the median of ``--repeat`` rounds); peak memory is the
largest of its judged operations'. The targets are set at 1,000,000 rows
and are not said to hold at other sizes: each goal's name carries the rows
and shards it was judged at, and a run at other sizes judges the same
thresholds at the rows it measured, under those names.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # first: it puts the project root on sys.path
import record  # noqa: E402
from common import Goal, emit  # noqa: E402
# The measuring: each operation in a fresh child (this script's --child), the baselines.
from shards_measure import (READER_BASELINE, READERS, entry, measure, measurement_line,  # noqa: E402
                            median_lines, op)

TARGET_ROWS = 1_000_000       # the size the targets below are set at
TARGETS = {"scan": 3.0, "merge": 15.0, "status": 1.0, "report": 10.0, "report-cli": 10.0}
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


# -- figures and goals -------------------------------------------------------------

def _key(label: str) -> str:
    """A label as a figures key ("new, raw shards" -> "new_raw_shards"): the
    docs' tables address figures by keys joined with "/"."""
    return label.replace(", ", "_").replace(" ", "_").replace("-", "_")

def where(config: dict) -> str:
    """What a configuration's goals are judged at, as their names say it."""
    rows = "? rows" if config["rows"] is None else f"{config['rows']:,} rows"
    if config.get("shard_rows") is not None:
        return f"{rows} in {config['shard_rows']}-row shards"
    return f"{rows} in {config['files']:,} shard files"


def judge(configs: dict) -> list[Goal]:
    """One goal per target each configuration measured, on today's code
    (label ``new``): each operation's CPU time, and the largest peak memory
    of those operations. A failed operation has no value: its goal is missed."""
    goals = []
    for config in configs.values():
        judged = {name: labels["new"] for name, labels in config["ops"].items()
                  if name in TARGETS and "new" in labels}
        for name, e in judged.items():
            goals.append(Goal(f"{name} CPU s, {where(config)}", e.get("op_cpu_s"), "<=", TARGETS[name]))
        if judged:
            peaks = [e.get("peak_mb") for e in judged.values()]
            goals.append(Goal(f"peak memory MB, {where(config)}", None if None in peaks else max(peaks),
                              "<=", MEM_TARGET_MB))
    return goals


def target_text(configs: dict) -> str:
    times = ", ".join(f"{name} <= {s:g} s" for name, s in TARGETS.items())
    text = f"at {TARGET_ROWS:,} rows: {times} of CPU time, peak memory <= {MEM_TARGET_MB} MB"
    other = [where(c) for c in configs.values() if c["rows"] != TARGET_ROWS]
    if other:
        text += f"; judged here at {'; '.join(other)}"
    return text


# -- runs -------------------------------------------------------------------------

def say(lines: list[str], text: str) -> None:
    """A line of the report, shown on stderr as it comes: a run at 1,000,000
    rows takes many minutes."""
    lines.append(text)
    common.log(text)


def run_measured(args, lines: list[str]) -> tuple[dict, list[str]]:
    """--measure: the shards already in OUT, each op with today's code then
    the baselines, alternated --repeat times. Returns (configurations, problems)."""
    runs: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.repeat):
        for name in args.ops:
            readers = args.readers if name in ("scan", "report", "report-cli", "merge") else []
            for impl in ["new", *readers] + (["legacy"] if name in args.legacy_ops else []):
                m = measure(name, impl, args.measure)
                m.update(label=impl)
                runs.setdefault((name, impl), []).append(m)
                say(lines, measurement_line(m))
    if args.repeat > 1:
        for text in median_lines(runs):
            say(lines, text)
    from runner.results.done import SHARDS_DIR

    config = {"dir": str(args.measure), "rows": None, "shard_rows": None,
              "files": len(list((args.measure / SHARDS_DIR).glob("*.parquet"))), "ops": {}}
    for (name, label), ms in runs.items():
        config["ops"].setdefault(name, {})[_key(label)] = entry(ms)
    read = [labels["new"]["rows"] for labels in config["ops"].values() if "rows" in labels.get("new", {})]
    config["rows"] = max(read) if read else None
    problems = [f"{name} ({label}): {ms[0]['error']}" for (name, label), ms in runs.items()
                if any("error" in m for m in ms)]
    return {"measured": config}, problems


def run_configuration(args, base: Path, rows: int, per: int, lines: list[str]) -> tuple[dict, list[str]]:
    """One generated configuration: today's code on the shards compacted as
    written, beside it on the raw shards and the legacy code on them."""
    cfg = f"{rows} rows in {per}-row shards"
    new = base / f"new-{rows}-{per}"
    g = generate(new, rows, per, compact=True)
    say(lines, f"{cfg}: compacted as written: {g['files']} files, generating took "
               f"{g['generate_s']:.0f} s of which compaction {g['compact_s']:.1f} s")
    config = {"rows": rows, "shard_rows": per, "files_compacted": g["files"],
              "generate_s": round(g["generate_s"], 3), "compact_s": round(g["compact_s"], 3),
              "files_raw": None, "generate_raw_s": None, "ops": {}}
    raw = base / f"raw-{rows}-{per}"
    if args.no_raw:
        raw.mkdir()
    else:
        g_raw = generate(raw, rows, per, compact=False)
        config.update(files_raw=g_raw["files"], generate_raw_s=round(g_raw["generate_s"], 3))
        say(lines, f"{cfg}: raw: {g_raw['files']} files")
    legacy = not args.no_raw and config["files_raw"] <= args.no_legacy_above
    measured = []
    for name in args.ops:
        pair = [("new", new)]
        # No status.json in the raw shards: legacy shows a scan there.
        if name not in ("merge", "status") and not args.no_raw:
            pair.append(("new, raw shards", raw))
        if legacy and name in args.legacy_ops:
            pair.append(("legacy", raw))
        for label, d in pair:
            measured.append(measure(name, "legacy" if label == "legacy" else "new", d) | {"label": label})
            say(lines, measurement_line(measured[-1]))
    # merge on raw shards last: the new merge folds the raw shards.
    if "merge" in args.ops and not args.no_raw:
        measured.append(measure("merge", "new", raw) | {"label": "new, raw shards"})
        say(lines, measurement_line(measured[-1]))
    shutil.rmtree(new, ignore_errors=True)
    shutil.rmtree(raw, ignore_errors=True)
    problems = []
    for m in measured:
        config["ops"].setdefault(m["op"], {})[_key(m["label"])] = entry([m])
        if "error" in m:
            problems.append(f"{cfg}: {m['op']} ({m['label']}): {m['error']}")
        elif m["rows"] != rows:         # it measured a smaller job than the one named
            problems.append(f"{cfg}: {m['op']} ({m['label']}) read {m['rows']} rows of {rows}")
    return config, problems


def run_generated(args, lines: list[str]) -> tuple[dict, list[str]]:
    """Each --rows x --shard-rows configuration, generated afresh."""
    configs, problems = {}, []
    base = Path(tempfile.mkdtemp(prefix="proofbatch-bench-shards-", dir=args.dir))
    try:
        for rows in args.rows:
            for per in args.shard_rows:
                config, found = run_configuration(args, base, rows, per, lines)
                configs[f"{rows}x{per}"] = config
                problems += found
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return configs, problems


def main() -> int:
    ap = common.arg_parser(__doc__.split("\n\n")[0])
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
                    "shards); then measure them with --measure OUT. Writes no record")
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
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(op(args.child[0], args.child[1], Path(args.child[2]))))
        return 0
    if args.generate_raw:
        g = generate(args.generate_raw, args.rows[0], args.shard_rows[0], compact=False,
                     options={} if args.pyarrow_defaults else None)
        print(f"{args.generate_raw}: {args.rows[0]} rows in {g['files']} files, {g['generate_s']:.0f} s")
        return 0
    rec, lines, load_start = record.current(), [], common.loadavg()
    if args.measure:
        # Its digest now: a merge measured folds the shards it names.
        rec.input("measured", path=args.measure)
        configs, problems = run_measured(args, lines)
    else:
        rec.input("rows", args.rows)
        rec.input("shard_rows", args.shard_rows)
        configs, problems = run_generated(args, lines)
    figures = {"configurations": configs, "loadavg_1m_start": load_start,
               "loadavg_1m_end": common.loadavg()}
    lines += [f"PROBLEM: {p}" for p in problems]
    lines.append(f"load average {load_start} at start, {figures['loadavg_1m_end']} at end")
    return emit(args, "shards_scale", figures, lines, target_text(configs), not problems, judge(configs))


if __name__ == "__main__":
    sys.exit(main())
