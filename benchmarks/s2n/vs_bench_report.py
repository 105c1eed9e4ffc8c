"""The side-by-side's report: verdicts, proof times and costs of the bench's
flow against proofbatch's, per round and over all rounds (for
``vs_bench_harness.py``)."""

from __future__ import annotations

import math
import os
import statistics

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from record import Goal

PROOF_RATIO_GOAL = 1.05     # issue 45: proofbatch's proof time within 5% of the bench's
WALL_RATIO_GOAL = 1 / 3     # and the whole flow in a third of the bench's wall time
CPU_RATIO_GOAL = 0.85       # issue 48: proof CPU at most 0.85 of the bench's PROFILE
SETTLE = ("settle (collect or compact before an image serves) has no equivalent in the bench's "
          "program: it loads its context and proves in one process, with no image to settle")


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def value(x: float) -> float | None:
    """A figure for a goal: none when nothing was measured (NaN), which misses it."""
    return None if math.isnan(x) else round(x, 4)


def beside(rounds, extra, ids, wrong, min_secs) -> tuple[dict[str, list[float]], list[str]]:
    """The flows a runtime setting adds (``extra``: per round, the bench's
    program under its OCAMLRUNPARAM, ``bench-tuned``, and proofbatch under
    --runtime default, ``pb-default``): per check OK in every flow, of at
    least ``min_secs`` PROFILE, proofbatch's proof CPU under the defaults
    against the bench's PROFILE, the bench's tuned PROFILE against its own,
    and proofbatch's proof CPU against the tuned bench's; and every verdict
    that differs from the bench's."""
    ratios: dict[str, list[float]] = {"default": [], "bench_gain": [], "vs_tuned_bench": []}
    differ = []
    for r, ((b, p), more) in enumerate(zip(rounds, extra or [{}] * len(rounds))):
        bt, pd = more.get("bench-tuned"), more.get("pb-default")
        for pid in ids:
            bv = b["verdicts"].get(pid, "-")
            for name, flow in (("bench-tuned", bt), ("pb-default", pd)):
                if flow is not None and flow["verdicts"].get(pid, "-") != bv:
                    differ.append(f"round {r + 1} {pid}: bench {bv}, {name} "
                                  f"{flow['verdicts'].get(pid, '-')}")
            prof = b["profile"].get(pid, (float("nan"), ""))[0]
            if pid in wrong or not prof >= min_secs or bv != "OK" or p["verdicts"].get(pid) != "OK":
                continue
            pc = float(p["rows"].get(pid, {}).get("prove_cpu_secs") or "nan")
            if pd is not None and pd["verdicts"].get(pid) == "OK":
                ratios["default"].append(float(pd["rows"][pid].get("prove_cpu_secs") or "nan") / prof)
            if bt is not None and bt["verdicts"].get(pid) == "OK":
                tuned = bt["profile"].get(pid, (float("nan"), ""))[0]
                ratios["bench_gain"].append(tuned / prof)
                ratios["vs_tuned_bench"].append(pc / tuned if tuned > 0 else float("nan"))
    return ratios, differ


def runtime_lines(rounds, extra, ratios, loads) -> tuple[dict, list[str]]:
    """Each side's runtime, and the figures of the flows a setting adds."""
    b, p = rounds[0]
    more = (extra or [{}])[0]
    runtimes = {"proofbatch": p.get("runtime") or "not recorded",
                "bench": b.get("runtime") or "OCaml's defaults"}
    if "bench-tuned" in more:
        runtimes.update(bench_tuned=more["bench-tuned"].get("runtime"), bench_settle=SETTLE,
                        proofbatch_default=more["pb-default"].get("runtime") or "default")
    lines = [f"runtimes: proofbatch {runtimes['proofbatch']}; the bench's program (its PROFILE) "
             f"{runtimes['bench']}"]
    if "bench-tuned" in more:
        lines += [
            f"proof CPU under --runtime default, prove_cpu_secs / bench PROFILE: median "
            f"{med(ratios['default']):.3f} over {len(ratios['default'])} checks ({loads})",
            f"the bench's program under {runtimes['bench_tuned']}: PROFILE / its PROFILE under "
            f"OCaml's defaults, median {med(ratios['bench_gain']):.3f} over "
            f"{len(ratios['bench_gain'])} checks; {SETTLE}",
            f"proof CPU against the bench's program under the same OCAMLRUNPARAM: median "
            f"{med(ratios['vs_tuned_bench']):.3f} (what the runner adds beyond OCaml's settings)"]
    figures = {"runtimes": runtimes,
               "proof_cpu_ratio_default_median": value(med(ratios["default"])),
               "bench_tuned_gain_median": value(med(ratios["bench_gain"])),
               "proof_cpu_ratio_vs_tuned_bench_median": value(med(ratios["vs_tuned_bench"]))}
    return figures, lines


def report(args, files, ids, wrong, listed, rounds, extra: list[dict] | None = None,
           answers: dict[str, str] | None = None) -> tuple[dict, list[str], list[Goal]]:
    """The figures, the report's lines, and the goals the run passes on:
    every verdict agreed, the proof-time and proof-CPU ratios and the
    end-to-end ratio. ``rounds`` holds each round's (bench flow, proofbatch
    flow) figures; ``extra`` each round's flows a runtime setting adds
    (``beside``); ``listed`` is the bench's map by problem id; ``answers``
    the answer given to each problem (the wrong ones are recorded)."""
    lines = [f"seed {args.seed}: {len(files)} files ({', '.join(files)}), {len(ids)} problems, "
             f"{len(wrong)} given wrong answers ({', '.join(sorted(wrong))}); "
             f"{args.workers} workers, {os.cpu_count()} cores"]
    differ: list[str] = []
    pb_ratio, cpu_ratio, host, per_problem, by_round, round_ratios = [], [], [], [], [], []
    for r, (b, p) in enumerate(rounds):
        first = len(pb_ratio)
        lines.append(f"round {r + 1}: bench {b['programs']} programs, "
                     f"{b['bytecode_fallbacks']} fell back to bytecode; evaldir {b['evaldir']}")
        lines.append(f"  {'problem':58} {'bench':>8} {'pb':>8} {'map s':>7} {'PROFILE':>8} "
                     f"{'prove_s':>8} {'cpu_s':>7} {'ratio':>6}")
        for pid in ids:
            bv, pv = b["verdicts"].get(pid, "-"), p["verdicts"].get(pid, "-")
            if bv != pv:
                differ.append(f"round {r + 1} {pid}: bench {bv}, proofbatch {pv}")
            prof = b["profile"].get(pid, (float("nan"), ""))[0]
            row = p["rows"].get(pid, {})
            ps = float(row.get("prove_secs") or "nan")
            pc = float(row.get("prove_cpu_secs") or "nan")
            want = float(listed[pid]["prove_secs"])
            ratio = ps / prof if prof > 0 else float("nan")
            if bv == pv == "OK" and pid not in wrong and prof >= args.min_secs:
                pb_ratio.append(ratio)
                cpu_ratio.append(pc / prof)
            if bv == "OK" and pid not in wrong and want >= args.min_secs:
                host.append(prof / want)
            per_problem.append({"round": r + 1, "problem": pid, "bench": bv, "proofbatch": pv,
                                "map_s": want, "profile_s": prof, "prove_secs": ps,
                                "prove_cpu_secs": pc})
            lines.append(f"  {pid[:58]:58} {bv:>8} {pv:>8} {want:7.2f} {prof:8.2f} {ps:8.2f} "
                         f"{pc:7.2f} {ratio:6.2f}")
        # Each round's medians, as its line prints them: docs/s2n.md gives them round by round.
        round_ratios.append({"round": r + 1, "proof_ratio_median": value(med(pb_ratio[first:])),
                             "proof_cpu_ratio_median": value(med(cpu_ratio[first:])),
                             "ratio_checks": len(pb_ratio) - first})
        by_round.append(f"round {r + 1}: proof wall ratio {med(pb_ratio[first:]):.3f}, CPU "
                        f"{med(cpu_ratio[first:]):.3f} over {len(pb_ratio) - first} checks; "
                        f"checks at nice {p.get('nice', 'not recorded')}")
    loads = "; ".join(f"round {r + 1}: bench {b['load']}, proofbatch {p['load']}"
                      for r, (b, p) in enumerate(rounds))
    bw = med([b["wall_s"] for b, _ in rounds])
    br = med([b["run_s"] for b, _ in rounds])
    pw = med([p["wall_s"] for _, p in rounds])
    ratio, cratio, hf = med(pb_ratio), med(cpu_ratio), med(host)
    wall = pw / bw if bw > 0 else float("nan")
    lines += [
        f"proof time, proofbatch prove_secs / bench PROFILE: median {ratio:.3f} over "
        f"{len(pb_ratio)} checks of >= {args.min_secs} s OK in both ({loads})",
        f"proof CPU, prove_cpu_secs / bench PROFILE (wall): median {cratio:.3f} ({loads})",
        *by_round,
        *[f"round {r + 1} end-to-end wall: bench {b['wall_s']:.0f} s (combine {b['combine_s']:.0f} "
          f"+ run-answers {b['run_s']:.0f}; {b['load']}), proofbatch {p['wall_s']:.0f} s "
          f"(extract {p['extract_s']:.0f} + run {p['run_s']:.0f}; {p['load']}): "
          f"{p['wall_s'] / b['wall_s']:.3f} of the bench's, {p['wall_s'] / b['run_s']:.3f} of "
          f"run-answers alone"
          for r, (b, p) in enumerate(rounds)],
        f"end-to-end wall, proofbatch / bench flow: median {wall:.3f}; against run-answers.sh "
        f"alone {pw / br:.3f} ({loads})",
        *[f"round {r + 1} CPU: bench {b['cpu_s'] / 3600:.4f} core-h, proofbatch "
          f"{p['cpu_s'] / 3600:.4f} core-h ({b['cpu_how']}; {loads})"
          for r, (b, p) in enumerate(rounds)],
        f"host factor, bench PROFILE / map prove_secs: median {hf:.2f} over {len(host)} checks "
        f"of >= {args.min_secs} s in the map ({loads})",
    ]
    more_ratios, more_differ = beside(rounds, extra, ids, wrong, args.min_secs)
    differ += more_differ
    runtime_figures, said = runtime_lines(rounds, extra, more_ratios, loads)
    lines += said
    lines += ["DIFFERS: " + d for d in differ]
    figures = {"seed": args.seed, "files": files, "problems": len(ids), "wrong": sorted(wrong),
               "workers": args.workers, "proof_ratio_median": round(ratio, 4),
               "proof_cpu_ratio_median": round(cratio, 4), "ratio_checks": len(pb_ratio),
               "wall_ratio": round(wall, 4), "wall_ratio_vs_run_answers": round(pw / br, 4),
               "host_factor": round(hf, 3), "host_factor_checks": len(host),
               "rounds": [{"bench": {k: v for k, v in b.items() if k not in ("verdicts", "profile")},
                           "proofbatch": {k: v for k, v in p.items() if k not in ("rows", "verdicts")},
                           **{flow: {k: v for k, v in f.items()
                                     if k not in ("rows", "verdicts", "profile")}
                              for flow, f in more.items()}}
                          for (b, p), more in zip(rounds, extra or [{}] * len(rounds))],
               "per_problem": per_problem, "differ": differ, **runtime_figures,
               # What docs/s2n.md's tables say beside the medians: which proofs they are
               # over, each round's, each goal's threshold (by the figure it judges) and
               # the wrong answer each wrong problem was given.
               "min_secs": args.min_secs, "round_ratios": round_ratios,
               "thresholds": {"proof_ratio_median": PROOF_RATIO_GOAL,
                              "proof_cpu_ratio_median": CPU_RATIO_GOAL,
                              "wall_ratio": round(WALL_RATIO_GOAL, 4)},
               "wrong_answers": {pid: (answers or {}).get(pid) for pid in sorted(wrong)}}
    goals = [Goal("verdicts differing between the flows", len(differ), "==", 0),
             Goal("proof time, proofbatch / bench (median)", value(ratio), "<=", PROOF_RATIO_GOAL),
             Goal("proof CPU, proofbatch / bench PROFILE (median)", value(cratio), "<=",
                  CPU_RATIO_GOAL),
             Goal("end-to-end wall, proofbatch / bench flow (median)", value(wall), "<=",
                  round(WALL_RATIO_GOAL, 4))]
    return figures, lines, goals
