"""benchmarks/table_limits.py: docs/limits.md's tables written from records
shaped as loaded_host.py and cpu_drift.py write them, end to end through
benchmarks/tables.py (each table from the record of its own run's flags);
and loaded_host.py's per-problem figures, which its table of problems needs."""

from __future__ import annotations

import shutil
import statistics
import sys

from ..helpers import ROOT
from .test_tables import HEAD, plant

sys.path.insert(0, str(ROOT / "benchmarks"))
import on_path  # noqa: E402,F401  (the groups' folders too)
import loaded_host  # noqa: E402
import tables  # noqa: E402
from table_limits import limits_tables  # noqa: E402

MAP = "/root/w/s2n-bignum-bench/timeout-map.json"


def command(script: str, *flags: str) -> list[str]:
    """A record's ``command``: the script's argv as the run gives it."""
    if script == "loaded_host":
        return ["benchmarks/limits/loaded_host.py", "--work", "/root/w", "--bench-map", MAP, *flags]
    return ["benchmarks/limits/cpu_drift.py", *flags]


# -- loaded_host.py ---------------------------------------------------------------------------

def row(pid: str, verdict: str, clock: float, cpu: float, limit: float, load: float | str) -> dict:
    """A results.csv row as read_rows gives it: every value a string."""
    return {"problem_id": pid, "verdict": verdict, "reason": "", "prove_secs": str(clock),
            "prove_cpu_secs": str(cpu), "timeout_s": str(limit), "host_load": str(load)}


def loaded_figures(picked: list[dict], runs: dict, factor: float, spinners: int, seed: int) -> dict:
    """The record's figures, built as loaded_host.main builds them."""
    _, _, judged, _ = loaded_host.judge(picked, runs)
    files = sorted({e["problem_id"].split(".")[1] for e in picked})
    return loaded_host.record_figures(seed, picked, files, -10, factor, spinners, runs, judged)


# Seed 1's draw as docs/limits.md gives it: (id, map s, quiet wall s, quiet CPU s, load at its end).
SEED_1 = (
    ("arm.bignum_inv_p521.CORE_INV_P521_SAFE", 55.7, 319.2, 88.41, 8.23),
    ("arm.bignum_ksqr_16_32.BIGNUM_KSQR_16_32_CORRECT", 52.2, 257.0, 83.8, 6.04),
    ("arm.bignum_montsqr_p384.BIGNUM_AMONTSQR_P384_UNOPT_CORE_CORRECT", 53.0, 199.4, 72.5, 6.3),
    ("arm.mlkem_mulcache_compute.MLKEM_MULCACHE_COMPUTE_CORRECT", 41.7, 174.1, 74.9, 4.6),
    ("arm.p384_montjadd.P384_MONTJADD_UNOPT_CORE_CORRECT", 42.4, 194.0, 73.8, 6.4),
    ("arm.p384_montjdouble.P384_MONTJDOUBLE_UNOPT_CORE_CORRECT", 54.4, 279.3, 85.2, 8.0),
)


def seed_1_run() -> tuple[list[dict], dict]:
    """The run's draw and its four sweeps: {name: (rows, wall s, load)}."""
    picked = [{"problem_id": pid, "prove_secs": map_s, "timeout_sec": 120.0} for pid, map_s, *_ in SEED_1]
    quiet = {pid: row(pid, "OK", wall, cpu, 120.0, load) for pid, _, wall, cpu, load in SEED_1}
    wall = {pid: row(pid, "TIMEOUT", 150.0, 84.0 + 3 * i, 150.0, 6.0) for i, (pid, *_) in enumerate(SEED_1)}
    wall[SEED_1[3][0]] = row(SEED_1[3][0], "OK", 136.3, 90.0, 150.0, 5.0)
    cpu = {pid: row(pid, "OK", 142.0 + 13 * i, 70.0 + 6.2 * i, 213.6, 7.0) for i, (pid, *_) in enumerate(SEED_1)}
    again = {pid: row(pid, "OK", 200.0, c, 120.0, 1.0) for pid, _, _, c, _ in SEED_1}
    return picked, {"quiet": (quiet, 2544.2, "load 0.5-11.2"), "wall": (wall, 1991.0, "load 4.8-8.4"),
                    "cpu": (cpu, 1677.0, "load 4.7-7.9"), "quiet-again": (again, 900.0, "load 1.0-3.0")}


def test_each_problem_of_each_sweep_is_in_the_figures():
    picked, runs = seed_1_run()
    pid = SEED_1[0][0]
    del runs["wall"][0][pid]                      # no row in the wall sweep
    runs["cpu"][0][pid]["host_load"] = ""         # a row written before host_load was
    per = loaded_host.problem_figures(picked, runs)
    assert [p["problem_id"] for p in per] == [p[0] for p in SEED_1]
    assert per[0]["map_s"] == 55.7 and per[0]["map_limit_s"] == 120.0
    assert per[0]["runs"]["quiet"] == {"verdict": "OK", "clock_s": 319.2, "cpu_s": 88.41, "limit_s": 120.0,
                                       "load": 8.23}
    assert per[0]["runs"]["wall"] == dict.fromkeys(("verdict", "clock_s", "cpu_s", "limit_s", "load"))
    assert per[0]["runs"]["cpu"]["load"] is None and per[0]["runs"]["cpu"]["limit_s"] == 213.6
    assert list(per[3]["runs"]) == ["quiet", "wall", "cpu", "quiet-again"]
    assert per[3]["runs"]["wall"]["verdict"] == "OK"


def test_the_records_figures_keep_every_key_and_add_the_problems():
    picked, runs = seed_1_run()
    figures = loaded_figures(picked, runs, 1.78, 2, 1)
    assert list(figures) == [
        "seed", "problems", "files", "check_nice", "cpu_host_factor", "spinners", "runs",
        "wall_false_timeouts", "cpu_drift_median", "quiet_drift_median",
        "quiet_wall_s", "wall_wall_s", "cpu_wall_s", "quiet-again_wall_s",
        "quiet_load", "wall_load", "cpu_load", "quiet-again_load", "per_problem"]
    assert figures["wall_false_timeouts"] == 5 and figures["quiet_wall_s"] == 2544.2
    assert figures["runs"]["wall"]["verdicts"] == {"TIMEOUT": 5, "OK": 1}
    assert figures["per_problem"] == loaded_host.problem_figures(picked, runs)


def issue_size_run(cpu_limit: float) -> tuple[list[dict], dict]:
    """Seed 2's size: 12 problems, every sweep but the wall one OK."""
    ids = [f"arm.file_{i:02d}.THM_{i}" for i in range(12)]
    picked = [{"problem_id": pid, "prove_secs": 40.0 + i, "timeout_sec": 120.0} for i, pid in enumerate(ids)]

    def sweep(verdict: str, clock: float, cpu: float, limit: float) -> dict:
        return {pid: row(pid, verdict, clock + i, cpu + i, limit, 3.0) for i, pid in enumerate(ids)}

    return picked, {"quiet": (sweep("OK", 60.0, 56.0, 120.0), 1554.0, "load 2.0-5.9"),
                    "wall": (sweep("TIMEOUT", 150.0, 34.0, 150.0), 1267.0, "load 1.1-15.8"),
                    "cpu": (sweep("OK", 99.0, 67.0, cpu_limit), 1468.0, "load 8.0-11.6"),
                    "quiet-again": (sweep("OK", 60.0, 55.0, 120.0), 700.0, "load 1.5-4.0")}


# -- cpu_drift.py -----------------------------------------------------------------------------

def drift_figures(medians: dict[str, float], rounds: int, spinners: int = 6, workers: int = 2) -> dict:
    """cpu_drift.py's figures, built as its main builds them, from copies
    whose CPU seconds lie 0.01 s either side of each condition's median."""
    cpu = {name: [round(m - 0.01, 2), round(m + 0.01, 2)] * rounds * (workers // 2)
           for name, m in medians.items()}
    quiet = statistics.median(cpu["quiet"] + cpu["quiet-again"])
    ratios = {name: statistics.median(v) / quiet for name, v in cpu.items()}
    drift = statistics.median(cpu["quiet-again"]) / statistics.median(cpu["quiet"])
    return {"workers": workers, "spinners": spinners, "cpu_secs": cpu, "ratios": ratios,
            "quiet_drift": drift, "load_end": 1.2}


# Not root: no busy-fifo, quiet-nice-10 or busy-nice-N (what --rounds 4's table shows needs none).
UNPRIVILEGED = {"quiet": 2.18, "busy": 2.58, "busy-pinned": 2.56, "busy-batch": 2.53,
                "busy-long-slice": 2.58, "quiet-again": 2.15}
# As root, in the script's order of conditions (busy-nice-N from --nice-levels 5,10,20).
AS_ROOT = {"quiet": 2.42, "busy": 2.54, "busy-pinned": 2.70, "busy-batch": 2.77, "busy-long-slice": 2.70,
           "busy-fifo": 2.38, "quiet-nice-10": 2.29, "busy-nice-5": 2.57, "busy-nice-10": 2.47,
           "busy-nice-20": 2.39, "quiet-again": 2.64}


# -- end to end -------------------------------------------------------------------------------

def docs_tree(tmp_path):
    """docs/limits.md as the checkout has it, alone under a README."""
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "limits.md", tmp_path / "docs" / "limits.md")
    (tmp_path / "README.md").write_text("# toy\n")
    return tmp_path


def table_lines(root, name: str) -> list[str]:
    """The ``|`` lines of table ``name`` in docs/limits.md, header and separator left out."""
    lines = (root / "docs" / "limits.md").read_text().splitlines()
    found = next(f for f in tables.tables_in("docs/limits.md", lines) if f.name == name)
    return lines[found.start + 2:found.end]


def test_the_limits_tables_are_written_from_the_records_of_their_own_runs(tmp_path):
    root, results = docs_tree(tmp_path), tmp_path / "results"
    registry = {t.name: t for t in limits_tables()}
    units = [f"{t.name}/{r.key}" for t in registry.values() for r in t.rows]
    listed = tmp_path / "unrecorded.txt"
    listed.write_text("".join(f"{u} ran before records began\n" for u in units))
    # No record yet: every row kept as written; the page's headers, rows and
    # markers agree with the registry.
    assert tables.run(root, results, listed, tables=registry, figures={}) == []

    picked, runs = seed_1_run()
    plant(results, "loaded_host", loaded_figures(picked, runs, 1.78, 2, 1), host_factor=1.78,
          command=command("loaded_host", "--seed", "1", "--problems", "6", "--min-files", "2", "--busy", "1"))
    picked, runs = issue_size_run(175.2)
    plant(results, "loaded_host", loaded_figures(picked, runs, 1.46, 6, 2), host_factor=1.46,
          stamp="20260102T000000Z", command=command(
              "loaded_host", "--seed", "2", "--problems", "12", "--min-files", "3", "--busy", "3",
              "--check-nice", "0"))
    picked, runs = issue_size_run(173.0)
    plant(results, "loaded_host", loaded_figures(picked, runs, 1.44, 6, 2), host_factor=1.44,
          stamp="20260103T000000Z", command=command(
              "loaded_host", "--seed", "2", "--problems", "12", "--min-files", "3", "--busy", "3",
              "--check-nice", "-10"))
    # Newer, but of other runs: another seed at --busy 1, another rounds count.
    picked, runs = issue_size_run(999.0)
    plant(results, "loaded_host", loaded_figures(picked, runs, 9.99, 2, 3), stamp="20260104T000000Z",
          command=command("loaded_host", "--seed", "3", "--problems", "12", "--busy", "1"))
    plant(results, "cpu_drift", drift_figures(UNPRIVILEGED, 4), command=command("cpu_drift", "--rounds", "4"))
    plant(results, "cpu_drift", drift_figures(AS_ROOT, 3), stamp="20260102T000000Z",
          command=command("cpu_drift", "--rounds", "3"))
    plant(results, "cpu_drift", drift_figures(AS_ROOT, 2), stamp="20260105T000000Z",
          command=command("cpu_drift", "--rounds", "2"))

    tables.run(root, results, listed, write=True, tables=registry, figures={})
    assert tables.run(root, results, tmp_path / "none.txt", tables=registry, figures={}) == []
    rec = f"`{HEAD[:7]}`, load 0.4-2.1"

    assert table_lines(root, "limits-loaded-problems") == [
        f"| `{pid}` | {map_s} | 120 | {wall:.0f} | {cpu:.1f} | OK | {load:.1f} | {rec}, factor 1.78 |"
        for pid, map_s, wall, cpu, load in SEED_1]
    assert table_lines(root, "limits-loaded-problems")[0] == (
        f"| `arm.bignum_inv_p521.CORE_INV_P521_SAFE` | 55.7 | 120 | 319 | 88.4 | OK | 8.2 | {rec}, factor 1.78 |")
    assert table_lines(root, "limits-loaded-runs") == [
        f"| quiet (the server's images load inside it) | cpu, 120 s | 0.5-11.2 | 6 OK, 72-88 s CPU each | "
        f"2,544 s | {rec}, factor 1.78 |",
        "| wall (the bench's alarm rule: `--limit-clock wall --limit-slack 30`, niceness 0; not its harness), "
        f"2 spinners | wall, 150 s | 4.8-8.4 | **5 TIMEOUT, 1 OK** (84-99 s of CPU each) | 1,991 s | {rec}, "
        "factor 1.78 |",
        f"| cpu, 2 spinners | cpu, 214 s (`--host-factor auto`) | 4.7-7.9 | **6 OK**, 70-101 s CPU, 142-207 s "
        f"wall | 1,677 s | {rec}, factor 1.78 |",
        f"| quiet again | cpu, 120 s | 1.0-3.0 | 6 OK, 72-88 s CPU each | 900 s | {rec}, factor 1.78 |"]
    # --check-nice 0 and --check-nice -10: each table its own run's record.
    issue, quiet_host = table_lines(root, "limits-issue-size"), table_lines(root, "limits-quiet-host")
    assert issue[2] == (f"| cpu, 6 spinners | cpu, 175 s (`--host-factor auto`) | 8.0-11.6 | **12 OK**, "
                        f"67-78 s CPU, 99-110 s wall | 1,468 s | {rec}, factor 1.46 |")
    assert issue[1].endswith("| **12 TIMEOUT** (34-45 s of CPU each when cut) | 1,267 s | "
                             f"{rec}, factor 1.46 |")
    assert "| cpu, 173 s (`--host-factor auto`) |" in quiet_host[2] and quiet_host[2].endswith("factor 1.44 |")

    assert table_lines(root, "limits-cpu-drift") == [f"| {a} | {b} | {c} | {rec} |" for a, b, c in (
        ("quiet", "2.18 s", "1.01"),
        ("beside 6 spinning processes (`busy`)", "2.58 s", "**1.19**"),
        ("busy, each copy pinned to one core", "2.56 s", "1.18"),
        ("busy, `SCHED_BATCH`", "2.53 s", "1.17"),
        ("busy, 100 ms slices asked of EEVDF (`sched_setattr`)", "2.58 s", "1.19"),
        ("quiet again, last in each round", "2.15 s", "0.99"))]
    assert table_lines(root, "limits-cpu-drift-niceness") == [f"| {a} | {b} | {c} | {rec} |" for a, b, c in (
        ("quiet", "2.42 s", "0.96"),
        ("`busy`", "2.54 s", "1.00"),
        ("busy, pinned / `SCHED_BATCH` / 100 ms slices", "2.70 / 2.77 / 2.70 s", "1.07 / 1.09 / 1.07"),
        ("busy, `SCHED_FIFO`", "2.38 s", "0.94"),
        ("quiet, niceness -10 (group and process)", "**2.29 s**", "0.91"),
        ("busy, niceness -5 / -10 / -20", "2.57 / **2.47** / 2.39 s", "1.02 / 0.98 / 0.94"),
        ("quiet again", "2.64 s", "1.04"))]
