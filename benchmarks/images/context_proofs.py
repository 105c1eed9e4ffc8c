"""--context-proofs: a real development's chain of contexts, replayed,
trusted, and loaded per problem from scratch, in one run.

The development is cut by `proofbatch extract` (runner/provers/hol_light/
extract.py) from Debian's HOL Light files given with --file (default
Library/card.ml, whose contexts start with `needs "Library/wo.ml"`): each
top-level theorem is a problem whose setup.ml is its file up to it and whose
answer is its own proof (the ground truth). A file's setups are prefixes of
one another, so the session's context tree holds one chain of images per
file, each loading one segment on top of its parent; the first loads the
file's `needs` too.

(a) replay: a bytecode session with --context-proofs replay builds the chain
    (every earlier proof, those of the needs'd files included, runs once)
    and checks every ground truth;
(b) trust: a second session, --context-proofs trust, the same;
(c) per problem: the bench's own method, one process per problem that loads
    that problem's whole context. Here each problem's image is forked from
    the trust session's booted base and loads its full setup.ml (made unique
    by a first phrase of its own, so nothing is shared), contexts trusted as
    the bench's CHEAT_TAC-rewritten contexts are. It skips the HOL Light boot
    a fresh process pays, so it is a lower bound on per-problem loading;
(d) --cold K: K problems (evenly spaced, the last included), each in a
    HOL Light of its own, booted for it: the true cold start. Their boots
    give an estimate for all problems, clearly labelled as one: (c) plus
    one measured boot per problem.

Reported per phase: image builds in core-seconds (CPU time of each build:
the new image's own, a forked child starting at zero, plus its parent's
during the fork; on a loaded host a build's wall time also counts the waits
for a core) and in wall seconds, the phase's wall time from prepare to last
verdict, and the proofs' prove_secs. Every check must be OK in every phase,
or the benchmark stops.

Targets (issue 14): trust builds the chain >= 10x faster than replay (image
build core-seconds), and the trust sweep beats per-problem loading >= 5x in
wall time.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

# common first: it puts the checkout on sys.path for the imports below.
import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import arg_parser, emit, limits, loadavg, log, require_ok, temp_dir
from runner.checks.context_proofs import ContextProofs
from runner.corpus import load_corpus
from runner.provers.hol_light.session.backend import HolLightBackend
from runner.provers.hol_light.extract.extract import extract
from runner.provers.hol_light.extract.extract_model import ExtractConfig
from runner.provers.hol_light.install import find_hol_light

TRUST_TARGET, SHARING_TARGET = 10.0, 5.0
DEFAULT_FILES = ("Library/card.ml",)
CHECK_LIMITS = limits(time_s=600.0)


def _cpu(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def count_build_cpu(session) -> list[float]:
    """Record the CPU seconds of each image the session builds from now on.

    The session forks every image (runner/provers/hol_light/session/image_tree.py:
    _fork_image) and the child loads its segment before it serves, so the
    child's CPU time when it serves is its load; the parent's CPU time over
    the same span is the fork. The session exposes only wall seconds per
    build, hence the wrapper on this one instance."""
    secs: list[float] = []
    fork = session._fork_image

    def timed(parent, node):
        before = _cpu(parent.pid)
        image = fork(parent, node)
        secs.append(_cpu(image.pid) + _cpu(parent.pid) - before)
        return image

    session._fork_image = timed
    return secs


def run_phase(session, build_cpu: list[float], problems, what: str) -> dict:
    """Prepare and check every problem in chain order, one at a time."""
    builds_before, cpu_before = len(session.image_builds), len(build_cpu)
    load0, wall0 = loadavg(), time.monotonic()
    session.prepare(problems)
    results, walls = [], []
    for p in problems:
        t0 = time.monotonic()
        results.append((p.problem_id, session.check(p, CHECK_LIMITS)))
        walls.append(time.monotonic() - t0)
    wall = time.monotonic() - wall0
    require_ok(results)
    build_wall = sum(b.secs for b in session.image_builds[builds_before:])
    build_cpu_secs = sum(build_cpu[cpu_before:])
    prove = sum(r.prove_secs or 0.0 for _, r in results)
    images = len(session.image_builds) - builds_before
    log(f"{what}: {images} images, builds {build_cpu_secs:.1f} core-s ({build_wall:.1f} s wall), "
        f"{prove:.1f} s of proofs, {wall:.1f} s wall; load average {load0} -> {loadavg()}")
    return {"images": images, "build_core_secs": round(build_cpu_secs, 2),
            "build_wall_secs": round(build_wall, 2), "wall_secs": round(wall, 2),
            "prove_secs": round(prove, 2), "loadavg": [load0, loadavg()],
            "check_walls": [round(w, 3) for w in walls], "build_cpu_each": build_cpu[cpu_before:]}


def cold_phase(install, root: Path, problems, per_problem: dict, k: int) -> dict:
    """K problems, each in a HOL Light booted for it alone (trust), timed
    from the start of the boot to its verdict."""
    n = len(problems)
    picks = sorted({round(i * (n - 1) / max(k - 1, 1)) for i in range(k)}) if k > 1 else [n - 1]
    runs = []
    for i in picks:
        p = problems[i]
        t0 = time.monotonic()
        session = HolLightBackend(install, root, context_proofs=ContextProofs.TRUST).start(
            temp_dir(f"cold-{i}"))
        try:
            boot = session.image_build_secs[session.base_key]
            session.prepare([p])
            result = session.check(p, CHECK_LIMITS)
        finally:
            session.close()
        wall = time.monotonic() - t0
        require_ok([(p.problem_id, result)])
        runs.append({"problem": p.problem_id, "index": i, "wall_secs": round(wall, 2),
                     "boot_secs": round(boot, 2),
                     "forked_wall_secs": per_problem["check_walls"][i]})
        log(f"cold {p.problem_id}: {wall:.1f} s (boot {boot:.1f} s); "
            f"forked from a booted base: {per_problem['check_walls'][i]:.1f} s")
    boot_mean = sum(r["boot_secs"] for r in runs) / len(runs)
    return {"runs": runs, "boot_mean_secs": round(boot_mean, 2),
            "estimate_all_wall_secs": round(per_problem["wall_secs"] + n * boot_mean, 1)}


def cut_development(files: list[Path], install) -> tuple[list, list, dict, Path]:
    """The development's problems in file order, the same behind a unique
    first phrase each (phase c), each problem's source file, and the
    context root to sweep with."""
    corpus = temp_dir("corpus") / "corpus"
    cut = extract(ExtractConfig(files=tuple(files), out=corpus, hol_dir=install.hol_dir))
    if cut.skipped:
        log(f"extract skipped {len(cut.skipped)} theorems (see its extract.json)")
    ids = [p.problem_id for p in cut.problems]
    unique = temp_dir("unique") / "corpus"
    for n, pid in enumerate(ids):
        d = unique / pid
        d.mkdir(parents=True)
        (d / "setup.ml").write_text(f"let proofbatch_bench_unique_{n} = {n};;\n"
                                    + (corpus / pid / "setup.ml").read_text())
        for name in ("query.txt", "answer.txt"):
            (d / name).write_text((corpus / pid / name).read_text())
    chain = {p.problem_id: p for p in load_corpus(corpus)}
    alone = {p.problem_id: p for p in load_corpus(unique)}
    sources = {p.problem_id: p.source for p in cut.problems}
    return [chain[i] for i in ids], [alone[i] for i in ids], sources, cut.context_root or corpus


def by_prefix(replay: list[float], trust: list[float], steps: int = 6) -> dict[int, float]:
    """The build speed-up had the chain stopped after its first k images, for
    k at even steps: where a file's heavy proofs fall moves it a lot. Only
    when both chains built one image per problem, none twice."""
    n = len(replay)
    if n != len(trust) or n < steps:
        return {}
    ks = sorted({round(n * i / steps) for i in range(1, steps + 1)})
    return {k: round(sum(replay[:k]) / max(sum(trust[:k]), 1e-9), 1) for k in ks}


def report(figures: dict) -> tuple[list[str], bool]:
    replay, trust, alone = figures["replay"], figures["trust"], figures["per_problem"]
    trust_x = replay["build_core_secs"] / max(trust["build_core_secs"], 1e-9)
    trust_wall_x = replay["build_wall_secs"] / max(trust["build_wall_secs"], 1e-9)
    sweep_x = alone["wall_secs"] / max(trust["wall_secs"], 1e-9)
    figures.update(trust_speedup_build=round(trust_x, 1), trust_speedup_build_wall=round(trust_wall_x, 1),
                   sweep_vs_per_problem_wall=round(sweep_x, 1))
    lines = [f"{', '.join(figures['files'])}: {figures['problems']} ground truths, "
             f"{figures['chains']} chain(s) of contexts",
             f"{'':26}{'images':>7}{'build core-s':>14}{'build wall':>12}{'wall s':>10}{'proofs s':>10}"]
    for name, f in (("(a) replay, chain", replay), ("(b) trust, chain", trust),
                    ("(c) per problem, forked", alone)):
        lines.append(f"{name:26}{f['images']:>7}{f['build_core_secs']:>14.1f}"
                     f"{f['build_wall_secs']:>12.1f}{f['wall_secs']:>10.1f}{f['prove_secs']:>10.1f}")
    lines += [f"trust builds the chain {trust_x:.1f}x faster than replay in core-seconds "
              f"({trust_wall_x:.1f}x in wall seconds; target {TRUST_TARGET:g}x)",
              f"the trust sweep is {sweep_x:.1f}x faster than per-problem loading forked from a "
              f"booted base (target {SHARING_TARGET:g}x)"]
    if figures["trust_speedup_by_prefix"]:
        lines.insert(-1, "  had the chain stopped after its first k images: " + ", ".join(
            f"k={k}: {x:.1f}x" for k, x in figures["trust_speedup_by_prefix"].items()))
    cold = figures.get("cold")
    if cold:
        for r in cold["runs"]:
            lines.append(f"(d) cold start, {r['problem']}: {r['wall_secs']:.1f} s "
                         f"(boot {r['boot_secs']:.1f} s) vs {r['forked_wall_secs']:.1f} s forked")
        est = cold["estimate_all_wall_secs"]
        lines.append(f"(d) estimate, all {figures['problems']} cold ((c) + one measured boot each): "
                     f"{est:.0f} s, {est / max(trust['wall_secs'], 1e-9):.1f}x the trust sweep")
    lines.append(f"load average {figures['loadavg_start']} at start, {figures['loadavg_end']} at end")
    return lines, trust_x >= TRUST_TARGET and sweep_x >= SHARING_TARGET


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--file", action="append", type=Path,
                        help="a proof file (repeatable), relative to HOL Light's directory or "
                             f"absolute; default {' '.join(DEFAULT_FILES)}")
    parser.add_argument("--limit", type=int, default=0, help="only the first N problems (0: all)")
    parser.add_argument("--cold", type=int, default=0, metavar="K",
                        help="also check K problems each in a HOL Light booted for it (d)")
    args = parser.parse_args()

    install = find_hol_light()
    files = [install.hol_dir / f for f in (args.file or DEFAULT_FILES)]
    problems, alone, sources, root = cut_development(files, install)
    if args.limit:
        problems, alone = problems[:args.limit], alone[:args.limit]
    chains = len({sources[p.problem_id] for p in problems})
    figures = {"files": [str(f) for f in files], "problems": len(problems), "chains": chains,
               "loadavg_start": loadavg()}
    log(f"{', '.join(figures['files'])}: {len(problems)} problems; load average {loadavg()}")

    # Both base images boot at once (boots are not measured); the phases
    # then run one after the other. bwrap's --die-with-parent is the
    # parent-death signal, which Linux sends when the *thread* that started
    # the process exits: the pool's threads must outlive the sessions.
    pool = ThreadPoolExecutor(2)
    sessions = dict(zip(ContextProofs, pool.map(
        lambda c: HolLightBackend(install, root, context_proofs=c).start(temp_dir(f"session-{c}")),
        ContextProofs)))
    try:
        for choice, session in sessions.items():
            log(f"{choice}: booted in {session.image_build_secs[session.base_key]:.1f} s")
        cpu = {choice: count_build_cpu(s) for choice, s in sessions.items()}
        for choice, session in sessions.items():
            figures[str(choice)] = run_phase(session, cpu[choice], problems, f"({choice}) chain")
        trust = ContextProofs.TRUST
        figures["per_problem"] = run_phase(sessions[trust], cpu[trust], alone,
                                           "(c) per problem, forked from the trust base")
    finally:
        for session in sessions.values():
            session.close()
        pool.shutdown()
    if args.cold:
        figures["cold"] = cold_phase(install, root, problems, figures["per_problem"], args.cold)
    figures["loadavg_end"] = loadavg()
    figures["trust_speedup_by_prefix"] = by_prefix(figures["replay"]["build_cpu_each"],
                                                   figures["trust"]["build_cpu_each"])
    for phase in ("replay", "trust", "per_problem"):
        del figures[phase]["check_walls"], figures[phase]["build_cpu_each"]
    lines, passed = report(figures)
    return emit(args, "context_proofs", figures, lines,
                f"trust >= {TRUST_TARGET:g}x replay on image build core-seconds; sweep >= "
                f"{SHARING_TARGET:g}x per-problem loading on wall time", passed)


if __name__ == "__main__":
    sys.exit(main())
