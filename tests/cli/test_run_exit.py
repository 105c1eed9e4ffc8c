"""`proofbatch run` exits 1 when every context of the sweep failed to load
(the prover setup failed, not the answers), with one line naming how many
and the common cause; the rows stay recorded (issue 23).

The CLI runs in this process, on the shared bytecode session (tests share
loaded images): only the executor's session is handed over, as
`run --server` hands over a served one.
"""

from __future__ import annotations

import csv

import cluster
from cluster.local import LocalExecutor
from runner import cli

from ..helpers import NO_BOX, make_corpus


def test_every_context_failing_to_load_exits_1_naming_the_cause(tmp_path, hol_session, monkeypatch,
                                                                capsys):
    corpus = make_corpus(tmp_path / "corpus", {
        "boom.first": ('failwith "boom";;\n', "`T`", "ACCEPT_TAC TRUTH"),
        "boom.second": ('let pb_x = 1;;\nfailwith "boom";;\n', "`T`", "ACCEPT_TAC TRUTH"),
    })
    out = tmp_path / "out"
    monkeypatch.setattr(cluster, "make_executor",
                        lambda args, workers: LocalExecutor(workers=workers, session=hol_session))
    code = cli.main(["run", str(corpus), "--out", str(out), *NO_BOX, "--default-timeout", "30"])
    err = capsys.readouterr().err
    assert code == 1, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("proofbatch: every context failed to load (2 of 2): setup: "), last
    assert "boom" in last
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["problem_id"] for r in rows) == ["boom.first", "boom.second"]
    assert {r["verdict"] for r in rows} == {"ERROR"}
