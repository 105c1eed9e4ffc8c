"""The bench's own map checked: real bench problems profiled on Slurm, a map derived and compared.

s2n-bignum-bench's ``timeout-map.json`` was measured once, on its own
machine. This script draws ``--problems`` of its arm problems (default 40)
from ``--files`` proof files chosen at random (the seed is printed),
stratified by the bench's times and holding at least ``--heavy`` problems of
30 s or more, and runs them through the CLI as the docs say a maintainer
would regenerate a map:

1. ``proofbatch extract`` of those files (the bench's ids);
2. ``proofbatch profile --problems @FILE --runs 3 --mode native
   --context-proofs trust --cluster slurm --nodes N`` on the dev cluster
   (``slurm/start-dev-cluster.sh``; at least 2 array tasks);
3. ``proofbatch timeout-map PROFILE --out MAP --compare-with BENCH`` and
   ``proofbatch timeout-map compare BENCH MAP --json``.

It prints the host factor between the bench's machine and this one (with its
spread), the problems whose class (light/heavy) changed, the largest
deviations after the factor, and the bench limits that our measured spread
says are too tight: per problem, the probability that a correct run here
exceeds the bench's limit moved to this host (limit x factor), from the
pooled spread model ``timeout-map`` derives limits with (runner/maps/spread.py).
It exits 1 when a profiled ground truth was not OK (a profile defect).

A corpus and a profile left in ``--work`` by an earlier run are reused (a
profile cut short is continued by the same command) only when the record
they were made with (benchmarks/record.py, scripts
``regenerate_bench_map-corpus`` and ``-profile``) has this commit, host and
inputs: the drawn files and problems, s2n-bignum's and HOL Light's commits,
the native build, ``--runs`` and ``--seed``. Otherwise they are made afresh,
and the run's record names what it reused.

    .venv/bin/python benchmarks/limits/regenerate_bench_map.py --work /work/build \\
        --bench-map /work/build/timeout-map.json --seed 1
"""

from __future__ import annotations

import json
import math
import random
import shutil
import sys
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
import record  # noqa: E402
from common import ROOT, arg_parser, emit, log  # noqa: E402
from s2n_readme_path import (PROOFBATCH, LoadSampler, built_work_arguments, step,  # noqa: E402
                             use_built_work)
from vs_bench_flows import git_rev, native_build_key  # noqa: E402

HEAVY_S = 30.0
# Strata of the bench's prove_secs: the heavy band is drawn first, the
# others take turns, so cheap and mid-sized proofs are both in the map.
STRATA = ((0.0, 1.0), (1.0, 10.0), (10.0, HEAVY_S))
SHOWN = 10


def by_file(bench_map: list[dict], s2n: Path) -> dict[str, list[dict]]:
    """The map's arm problems by proof file (those s2n-bignum has)."""
    files: dict[str, list[dict]] = defaultdict(list)
    for e in bench_map:
        arch, stem, _ = e["problem_id"].split(".", 2)
        if arch == "arm" and (s2n / "arm/proofs" / f"{stem}.ml").is_file():
            files[stem].append(e)
    return files


def draw(files: dict[str, list[dict]], seed: int, count: int, min_files: int, heavy: int,
         max_heavy_s: float) -> list[dict]:
    """``count`` problems of at least ``min_files`` files drawn at random:
    files are taken in a seeded order until they hold ``count`` problems and
    ``heavy`` of 30 s up to ``max_heavy_s``; then ``heavy`` such problems,
    and the rest in turns from the strata below 30 s."""
    rng = random.Random(seed)
    order = sorted(files)
    rng.shuffle(order)

    def heavy_of(es):
        return [e for e in es if HEAVY_S <= float(e["prove_secs"]) <= max_heavy_s]

    def usable(es):      # below 30 s, or heavy within bounds
        return [e for e in es if float(e["prove_secs"]) < HEAVY_S] + heavy_of(es)

    chosen_files: list[str] = []
    for stem in order:
        chosen_files.append(stem)
        pool = [e for f in chosen_files for e in files[f]]
        if len(chosen_files) >= min_files and len(usable(pool)) >= count \
                and len(heavy_of(pool)) >= heavy:
            break
    else:
        raise SystemExit(f"the map's arm files hold no {count} problems with {heavy} of "
                         f"{HEAVY_S:g}-{max_heavy_s:g} s")
    pool = sorted((e for f in chosen_files for e in files[f]), key=lambda e: e["problem_id"])
    picked = rng.sample(heavy_of(pool), heavy)
    strata = [[e for e in pool if lo <= float(e["prove_secs"]) < hi] for lo, hi in STRATA]
    for s in strata:
        rng.shuffle(s)
    while len(picked) < count and any(strata):
        for s in strata:
            if s and len(picked) < count:
                picked.append(s.pop())
    return sorted(picked, key=lambda e: e["problem_id"])


def reusable(kind: str, folder: Path, inputs: dict, ready: Path | None = None,
             directory: Path | None = None) -> bool:
    """Whether ``folder`` (the corpus or the profile) may be kept: it holds
    ``ready`` (its marker of a finished step, if any) and a clean record of
    this commit and host made it from these inputs. Else it is removed, to
    be made afresh."""
    data = record.matching(f"regenerate_bench_map-{kind}",
                           {"commit": record.commit()[0], "host": record.host(),
                            "inputs": {**inputs, "folder": str(folder)}}, directory)
    if data is not None and folder.exists() and (ready is None or ready.exists()):
        record.current().reused(kind, data["path"], folder=str(folder))
        log(f"{kind}: reusing {folder} (made as {data['path']} records)")
        return True
    if folder.exists():
        log(f"{kind}: {folder} has no record of this commit, host and inputs: making it afresh")
    shutil.rmtree(folder, ignore_errors=True)
    return False


def made(kind: str, folder: Path, inputs: dict, directory: Path | None = None) -> Path:
    """The record of what makes ``folder``, for a later run's ``reusable``."""
    rec = record.Record(f"regenerate_bench_map-{kind}", sys.argv)
    for name, value in {**inputs, "folder": str(folder)}.items():
        rec.input(name, value)
    return rec.finish([], directory=directory)


def exceedance(profile_dir: Path, limits_here: dict[str, float]) -> dict[str, float]:
    """Per problem, the chance that a correct run here exceeds ``limits_here``,
    from the spread model timeout-map fits to the profile (CPU times)."""
    from runner.maps import spread
    from runner.maps.profile_data import on_clock
    from runner.maps.timeout_map import MapPolicy
    from runner.profile import load_profile

    runs, _ = on_clock(load_profile(profile_dir).runs, "cpu")
    runs = sorted((r for r in runs if r.problem_id in limits_here), key=lambda r: r.problem_id)
    policy = MapPolicy()
    model = spread.fit(runs, resolution_s=policy.resolution_s, min_df=int(policy.min_band_df),
                       meaningful_s=policy.spread_min_s)
    p = model.exceedance([limits_here[r.problem_id] for r in runs])
    return {r.problem_id: float(x) for r, x in zip(runs, p) if not math.isnan(x)}


def run_spans(runs: list[list[dict]], began: datetime) -> tuple[list[dict], float | None]:
    """Per run of the profile (its result rows): checks, how many OK, wall
    seconds from its first check dispatched to its last verdict, and its
    proofs' ``prove_secs`` summed; and the seconds from ``began`` (the
    profile command's start) to the first check it dispatched. Before that
    first check, ``profile`` prepares run 1, which natively compiles every
    context (runner/profile.py). Rows dispatched before ``began`` are an
    earlier command's (a resumed profile): in their run's span, not in the
    time to this command's first check."""
    spans = [{"checks": len(rows), "ok": sum(r["verdict"] == "OK" for r in rows),
              "wall_s": round((max(r["finished_at"] for r in rows)
                               - min(r["started_at"] for r in rows)).total_seconds(), 1),
              "prove_s": round(sum(r["prove_secs"] or 0.0 for r in rows), 1)} for rows in runs if rows]
    first = min((r["started_at"] for rows in runs for r in rows if r["started_at"] >= began), default=None)
    return spans, None if first is None else round((first - began).total_seconds(), 1)


def profile_runs(profile_dir: Path) -> list[list[dict]]:
    """The result rows of each run of the profile's generations, in order
    (profile.json names each run's sweep folder)."""
    from runner.results import shards

    provenance = json.loads((profile_dir / "profile.json").read_text())
    return [shards.read_results(profile_dir / run["dir"]).to_pylist()
            for g in provenance.get("generations", []) for run in g["runs"]
            if (profile_dir / run["dir"]).is_dir()]


def run_times(profile_dir: Path) -> tuple[dict[str, list[float]], str]:
    """Each profiled problem's times, one per run, on the clock ``timeout-map``
    derives limits from (CPU where every run measured it), and that clock."""
    from runner.maps.profile_data import on_clock
    from runner.profile import load_profile

    runs, clock = on_clock(load_profile(profile_dir).runs, "cpu")
    return {r.problem_id: [round(t, 4) for t in r.prove_secs] for r in runs}, clock


def derived_map(map_path: Path) -> dict:
    """What ``timeout-map`` wrote in our map's sidecar (runner/maps/timeout_map.py
    ``write_map``): its policy, each problem's class, margin, rule, limit and
    times, and the comparison with the bench's map its provenance records."""
    from runner.maps.timeout_map import read_sidecar

    meta = read_sidecar(map_path) or {}
    return {"policy": meta.get("policy"), "problems": meta.get("problems", {}),
            "compared_with": (meta.get("provenance") or {}).get("compared_with", [])}


def table_figures(args, picked: list[dict], profile_dir: Path, began: datetime, ours: Path,
                  cmp: dict) -> dict:
    """What docs/profiles-and-timeout-maps.md's table of this run says beyond
    the report's figures (benchmarks/table_native.py formats it): the
    settings, the drawn problems' bench times, each run's span, each
    problem's run-to-run times, the comparison per problem (``timeout-map
    compare --json``'s records of the problems in both maps) and our map's sidecar."""
    per_run, first_check_s = run_spans(profile_runs(profile_dir), began)
    times, clock = run_times(profile_dir)
    return {"runs": args.runs, "nodes": args.nodes, "max_heavy_s": args.max_heavy_s,
            "bench_prove_secs": {e["problem_id"]: float(e["prove_secs"]) for e in picked},
            "per_run": per_run, "first_check_s": first_check_s, "times_s": times, "clock": clock,
            "heavy_s": cmp["heavy_s"], "ours_limit_below_bench": cmp["b_limit_below_a_time"],
            "compared": {r["problem_id"]: r for r in cmp["problems"] if r["in"] == "both"},
            "derived": derived_map(ours)}


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    built_work_arguments(parser)
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--files", type=int, default=4, help="at least this many proof files")
    parser.add_argument("--heavy", type=int, default=5, help="problems of 30 s or more")
    parser.add_argument("--max-heavy-s", type=float, default=120.0,
                        help="the heavy problems' bench times stay under this (each is run 3 times)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=2, help="Slurm array tasks per run")
    args = parser.parse_args()
    s2n = use_built_work(args)

    bench = json.loads(args.bench_map.read_text())
    picked = draw(by_file(bench, s2n), args.seed, args.problems, args.files, args.heavy,
                  args.max_heavy_s)
    files = sorted({e["problem_id"].split(".")[1] for e in picked})
    log(f"seed {args.seed}: {len(picked)} problems from {len(files)} files: {', '.join(files)}")
    tag = f"regen-{args.seed}"
    corpus, profile_dir = args.work / f"{tag}-corpus", args.work / f"{tag}-profile"
    ours, cmp_json = args.work / f"{tag}-map.json", args.work / f"{tag}-compare.json"
    chosen = args.work / f"{tag}-problems.txt"
    chosen.write_text("".join(e["problem_id"] + "\n" for e in picked))
    corpus_inputs = {"files": files, "s2n_bignum_rev": git_rev(s2n)}
    if not reusable("corpus", corpus, corpus_inputs, ready=corpus / ".extracted"):
        step(PROOFBATCH + ["extract", *[s2n / "arm/proofs" / f"{f}.ml" for f in files], "--out",
                           corpus, "--prefix", "arm"], cwd=ROOT)
        (corpus / ".extracted").touch()
        made("corpus", corpus, corpus_inputs)
    # Resumable: a profile cut short is continued by the same command, when
    # it is the same profile; its record is written as it begins.
    profile_inputs = {**corpus_inputs, "corpus_sha256": record.digest(corpus),
                      "problems": [e["problem_id"] for e in picked], "runs": args.runs,
                      "seed": args.seed, "hol_light_rev": git_rev(args.work / "hol-light"),
                      "native_build": native_build_key(args.work / "hol-light")}
    if not reusable("profile", profile_dir, profile_inputs):
        made("profile", profile_dir, profile_inputs)
    began = datetime.now(timezone.utc)
    with LoadSampler() as load:
        profile_s = step(PROOFBATCH + [
            "profile", corpus, "--out", profile_dir, "--problems", f"@{chosen}", "--runs",
            str(args.runs), "--mode", "native", "--context-proofs", "trust", "--hol-light",
            args.work / "hol-light", "--context-root", s2n, "--cluster", "slurm", "--nodes",
            str(args.nodes), "--seed", str(args.seed)], cwd=ROOT)
    step(PROOFBATCH + ["timeout-map", profile_dir, "--out", ours, "--compare-with", args.bench_map],
         cwd=ROOT)
    step(PROOFBATCH + ["timeout-map", "compare", args.bench_map, ours, "--json", cmp_json], cwd=ROOT)

    cmp = json.loads(cmp_json.read_text())
    defects = json.loads((profile_dir / "summary.json").read_text()).get("defects", [])
    mine = {r["problem_id"]: r for r in cmp["problems"] if r["in"] == "both"}
    f = cmp["factor"]
    factor = f["median"] or 1.0
    p_false = exceedance(profile_dir, {p: r["a_timeout_sec"] * factor for p, r in mine.items()})
    lines = [f"seed {args.seed}: {len(picked)} problems of {len(files)} arm files ({', '.join(files)}), "
             f"{sum(float(e['prove_secs']) >= HEAVY_S for e in picked)} of {HEAVY_S:g} s or more; "
             f"{args.runs} runs on Slurm, {args.nodes} array tasks each",
             f"profile: {profile_s:.0f} s wall, {load.text()}; {len(defects)} defects",
             f"host factor (ours / bench prove_secs): median {factor:.2f}, quartiles "
             f"{f['p25'] or 0:.2f}-{f['p75'] or 0:.2f} over {f['used']} problems of {f['min_s']:g} s up",
             f"class changes (bench -> ours): {len(cmp['class_changes'])}"]
    lines += [f"  {p}: {mine[p]['a_class']} -> {mine[p]['b_class']}" for p in cmp["class_changes"]]
    lines.append("largest deviations after the factor (ours / bench / factor):")
    in_factor = sorted((r for r in mine.values() if r["in_factor"]),
                       key=lambda r: -abs(math.log(r["ratio_after_factor"])))
    lines += [f"  {r['problem_id'][:60]:60} bench {r['a_prove_secs']:7.2f} s  ours "
              f"{r['b_prove_secs']:7.2f} s  x{r['ratio_after_factor']:.2f}" for r in in_factor[:SHOWN]]
    tight = sorted(((p, x) for p, x in p_false.items() if x >= 1e-4), key=lambda t: -t[1])
    lines.append(f"bench limits our spread finds tight (P(correct run here > bench limit x "
                 f"{factor:.2f}) >= 1e-4): {len(tight)} of {len(p_false)}")
    lines += [f"  {p[:60]:60} limit {mine[p]['a_timeout_sec']:6.0f} s  ours {mine[p]['b_prove_secs']:7.2f} s"
              f"  P {x:.2g}" for p, x in tight[:SHOWN]]
    lines.append(f"bench limits below our measured time moved to the bench's host: "
                 f"{len(cmp['a_limit_below_b_time'])}")
    figures = {"seed": args.seed, "problems": len(picked), "files": files, "defects": len(defects),
               "profile_wall_s": round(profile_s, 1), "load": load.text(),
               "host_factor": f, "class_changes": cmp["class_changes"],
               "tight": {p: x for p, x in tight}, "bench_limit_below_ours": cmp["a_limit_below_b_time"]}
    figures.update(table_figures(args, picked, profile_dir, began, ours, cmp))
    return emit(args, "regenerate_bench_map", figures, lines,
                "every drawn ground truth profiled OK on Slurm, the map derived and compared", not defects)


if __name__ == "__main__":
    sys.exit(main())
