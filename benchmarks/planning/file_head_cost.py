"""What s2n-bignum's machine code costs to decode, and a native context's
compile, fitted over the image builds real sweeps recorded.

A proof file's head (runner.reporting.report.image_classes: the first image below the
library prefix) defines its routine's machine code and decodes it
(``ARM_MK_EXEC_RULE``; runner/provers/hol_light/costs/machine_code.py): a phrase
whose cost follows the code, not its own size. This reads each given sweep
(``proofbatch run --out``; its ``sweep.json`` says the mode, corpus and
context root), rebuilds the sweep's context tree from its corpus and aligns
it with the sweep's ``plan.json`` by each problem's chain, and for every
image but the boot and the library prefix takes

- the measured load (``OUT/images/*.json``, the median of its builds),
  scaled by the sweep's library prefix: the model's load of it (load_cost.py's
  CPU-time fit) over the measured one, since other work on the host
  stretches every build of a sweep alike (a loaded host doubled it), less
  what context_costs' model without machine code prices its phrases at;
- the machine code its EXEC rules decode (bytes) and how many there are;
- natively, its context's compile (``native-compile:KEY``) against its
  compile units (chunks) and KB.

Fits per mode: ``image_s``, what an image costs beyond its phrases, the
median residual of the images that decode no machine code (chain images);
then, least squares through the origin over the file heads, their residual
less ``image_s`` = ``exec_s`` per EXEC rule + ``exec_per_kb_s`` per KB of
code (``exec_s`` held at 0, per KB alone, when the fit makes it negative); natively, the compile of a
context that loads nothing new (a file head, a chain image) as one chunk:
``compile_chunk_s`` = the median of (compile - KB x compile_per_kb_s) / chunks,
and, least squares with an intercept over the compiles of an image's
answers (``native-compile:answers:KEY``, one batch each here) against the
KB of their text, ``answer_batch_s`` + ``answer_per_kb_s`` per KB.
Prints the fit and each image's measured, old and new estimate.

    .venv/bin/python benchmarks/planning/file_head_cost.py OUT [OUT ...] [--json]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
from common import arg_parser, emit  # noqa: E402
from runner.checks.context_proofs import ContextProofs  # noqa: E402
from runner.corpus import load_corpus  # noqa: E402
from runner.provers.hol_light import contexts  # noqa: E402
from runner.provers.hol_light.costs import context_costs, file_loads, load_model  # noqa: E402
from runner.reporting.report import image_classes  # noqa: E402

TRUST = ContextProofs.TRUST


def images_of(out: Path) -> list[dict]:
    """Each image of a sweep but the boot and library prefix: its measured
    load and compile, and what the model without machine code says."""
    sweep = json.loads((out / "sweep.json").read_text())
    if sweep.get("context_proofs") != "trust":
        raise SystemExit(f"{out}: swept with --context-proofs {sweep.get('context_proofs')}; "
                         "the fit is of trusted contexts")
    plan = json.loads((out / "plan.json").read_text())
    mode = sweep["mode"]
    planned = {i["key"]: i for i in plan["images"]}
    classes = image_classes(planned)
    builds: dict[str, list[float]] = defaultdict(list)
    for f in (out / "images").glob("*.json"):
        for b in json.loads(f.read_text())["builds"]:
            builds[b["key"]].append(float(b["secs"]))
    corpus = Path(sweep["corpus"])
    answers = sweep["config"].get("answers")
    problems = {p.problem_id: p for p in load_corpus(corpus, Path(answers) if answers else None)}
    setups = {c["problem_id"]: problems[c["problem_id"]].setup_path.read_text()
              for c in plan["checks"]}
    answer_kb: dict[str, float] = defaultdict(float)
    for c in plan["checks"]:
        answer_kb[c["image_key"]] += len(problems[c["problem_id"]].answer or b"") / 1024
    tree = contexts.build_context_tree(setups, "file_head_cost")
    files = file_loads.FileLoads(Path(sweep["context_root"]), Path(sweep["config"]["hol_light"]))
    model = replace(load_model.MODELS[mode], image_s=0.0, exec_s=0.0, exec_per_kb_s=0.0)
    costs = context_costs.estimate(tree, {}, mode=mode, files=files, model=model)
    ours: dict[str, str] = {}
    for c in plan["checks"]:
        chain, k = [], c["image_key"]
        while k is not None:
            chain.append(k)
            k = planned[k]["parent"]
        theirs = [n.key for n in tree.chain(tree.image_of[c["problem_id"]])]
        if len(theirs) != len(chain):
            raise SystemExit(f"{out}: {c['problem_id']}'s chain is not the corpus's")
        ours.update(zip(reversed(chain), theirs))
    rows = []
    for key, cls in classes.items():
        if cls == "boot" or key not in builds:
            continue
        cost = costs[ours[key]]
        rows.append({"sweep": out.name, "mode": mode, "class": cls,
                     "load_s": statistics.median(builds[key]),
                     "compile_s": sum(builds.get("native-compile:" + key, [])),
                     "answers_s": builds.get("native-compile:answers:" + key),
                     "answer_kb": answer_kb.get(key, 0.0),
                     "model_s": cost.load_s(TRUST), "kb": cost.kb, "chunks": cost.chunks,
                     "execs": cost.execs, "exec_kb": cost.exec_bytes / 1024})
    # Other work on the host stretches every build of a sweep alike; its
    # library prefix, priced by load_cost.py's CPU-time fit, is the yardstick:
    # each build is scaled by the model's library load over the measured one.
    [lib] = [r for r in rows if r["class"] == "library prefix"] or [None]
    scale = lib["model_s"] / lib["load_s"] if lib else 1.0
    for r in rows:
        r["scale"] = scale
        r["raw_load_s"], r["raw_compile_s"] = r["load_s"], r["compile_s"]
        r["load_s"] *= scale
        r["compile_s"] *= scale
        r["answers_s"] = [a * scale for a in r["answers_s"]] if r["answers_s"] else None
    return rows


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x."""
    b = statistics.covariance(xs, ys) / statistics.variance(xs)
    return statistics.fmean(ys) - b * statistics.fmean(xs), b


def fit_origin(xs: list[tuple[float, float]], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a x0 + b x1 (no intercept), by the normal equations."""
    s00 = sum(x[0] * x[0] for x in xs)
    s01 = sum(x[0] * x[1] for x in xs)
    s11 = sum(x[1] * x[1] for x in xs)
    t0 = sum(x[0] * y for x, y in zip(xs, ys))
    t1 = sum(x[1] * y for x, y in zip(xs, ys))
    det = s00 * s11 - s01 * s01
    if abs(det) < 1e-12:
        return (t0 / s00 if s00 else 0.0), 0.0
    return (t0 * s11 - t1 * s01) / det, (s00 * t1 - s01 * t0) / det


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("sweeps", type=Path, nargs="+", help="sweep directories (run --out)")
    args = parser.parse_args()
    every = [r for out in args.sweeps for r in images_of(out.resolve())]
    rows = [r for r in every if r["class"] != "library prefix"]
    lines, figures = [], {"images": len(rows), "fits": {}}
    for mode in sorted({r["mode"] for r in every}):
        libs = [r for r in every if r["mode"] == mode and r["class"] == "library prefix"]
        if libs:
            measured = statistics.median(r["raw_load_s"] for r in libs)
            loads = ", ".join(f"{r['raw_load_s']:.1f}" for r in libs)
            compiles = ", ".join(f"{r['raw_compile_s']:.1f}" for r in libs)
            lines.append(f"{mode}: library prefix load measured {loads} s "
                         f"(median {measured:.1f}), the model's {libs[0]['model_s']:.1f} s: measured/model "
                         f"{measured / libs[0]['model_s']:.3f}; its compile "
                         f"{compiles} s")
            figures["fits"].setdefault(mode, {})["library_measured_over_model"] = round(
                measured / libs[0]["model_s"], 4)
        mine = [r for r in rows if r["mode"] == mode]
        if not mine:
            continue
        coded = [r for r in mine if r["execs"]]
        plain = [r["load_s"] - r["model_s"] for r in mine if not r["execs"]]
        image_s = statistics.median(plain) if plain else 0.0
        xs = [(r["execs"], r["exec_kb"]) for r in coded]
        ys = [r["load_s"] - r["model_s"] - image_s for r in coded]
        a, b = fit_origin(xs, ys)
        if a < 0:       # a rule cannot cost less than nothing: per KB alone
            a, b = 0.0, sum(x[1] * y for x, y in zip(xs, ys)) / sum(x[1] ** 2 for x in xs)
        fit = {"image_s": round(image_s, 4), "exec_s": round(a, 4), "exec_per_kb_s": round(b, 4),
               "images": len(coded), "plain_images": len(plain)}
        if mode == "native":
            per_kb = load_model.MODELS["native"].compile_per_kb_s
            fit["compile_chunk_s"] = round(statistics.median(
                (r["compile_s"] - r["kb"] * per_kb) / max(1, r["chunks"]) for r in mine), 4)
            batches = [(r["answer_kb"], s) for r in mine for s in (r["answers_s"] or [])]
            if len(batches) > 1:
                a0, b0 = fit_line([kb for kb, _ in batches], [s for _, s in batches])
                fit["answer_batch_s"], fit["answer_per_kb_s"] = round(a0, 4), round(b0, 4)
        figures["fits"].setdefault(mode, {}).update(fit)
        lines.append(f"{mode}: image_s {image_s:.4f} over {len(plain)} images without machine code; "
                     f"exec_s {a:.4f} + exec_per_kb_s {b:.4f} over {len(coded)} file heads"
                     + (f"; compile_chunk_s {fit['compile_chunk_s']:.4f} over {len(mine)} contexts"
                        f"; answer_batch_s {fit.get('answer_batch_s')} + answer_per_kb_s "
                        f"{fit.get('answer_per_kb_s')} over {len(batches)} batches"
                        if mode == "native" else ""))
        for r in mine:
            new = r["model_s"] + image_s + (a * r["execs"] + b * r["exec_kb"] if r["execs"] else 0.0)
            lines.append(f"  {r['sweep']:18} {r['class']:12} code {1024 * r['exec_kb']:5.0f} B  "
                         f"measured {r['raw_load_s']:6.2f} s (x{r['scale']:.2f} {r['load_s']:6.2f})  "
                         f"old model {r['model_s']:5.2f}  fit {new:6.2f}"
                         + (f"  compile {r['compile_s']:.2f} s ({r['chunks']} chunks)"
                            + (f"  answers {r['answer_kb']:.1f} KB "
                               + ", ".join(f"{x:.2f}" for x in r["answers_s"]) + " s"
                               if r["answers_s"] else "")
                            if mode == "native" else ""))
    figures["rows"] = rows
    return emit(args, "file_head_cost", figures, lines, "a fit (no target)", True)


if __name__ == "__main__":
    sys.exit(main())
