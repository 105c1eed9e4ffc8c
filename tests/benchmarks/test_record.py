"""benchmarks/record.py: every benchmark run leaves one JSON record, and its
``pass`` holds only when every goal it printed was met."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import record  # noqa: E402


def test_a_record_keeps_the_run_and_gates_on_every_goal(tmp_path):
    answers = tmp_path / "answers.csv"
    answers.write_text("id,answer\na,ARITH_TAC\n")
    rec = record.Record("demo", ["demo.py", "--seed", "1"])
    rec.input("ids", ["a"])
    rec.input("answers", path=answers)
    rec.niceness("check", -10)
    rec.set("host_factor", 1.44)
    rec.figures({"ratio": 1.2})
    rec.reused("bench flow", "benchmarks/results/x/old.json", seed=1)
    path = rec.finish([record.Goal("ratio", 1.2, "<=", 1.05), record.Goal("ok", 3, "==", 3)],
                      directory=tmp_path)
    data = json.loads(path.read_text())
    assert path.parent == tmp_path / "demo"
    assert data["command"] == ["demo.py", "--seed", "1"]
    assert len(data["commit"]) == 40 and isinstance(data["dirty"], bool)
    assert data["host"]["cpus"] >= 1 and data["host"]["mem_bytes"] > 0
    assert set(data["load"]) == {"before", "during", "after"}
    assert data["inputs"]["answers"]["sha256"] == record.digest(answers)
    assert data["niceness"]["check"] == -10 and data["host_factor"] == 1.44
    assert data["reused"][0]["record"].endswith("old.json")
    # One goal missed: the run does not pass, whatever the script thought.
    assert [g["met"] for g in data["goals"]] == [False, True]
    assert data["pass"] is False
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_goal_with_no_value_is_not_met():
    assert not record.Goal("ratio", None, "<=", 1.05).met
    with pytest.raises(ValueError):
        record.Goal("ratio", 1.0, "~", 1.0)


def test_matching_reuses_only_a_clean_record_of_the_same_keys(tmp_path):
    for seed, dirty in ((1, False), (2, True)):
        rec = record.Record("flow", ["flow.py"])
        rec.input("seed", seed)
        rec.finish([], directory=tmp_path)
        data = json.loads(rec.path.read_text())
        data["dirty"] = dirty       # a record of a dirty tree is never reused
        rec.path.write_text(json.dumps(data))
    assert record.matching("flow", {"inputs": {"seed": 1}}, tmp_path)["inputs"]["seed"] == 1
    assert record.matching("flow", {"inputs": {"seed": 2}}, tmp_path) is None
    assert record.matching("flow", {"inputs": {"seed": 1}, "commit": "0" * 40}, tmp_path) is None


def test_emit_writes_the_record_and_fails_on_a_missed_goal(tmp_path):
    script = tmp_path / "tiny.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
        "import common\n"
        "from common import Goal, arg_parser, emit\n"
        "args = arg_parser('x').parse_args()\n"
        "sys.exit(emit(args, 'tiny', {'ratio': 0.9}, ['ratio 0.9'], 'ratio <= 0.85', True,\n"
        "             [Goal('ratio', 0.9, '<=', 0.85)]))\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env={"PROOFBATCH_RECORDS": str(tmp_path / "results"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 1, r.stderr
    assert "MISS: ratio <= 0.85" in r.stdout and "goal <= 0.85: MISSED" in r.stdout
    [path] = (tmp_path / "results" / "tiny").glob("*.json")
    data = json.loads(path.read_text())
    assert data["figures"] == {"ratio": 0.9} and data["pass"] is False
