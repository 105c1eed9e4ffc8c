"""Issue 46, defect 6: a proof time longer than any limit it can have been
measured under (``prove_secs: 1e308``, or 1e9) was accepted where
``timeout_sec: 1e308`` was refused. simulate then raised OverflowError,
status printed a 309-digit ETA and report "+inf%". Now maps and profiles
refuse it where they are read, in one line naming the file and the entry,
so run (and with it status and report), simulate and timeout-map never
see it; and simulate's durations print whatever a recorded plan sums to."""

from __future__ import annotations

import json
import math

import pytest

from runner.commands.simulate_output import _duration
from runner.maps.timeouts import MAX_PROVE_S, read_map

from ..helpers import ADD, assert_one_line_error
from .test_bad_files import _set_first, no_dispatch, profile, spoil_summary  # noqa: F401 (fixtures)
from .test_bad_inputs import cli_result

ABSURD = [1e9, 1e308]


def bench_map(path, prove_secs, pid: str = ADD):
    path.write_text(json.dumps([{"problem_id": pid, "prove_secs": prove_secs, "timeout_sec": 120}]))
    return path


@pytest.mark.parametrize("prove_secs", ABSURD)
def test_run_refuses_a_map_with_an_absurd_prove_secs(run, corpus, hol, tmp_path, prove_secs):
    """run planned with it: its ETA (status) and the report's proof-time lines read it."""
    timeout_map = bench_map(tmp_path / "timeout-map.json", prove_secs)
    result = run(corpus, "--timeout-map", timeout_map, "--map-mode", "native", "--hol-light", hol)
    assert_one_line_error(result, timeout_map, f"entry 0 ({ADD}): prove_secs {prove_secs!r} is more "
                          "than a week", "; write the measured proof time in seconds")


@pytest.mark.parametrize("prove_secs", ABSURD)
def test_simulate_refuses_an_absurd_prove_secs_instead_of_overflowing(capsys, tmp_path, prove_secs):
    timeout_map = bench_map(tmp_path / "timeout-map.json", prove_secs)
    result = cli_result(capsys, "simulate", "--timeout-map", timeout_map, "--workers", "1")
    assert_one_line_error(result, timeout_map, f"entry 0 ({ADD}): prove_secs", "more than a week")


@pytest.mark.parametrize("field", ["prove_secs", "prove_cpu_secs"])
@pytest.mark.parametrize("command", ["timeout-map", "simulate"])
def test_a_profile_with_an_absurd_proof_time_is_refused(capsys, tmp_path, no_dispatch, profile,
                                                        field, command):
    def how(summary):
        entry = summary["problems"][0]
        entry.setdefault(field, list(entry["prove_secs"]))
        _set_first(field, 1e9)(summary)

    path = spoil_summary(profile, how)
    out_map = tmp_path / "map.json"
    argv = (["timeout-map", profile, "--out", out_map] if command == "timeout-map"
            else ["simulate", "--profile", profile, "--workers", "4"])
    assert_one_line_error(cli_result(capsys, *argv), path,
                          f"entry 0 (arith.add_comm): {field}[0] is 1000000000.0, more than a week")
    assert not out_map.exists()


def test_a_week_is_still_a_proof_time_and_prints(capsys, tmp_path):
    """The bound is the longest limit a map may hold, not below it; on a
    host 1000 times slower its makespan still prints."""
    assert read_map(bench_map(tmp_path / "m.json", MAX_PROVE_S))[ADD].prove_secs == MAX_PROVE_S
    argv = ["simulate", "--timeout-map", tmp_path / "m.json", "--map-mode", "native",
            "--workers", "1", "--host-factor", "1000"]
    code, out, err = cli_result(capsys, *argv)
    assert (code, err) == (0, []) and "makespan" in out
    code, out, err = cli_result(capsys, *argv, "--json")
    assert json.loads(out)["makespan_s"] > 1000 * MAX_PROVE_S       # and the boot


def test_simulate_durations_print_whatever_a_plan_sums_to():
    """_duration raised OverflowError on an infinite makespan."""
    assert _duration(math.inf) == "infinite" and _duration(math.nan) == "unknown"
    assert _duration(1e308) == "1e+308 s" and len(_duration(1e300)) < 20
    assert _duration(7200) == "2h00m (7,200 s)" and _duration(30) == "30.0 s"
