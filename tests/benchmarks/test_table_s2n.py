"""docs/s2n.md's tables of vs_bench_harness.py's and paired_proof.py's runs
(benchmarks/table_s2n.py): the figures the scripts now record for them, and
each table written end to end by tables.run from records planted as the
scripts write them (their figures made by the scripts' own report functions),
into the tables as docs/s2n.md holds them."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from ..helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import on_path  # noqa: E402,F401  (the groups' folders too)
import tables  # noqa: E402
import table_s2n  # noqa: E402
import vs_bench_report  # noqa: E402

HEAD = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                      text=True, check=True).stdout.strip()
REGISTRY = {t.name: t for t in table_s2n.s2n_tables()}
RECORD = f"`{HEAD[:7]}`, load 0.4-2.1"       # plant()'s commit and load

# The commands of the runs the rows name (the report's), as a record's argv holds them.
TREES = ["--hol-light", "/root/w/hol-light", "--s2n-bignum", "/root/w/s2n-bignum",
         "--bench-repo", "/root/w/s2n-bignum-bench", "--bench-map",
         "/root/w/s2n-bignum-bench/timeout-map.json"]
VS = "benchmarks/s2n/vs_bench_harness.py"
FIRST_CMD = [VS, "--work", "/root/w/rerun/vs-first", *TREES, "--seed", "1", "--files", "4",
             "--problems", "6", "--wrong", "2", "--workers", "2", "--rounds", "1"]
ISSUE_CMD = [VS, "--work", "/root/w/rerun/vs-24", *TREES, "--seed", "1", "--files", "4",
             "--problems", "24", "--workers", "2", "--rounds", "2"]
ROUNDS_CMD = [VS, "--work", "/root/w/rerun/vs-24-rounds", *TREES, "--seed", "1", "--files", "4",
              "--problems", "24", "--workers", "2", "--rounds", "4"]
PAIRED_CMDS = [["benchmarks/s2n/paired_proof.py", "--work", "/root/w/rerun/paired", *TREES,
                "--pairs", "4", "--phases", phases] for phases in ("bench,proofbatch", "proving,bench,none")]
# Other runs of the same script, whose records must not be taken: the README's and docs/native.md's.
OTHERS = [[VS, "--work", "/root/w/vs48", *TREES, "--seed", "48", "--files", "4", "--problems", "24",
           "--workers", "2", "--rounds", "2", "--runtime", "s=16M,o=200"],
          [VS, "--work", "/root/w/vsheavy", *TREES, "--seed", "44", "--only", "@/root/w/heavy-vs-ids.txt",
           "--wrong", "0", "--workers", "2", "--rounds", "1"]]

# The first run's draw (docs/s2n.md's): its 6 problems, 2 given wrong answers.
C, D = "arm.bignum_cdiv_exact.BIGNUM_CDIV_EXACT_CORRECT", "arm.bignum_demont.BIGNUM_DEMONT_CORRECT"
F, L, T = (f"arm.bignum_littleendian_4.{n}" for n in (
    "BIGNUM_FROMLEBYTES_4_CORRECT", "BIGNUM_LITTLEENDIAN_4_CORRECT", "BIGNUM_TOLEBYTES_4_CORRECT"))
S = "arm.bignum_sub_p384.BIGNUM_SUB_P384_CORRECT"
IDS = [C, D, F, L, T, S]
WRONG = {D: "ALL_TAC", T: "NO_TAC"}
# map s, bench PROFILE s, prove_secs, prove_cpu_secs (the table in docs/s2n.md)
FIRST_TIMES = {C: (2.35, 16.59, 10.74, 4.11), D: (3.13, 0.0, 0.0, 0.0), F: (1.75, 19.37, 7.67, 3.46),
               L: (0.01, 0.26, 0.05, 0.02), T: (0.01, 0.0, 0.0, 0.0), S: (2.72, 13.43, 13.00, 4.95)}
LISTED = {pid: {"prove_secs": str(t[0])} for pid, t in FIRST_TIMES.items()}


def bench_flow(profile, combine_s, run_s, cpu_s, load, ended):
    """The bench's flow as run_bench returns it."""
    verdicts = {pid: "FAIL" if pid in WRONG else "OK" for pid in profile}
    return {"verdicts": verdicts, "profile": {pid: (s, verdicts[pid]) for pid, s in profile.items()},
            "combine_s": combine_s, "run_s": run_s, "wall_s": combine_s + run_s, "cpu_s": cpu_s,
            "cpu_how": "cgroup", "load": load, "programs": 4, "bytecode_fallbacks": 0,
            "evaldir": "/w/bench/eval-1", "runtime": "OCaml's defaults", "ended": ended}


def pb_flow(times, extract_s, run_s, cpu_s, load, ended):
    """proofbatch's flow as run_proofbatch returns it: ``times`` (prove_secs, prove_cpu_secs)."""
    verdicts = {pid: "FAIL" if pid in WRONG else "OK" for pid in times}
    rows = {pid: {"verdict": verdicts[pid], "prove_secs": str(s), "prove_cpu_secs": str(c)}
            for pid, (s, c) in times.items()}
    return {"rows": rows, "verdicts": verdicts, "nice": -10, "runtime": "s=16M,o=200",
            "extract_s": extract_s, "run_s": run_s, "wall_s": extract_s + run_s, "cpu_s": cpu_s,
            "cpu_how": "cgroup", "load": load, "out": "/w/out-1-1", "ended": ended}


def vs_figures(rounds):
    """vs_bench_harness.py's figures for these rounds, as its record holds them (JSON)."""
    args = SimpleNamespace(seed=1, workers=2, min_secs=0.5)
    answers = {pid: WRONG.get(pid, "ARITH_TAC") for pid in IDS}
    figures, _, goals = vs_bench_report.report(args, ["bignum_cdiv_exact", "bignum_demont",
                                                      "bignum_littleendian_4", "bignum_sub_p384"],
                                               IDS, set(WRONG), LISTED, rounds, None, answers)
    return json.loads(json.dumps(figures)), all(g.met for g in goals)


def first_round(scale=1.0, pb_scale=1.0, ended=("2026-11-27 08:20:00 UTC", "2026-11-27 08:24:00 UTC")):
    """One round of the first draw: the docs' times, the bench's scaled by ``scale``
    and proofbatch's by ``pb_scale``; the flow that ends first ran first."""
    bench = bench_flow({p: t[1] * scale for p, t in FIRST_TIMES.items()}, 57.0, 920.0, 447.48,
                       "load 4.8-8.1", ended[0])
    pb = pb_flow({p: (t[2] * pb_scale, t[3] * pb_scale) for p, t in FIRST_TIMES.items()}, 0.6, 211.0,
                 93.96, "load 7.3-8.4", ended[1])
    return bench, pb


def plant(results, script, command, figures, passed, stamp="20261201T000000Z"):
    """A record as benchmarks/record.py writes one (the keys tables.py reads)."""
    folder = results / script
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stamp}-{HEAD[:10]}.json"
    path.write_text(json.dumps({
        "script": script, "command": command, "commit": HEAD, "dirty": False,
        "load": {"before": 0.4, "during": {"min": 0.5, "max": 2.1}, "after": 1.0},
        "host_factor": None, "figures": figures, "pass": passed}))
    return path


def paired_figures(phases):
    """paired_proof.py's figures, its report fed each phase's runs as its main gathers them."""
    import paired_proof

    results = {}
    for phase, (window, bench, pb, load) in phases.items():
        results[phase] = {"bench": bench, "pb": pb, "pb_cpu": [x * 0.99 for x in pb],
                          "started": f"2026-11-28 {window[0]}:05 UTC",
                          "ended": f"2026-11-28 {window[1]}:41 UTC",
                          "ratios": [p / b for p, b in zip(pb, bench)], "load": load,
                          "background_runs": 0 if phase == "none" else 3}
    figures, _, met = paired_proof.report("arm.bignum_mul_p25519.BIGNUM_MUL_P25519_CORRECT", 10.05, 4,
                                          results)
    return json.loads(json.dumps(figures)), met


@pytest.fixture
def tree(tmp_path):
    """A checkout holding docs/s2n.md's five tables as the real page has them
    (marker, header, separator and rows), and nothing else."""
    lines = (ROOT / "docs" / "s2n.md").read_text().splitlines()
    kept = []
    for found in tables.tables_in("docs/s2n.md", lines):
        if found.name in REGISTRY:
            kept += [lines[found.marker_at], *lines[found.start:found.end], ""]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "s2n.md").write_text("\n".join(kept) + "\n")
    (tmp_path / "README.md").write_text("# toy\n")
    return tmp_path, tmp_path / "results"


def check(root, results, unrecorded=None, write=False):
    return tables.run(root, results, unrecorded or root / "none.txt", write=write, tables=REGISTRY,
                      figures={})


def table_lines(root, name):
    lines = (root / "docs" / "s2n.md").read_text().splitlines()
    found = next(f for f in tables.tables_in("docs/s2n.md", lines) if f.name == name)
    return lines[found.start:found.end]


# -- what the scripts record for the tables ----------------------------------------------------

def test_vs_bench_records_each_rounds_medians_the_goals_and_the_wrong_answers():
    slow = first_round(pb_scale=2.0)
    figures, passed = vs_figures([first_round(), slow])
    assert figures["min_secs"] == 0.5
    assert figures["round_ratios"] == [
        {"round": 1, "proof_ratio_median": 0.6474, "proof_cpu_ratio_median": 0.2477, "ratio_checks": 3},
        {"round": 2, "proof_ratio_median": 1.2948, "proof_cpu_ratio_median": 0.4955, "ratio_checks": 3}]
    assert figures["thresholds"] == {"proof_ratio_median": 1.05, "proof_cpu_ratio_median": 0.85,
                                     "wall_ratio": 0.3333}
    assert figures["wrong_answers"] == {D: "ALL_TAC", T: "NO_TAC"}
    # Every key it had before is still there.
    assert {"proof_ratio_median", "rounds", "per_problem", "differ", "host_factor", "wall_ratio",
            "runtimes"} <= set(figures)
    # A round with no check long enough records none, not NaN.
    short = vs_bench_report.report(SimpleNamespace(seed=1, workers=2, min_secs=100.0), [], IDS,
                                   set(WRONG), LISTED, [first_round()])[0]
    assert short["round_ratios"][0]["proof_ratio_median"] is None


def test_paired_proof_records_each_phases_window_and_the_attempts():
    figures, met = paired_figures({"proving": (("06:24", "06:32"), [10.0] * 4, [10.0] * 4, "load 0.9-2.3")})
    assert figures["attempts"] == 20
    assert figures["phases"]["proving"]["started"] == "2026-11-28 06:24:05 UTC"
    assert figures["phases"]["proving"]["ended"] == "2026-11-28 06:32:41 UTC"
    assert met


def test_each_rows_flags_tell_its_run_apart_from_every_other_run():
    commands = {"first": FIRST_CMD, "issue": ISSUE_CMD, "rounds": ROUNDS_CMD, "other": OTHERS[0],
                "heavy": OTHERS[1], "paired-1": PAIRED_CMDS[0], "paired-2": PAIRED_CMDS[1]}
    wanted = {"s2n-first-problems": "first", "s2n-first-measures": "first", "s2n-issue-size": "issue",
              "s2n-rounds": "rounds"}
    for table in REGISTRY.values():
        for row in table.rows:
            held = [name for name, cmd in commands.items()
                    if cmd[0].split("/")[-1].removesuffix(".py") == row.script
                    and tables.holds(cmd, row.args)]
            want = wanted.get(table.name) or f"paired-{table_s2n.PAIRED_RUNS.index(row.args) + 1}"
            assert held == [want], (table.name, row.key, held)


# -- the tables, end to end --------------------------------------------------------------------

def test_the_pages_tables_are_registered_as_written_and_kept_until_their_runs_have_records(tree):
    root, results = tree
    listed = root / "unrecorded.txt"
    listed.write_text("".join(f"{t.name}/{r.key}  ran before records began\n"
                              for t in REGISTRY.values() for r in t.rows))
    assert check(root, results, listed) == []
    # A record of the README's run, or of the heavy proofs', is none of theirs.
    for i, command in enumerate(OTHERS):
        figures, passed = vs_figures([first_round()])
        plant(results, "vs_bench_harness", command, figures, passed, stamp=f"2026120{i + 1}T000000Z")
    assert check(root, results, listed) == []


def test_the_first_run_is_written_as_the_page_gives_it(tree):
    root, results = tree
    figures, passed = vs_figures([first_round()])
    assert passed
    plant(results, "vs_bench_harness", FIRST_CMD, figures, passed)
    check(root, results, write=True)
    assert table_lines(root, "s2n-first-problems")[2:] == [
        f"| `BIGNUM_CDIV_EXACT_CORRECT` | OK | OK | 2.35 | 16.59 | 10.74 | 4.11 | 0.65 | {RECORD} |",
        f"| `BIGNUM_DEMONT_CORRECT` (`ALL_TAC`) | FAIL | FAIL | 3.13 | 0.00 | 0.00 | 0.00 |  | {RECORD} |",
        f"| `BIGNUM_FROMLEBYTES_4_CORRECT` | OK | OK | 1.75 | 19.37 | 7.67 | 3.46 | 0.40 | {RECORD} |",
        f"| `BIGNUM_LITTLEENDIAN_4_CORRECT` | OK | OK | 0.01 | 0.26 | 0.05 | 0.02 | 0.19 | {RECORD} |",
        f"| `BIGNUM_TOLEBYTES_4_CORRECT` (`NO_TAC`) | FAIL | FAIL | 0.01 | 0.00 | 0.00 | 0.00 |  | {RECORD} |",
        f"| `BIGNUM_SUB_P384_CORRECT` | OK | OK | 2.72 | 13.43 | 13.00 | 4.95 | 0.97 | {RECORD} |"]
    assert table_lines(root, "s2n-first-measures")[2:] == [
        f"| verdicts | the same in all 6 (4 OK, 2 FAIL) | the same: met | {RECORD} |",
        "| proof time, `prove_secs` / `PROFILE` | median 0.647 over the 3 OK proofs of 0.5 s or more "
        f"(bench load 4.8-8.1, proofbatch load 7.3-8.4) | <= 1.05: met | {RECORD} |",
        f"| proof CPU, `prove_cpu_secs` / `PROFILE` | median 0.248 (same loads) | <= 0.85: met | {RECORD} |",
        "| end-to-end wall | bench 977 s (combine 57 s + run-answers 920 s; load 4.8-8.1), proofbatch "
        "212 s (extract 1 s + run 211 s; load 7.3-8.4): 0.217 of the bench's, 0.230 of `run-answers.sh` "
        f"alone | <= 0.333: met | {RECORD} |",
        f"| CPU | bench 0.1243 core-h, proofbatch 0.0261 core-h (cgroups; same loads) | none | {RECORD} |",
        "| host factor, `PROFILE` / the map's `prove_secs` | median 7.06 over the 3 OK proofs the map lists "
        f"at 0.5 s or more (bench load 4.8-8.1) | stated | {RECORD} |"]
    # The other tables' runs have no record: kept as the page has them.
    assert table_lines(root, "s2n-rounds")[2].endswith("| none: run before records began |")
    listed = root / "unrecorded.txt"
    listed.write_text("".join(f"{t.name}/{r.key}  not run\n" for t in REGISTRY.values()
                              for r in t.rows if not t.name.startswith("s2n-first")))
    assert check(root, results, listed) == []
    # A draw of another size is named, not cut short.
    bench, pb = first_round()
    for flow in (bench["profile"], pb["rows"], bench["verdicts"], pb["verdicts"]):
        flow.pop(S)
    fewer = vs_bench_report.report(SimpleNamespace(seed=1, workers=2, min_secs=0.5), [], IDS[:5],
                                   set(WRONG), LISTED, [(bench, pb)], None, WRONG)[0]
    plant(results, "vs_bench_harness", FIRST_CMD, json.loads(json.dumps(fewer)), True,
          stamp="20261202T000000Z")
    with pytest.raises(tables.TableError, match="the record's draw has 5 problems, the table 6 rows"):
        check(root, results, listed)


def test_the_issues_size_is_written_round_by_round(tree):
    root, results = tree
    # Round 1 at the docs' times; round 2 with proofbatch's proofs 1.2x as long, and a verdict differing.
    bench2, pb2 = first_round(pb_scale=1.2)
    pb2["verdicts"][L] = pb2["rows"][L]["verdict"] = "TIMEOUT"
    figures, passed = vs_figures([first_round(), (bench2, pb2)])
    assert not passed
    plant(results, "vs_bench_harness", ISSUE_CMD, figures, passed)
    check(root, results, write=True)
    miss = f"{RECORD}, MISS"
    assert table_lines(root, "s2n-issue-size")[:1] + table_lines(root, "s2n-issue-size")[2:] == [
        "| measure | round 1 | round 2 | goal | record |",
        "| verdicts | the same in all 6 (4 OK, 2 FAIL) | 1 of 6 differ (proofbatch: 3 OK, 2 FAIL, 1 TIMEOUT) | "
        f"the same: **missed** | {miss} |",
        "| proof time, `prove_secs` / `PROFILE` (OK proofs of 0.5 s or more) | median 0.647 over 3 (bench "
        "load 4.8-8.1, proofbatch 7.3-8.4) | median 0.777 over 3 (bench load 4.8-8.1, proofbatch 7.3-8.4) "
        f"| <= 1.05: met (all rounds: 0.712) | {miss} |",
        "| proof CPU, `prove_cpu_secs` / `PROFILE` | median 0.248 | median 0.297 | <= 0.85: met (all "
        f"rounds: 0.273) | {miss} |",
        "| end-to-end wall | bench 977 s (combine 57 + run-answers 920), proofbatch 212 s: 0.217 | bench "
        "977 s (combine 57 + run-answers 920), proofbatch 212 s: 0.217 | <= 0.333: met (all rounds: "
        f"0.217) | {miss} |",
        "| CPU | bench 0.124 core-h, proofbatch 0.026 | bench 0.124 core-h, proofbatch 0.026 | none | "
        f"{miss} |",
        "| host factor, `PROFILE` / the map's `prove_secs` | median 7.06 over the 6 proofs of all rounds "
        f"the map lists at 0.5 s or more |  | stated | {miss} |"]


def test_four_rounds_are_written_one_a_row_then_over_all(tree):
    root, results = tree
    first, second = ("2026-11-28 07:00:00 UTC", "2026-11-28 07:05:00 UTC")
    rounds = [first_round(1.0 + r / 100, ended=(first, second) if r % 2 == 0 else (second, first))
              for r in range(4)]
    figures, passed = vs_figures(rounds)
    plant(results, "vs_bench_harness", ROUNDS_CMD, figures, passed)
    # The first run's record, of other flags, is not these rounds'.
    plant(results, "vs_bench_harness", FIRST_CMD, vs_figures([first_round(2.0)])[0], True,
          stamp="20261202T000000Z")
    check(root, results, write=True)
    same = f"977 s / 212 s: 0.217 | 4.8-8.1; 7.3-8.4 | {RECORD} |"
    assert table_lines(root, "s2n-rounds")[2:] == [
        f"| 1 | bench, then proofbatch | 0.647 (3 proofs) | 0.248 | {same}",
        f"| 2 | proofbatch, then bench | 0.641 (3) | 0.245 | {same}",
        f"| 3 | bench, then proofbatch | 0.635 (3) | 0.243 | {same}",
        f"| 4 | proofbatch, then bench | 0.628 (3) | 0.240 | {same}",
        "| all |  | median 0.638 over 12 (goal 1.05: met) | 0.244 (goal 0.85: met) | median 0.217 (goal "
        f"0.333: met) |  | {RECORD} |"]
    # Written, the tables match their records.
    listed = root / "unrecorded.txt"
    listed.write_text("".join(f"{t.name}/{r.key}  not run\n" for t in REGISTRY.values() for r in t.rows
                              if t.name in ("s2n-issue-size", "s2n-paired")))
    assert check(root, results, listed) == []


def test_the_paired_runs_are_written_a_phase_a_row(tree):
    root, results = tree
    b, p = [11.0, 11.0, 11.0, 11.0], [11.11, 10.89, 11.22, 11.0]
    one, met_one = paired_figures({"bench": (("06:03", "06:11"), b, p, "load 1.0-2.1"),
                                   "proofbatch": (("06:11", "06:19"), b, p[::-1], "load 1.8-2.3")})
    two, met_two = paired_figures({"proving": (("06:24", "06:32"), b, p, "load 0.9-2.3"),
                                   "bench": (("06:32", "06:39"), [10.0] * 4, [10.0] * 4, "load 1.8-2.1"),
                                   "none": (("06:39", "06:48"), b, [12.0] * 4, "load 1.0-2.0")})
    assert met_one and not met_two
    plant(results, "paired_proof", PAIRED_CMDS[0], one, met_one)
    plant(results, "paired_proof", PAIRED_CMDS[1], two, met_two, stamp="20261202T000000Z")
    check(root, results, write=True)
    times, ratios = "11.11 10.89 11.22 11.00", "1.010 0.990 1.020 1.000"
    assert table_lines(root, "s2n-paired")[2:] == [
        f"| the bench's program | 06:03-06:11 | 11.00 11.00 11.00 11.00 | {times} | {ratios} | **1.005** | "
        f"1.0-2.1 | {RECORD} |",
        "| `proofbatch run` | 06:11-06:19 | 11.00 11.00 11.00 11.00 | 11.00 11.22 10.89 11.11 | "
        f"1.000 1.020 0.990 1.010 | **1.005** | 1.8-2.3 | {RECORD} |",
        f"| 20 attempts proving | 06:24-06:32 | 11.00 11.00 11.00 11.00 | {times} | {ratios} | **1.005** | "
        f"0.9-2.3 | {RECORD}, MISS |",
        "| the bench's program | 06:32-06:39 | 10.00 10.00 10.00 10.00 | 10.00 10.00 10.00 10.00 | "
        f"1.000 1.000 1.000 1.000 | **1.000** | 1.8-2.1 | {RECORD}, MISS |",
        "| nothing | 06:39-06:48 | 11.00 11.00 11.00 11.00 | 12.00 12.00 12.00 12.00 | "
        f"1.091 1.091 1.091 1.091 | **1.091** | 1.0-2.0 | {RECORD}, MISS |"]
