"""--context-proofs: a real development's chain of contexts, replayed,
trusted, and loaded per problem from scratch, in one run.

The development is a file of Debian's HOL Light library (default
Library/floor.ml: 862 lines, 98 top-level proves, no needs), cut by hand as
`proofbatch extract` cuts it: each top-level ``let NAME = prove (`t`, tac);;``
is a problem whose setup.ml is the file up to it and whose answer is its own
proof (the ground truth). The setups are prefixes of one another, so the
session's context tree is one chain of images, each loading one segment on
top of its parent.

(a) replay: a bytecode session with --context-proofs replay builds the chain
    (every earlier proof runs once) and checks every ground truth;
(b) trust: a second session, --context-proofs trust, the same;
(c) per problem: the bench's own method, one process per problem that loads
    that problem's whole context. Here each problem's image is forked from
    the trust session's base and loads its full setup.ml (made unique by a
    first phrase of its own, so nothing is shared), contexts trusted as the
    bench's CHEAT_TAC-rewritten contexts are. A cold HOL Light per problem
    would add 80-90 s of boot per problem on top (../shared/notes), so this
    baseline is the cheapest form of per-problem loading: the figure is a
    lower bound on what per-problem loading costs.

Reported: image build core-seconds (the sum of the images' build times, each
build being one process on one core, plus the CPU time of this script's
process tree over each phase) and wall time from prepare to last verdict.
Every check must be OK in every phase, or the benchmark stops.

Targets (issue 14): trust builds the chain >= 10x faster than replay, and the
trust sweep beats per-problem loading >= 5x in wall time.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# common first: it puts the checkout on sys.path for the imports below.
from common import arg_parser, cpu_busy, emit, limits, loadavg, log, require_ok, temp_dir
from runner.context_proofs import ContextProofs
from runner.corpus import load_corpus
from runner.provers.hol_light.backend import HolLightBackend
from runner.provers.hol_light.install import find_hol_light

from library_cut import LIBRARY, cut  # noqa: E402

TRUST_TARGET, SHARING_TARGET = 10.0, 5.0


def run_phase(session, problems, what: str) -> dict:
    """Prepare and check every problem in chain order, one at a time."""
    builds_before = len(session.image_builds)
    cpu0, wall0 = cpu_busy()[1], time.monotonic()
    session.prepare(problems)
    results = []
    for p in problems:
        results.append((p.problem_id, session.check(p, limits(time_s=600.0))))
    wall = time.monotonic() - wall0
    cpu = cpu_busy()[1] - cpu0
    require_ok(results)
    builds = session.image_builds[builds_before:]
    build_secs = sum(b.secs for b in builds)
    prove = sum(r.prove_secs or 0.0 for _, r in results)
    log(f"{what}: {len(builds)} images, {build_secs:.1f} s of builds, {prove:.1f} s of proofs, "
        f"{wall:.1f} s wall, {cpu:.1f} s CPU")
    return {"images": len(builds), "build_core_secs": round(build_secs, 2), "wall_secs": round(wall, 2),
            "cpu_secs": round(cpu, 2), "prove_secs": round(prove, 2)}


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--file", default="floor.ml", help="a file of /usr/share/hol-light/Library")
    parser.add_argument("--limit", type=int, default=0, help="only the first N theorems (0: all)")
    args = parser.parse_args()

    source = LIBRARY / args.file
    corpus = temp_dir("corpus") / "corpus"
    ids = cut(source, corpus, prefix="bench")
    if args.limit:
        ids = ids[:args.limit]
    by_id = {p.problem_id: p for p in load_corpus(corpus)}
    problems = [by_id[i] for i in ids]
    # (c): the same problems, each behind a first phrase of its own.
    unique = temp_dir("unique") / "corpus"
    for n, pid in enumerate(ids):
        d = unique / pid
        d.mkdir(parents=True)
        (d / "setup.ml").write_text(f"let proofbatch_bench_unique_{n} = {n};;\n"
                                    + (corpus / pid / "setup.ml").read_text())
        for name in ("query.txt", "answer.txt"):
            (d / name).write_text((corpus / pid / name).read_text())
    by_id = {p.problem_id: p for p in load_corpus(unique)}
    scratch_problems = [by_id[i] for i in ids]
    lines_total = source.read_text().count("\n")
    log(f"{source}: {len(ids)} problems, {lines_total} lines; load average {loadavg()}")

    install = find_hol_light()
    figures = {"file": str(source), "problems": len(ids), "loadavg_start": loadavg()}
    # Both base images boot at once (boots are not measured); the phases
    # then run one after the other. bwrap's --die-with-parent is the
    # parent-death signal, which Linux sends when the *thread* that started
    # the process exits: the pool's threads must outlive the sessions.
    pool = ThreadPoolExecutor(2)
    sessions = dict(zip(ContextProofs, pool.map(
        lambda c: HolLightBackend(install, corpus, context_proofs=c).start(temp_dir(f"session-{c}")),
        ContextProofs)))
    try:
        for choice, session in sessions.items():
            log(f"{choice}: booted in {session.image_build_secs[session.base_key]:.1f} s")
            figures[str(choice)] = run_phase(session, problems, f"{choice} chain")
        figures["per_problem"] = run_phase(sessions[ContextProofs.TRUST], scratch_problems,
                                           "per problem (trust, whole context each)")
    finally:
        for session in sessions.values():
            session.close()
        pool.shutdown()
    figures["loadavg_end"] = loadavg()
    replay, trust, scratch = figures["replay"], figures["trust"], figures["per_problem"]
    trust_x = replay["build_core_secs"] / max(trust["build_core_secs"], 1e-9)
    sharing_x = scratch["wall_secs"] / max(trust["wall_secs"], 1e-9)
    figures.update(trust_speedup_build=round(trust_x, 1), sweep_vs_per_problem_wall=round(sharing_x, 1))
    lines = [f"{source.name}: {len(ids)} ground truths, a chain of contexts",
             f"{'':24}{'images':>8}{'build core-s':>14}{'CPU s':>10}{'wall s':>10}{'proofs s':>10}"]
    for name, f in (("replay (chain)", replay), ("trust (chain)", trust),
                    ("per problem (trust)", scratch)):
        lines.append(f"{name:24}{f['images']:>8}{f['build_core_secs']:>14.1f}{f['cpu_secs']:>10.1f}"
                     f"{f['wall_secs']:>10.1f}{f['prove_secs']:>10.1f}")
    lines += [f"trust builds the chain {trust_x:.1f}x faster than replay (target {TRUST_TARGET:g}x)",
              f"the trust sweep is {sharing_x:.1f}x faster than per-problem loading "
              f"(target {SHARING_TARGET:g}x)",
              f"load average {figures['loadavg_start']} at start, {figures['loadavg_end']} at end"]
    passed = trust_x >= TRUST_TARGET and sharing_x >= SHARING_TARGET
    return emit(args, "context_proofs", figures, lines,
                f"trust >= {TRUST_TARGET:g}x replay on image builds; sweep >= {SHARING_TARGET:g}x "
                "per-problem loading on wall time", passed)


if __name__ == "__main__":
    sys.exit(main())
