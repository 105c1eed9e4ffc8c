"""Native HOL Light against the bytecode toplevel, in one run.

1. Start-up: the bytecode toplevel loading hol.ml to its READY line, against
   the native server (HOL Light compiled in) to its READY line.
2. Heavy proofs: the example corpus's heavy.* problems, checked in both, one
   at a time; speed-up of prove_secs and core-hours saved.
3. Per-check overhead in native mode over trivial problems: batched (64
   answers per plugin) and unbatched (one plugin per answer). Overhead is
   everything but the proof: (elapsed time of the checks, their compiles
   included, minus their prove_secs) / count; the runtime part alone
   (wall_secs - prove_secs) is shown too.

Targets: heavy >= 3x faster; batched overhead <= 15 ms per check; start-up
>= 4x faster. The native build itself is taken from the cache (built first if
missing; its time is printed, not counted).
"""

from __future__ import annotations

import atexit
import time

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import (ROOT, Spec, arg_parser, emit, limits, loadavg, log, median, require_ok,
                    start_session, temp_dir, write_corpus)

from runner.corpus import load_corpus
from runner.provers.hol_light.install import find_hol_light
from runner.provers.hol_light.session.native import NativeHolLightBackend
from runner.provers.hol_light.native.native_build import build_native

DEMO = ROOT / "examples" / "hol_light_demo"
TARGET_HEAVY, TARGET_OVERHEAD_MS, TARGET_START = 3.0, 15.0, 4.0


def trivial(count: int, prefix: str) -> list[Spec]:
    answers = ("ARITH_TAC", "REWRITE_TAC[ADD_CLAUSES]")
    return [Spec(f"{prefix}{i:04d}", f"`v{prefix}{i} + 0 = v{prefix}{i}`", answers[i % 2],
                 category="trivial") for i in range(count)]


def overhead(backend, problems, workdir) -> tuple[float, float, float]:
    """(per-check overhead ms, runtime-only median ms, compile ms per check)."""
    session = backend.start(workdir)
    atexit.register(session.close)
    session.prepare(problems)
    lim = limits()
    results, started = [], time.monotonic()
    for p in problems:
        results.append((p.problem_id, session.check(p, lim)))
    elapsed = time.monotonic() - started
    require_ok(results)
    proving = sum(r.prove_secs for _, r in results)
    runtime = median([r.wall_secs - r.prove_secs for _, r in results])
    per_check = (elapsed - proving) / len(problems)
    compile_ms = 1000 * session.compile_secs / len(problems)
    session.close()
    return 1000 * per_check, 1000 * runtime, compile_ms


def main() -> int:
    parser = arg_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=128, help="trivial checks, batched")
    parser.add_argument("--unbatched", type=int, default=16, help="trivial checks, one plugin each")
    args = parser.parse_args()
    load_start = loadavg()
    install = find_hol_light()
    started = time.monotonic()
    build = build_native(install, log=lambda line: log(f"native build: {line}"))
    log(f"native build {'cached' if build.cached else 'built'} in {time.monotonic() - started:.1f} s")

    log("starting the bytecode toplevel...")
    bytecode, byte_start = start_session(DEMO)
    log(f"bytecode READY in {byte_start:.1f} s; starting the native server...")
    native_backend = NativeHolLightBackend(install, build, DEMO)
    native = native_backend.start(temp_dir("native"))
    atexit.register(native.close)
    native_start = native.image_builds[0].secs
    log(f"native READY in {native_start:.1f} s")

    heavy = [p for p in load_corpus(DEMO, None) if p.problem_id.startswith("heavy.")]
    bytecode.prepare(heavy)
    native.prepare(heavy)
    lim = limits(time_s=600.0)
    rows = []
    for p in heavy:
        b = bytecode.check(p, lim)
        n = native.check(p, lim)
        require_ok([(p.problem_id, b), (p.problem_id, n)])
        rows.append((p.problem_id, b, n))
        log(f"{p.problem_id}: bytecode {b.prove_secs:.2f} s, native {n.prove_secs:.2f} s")
    bytecode.close()
    byte_total = sum(b.prove_secs for _, b, _ in rows)
    native_total = sum(n.prove_secs for _, _, n in rows)
    speedup = byte_total / native_total
    ratios = [b.prove_secs / n.prove_secs for _, b, n in rows]
    saved_s = sum(b.wall_secs - n.wall_secs for _, b, n in rows)
    native.close()

    root = temp_dir("native-overhead")
    batched = write_corpus(trivial(args.count, "b"), root / "batched")
    single = write_corpus(trivial(args.unbatched, "u"), root / "single")
    log(f"{args.count} trivial checks, batched...")
    b_total, b_runtime, b_compile = overhead(native_backend, batched, temp_dir("nb"))
    log(f"{args.unbatched} trivial checks, unbatched...")
    unbatched_backend = NativeHolLightBackend(install, build, DEMO, batch_size=1)
    u_total, u_runtime, u_compile = overhead(unbatched_backend, single, temp_dir("nu"))

    start_ratio = byte_start / native_start
    figures = {
        "bytecode_start_s": round(byte_start, 1), "native_start_s": round(native_start, 1),
        "start_speedup": round(start_ratio, 2),
        "heavy": {pid: {"bytecode_s": round(b.prove_secs, 2), "native_s": round(n.prove_secs, 2)}
                  for pid, b, n in rows},
        "heavy_speedup": round(speedup, 2), "heavy_ratio_min": round(min(ratios), 2),
        "heavy_ratio_max": round(max(ratios), 2),
        "core_hours_saved_per_1000_runs": round(saved_s * 1000 / len(rows) / 3600, 2),
        "batched_overhead_ms": round(b_total, 1), "batched_runtime_ms": round(b_runtime, 1),
        "batched_compile_ms": round(b_compile, 1), "unbatched_overhead_ms": round(u_total, 1),
        "unbatched_runtime_ms": round(u_runtime, 1), "unbatched_compile_ms": round(u_compile, 1),
        "loadavg": [round(load_start, 2), round(loadavg(), 2)],
    }
    lines = [
        f"start-up: bytecode {byte_start:.1f} s, native {native_start:.1f} s: {start_ratio:.2f}x",
        *[f"{pid}: bytecode {b.prove_secs:.2f} s, native {n.prove_secs:.2f} s "
          f"({b.prove_secs / n.prove_secs:.2f}x)" for pid, b, n in rows],
        f"heavy: {byte_total:.1f} s vs {native_total:.1f} s: {speedup:.2f}x "
        f"(per problem {min(ratios):.2f}-{max(ratios):.2f}x); saves {saved_s:.1f} core-s per run "
        f"of the {len(rows)}, {figures['core_hours_saved_per_1000_runs']} core-hours per 1000 such checks",
        f"batched ({args.count}): {b_total:.1f} ms per check, of which compile {b_compile:.1f} ms; "
        f"runtime median {b_runtime:.1f} ms",
        f"unbatched ({args.unbatched}): {u_total:.1f} ms per check, of which compile {u_compile:.1f} ms; "
        f"runtime median {u_runtime:.1f} ms",
        f"load average {load_start:.2f} at start, {loadavg():.2f} at end (2 cores)",
    ]
    passed = speedup >= TARGET_HEAVY and b_total <= TARGET_OVERHEAD_MS and start_ratio >= TARGET_START
    return emit(args, "native", figures, lines,
                f"heavy >= {TARGET_HEAVY}x, batched overhead <= {TARGET_OVERHEAD_MS} ms, "
                f"start-up >= {TARGET_START}x", passed)


if __name__ == "__main__":
    raise SystemExit(main())
