"""`proofbatch run` exits 1 when every context of the sweep failed to load
(the prover setup failed, not the answers), with one line naming how many
and the common cause; the rows stay recorded (issue 23).

One real bytecode HOL Light boot, in the CLI's own process.
"""

from __future__ import annotations

import csv
import subprocess

import pytest

from ..helpers import NO_BOX, PROOFBATCH, make_corpus

pytestmark = pytest.mark.hol


def test_every_context_failing_to_load_exits_1_naming_the_cause(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", {
        "boom.first": ('failwith "boom";;\n', "`T`", "ACCEPT_TAC TRUTH"),
        "boom.second": ('let pb_x = 1;;\nfailwith "boom";;\n', "`T`", "ACCEPT_TAC TRUTH"),
    })
    out = tmp_path / "out"
    proc = subprocess.run([str(PROOFBATCH), "run", str(corpus), "--out", str(out), *NO_BOX,
                           "--default-timeout", "30"], capture_output=True, text=True, timeout=1200,
                          cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("proofbatch: every context failed to load (2 of 2): setup: "), last
    assert "boom" in last
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["problem_id"] for r in rows) == ["boom.first", "boom.second"]
    assert {r["verdict"] for r in rows} == {"ERROR"}
