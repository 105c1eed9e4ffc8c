"""Prefix sharing: N problems cut from one proof file, with and without a
shared tree of images.

The proof file has N equal parts; each part defines a constant and proves
two lemmas about it with ARITH_TAC and MESON_TAC[] (real work when loaded,
about a second per part in bytecode). Problem i's setup.ml is the first
k_i phrases of the file, where k_i ends part i, so each setup is a prefix of
the next; its query is the last lemma of its setup and its answer is
``ACCEPT_TAC`` of that lemma, so a check is trivial but fails unless the
context really was loaded.

(a) shared: the session's default prefix tree, a chain of N images, each
    loading one part on top of its parent.
(b) unshared: the same setups, each behind a unique first phrase
    ``let proofbatch_bench_unique_<i> = <i>;;``, so no two share a prefix
    and every image loads its whole context from the base image.

Both run in the same booted session, one check at a time; their image keys
differ, so nothing built for (a) is reused by (b). Each variant is timed from
``prepare`` to its last verdict, and the session's ``image_build_secs`` of
the images it built are summed.

Target (the brief set none; chosen here): speedup (b)/(a) >= 0.75 x the
ideal (N+1)/2 of N equal parts, i.e. >= 3.375 for N = 8.
"""

from __future__ import annotations

import os
import sys
import time

# common first: it puts the checkout on sys.path for the imports below.
import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import (Spec, arg_parser, cpu_busy, emit, limits, log, loadavg, require_ok,
                    start_session, temp_dir, write_corpus)
from runner.provers.hol_light.ocaml_lexer import split_phrases

TARGET_FRACTION_OF_IDEAL = 0.75


def proof_file_parts(n: int) -> list[str]:
    """The proof file, as N parts of three phrases each, of equal cost."""
    parts = []
    for j in range(1, n + 1):
        # Each part ends right after its last ";;" and newline, so that the
        # file's phrases split exactly at part boundaries; the blank line
        # between parts opens the next one.
        blank = "" if j == 1 else "\n"
        parts.append(
            f"{blank}"
            f"(* ---- part {j}: a polynomial and the Andrews challenge ---- *)\n"
            f"let pb_poly_{j} = new_definition\n"
            f" `pb_poly_{j} (a:num) b c d = (a + b + c + d) EXP 7`;;\n"
            f"\n"
            f"let PB_POLY_{j}_SYM = prove\n"
            f" (`!a b c d. pb_poly_{j} a b c d = pb_poly_{j} d c b a`,\n"
            f"  REWRITE_TAC[pb_poly_{j}] THEN ARITH_TAC);;\n"
            f"\n"
            f"let PB_ANDREWS_{j} = prove\n"
            f" (`((?x:A. !y. p{j} x <=> p{j} y) <=> ((?x. q{j} x) <=> (!y. q{j} y))) <=>\n"
            f"   ((?x. !y. q{j} x <=> q{j} y) <=> ((?x. p{j} x) <=> (!y. p{j} y)))`,\n"
            f"  MESON_TAC[]);;\n")
    return parts


def problems_for(parts: list[str], prefix: str, unique: bool) -> list[Spec]:
    text = "".join(parts)
    phrases = split_phrases(text)
    ends = [len("".join(phrases[:k])) for k in range(len(phrases) + 1)]
    specs = []
    for i in range(1, len(parts) + 1):
        k = ends.index(len("".join(parts[:i])))   # k_i: the phrases through part i
        setup = "".join(phrases[:k])              # the first k_i phrases of the file
        assert setup == "".join(parts[:i])
        if unique:
            setup = f"let proofbatch_bench_unique_{i} = {i};;\n" + setup
        specs.append(Spec(f"{prefix}{i:02d}",
                          f"`!a b c d. pb_poly_{i} a b c d = pb_poly_{i} d c b a`",
                          f"ACCEPT_TAC PB_POLY_{i}_SYM", setup=setup, category="prefix"))
    return specs


def run_variant(session, problems) -> dict:
    before = set(session.image_build_secs)
    lim = limits(time_s=300.0)
    busy0, ours0 = cpu_busy()
    started = time.monotonic()
    session.prepare(problems)
    results = [(p.problem_id, session.check(p, lim)) for p in problems]
    secs = time.monotonic() - started
    busy1, ours1 = cpu_busy()
    require_ok(results)
    built = {k: v for k, v in session.image_build_secs.items() if k not in before}
    per_problem = [session.image_build_secs.get(session.image_key(p)) for p in problems]
    return {"secs": secs, "images_built": len(built), "image_build_secs": sum(built.values()),
            "build_secs_by_problem": per_problem,
            "check_wall_secs": sum(r.wall_secs for _, r in results),
            "our_cpu_s": ours1 - ours0, "other_cpu_s": max(0.0, (busy1 - busy0) - (ours1 - ours0))}


def main() -> int:
    parser = arg_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=8, help="problems cut from the proof file")
    args = parser.parse_args()
    if args.n < 2:
        parser.error("--n must be at least 2")
    load_start = loadavg()

    root = temp_dir("prefix")
    parts = proof_file_parts(args.n)
    shared = write_corpus(problems_for(parts, "shared", unique=False), root / "shared")
    unshared = write_corpus(problems_for(parts, "unshared", unique=True), root / "unshared")

    log("booting HOL Light (not timed)...")
    # Room for every image of both variants (and the base): nothing is evicted,
    # so nothing is rebuilt, and no image quits, which would hide its CPU time
    # from cpu_busy (an orphaned image is reaped outside this process tree).
    session, boot = start_session(root, max_images=2 * args.n + 1)
    log(f"booted in {boot:.1f} s; (a) shared prefixes")
    a = run_variant(session, shared)
    log(f"(a) {a['secs']:.1f} s; (b) unshared")
    b = run_variant(session, unshared)
    log(f"(b) {b['secs']:.1f} s")

    speedup = b["secs"] / a["secs"]
    ideal = (args.n + 1) / 2
    target = TARGET_FRACTION_OF_IDEAL * ideal
    # What (b) should cost if loading a context costs the sum of its parts, as (a) measured them.
    parts_secs = a["build_secs_by_problem"]
    predicted_b = sum(sum(parts_secs[:i + 1]) for i in range(len(parts_secs)))
    figures = {
        "n": args.n,
        "phrases_in_file": len(split_phrases("".join(parts))),
        "shared_secs": round(a["secs"], 3),
        "unshared_secs": round(b["secs"], 3),
        "speedup": round(speedup, 3),
        "ideal_speedup": ideal,
        "shared_images_built": a["images_built"],
        "unshared_images_built": b["images_built"],
        "shared_image_build_secs": round(a["image_build_secs"], 3),
        "unshared_image_build_secs": round(b["image_build_secs"], 3),
        "image_build_speedup": round(b["image_build_secs"] / a["image_build_secs"], 3),
        "unshared_build_secs_predicted_from_shared_parts": round(predicted_b, 3),
        "shared_part_build_secs": [round(x, 3) for x in parts_secs],
        "check_wall_secs": {"shared": round(a["check_wall_secs"], 3),
                            "unshared": round(b["check_wall_secs"], 3)},
        "our_cpu_s": {"shared": round(a["our_cpu_s"], 2), "unshared": round(b["our_cpu_s"], 2)},
        "other_cpu_s": {"shared": round(a["other_cpu_s"], 2), "unshared": round(b["other_cpu_s"], 2)},
        "boot_s": round(boot, 2),
        "cpus": os.cpu_count(),
        "loadavg_1m_start": load_start,
        "loadavg_1m_end": loadavg(),
    }
    lines = [
        f"{args.n} problems cut from one proof file of {figures['phrases_in_file']} phrases "
        f"({len(parts)} parts); all checks OK; boot {boot:.1f} s (not timed)",
        f"(a) shared prefixes: {a['secs']:.2f} s prepare-to-last-verdict; {a['images_built']} images "
        f"built, {a['image_build_secs']:.2f} s of image builds "
        f"(per part: {', '.join(f'{x:.2f}' for x in parts_secs)})",
        f"(b) baseline, no sharing: {b['secs']:.2f} s; {b['images_built']} images built, "
        f"{b['image_build_secs']:.2f} s of image builds (predicted from (a)'s parts: "
        f"{predicted_b:.2f} s)",
        f"speedup {speedup:.2f}x (image builds alone {figures['image_build_speedup']:.2f}x); "
        f"ideal for {args.n} equal parts (N+1)/2 = {ideal:.2f}x",
        f"CPU-s ours/other processes: (a) {a['our_cpu_s']:.1f}/{a['other_cpu_s']:.1f}, "
        f"(b) {b['our_cpu_s']:.1f}/{b['other_cpu_s']:.1f}",
        f"host: {os.cpu_count()} CPUs, 1-min load average {load_start} at start, "
        f"{figures['loadavg_1m_end']} at end",
    ]
    return emit(args, "prefix_sharing", figures, lines,
                f"speedup >= {TARGET_FRACTION_OF_IDEAL:g} x (N+1)/2 = {target:.3g} "
                f"(measured {speedup:.2f})", speedup >= target)


if __name__ == "__main__":
    sys.exit(main())
