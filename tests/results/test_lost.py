"""Compute lost to reruns (runner/results/lost.py): a check cut short
without a verdict runs again from its start, and its cost is kept by cause.
The runner-death paths are tested for real in tests/test_stopping.py and
tests/checks/test_infra_deaths.py; here, what the next runner makes of a
board left by one killed without a word."""

from __future__ import annotations

import time

from runner.cli import Terminated
from runner.results import lost
from runner.results.running import RunningBoard, entries, retire_boards

from ..helpers import left_by_a_dead_runner
from ..test_registry import toy  # noqa: F401  (the toy prover registered, a fixture)


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


def test_a_check_whose_session_raises_under_the_stop_is_still_a_loss(tmp_path, toy):  # noqa: F811
    """A stop closes the session under its checks. HOL Light's ForkSession
    then raises for a check in a context image (its base image is dead:
    ProverError) instead of returning; that check was cut short all the
    same, and its cost is a loss with the stop's cause. A check still
    waiting for its image lost nothing of its own. The session here is the
    toy prover's (a real process per check), raising as ForkSession does."""
    import threading

    from runner import events
    from runner.checks.tasks import CheckTask
    from runner.checks.worker import Stop, work
    from runner.errors import ProverError
    from runner.prover import CheckLimits
    from runner.results.shards import ShardWriter

    from ..test_registry import toy_corpus
    from ..toy_prover import ToyBackend, load

    class DyingWithItsBase(type(ToyBackend(tmp_path).start(tmp_path / "probe"))):
        def check(self, problem, limits):
            events.say("forked")                    # the check runs in its image from here
            result = super().check(problem, limits)
            if self._closed:
                raise ProverError("the base HOL Light image died; start the sweep again to resume")
            return result

    corpus = toy_corpus(tmp_path / "corpus", {"slow.sum": ("sum(range(10**12))", "0", None)})
    (p,) = load(corpus)
    session = DyingWithItsBase(ToyBackend(corpus), tmp_path / "work")
    out, stop = tmp_path / "out", Stop()
    board = RunningBoard(out, "run1-w0", "host/1/w0")
    limits = CheckLimits(time_s=600, time_source="default", mem_bytes=2**31, expected_mem_bytes=2**20)
    raised: list[BaseException] = []

    def worker():
        try:
            with ShardWriter(out, "run1-w0") as writer:
                work(session, iter([CheckTask(p, limits)]), writer, worker="host/1/w0", run_id="run1",
                     stop=stop, board=board)
        except ProverError as exc:
            raised.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    deadline = time.monotonic() + 60
    while not any(e.get("started") for e in entries(out)) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    stop.stop(lost.stop_cause(Terminated()))
    session.close()
    thread.join(timeout=60)
    assert raised, "the session did not raise under the stop: this test tests nothing"
    (loss,) = lost.read(out)
    assert (loss.problem_id, loss.cause) == ("slow.sum", "SIGTERM") and loss.wall_s >= 0.5
    # A board entry that never started (waiting for its image) is no loss.
    waiting = RunningBoard(out, "run1-w1", "host/1/w1")
    waiting.start("arm.light.L", 0, 120.0)
    waiting.lost("SIGTERM")
    assert len(lost.read(out)) == 1
