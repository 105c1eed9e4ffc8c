"""A profile's summary.json and summary.csv, written from its runs' shards:
per problem the times of its latest generation, each run's node, and the
defects (runner/profile.py runs the sweeps; runner/maps/profile_data.py
reads what is written here)."""

from __future__ import annotations

import statistics
from pathlib import Path

from ..results import shards
from ..results.publish import publish
from . import nodes as node_speed
from .profile_data import SUMMARY, SUMMARY_CSV, SUMMARY_FORMAT, _now, _write_json


def _other_choice(choice: str) -> str:
    return "trust" if choice == "replay" else "replay"


def trust_differences(out: Path, generation: dict) -> dict[str, dict]:
    """Problems of ``generation`` whose verdict under its verification
    sweep's choice differs from run 1's: problem -> defect record."""
    verify = generation.get("verify")
    if not verify or not (out / verify["dir"]).is_dir():
        return {}
    base = _other_choice(verify["context_proofs"])
    first = {r["problem_id"]: r for r in shards.read_results(out / generation["runs"][0]["dir"]).to_pylist()}
    found = {}
    for row in shards.read_results(out / verify["dir"]).to_pylist():
        pid, other = row["problem_id"], first.get(row["problem_id"])
        if other is not None and other["verdict"] != row["verdict"]:
            found[pid] = {"problem_id": pid, "content_sha256": generation["content_sha256"].get(pid),
                          "verdict": f"{row['verdict']} under {verify['context_proofs']}",
                          "reason": f"{other['verdict']} under {base} ({other['reason']}), "
                                    f"{row['verdict']} under {verify['context_proofs']} ({row['reason']})",
                          "run": verify["dir"]}
    return found


def write_summary(out: Path, provenance: dict, in_corpus: set[str]) -> None:
    """Per-problem statistics from each problem's latest generation."""
    latest: dict[str, dict] = {}
    for generation in provenance["generations"]:
        if generation.get("finished"):
            for pid in generation["problems"]:
                latest[pid] = generation
    rows_of: dict[str, list[dict]] = {}
    for generation in provenance["generations"]:
        for run in generation["runs"] if generation.get("finished") else ():
            for row in shards.read_results(out / run["dir"]).to_pylist():
                if latest.get(row["problem_id"]) is generation:
                    rows_of.setdefault(row["problem_id"], []).append(dict(row, run=run["dir"]))
    problems, defects = [], []
    differs = {pid: d for g in provenance["generations"] if g.get("finished")
               for pid, d in trust_differences(out, g).items() if latest.get(pid) is g}
    for pid in sorted(latest):
        if pid not in in_corpus:
            continue                      # no longer in the corpus
        if pid in differs:
            defects.append(differs[pid])  # trust would change its verdict: a defect
            continue
        generation, rows = latest[pid], rows_of.get(pid, [])
        profiled_hash = generation["content_sha256"][pid]
        bad = next((r for r in rows if r["verdict"] != "OK" or r["prove_secs"] is None), None)
        if bad is not None or not rows:
            defects.append({"problem_id": pid, "content_sha256": profiled_hash,
                            "verdict": bad["verdict"] if bad else "ERROR",
                            "reason": (bad["reason"] or "no prove time recorded") if bad else "never ran",
                            "run": bad["run"] if bad else generation["id"]})
            continue
        times = [r["prove_secs"] for r in rows]
        rss = [r["peak_rss_mb"] for r in rows if r["peak_rss_mb"] is not None]
        # CPU times where every run measured one (runs before the column have none).
        cpu = [r.get("prove_cpu_secs") for r in rows]
        cpu = cpu if all(c is not None for c in cpu) else []
        problems.append({
            "problem_id": pid, "category": rows[0]["category"], "content_sha256": profiled_hash,
            "generation": generation["id"], "runs": len(times), "prove_secs": times,
            "min": min(times), "median": statistics.median(times), "max": max(times),
            "spread": max(times) / min(times) if min(times) > 0 else None,
            "wall_secs": [r["wall_secs"] for r in rows], "peak_rss_mb": rss,
            "prove_cpu_secs": cpu, "cpu_secs": [r.get("cpu_secs") for r in rows],
            "host_load": [r.get("host_load") for r in rows],
            "image_key": rows[0]["image_key"], "hosts": sorted({r["host"] for r in rows}),
            # The node of each run, in the order of prove_secs (runner/maps/nodes.py).
            "run_hosts": [r["host"] for r in rows], "cpu_models": [r.get("cpu_model") or "" for r in rows],
            "host_cpus": [r.get("host_cpus") for r in rows],
            "mode": rows[0]["mode"], "prover_build": rows[0]["prover_build"]})
    summary = {"format": SUMMARY_FORMAT, "written": _now(), "problems": problems, "defects": defects,
               **node_speed.summary_fields(out, problems, provenance)}
    _write_json(out / SUMMARY, summary)
    header = ["problem_id", "category", "runs", "min", "median", "max", "spread", "peak_rss_mb",
              "median_cpu"]
    lines = [[p["problem_id"], p["category"], p["runs"], f"{p['min']:.6f}", f"{p['median']:.6f}",
              f"{p['max']:.6f}", "" if p["spread"] is None else f"{p['spread']:.3f}",
              f"{max(p['peak_rss_mb']):.1f}" if p["peak_rss_mb"] else "",
              f"{statistics.median(p['prove_cpu_secs']):.6f}" if p["prove_cpu_secs"] else ""]
             for p in problems]
    publish(out / SUMMARY_CSV, lambda tmp: tmp.write_text(
        "\n".join(",".join(str(c) for c in row) for row in [header, *lines]) + "\n"))
