"""Compute lost to reruns (runner/results/lost.py): a check cut short
without a verdict runs again from its start, and its cost is kept by cause.
The runner-death paths are tested for real in tests/test_stopping.py and
tests/checks/test_infra_deaths.py; here, what the next runner makes of a
board left by one killed without a word."""

from __future__ import annotations

from runner.results import lost
from runner.results.running import RunningBoard, entries, retire_boards

from ..helpers import left_by_a_dead_runner


def test_a_board_left_by_a_killed_runner_becomes_a_loss_with_its_last_cpu_time(tmp_path):
    out = tmp_path / "out"
    heavy = RunningBoard(out, "run1-w0", "host/1/w0")
    heavy.start("arm.heavy.H", 0, 1639.0)
    heavy.started()
    heavy.progress(1200.0, 900 << 20, "cpu")
    waiting = RunningBoard(out, "run1-w1", "host/1/w1")
    waiting.start("arm.light.L", 0, 120.0)          # still waiting for its image: nothing lost
    other = RunningBoard(out, "run2-w0", "host/2/w0")
    other.start("arm.other.O", 0, 120.0)
    other.started()
    live = RunningBoard(out, "run3-w0", "host/3/w0")      # this process: alive, never retired
    live.start("arm.live.A", 0, 120.0)
    live.started()
    for board in (heavy, waiting, other):
        left_by_a_dead_runner(board)
    # A requeued Slurm task retires only its own earlier incarnation's entries.
    (loss,) = retire_boards(out, "run1-", lost.REQUEUED)
    assert (loss.problem_id, loss.cause, loss.cpu_s) == ("arm.heavy.H", lost.REQUEUED, 1200.0)
    assert [e["problem_id"] for e in entries(out)] == ["arm.other.O", "arm.live.A"]
    (rest,) = retire_boards(out)
    assert rest.cause == lost.SILENT and rest.cpu_s == 0.0
    # A Slurm task or Dask worker still running (a driver restarted beside
    # it) keeps its entry: it is no loss.
    assert [e["problem_id"] for e in entries(out)] == ["arm.live.A"]
    costs = lost.by_cause(lost.read(out))
    assert list(costs) == [lost.REQUEUED, lost.SILENT]           # the costliest first
    assert costs[lost.REQUEUED] == {"checks": 1, "cpu_core_hours": 1200.0 / 3600,
                                    "wall_hours": costs[lost.REQUEUED]["wall_hours"]}


def test_a_stop_is_named_by_the_signal_that_caused_it():
    from runner.cli import HungUp, Terminated

    assert lost.stop_cause(KeyboardInterrupt()) == "Ctrl-C"
    assert lost.stop_cause(Terminated()) == "SIGTERM"
    assert lost.stop_cause(HungUp()) == "SIGHUP"
    assert lost.stop_cause(SystemExit()).startswith("Slurm preemption")
