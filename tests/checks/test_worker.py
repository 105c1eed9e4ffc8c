"""The worker loop (runner/checks/worker.py): what it records without a check."""

from __future__ import annotations

import pytest

from runner.results.shards import ShardWriter
from runner.checks.tasks import CheckTask
from runner.checks.worker import work
from runner.prover import CheckLimits

from ..helpers import problem

pytestmark = pytest.mark.hol


def test_an_answer_that_is_not_utf8_is_an_error_naming_the_encoding(hol_session, tmp_path):
    """OCaml's parser, given the bytes, would report a syntax error that never
    says why; the bench reads answers as UTF-8."""
    p = problem(tmp_path / "corpus", "enc.latin1", "x + 0 = x", "ARITH_TAC")
    p = type(p)(**{**p.__dict__, "answer": b"(* caf\xe9 *) ARITH_TAC"})
    limits = CheckLimits(time_s=10, time_source="default", mem_bytes=2**31, expected_mem_bytes=2**20)
    rows = []
    with ShardWriter(tmp_path / "out", "w0") as writer:
        work(hol_session, iter([CheckTask(p, limits)]), writer, worker="w0", run_id="r",
             on_row=rows.append)
    (row,) = rows
    assert row.verdict == "ERROR"
    assert row.reason.startswith("answer is not UTF-8 text (byte 0xe9 at offset 6, line 1)"), row.reason
