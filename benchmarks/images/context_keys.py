"""Building the context tree of a bench-sized corpus: comment-insensitive
keys (runner.provers.hol_light.contexts today) against keys on the raw text (the baseline:
runner/contexts.py as of commit ac9f4b5, before the prover packages, read from git), in one run.

The corpus is synthetic but shaped like s2n-bignum-bench's: every setup
opens with comments naming its own proof file, then inlines the same
library (LIB_LINES lines of HOL Light phrases: multi-line ``prove`` calls
with term quotations, comments, strings), then the first phrases of its own
file up to its theorem. FILES proof files, SETUPS setups in all, of about
40,000 lines each.

Figures: seconds to build the tree (best of --repeat), images, and the text
the images would load (sum of segment lengths), for both keyings.
Target (from the brief): building stays fast; the new keys share the
library, so the text loaded drops to about one library plus each file's
own phrases.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import ROOT  # first: it puts the project root on sys.path
from runner.provers.hol_light import contexts, ocaml_lexer  # noqa: E402
from runner import subproc  # noqa: E402

BASELINE_COMMIT = "ac9f4b5"


def baseline_module() -> types.ModuleType:
    source = subproc.run(["git", "-C", str(ROOT), "show", f"{BASELINE_COMMIT}:runner/contexts.py"])
    module = types.ModuleType("contexts_baseline")
    sys.modules[module.__name__] = module        # dataclasses look their module up
    exec(compile(source, "contexts_baseline.py", "exec"), module.__dict__)
    return module


def library(lines: int) -> str:
    parts, n, i = [], 0, 0
    while n < lines:
        parts.append(
            f"(* ------------------------------------------------------------------------- *)\n"
            f"(* Lemma {i}: a word-level fact, as the library states it.                     *)\n"
            f"(* ------------------------------------------------------------------------- *)\n"
            f"\n"
            f"let WORD_LEMMA_{i} = prove\n"
            f" (`!x:int64 y. word_add x (word {i}) = word_add (word {i}) x /\\\n"
            f"   val(word_and x (word {i}):int64) <= {i} + val x`,\n"
            f"  REPEAT GEN_TAC THEN CONJ_TAC THENL\n"
            f"   [CONV_TAC WORD_RULE; REWRITE_TAC[VAL_WORD_AND_LE; \"lemma_{i}\" = \"x\"]]);;\n"
            f"\n")
        n += 10
        i += 1
    return "".join(parts)


def corpus(files: int, setups: int, lib_lines: int, own_lines: int) -> dict[str, str]:
    lib = library(lib_lines)
    out = {}
    for f in range(files):
        per_file = setups // files + (f < setups % files)
        header = (f"(* {'arm' if f % 2 else 'x86'}/proofs/bignum_file_{f}.ml *)\n"
                  f"(*\n * Copyright Amazon.com, Inc. or its affiliates. All Rights Reserved.\n"
                  f" * SPDX-License-Identifier: Apache-2.0 OR ISC OR MIT-0\n *)\n\n")
        own = library(own_lines).replace("WORD_LEMMA_", f"FILE{f}_LEMMA_")
        phrases = ocaml_lexer.split_phrases(own)
        for t in range(per_file):
            cut = len(phrases) * (t + 1) // per_file
            out[f"file{f}.T{t}"] = header + lib + "".join(phrases[:cut])
    return out


def measure(build, setups: dict[str, str], repeat: int) -> tuple[float, object]:
    best, tree = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        tree = build(setups, "salt")
        best = min(best, time.perf_counter() - started)
    return best, tree


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--setups", type=int, default=100)
    p.add_argument("--files", type=int, default=7)
    p.add_argument("--lib-lines", type=int, default=35_000)
    p.add_argument("--own-lines", type=int, default=5_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", action="store_true",
                    help="print one JSON object instead of the text report")
    args = p.parse_args()
    setups = corpus(args.files, args.setups, args.lib_lines, args.own_lines)
    lines = [s.count("\n") for s in setups.values()]
    base = baseline_module()
    results = {}
    for name, build in (("baseline (raw text)", base.build_context_tree),
                        ("normal forms", contexts.build_context_tree)):
        secs, tree = measure(build, setups, args.repeat)
        results[name] = {"build_s": secs, "images": len(tree.nodes),
                         "loaded_mb": sum(len(n.segment) for n in tree.nodes.values()) / 1e6}
    figures = {"setups": len(setups), "files": args.files, "lines_min": min(lines),
               "lines_max": max(lines), "corpus_mb": sum(map(len, setups.values())) / 1e6,
               "results": results}
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    print(f"{len(setups)} setups from {args.files} files, {min(lines):,}-{max(lines):,} lines, "
          f"{figures['corpus_mb']:.0f} MB; best of {args.repeat}")
    print(f"{'':22} {'build s':>8} {'images':>7} {'text loaded MB':>15}")
    for name, r in results.items():
        print(f"{name:22} {r['build_s']:8.2f} {r['images']:7d} {r['loaded_mb']:15.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
