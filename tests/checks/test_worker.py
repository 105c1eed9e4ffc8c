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


def test_a_long_check_shows_its_cpu_time_and_memory_on_the_running_board(hol_session, tmp_path,
                                                                           monkeypatch):
    """`status` reads the board, never the guard: a check that runs for hours
    must say there how much CPU time of its limit it has used so far."""
    import threading

    from runner.checks import guard
    from runner.results.running import RunningBoard, entries

    from ..helpers import spin_then_prove

    monkeypatch.setattr(guard, "PROGRESS_EVERY_S", 0.3)
    p = problem(tmp_path / "corpus", "slow.spin", "x + 0 = x", spin_then_prove(900_000_000))
    limits = CheckLimits(time_s=60, time_source="default", mem_bytes=2**31, expected_mem_bytes=2**20)
    hol_session.prepare([p])
    out = tmp_path / "out"
    board = RunningBoard(out, "w0", "w0")
    seen: list[dict] = []
    done = threading.Event()

    def watch():
        while not done.wait(0.1):
            seen.extend(e for e in entries(out) if "cpu_s" in e)

    watcher = threading.Thread(target=watch)
    watcher.start()
    rows = []
    try:
        with ShardWriter(out, "w0") as writer:
            work(hol_session, iter([CheckTask(p, limits)]), writer, worker="w0", run_id="r",
                 on_row=rows.append, board=board)
    finally:
        done.set()
        watcher.join()
    (row,) = rows
    assert row.verdict == "OK", row.reason
    assert seen, "the board never showed the check's CPU time"
    cpu = [e["cpu_s"] for e in seen]
    assert cpu == sorted(cpu) and cpu[-1] > 0.3
    assert cpu[-1] <= row.cpu_secs + 0.1
    assert all(e["problem_id"] == "slow.spin" and e["timeout_s"] == 60 and e["clock"] == "cpu"
               and e["peak_rss_mb"] > 0 for e in seen)
    assert entries(out) == []          # cleared once the check is recorded
