"""A profile's summary.json is checked before a map or a plan is derived from
it (issue 33, point 6); what `proofbatch profile` and write_profile write
passes, CPU-time lists included. The refusals through the command line are
in tests/cli/test_bad_inputs.py."""

from __future__ import annotations

import json

import pytest

from runner.errors import InputError
from runner.maps.profile_data import SUMMARY_FORMAT, ProblemRuns, load_profile, write_profile
from runner.maps.summary_checks import check_summary

from ..helpers import ROOT


def entry(**over) -> dict:
    base = {"problem_id": "p", "category": "c", "prove_secs": [0.5, 0.25], "wall_secs": [0.6, 0.3],
            "peak_rss_mb": [320.0], "image_key": "k"}
    return {**base, **over}


def summary(*entries, defects=()) -> dict:
    return {"format": SUMMARY_FORMAT, "problems": list(entries), "defects": list(defects)}


def test_the_shipped_profile_and_a_written_one_pass(tmp_path):
    shipped = ROOT / "profiles" / "hol_light_demo"
    check_summary(json.loads((shipped / "summary.json").read_text()), "s", SUMMARY_FORMAT)
    assert load_profile(shipped).runs
    written = write_profile(tmp_path / "p", [ProblemRuns("a", "c", (1.0, 0.0), (10.0,), (),
                                                         "k", (0.9, 0.0))], {"corpus": "x"})
    assert [r.prove_cpu_secs for r in load_profile(written).runs] == [(0.9, 0.0)]


def test_cpu_time_lists_are_optional_and_cpu_secs_may_hold_null():
    check_summary(summary(entry(prove_cpu_secs=[0.4, 0.2], cpu_secs=[0.5, None]),
                          entry(problem_id="q", prove_cpu_secs=[], cpu_secs=None)), "s", SUMMARY_FORMAT)


@pytest.mark.parametrize("bad, complaint", [
    (entry(prove_cpu_secs=[0.4, None]), "entry 0 (p): prove_cpu_secs[1] is None"),
    (entry(cpu_secs=[float("nan")]), "entry 0 (p): cpu_secs[0] is nan"),
    (entry(cpu_secs=3.0), "entry 0 (p): cpu_secs is 3.0, not a list"),
    (entry(prove_secs=[True]), "entry 0 (p): prove_secs[0] is True"),
    (entry(category=None), "entry 0 (p): category None is not text"),
    (entry(problem_id=""), "entry 0: problem_id '' is not a problem id"),
])
def test_each_field_is_named(bad, complaint):
    with pytest.raises(InputError) as refused:
        check_summary(summary(bad), "s.json", SUMMARY_FORMAT)
    assert refused.value.where == "s.json"
    assert refused.value.problem.startswith(complaint), refused.value.problem


def test_another_format_is_left_to_the_format_check(tmp_path):
    check_summary({"format": "other/9", "problems": "whatever"}, "s", SUMMARY_FORMAT)
    profile = write_profile(tmp_path / "p", [ProblemRuns("a", "c", (1.0,))], {})
    data = json.loads((profile / "summary.json").read_text())
    data["format"] = "other/9"
    (profile / "summary.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="unknown profile format"):
        load_profile(profile)
