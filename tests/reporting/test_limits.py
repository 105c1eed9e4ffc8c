"""The report says when limits were tight (runner/reporting/limits.py, issue 31).

The story: a reader must tell a slow answer from a slow machine. The report
counts, on the sweep's own clock, the OK checks that used more than 80% of
their limit, the TIMEOUTs that came while the host's load was above its
CPUs, the checks starved past the backstop, and under a map this sweep's
proof times against the map's.
"""

from __future__ import annotations

import dataclasses
import json

from runner.checks.guard import BACKSTOP
from runner.reporting import limits
from runner.results.rows import rows_to_table

from ..helpers import row


def rows():
    return [
        # On the CPU clock: 50 s of CPU under a 60 s limit is tight, whatever its wall time.
        dataclasses.replace(row("tight"), prove_secs=80.0, prove_cpu_secs=50.0, limit_clock="cpu"),
        dataclasses.replace(row("easy"), prove_secs=50.0, prove_cpu_secs=10.0, limit_clock="cpu"),
        dataclasses.replace(row("loaded", verdict="TIMEOUT", prove_secs=None), host_load=5.0,
                            host_cpus=2),
        dataclasses.replace(row("quiet", verdict="TIMEOUT", prove_secs=None), host_load=0.5,
                            host_cpus=2),
        row("old", verdict="TIMEOUT", prove_secs=None),          # written before load was kept
        dataclasses.replace(row("starved", verdict="ERROR", reason=f"{BACKSTOP}: 900 s ...",
                                prove_secs=None), infra_retries=2),
    ]


def test_tight_limits_and_loaded_timeouts_are_counted_on_the_sweep_s_clock():
    c = limits.check(rows_to_table(rows()), {"limit_clock": "cpu", "host_factor": 2.0})
    assert [t[0] for t in c.tight] == ["tight"] and c.ok == 2
    assert (c.timeouts, c.timeouts_loaded, c.timeouts_unknown_load) == (3, 1, 1)
    assert (c.starved, c.retried) == (1, 1)
    said = limits.lines(c)
    assert said[0] == "limits counted CPU time, map limits x2.00 for this host"
    assert "1 of 2 OK checks used more than 80% of their limit (tight 50.0/60 s)" in said
    assert "3 TIMEOUTs, 1 of 2 with a recorded load while the host's load was above its CPUs" in said


def test_on_the_wall_clock_wall_times_count_and_a_loaded_timeout_is_flagged():
    c = limits.check(rows_to_table(rows()), {})          # a sweep from before the clock: wall
    # 50 s of wall time under a 60 s limit is tight too: on this clock a loaded host costs.
    assert c.clock == "wall" and sorted(t[0] for t in c.tight) == ["easy", "tight"]
    assert any("the host, not the answer, may have spent the time" in line for line in limits.lines(c))


def test_under_a_map_proof_times_are_set_against_the_map_s(tmp_path):
    path = tmp_path / "map.json"
    path.write_text(json.dumps([{"problem_id": "tight", "prove_secs": 20.0, "timeout_sec": 120},
                                {"problem_id": "easy", "prove_secs": 4.0, "timeout_sec": 120},
                                {"problem_id": "tiny", "prove_secs": 0.01, "timeout_sec": 120}]))
    manifest = {"limit_clock": "cpu", "config": {"timeout_map": str(path)}}
    c = limits.check(rows_to_table(rows()), manifest)
    assert (c.map_ratio, c.map_ratio_n) == (2.5, 2)       # 50/20 and 10/4
    assert limits.check(rows_to_table(rows()), {"config": {"timeout_map": "/gone.json"}}).map_ratio is None
