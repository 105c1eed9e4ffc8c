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
own phrases. Two goals gate PASS: the new keys build the tree in no more
time than the raw-text keys (same run), and their images load no more text
than one setup's opening comments, the library once and each file's own
phrases once. The corpus lives in memory: the script reads and writes no
folder but its record.
"""

from __future__ import annotations

import hashlib
import sys
import time
import types

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import ROOT, Goal, arg_parser, emit, log  # first: it puts the project root on sys.path
import record  # noqa: E402
from runner.provers.hol_light import contexts, ocaml_lexer  # noqa: E402
from runner import subproc  # noqa: E402

BASELINE_COMMIT = "ac9f4b5"
BASELINE_PATH = "runner/contexts.py"
KEYINGS = {"raw_text": "baseline (raw text)", "normal_forms": "normal forms"}


def baseline_source() -> str:
    return subproc.run(["git", "-C", str(ROOT), "show", f"{BASELINE_COMMIT}:{BASELINE_PATH}"])


def baseline_module(source: str) -> types.ModuleType:
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


def header(f: int) -> str:
    """The comments the bench's inlined setups open with: their own proof file's name."""
    return (f"(* {'arm' if f % 2 else 'x86'}/proofs/bignum_file_{f}.ml *)\n"
            f"(*\n * Copyright Amazon.com, Inc. or its affiliates. All Rights Reserved.\n"
            f" * SPDX-License-Identifier: Apache-2.0 OR ISC OR MIT-0\n *)\n\n")


def own_phrases(f: int, own_lines: int) -> list[str]:
    return ocaml_lexer.split_phrases(library(own_lines).replace("WORD_LEMMA_", f"FILE{f}_LEMMA_"))


def setups_of(f: int, files: int, setups: int) -> int:
    return setups // files + (f < setups % files)


def corpus(files: int, setups: int, lib_lines: int, own_lines: int) -> dict[str, str]:
    lib = library(lib_lines)
    out = {}
    for f in range(files):
        per_file = setups_of(f, files, setups)
        phrases = own_phrases(f, own_lines)
        for t in range(per_file):
            cut = len(phrases) * (t + 1) // per_file
            out[f"file{f}.T{t}"] = header(f) + lib + "".join(phrases[:cut])
    return out


def least_text(files: int, setups: int, lib_lines: int, own_lines: int) -> int:
    """Characters that keys sharing everything the toplevel runs alike still
    load: an image loads one problem's setup text as written, so one setup's
    opening comments; the library once; and each file's own phrases once
    (its last setup holds them all)."""
    own = sum(len("".join(own_phrases(f, own_lines))) for f in range(files)
              if setups_of(f, files, setups))
    return max(len(header(f)) for f in range(files)) + len(library(lib_lines)) + own


def measure(build, setups: dict[str, str], repeat: int) -> dict:
    best, tree = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        tree = build(setups, "salt")
        best = min(best, time.perf_counter() - started)
    loaded = sum(len(n.segment) for n in tree.nodes.values())
    return {"build_s": round(best, 6), "images": len(tree.nodes), "loaded_chars": loaded,
            "loaded_mb": round(loaded / 1e6, 4)}


def judge(results: dict, bound_chars: int) -> list[Goal]:
    """The docstring's two targets. "Stays fast": no slower than the keys it
    replaced, measured in the same run. "About one library plus each file's
    own phrases": at most ``least_text``'s characters."""
    raw, ours = results["raw_text"], results["normal_forms"]
    ratio = ours["build_s"] / raw["build_s"] if raw["build_s"] > 0 else None
    return [Goal("build time, normal-form keys / raw-text keys (best of each)",
                 None if ratio is None else round(ratio, 4), "<=", 1.0),
            Goal("text loaded by normal-form keys' images, characters", ours["loaded_chars"], "<=",
                 bound_chars)]


def report(args, setups: dict[str, str], figures: dict) -> list[str]:
    lines = [f"{len(setups)} setups from {args.files} files, {figures['lines_min']:,}-"
             f"{figures['lines_max']:,} lines, {figures['corpus_mb']:.0f} MB; best of {args.repeat}",
             f"{'':22} {'build s':>8} {'images':>7} {'text loaded MB':>15}"]
    for key, name in KEYINGS.items():
        r = figures[key]
        lines.append(f"{name:22} {r['build_s']:8.2f} {r['images']:7d} {r['loaded_mb']:15.1f}")
    lines.append(f"one setup's opening comments + the library + each file's own phrases: "
                 f"{figures['least_text_mb']:.1f} MB")
    return lines


def main() -> int:
    p = arg_parser(__doc__.splitlines()[0])
    p.add_argument("--setups", type=int, default=100)
    p.add_argument("--files", type=int, default=7)
    p.add_argument("--lib-lines", type=int, default=35_000)
    p.add_argument("--own-lines", type=int, default=5_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    # No setup leaves no lines to report and no tree to time; no file, no setup to put in it.
    if min(args.setups, args.files, args.lib_lines, args.own_lines, args.repeat) < 1:
        p.error("--setups, --files, --lib-lines, --own-lines and --repeat must be at least 1")
    source = baseline_source()
    rec = record.current()
    for name in ("setups", "files", "lib_lines", "own_lines", "repeat"):
        rec.input(name, getattr(args, name))
    rec.input("baseline", {"source": f"{BASELINE_COMMIT}:{BASELINE_PATH}",
                           "sha256": hashlib.sha256(source.encode()).hexdigest()})
    setups = corpus(args.files, args.setups, args.lib_lines, args.own_lines)
    counts = [s.count("\n") for s in setups.values()]
    bound = least_text(args.files, args.setups, args.lib_lines, args.own_lines)
    figures = {"setups": len(setups), "files": args.files, "repeat": args.repeat,
               "lines_min": min(counts), "lines_max": max(counts),
               "corpus_mb": round(sum(map(len, setups.values())) / 1e6, 3),
               "least_text_chars": bound, "least_text_mb": round(bound / 1e6, 4)}
    for key, build in (("raw_text", baseline_module(source).build_context_tree),
                       ("normal_forms", contexts.build_context_tree)):
        figures[key] = measure(build, setups, args.repeat)
        log(f"{KEYINGS[key]}: {figures[key]['build_s']:.2f} s, {figures[key]['images']} images")
    goals = judge(figures, bound)
    figures["build_ratio"] = goals[0].value
    target = ("normal-form keys build the tree no slower than raw-text keys, and load no more text "
              "than one setup's opening comments + the library + each file's own phrases")
    return emit(args, "context_keys", figures, report(args, setups, figures), target, True, goals)


if __name__ == "__main__":
    sys.exit(main())
