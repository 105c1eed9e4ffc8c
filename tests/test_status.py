"""`proofbatch status` reads a running sweep from its directory alone: done
and total, counts per verdict, and the check each worker is running with
its elapsed time against its limit."""

from __future__ import annotations

import json
import shutil
import threading
import time

import pytest

from runner import cli
from runner.status import read_status

from .helpers import DEMO, demo_config, sweep_with
from .helpers import SPIN

pytestmark = pytest.mark.hol

LIGHT = ["arith.add_comm", "lists.append_nil", "logic.drinker"]


def test_status_of_a_running_sweep(hol_session, tmp_path, capsys):
    corpus = tmp_path / "corpus"
    for pid in LIGHT:
        shutil.copytree(DEMO / pid, corpus / pid)
        (corpus / pid / "category.txt").write_text("light\n")
    spin = corpus / "slow.spin"
    spin.mkdir()
    (spin / "setup.ml").write_text("")
    (spin / "query.txt").write_text("`F`\n")
    (spin / "answer.txt").write_text(SPIN + "\n")
    (spin / "category.txt").write_text("slow\n")
    (tmp_path / "timeouts.json").write_text(json.dumps({"light": 30, "slow": 5}))
    out = tmp_path / "out"
    config = demo_config(out, corpus=corpus, category_timeouts=tmp_path / "timeouts.json")
    sweep = threading.Thread(target=sweep_with, args=(hol_session, config))
    sweep.start()
    try:
        deadline, status = time.monotonic() + 60, None
        while time.monotonic() < deadline:
            if (out / "sweep.json").exists():
                status = read_status(out)
                if any(r.problem_id == "slow.spin" for r in status.running) and status.done == 3:
                    break
            time.sleep(0.2)
        assert status is not None and status.total == 4
        spinning = next(r for r in status.running if r.problem_id == "slow.spin")
        assert 0 <= spinning.elapsed_s < 5 + 3 and spinning.timeout_s == 5
        assert spinning.alive is True
        assert status.counts["OK"] == 3
        assert cli.main(["status", str(out)]) == 0
        printed = " ".join(capsys.readouterr().out.split())
        assert "3 of 4 checks done" in printed and "slow.spin" in printed
    finally:
        sweep.join()
    final = read_status(out)
    assert final.done == 4 and final.running == []
    assert final.counts["TIMEOUT"] == 1
