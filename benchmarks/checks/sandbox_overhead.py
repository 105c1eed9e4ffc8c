"""What the sandbox costs per check: sandboxed against unsandboxed, same run.

Boots two sessions of the same HOL Light, one with the default sandbox
(bwrap: the image tree in namespaces, each check jailed in its scratch
directory under a uid of its own, rlimits) and one with ``--sandbox none``
(the baseline). Then checks the same kind of trivial problems (empty setup,
``vN + 0 = vN`` by ARITH_TAC or a rewrite) through ``session.check``,
alternating between the two sessions in blocks of 10 so that drift in the
host's load favours neither.

A check's overhead is everything the runner adds around the proof: the
``session.check`` round trip (scratch setup, fork, jail, verdict, reap,
cleanup) minus ``prove_secs`` (measured inside the prover, around ``prove``
only). ``wall_secs − prove_secs`` (dispatch to verdict) is reported too.

Target: the sandboxed median overhead is within 10% of the unsandboxed one.
"""

from __future__ import annotations

import os
import sys
import time

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import (Spec, arg_parser, emit, limits, log, loadavg, median, percentile, require_ok,
                    start_session, temp_dir, write_corpus)

from runner.checks.sandbox import SandboxConfig  # noqa: E402  (common puts the root on sys.path)

TARGET_RATIO = 1.10
BLOCK = 10


def problems(count: int, prefix: str) -> list[Spec]:
    answers = ("ARITH_TAC", "REWRITE_TAC[ADD_CLAUSES]")
    return [Spec(f"{prefix}{i:04d}", f"`v{prefix}{i} + 0 = v{prefix}{i}`", answers[i % 2],
                 category="trivial") for i in range(count)]


def main() -> int:
    parser = arg_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200, help="checks per session (>= 200)")
    parser.add_argument("--warmup", type=int, default=5, help="uncounted checks per session first")
    args = parser.parse_args()
    if args.count < 200:
        parser.error("--count must be at least 200")
    load_start = loadavg()
    root = temp_dir("sandbox")
    sessions = {}
    for kind in ("bwrap", "none"):
        log(f"booting HOL Light with sandbox {kind}...")
        session, boot = start_session(root, sandbox_config=SandboxConfig(kind=kind))
        log(f"booted in {boot:.1f} s")
        sessions[kind] = session
    lim = limits()
    corpora = {kind: write_corpus(problems(args.warmup + args.count, kind[0]), root / f"corpus-{kind}")
               for kind in sessions}
    for kind, session in sessions.items():
        session.prepare(corpora[kind])
        for p in corpora[kind][:args.warmup]:
            session.check(p, lim)

    results = {kind: [] for kind in sessions}
    timed = {kind: corpora[kind][args.warmup:] for kind in sessions}
    for start in range(0, args.count, BLOCK):
        for kind, session in sessions.items():
            for p in timed[kind][start:start + BLOCK]:
                began = time.monotonic()
                r = session.check(p, lim)
                results[kind].append((p.problem_id, r, time.monotonic() - began))
    for kind in sessions:
        require_ok([(pid, r) for pid, r, _ in results[kind]])
        assert {r.sandbox for _, r, _ in results[kind]} == {kind}

    figures: dict = {"checks_per_session": args.count, "cpus": os.cpu_count()}
    lines = [f"{args.count} trivial checks per session, alternating in blocks of {BLOCK}, "
             f"{args.warmup} warm-up checks each not counted"]
    for kind in sessions:
        trip = [(rt - r.prove_secs) * 1000 for _, r, rt in results[kind]]
        wall = [(r.wall_secs - r.prove_secs) * 1000 for _, r, _ in results[kind]]
        figures[f"{kind}_overhead_median_ms"] = round(median(trip), 2)
        figures[f"{kind}_overhead_p90_ms"] = round(percentile(trip, 90), 2)
        figures[f"{kind}_wall_minus_prove_median_ms"] = round(median(wall), 2)
        lines.append(f"sandbox {kind:5}: overhead (round trip - prove_secs) median {median(trip):.2f} ms, "
                     f"p90 {percentile(trip, 90):.2f} ms; wall_secs - prove_secs median "
                     f"{median(wall):.2f} ms")
    ratio = figures["bwrap_overhead_median_ms"] / figures["none_overhead_median_ms"]
    figures["ratio"] = round(ratio, 3)
    figures["loadavg_1m_start"], figures["loadavg_1m_end"] = load_start, loadavg()
    lines.append(f"sandboxed / unsandboxed median overhead: {ratio:.3f} (baseline: sandbox none, "
                 "same run)")
    lines.append(f"host: {os.cpu_count()} CPUs, 1-min load average {load_start} at start, "
                 f"{figures['loadavg_1m_end']} at end")
    for session in sessions.values():
        session.close()
    return emit(args, "sandbox_overhead", figures, lines,
                f"sandboxed median overhead <= {TARGET_RATIO:.2f} x unsandboxed (measured {ratio:.3f})",
                ratio <= TARGET_RATIO)


if __name__ == "__main__":
    sys.exit(main())
