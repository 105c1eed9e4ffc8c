"""Does the context of every problem of s2n-bignum's arm and x86 trees compile
natively? (issue 32, point 1)

As a bench user has the inputs: the bench's pinned HOL Light checkout built
natively (``scripts/build-hol-light-checkout.sh ... native`` and
``proofbatch build-native``), s2n-bignum at 51147aa with its objects made.
For each tree:

1. ``--files N`` proof files of ``TREE/proofs`` drawn at random with
   ``--seed S`` (printed; ``--files 0``: every file), among those the
   bench's map lists when ``--bench-map`` is given;
2. ``proofbatch extract <files> --out WORK/corpus-TREE-S --prefix TREE
   --context-root S2N``, through the CLI;
3. every problem's context compiled natively with trusted context proofs,
   as ``proofbatch run --mode native --context-proofs trust`` compiles them
   before it gives any check its limit (``NativeHolLightBackend.classify``),
   compile logs of what fails in ``WORK/logs-TREE-S/native-compile``.

It prints, per tree, how many problems' contexts compile, the compile time
and the host's load, and lists each problem whose context does not compile
with the reason (which ends with the compiler's own words). Exit 0 when
all compile. Whole trees are many CPU-hours (each file's contexts: its
libraries once per tree, then every problem's segment): sample.

    .venv/bin/python benchmarks/native/native_tree.py --s2n-bignum /work/build/s2n-bignum \\
        --hol-light /work/build/hol-light --work /tmp/native-tree --files 3 --seed 7 \\
        --bench-map s2n-bignum-bench/timeout-map.json
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
from common import arg_parser, emit, log  # noqa: E402
from s2n_readme_path import PROOFBATCH, LoadSampler, step  # noqa: E402

from runner import events  # noqa: E402
from runner.checks.context_proofs import ContextProofs  # noqa: E402
from runner.corpus import load_corpus  # noqa: E402
from runner.provers.hol_light.install import find_hol_light  # noqa: E402
from runner.provers.hol_light.session.native import NativeHolLightBackend  # noqa: E402
from runner.provers.hol_light.native.native_build import build_native  # noqa: E402

TREES = ("arm", "x86")


def candidates(s2n: Path, tree: str, bench_map: list[dict] | None) -> list[str]:
    """The proof files of a tree (stems): those the map lists, if given."""
    files = sorted(p.stem for p in (s2n / tree / "proofs").glob("*.ml"))
    if bench_map is None:
        return files
    listed = {e["problem_id"].split(".")[1] for e in bench_map if e["problem_id"].startswith(tree + ".")}
    return [f for f in files if f in listed]


def library_files(s2n: Path, tree: str) -> set[str]:
    """Proof files of ``tree`` that another file of it loads (base.ml loads
    arm.ml, decode.ml, ...; proof files load neon_helper.ml): libraries,
    written to be loaded after what comes before them. A problem cut from
    one alone has a context that lacks it, and the toplevel rejects it too
    (`Unbound value define_auto_record_type` for x86/proofs/x86.ml)."""
    loaded: set[str] = set()
    standalone: set[str] = set()        # those that load base.ml themselves
    for path in (s2n / tree / "proofs").glob("*.ml"):
        text = path.read_text(encoding="utf-8", errors="replace")
        names = re.findall(r'^\s*(?:needs|loadt|loads)\s+"([^"]+)"', text, re.M)
        if f"{tree}/proofs/base.ml" in names:
            standalone.add(path.stem)
        loaded |= {Path(n).stem for n in names if n.startswith(f"{tree}/proofs/")}
    return loaded - standalone - {"base"}


def compile_tree(args, tree: str, files: list[str]) -> tuple[list[str], dict[str, str], float, str, dict]:
    """Extract ``files`` and compile every problem's context; (problem ids,
    {problem: why it does not compile}, compile seconds, load, how weakly
    typed values were carried: units settled, values, cuts)."""
    corpus = args.work / f"corpus-{tree}-{args.seed}"
    if not (corpus / "extract.json").is_file():
        step(PROOFBATCH + ["extract", *[args.s2n_bignum / tree / "proofs" / f"{f}.ml" for f in files],
                           "--out", corpus, "--prefix", tree, "--context-root", args.s2n_bignum])
    problems = load_corpus(corpus, None)
    install = find_hol_light(args.hol_light)
    build = build_native(install, log=log)
    backend = NativeHolLightBackend(install, build, args.s2n_bignum, context_proofs=ContextProofs.TRUST,
                                    log_dir=args.work / f"logs-{tree}-{args.seed}")

    def progress(event: events.Event) -> None:
        if event.kind == "compile":
            log(f"{tree}: compiling {event.name}")
        elif event.kind == "compiled" and not event.ok:
            log(f"{tree}: does not compile: {event.name}")

    stop = events.listen(progress)
    started = time.monotonic()
    try:
        with LoadSampler() as load:
            refused = backend.classify(problems)
    finally:
        stop()
    weak = {"units_settled": len(backend.weak_settled),
            "values": sorted({v for _, names in backend.weak_settled for v in names}),
            "cuts": backend.weak_cuts}
    return [p.problem_id for p in problems], refused, time.monotonic() - started, load.text(), weak


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--s2n-bignum", type=Path, required=True, help="s2n-bignum, objects made")
    parser.add_argument("--hol-light", type=Path, required=True, help="the bench's checkout, built native")
    parser.add_argument("--work", type=Path, required=True, help="folder for the corpora and logs")
    parser.add_argument("--trees", default=",".join(TREES))
    parser.add_argument("--files", type=int, default=3, help="files per tree drawn at random; 0: all")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 10000)
    parser.add_argument("--bench-map", type=Path, help="draw only files the bench's timeout-map.json lists")
    parser.add_argument("--only", help="these proof files' stems (comma-separated) instead of a draw, "
                        "e.g. instruction,decode")
    args = parser.parse_args()
    args.work, args.s2n_bignum = args.work.resolve(), args.s2n_bignum.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    bench_map = json.loads(args.bench_map.read_text()) if args.bench_map else None

    lines, figures, failures = [f"seed {args.seed}"], {"seed": args.seed}, []
    for tree in args.trees.split(","):
        pool = candidates(args.s2n_bignum, tree, bench_map)
        if args.only:
            files = sorted(args.only.split(","))
        else:
            files = pool if args.files <= 0 else sorted(random.Random(args.seed).sample(pool, min(args.files, len(pool))))
        log(f"seed {args.seed}, {tree}: {len(files)} of {len(pool)} files: {', '.join(files)}")
        ids, refused, secs, load, weak = compile_tree(args, tree, files)
        ok = len(ids) - len(refused)
        lines.append(f"{tree}: {len(files)} of {len(pool)} files ({', '.join(files)}): {ok} of {len(ids)} "
                     f"problems' contexts compile natively (trust), {secs:.0f} s, {load}")
        lines.append(f"  weakly typed values carried to the next unit: {weak['units_settled']} units "
                     f"({', '.join(weak['values']) or 'none'}), {weak['cuts']} units cut before a later type")
        library = library_files(args.s2n_bignum, tree)
        of_library = sorted({pid.split(".")[1] for pid in refused} & library)
        if of_library:
            lines.append(f"  {sum(pid.split('.')[1] in library for pid in refused)} of those that do not are "
                         f"cut from library files other files of {tree}/proofs load ({', '.join(of_library)}): "
                         "extracted alone, their contexts lack what is loaded before them")
        reasons = Counter(refused.values())
        for reason, n in reasons.most_common():
            lines.append(f"  {n} do not: {reason}")
        failures += [f"{tree}: {pid}: {why}" for pid, why in sorted(refused.items())]
        figures[tree] = {"files": files, "pool": len(pool), "problems": len(ids), "compile": ok,
                         "compile_s": round(secs, 1), "load": load, "refused": refused, "weak": weak}
    lines += [f"does not compile: {x}" for x in failures]
    return emit(args, "native_tree", figures, lines, "every sampled problem's context compiles natively",
                not failures)


if __name__ == "__main__":
    sys.exit(main())
