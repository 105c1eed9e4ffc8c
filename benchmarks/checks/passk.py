"""K attempts against one loaded context, against loading the context per attempt.

One problem whose context is ``needs "Library/words.ml";;`` (about 25 s of
CPU to load in bytecode HOL Light) gets K = 32 attempts, each a distinct
answer text (``ALL_TAC THEN`` repeated i times before ``CONV_TAC
WORD_REDUCE_CONV``), so none is deduplicated and every one is checked.

(a) attempts: the K answers as ``answers.jsonl`` of one problem, swept with
    ``run_sweep`` and ``LocalExecutor(workers=1)``: the context is loaded
    once into an image and every attempt forks from it.
(b) baseline: each attempt as its own problem whose setup starts with a
    unique phrase ``let proofbatch_bench_unique_<i> = <i>;;`` before the same
    ``needs``, so no two share an image and each attempt loads the context
    itself, from the booted base image (a runner without attempts would also
    pay a cold HOL Light start per attempt, which is not counted here).
    ``--baseline-attempts N`` (default K) runs N of them; when N < K the
    baseline for K is N's measured per-attempt time times K, and the report
    says so.

Both sweep through the same booted session, one check at a time, each into
a fresh --out, timed around the whole ``run_sweep`` call (manifest, shards,
merge included). Per-attempt overhead is a check's ``wall_secs -
prove_secs`` in (a) (fork, answer install, verdict, reap), and (a)'s time
beyond its one image build, divided by K.

Target (the brief set none; chosen before any run): speedup (b)/(a) >= K/2.
Loading once instead of K times should approach K when the checks are cheap;
half of that leaves room for a loaded host.
"""

from __future__ import annotations

import json
import os
import sys
import time

# common first: it puts the checkout on sys.path for the imports below.
import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import ROOT, arg_parser, cpu_busy, emit, log, loadavg, median, start_session, temp_dir
from cluster.local import LocalExecutor
from runner.planning.sweep_config import SweepConfig
from runner.sweep import prepare, run_sweep

CONTEXT = 'needs "Library/words.ml";;\n'
QUERY = "`word_add (word 200:byte) (word 100) = word 44`"
DEMO = ROOT / "examples" / "hol_light_demo"


def answer(i: int) -> str:
    return "ALL_TAC THEN " * i + "CONV_TAC WORD_REDUCE_CONV"


def write_problem(corpus, pid: str, setup: str, answer_text: str | None = None) -> None:
    d = corpus / pid
    d.mkdir(parents=True)
    (d / "setup.ml").write_text(setup)
    (d / "query.txt").write_text(QUERY + "\n")
    (d / "category.txt").write_text("words\n")
    if answer_text is not None:
        (d / "answer.txt").write_text(answer_text + "\n")


def sweep(session, corpus, out, answers=None) -> dict:
    config = SweepConfig(corpus=corpus, out=out, answers=answers, workers=1, default_timeout=120,
                         mem_limit=2 * 2**30, context_root=DEMO, max_images=2)
    prepared = prepare(config)
    built_before = len(session.image_builds)
    busy0, ours0 = cpu_busy()
    started = time.monotonic()
    summary = run_sweep(prepared, LocalExecutor(workers=1, session=session))
    secs = time.monotonic() - started
    busy1, ours1 = cpu_busy()
    rows = summary.table.to_pylist()
    bad = [r for r in rows if r["verdict"] != "OK"]
    if bad:
        raise SystemExit(f"benchmark invalid: {len(bad)} of {len(rows)} checks not OK "
                         f"({bad[0]['problem_id']}/{bad[0]['attempt']}: {bad[0]['reason']})")
    if any(r["dedup_of"] is not None for r in rows):
        raise SystemExit("benchmark invalid: an attempt was deduplicated, not checked")
    builds = session.image_builds[built_before:]
    return {"secs": secs, "checks": len(rows), "images_built": len(builds),
            "image_build_secs": sum(b.secs for b in builds),
            "overheads": [r["wall_secs"] - r["prove_secs"] for r in rows],
            "our_cpu_s": ours1 - ours0, "other_cpu_s": max(0.0, (busy1 - busy0) - (ours1 - ours0))}


def main() -> int:
    parser = arg_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=32, help="attempts of the one problem")
    parser.add_argument("--baseline-attempts", type=int, default=None,
                        help="attempts the baseline loads the context for (default: K)")
    args = parser.parse_args()
    k = args.k
    n = args.baseline_attempts or k
    if k < 2 or not 1 <= n <= k:
        parser.error("need K >= 2 and 1 <= --baseline-attempts <= K")
    load_start = loadavg()

    root = temp_dir("passk")
    write_problem(root / "attempts", "words.attempts", CONTEXT)
    (root / "answers" / "words.attempts").mkdir(parents=True)
    (root / "answers" / "words.attempts" / "answers.jsonl").write_text(
        "".join(json.dumps(answer(i)) + "\n" for i in range(k)))
    for i in range(n):
        write_problem(root / "baseline", f"words.unique{i:03d}",
                      f"let proofbatch_bench_unique_{i} = {i};;\n" + CONTEXT, answer(i))

    log("booting HOL Light (not timed)...")
    session, boot = start_session(DEMO, max_images=2)
    log(f"booted in {boot:.1f} s; (a) {k} attempts against one loaded context")
    a = sweep(session, root / "attempts", root / "out-a", answers=root / "answers")
    log(f"(a) {a['secs']:.1f} s; (b) {n} attempts, each loading the context")
    b = sweep(session, root / "baseline", root / "out-b")
    log(f"(b) {b['secs']:.1f} s")

    b_for_k = b["secs"] / n * k
    speedup = b_for_k / a["secs"]
    target = k / 2
    amortized = (a["secs"] - a["image_build_secs"]) / k
    figures = {
        "k": k, "baseline_attempts": n,
        "attempts_secs": round(a["secs"], 3),
        "attempts_image_build_secs": round(a["image_build_secs"], 3),
        "attempts_images_built": a["images_built"],
        "overhead_ms_median": round(1000 * median(a["overheads"]), 2),
        "overhead_ms_max": round(1000 * max(a["overheads"]), 2),
        "per_attempt_secs_beyond_the_load": round(amortized, 4),
        "baseline_secs": round(b["secs"], 3),
        "baseline_images_built": b["images_built"],
        "baseline_per_attempt_secs": round(b["secs"] / n, 3),
        "baseline_image_build_secs_median": round(
            b["image_build_secs"] / max(1, b["images_built"]), 3),
        "baseline_secs_for_k": round(b_for_k, 3),
        "baseline_measured_for_all_k": n == k,
        "speedup": round(speedup, 2),
        "our_cpu_s": {"attempts": round(a["our_cpu_s"], 1), "baseline": round(b["our_cpu_s"], 1)},
        "other_cpu_s": {"attempts": round(a["other_cpu_s"], 1), "baseline": round(b["other_cpu_s"], 1)},
        "boot_s": round(boot, 2), "cpus": os.cpu_count(),
        "loadavg_1m_start": load_start, "loadavg_1m_end": loadavg(),
    }
    scaled = "" if n == k else f" (measured on {n} attempts, x {k}/{n})"
    lines = [
        f"one problem, context `{CONTEXT.strip()}`; {k} distinct answers, all OK; boot {boot:.1f} s "
        "(not timed)",
        f"(a) {k} attempts, one loaded context: {a['secs']:.2f} s, of which the image build "
        f"{a['image_build_secs']:.2f} s; {amortized * 1000:.1f} ms per attempt beyond it",
        f"    per-attempt overhead (wall - prove): median {figures['overhead_ms_median']:.1f} ms, "
        f"max {figures['overhead_ms_max']:.1f} ms",
        f"(b) baseline, context loaded per attempt: {b['secs']:.2f} s for {n} attempts, "
        f"{b['secs'] / n:.2f} s each; for {k}: {b_for_k:.1f} s{scaled}",
        f"speedup {speedup:.1f}x at K = {k}",
        f"CPU-s ours/other processes: (a) {a['our_cpu_s']:.1f}/{a['other_cpu_s']:.1f}, "
        f"(b) {b['our_cpu_s']:.1f}/{b['other_cpu_s']:.1f}",
        f"host: {os.cpu_count()} CPUs, 1-min load average {load_start} at start, "
        f"{figures['loadavg_1m_end']} at end",
    ]
    return emit(args, "passk", figures, lines, f"speedup >= K/2 = {target:g} (measured {speedup:.1f})",
                speedup >= target)


if __name__ == "__main__":
    sys.exit(main())
