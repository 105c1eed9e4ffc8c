"""What one top-level phrase of a context costs to load in Debian's bytecode
HOL Light toplevel, proofs aside: the flat per-phrase figure
runner/provers/hol_light/costs/context_costs.py charged before its model priced
phrases by size, kept as a cross-check on Debian's own files. The model's
figures (bytecode and native, s2n-bignum's library and HOL Light's, loads
followed) come from benchmarks/images/load_cost.py.

Method. One HOL Light boots; for each variant a child is forked (Unix.fork
from the loaded toplevel, as sessions do) and loads one real development
file with ``Toploop.use_file``. Python splits the file into phrases
(runner.provers.hol_light.ocaml_lexer.split_phrases) and puts after each one a marker phrase
``pb_mark i;;`` that stores ``Sys.time ()`` (CPU seconds of the process), so
every phrase gets its own CPU time. Variants:

- ``marks``: the markers alone, so their own cost is known and subtracted;
- ``FILE replay``: the file as written;
- ``FILE trust``: the same file after ``let prove (tm, (_ : tactic)) =
  mk_thm ([], tm)``: every proof returns its statement without running its
  tactic, as ``--context-proofs trust`` does.

Printed per file: phrases, proof phrases (``prove``), the median and mean
CPU seconds of a non-proof phrase, and of a proof phrase under trust and
under replay. The files have no ``needs``, so nothing else loads.

    nice .venv/bin/python benchmarks/images/phrase_cost.py [--files Library/words.ml ...]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)

from runner.provers.hol_light.ocaml_lexer import split_phrases  # noqa: E402
from runner.provers.hol_light.costs.file_loads import theorem_of  # noqa: E402

HOL = Path("/usr/share/hol-light")
PROOF = re.compile(r"\bprove\b|\bprove_by_refinement\b")


def instrumented(phrases: list[str], trust: bool) -> str:
    head = "let prove (tm, (_ : tactic)) = mk_thm ([], tm);;\n" if trust else ""
    return head + "".join(f"{p.rstrip()}\npb_mark {i};;\n" for i, p in enumerate(phrases))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", nargs="+", default=["Library/words.ml", "Library/prime.ml"],
                    help="development files under /usr/share/hol-light without needs")
    ap.add_argument("--marks", type=int, default=2000, help="marker phrases of the baseline")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="proofbatch-phrase-cost-"))
    variants: list[tuple[str, Path, int, list[str]]] = []
    (tmp / "marks.ml").write_text("".join(f"pb_mark {i};;\n" for i in range(args.marks)))
    variants.append(("marks", tmp / "marks.ml", args.marks, []))
    for name in args.files:
        text = (HOL / name).read_text()
        phrases = [p for p in split_phrases(text) if p.strip()]
        if phrases and ";;" not in phrases[-1]:
            phrases = phrases[:-1]             # a trailing comment or blank
        for choice in ("replay", "trust"):
            path = tmp / f"{Path(name).stem}.{choice}.ml"
            path.write_text(instrumented(phrases, choice == "trust"))
            variants.append((f"{name} {choice}", path, len(phrases), phrases))
    n_max = max(v[2] for v in variants) + 1
    script = [f"let pb_t = Array.make {n_max} 0.0;;",
              "let pb_mark i = pb_t.(i) <- Sys.time ();;",
              '#load "unix.cma";;',
              "let pb_null = Format.make_formatter (fun _ _ _ -> ()) (fun () -> ());;",
              ("let pb_run file n out = match Unix.fork () with "
               "0 -> let t0 = Sys.time () in let ok = Toploop.use_file pb_null file in "
               "let oc = open_out out in Printf.fprintf oc \"%b %.6f\\n\" ok t0; "
               "for i = 0 to n - 1 do Printf.fprintf oc \"%.6f\\n\" pb_t.(i) done; "
               "close_out oc; exit 0 "
               "| pid -> ignore (Unix.waitpid [] pid);;")]
    for i, (_, path, n, _) in enumerate(variants):
        script.append(f'pb_run "{path}" {n} "{tmp}/out{i}.txt";;')
    (tmp / "driver.ml").write_text("\n".join(script) + "\n")
    start = time.monotonic()
    with open(tmp / "driver.ml") as stdin:
        subprocess.run([str(HOL / "ocaml"), "-init", str(HOL / "hol.ml")], stdin=stdin,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=HOL, check=False)
    print(f"HOL Light booted and ran {len(variants)} variants in {time.monotonic() - start:.0f} s wall")

    def deltas(i: int) -> tuple[bool, list[float]]:
        lines = (tmp / f"out{i}.txt").read_text().split()
        ok, t0, marks = lines[0] == "true", float(lines[1]), [float(x) for x in lines[2:]]
        return ok, [b - a for a, b in zip([t0] + marks, marks)]

    ok, mark_d = deltas(0)
    mark_s = statistics.mean(mark_d)
    print(f"marker phrase alone: mean {1000 * mark_s:.3f} ms, median "
          f"{1000 * statistics.median(mark_d):.3f} ms over {len(mark_d)}")
    for i, (label, _, n, phrases) in enumerate(variants[1:], start=1):
        ok, d = deltas(i)
        # Each delta holds the phrase and the marker before it.
        d = [x - mark_s for x in d]
        proof = [x for x, p in zip(d, phrases) if theorem_of(p) or PROOF.search(p)]
        plain = [x for x, p in zip(d, phrases) if not (theorem_of(p) or PROOF.search(p))]
        print(f"{label}: loaded={ok} phrases={n} lines={sum(p.count(chr(10)) for p in phrases)} "
              f"total {sum(d):.2f} s CPU; non-proof phrases {len(plain)}: median "
              f"{1000 * statistics.median(plain):.2f} ms, mean {1000 * statistics.mean(plain):.2f} ms; "
              f"proof phrases {len(proof)}: median {1000 * statistics.median(proof):.2f} ms, mean "
              f"{1000 * statistics.mean(proof):.2f} ms; all phrases mean {1000 * statistics.mean(d):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
