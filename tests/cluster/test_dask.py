"""Sweeps on real Dask: a running scheduler (`--cluster dask`) and workers
started as Slurm jobs by dask-jobqueue (`--cluster dask-slurm`).

The sweeps here run HOL Light natively (`--mode native`), as a cluster user
sweeping a real development does: a Dask worker's cold start then takes about
14 s instead of a bytecode toplevel's 70-90 s of CPU (docs/native.md). The
worker keeps its session afterwards, so a second sweep on the same scheduler
loads nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from distributed import Client

from cluster.dask import PLUGIN, DaskExecutor, DaskSlurmExecutor, DaskSlurmOptions
from runner.checks import attempts
from runner.reporting.status import read_status
from runner.sweep import prepare, run_sweep

from ..helpers import DEMO, demo_config, expected_verdicts
from ..helpers import attempts_config, kept_by_early_stop
from ..helpers import expected as expected_attempts
from ..helpers import SPIN
from .dask_cluster import scheduler_and_worker

pytestmark = pytest.mark.hol

# What `dask-slurm` sweeps: a verdict of each kind from light contexts (no
# heavy proof, no words library), so that its Slurm-started worker, which
# pays its own HOL Light load, costs little more than that load. The whole
# corpus runs on `dask`.
DASK_SLURM_ONLY = ("arith.add_comm", "arith.false_claim", "fault.cheat_tac", "fault.forbidden_sys",
                   "fault.loop_alloc", "fault.memout", "lists.append_nil", "logic.drinker",
                   "sets.union_comm")


def expected_on(name: str) -> dict[str, str]:
    wanted = expected_verdicts()
    if name == "dask-slurm":
        wanted = {p: v for p, v in wanted.items() if p in DASK_SLURM_ONLY}
    return wanted


# What every sweep here runs in. The native build is the test session's
# (the native_build fixture), found through PROOFBATCH_CACHE, which the
# worker inherits from this process.
NATIVE = {"mode": "native"}


@pytest.fixture(scope="module")
def scheduler(native_build, tmp_path_factory):
    """A Dask scheduler and one worker with two threads, as a user runs them."""
    # No retry of a task whose worker died (Dask's default is 3): one kill
    # then reaches the driver as KilledWorker (the last test here).
    env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
    with scheduler_and_worker(tmp_path_factory.mktemp("dask"), memory="8GiB", env=env) as address:
        yield address


@pytest.fixture(scope="module")
def dask_sweeps(request, scheduler, tmp_path_factory) -> dict:
    """The example corpus on `dask` (the running scheduler above), then on
    `dask-slurm` (a worker started as a Slurm job); each pays one HOL Light
    load. Not at once: two Dask clients in one process, one closing its
    cluster while the other waits in as_completed, left the other waiting
    forever (distributed 2026.8)."""
    runs = {"dask": DaskExecutor(scheduler)}
    try:
        request.getfixturevalue("slurm_cluster")
        runs["dask-slurm"] = DaskSlurmExecutor(DaskSlurmOptions(jobs=1, cores=2, interface="lo"))
    except pytest.skip.Exception as exc:
        runs["dask-slurm"] = exc           # its test skips with the same reason
    results: dict = {}
    outs = {name: tmp_path_factory.mktemp(name) / "out" for name in runs}

    def sweep(name, executor):
        try:
            only = DASK_SLURM_ONLY if name == "dask-slurm" else None
            results[name] = run_sweep(prepare(demo_config(outs[name], only=only, **NATIVE)), executor)
        except BaseException as exc:       # re-raised by the test that reads it
            results[name] = exc

    statuses: dict = {name: [] for name in runs}
    for name, executor in runs.items():
        if isinstance(executor, BaseException):
            continue
        thread = threading.Thread(target=sweep, args=(name, executor))
        thread.start()
        # Meanwhile, what `proofbatch status` shows of the sweep.
        while thread.is_alive():
            if (outs[name] / "sweep.json").exists():
                statuses[name].append(read_status(outs[name]))
            time.sleep(1)
        thread.join()
    return {name: results.get(name, runs[name]) for name in runs} | {"statuses": statuses}


@pytest.fixture(scope="module")
def dask_demo(dask_sweeps):
    return outcome(dask_sweeps["dask"])


def outcome(result):
    if isinstance(result, pytest.skip.Exception):
        pytest.skip(str(result))
    if isinstance(result, BaseException):
        raise result
    return result


def verdicts(summary) -> dict[str, str]:
    return {r["problem_id"]: r["verdict"] for r in summary.table.to_pylist()}


def test_the_example_corpus_gives_the_same_verdicts_on_dask_as_locally(dask_demo, demo_rows):
    assert verdicts(dask_demo) == expected_verdicts()
    assert verdicts(dask_demo) == {p: r["verdict"] for p, r in demo_rows.items()}
    rows = [r for r in dask_demo.table.to_pylist() if r["exit_status"] != "not run"]
    assert {r["worker"].split("/")[0] for r in rows} == {"w0"}
    assert {r["mode"] for r in rows} == {"native"}


def test_status_shows_dask_workers_while_the_sweeps_run(dask_sweeps):
    for name in ("dask", "dask-slurm"):
        outcome(dask_sweeps[name])
        seen = dask_sweeps["statuses"][name]
        running = [r for s in seen for r in s.running]
        assert running, f"{name}: no worker showed a running check on the board"
        assert {s.total for s in seen} == {len(expected_on(name))}
        assert max(s.done for s in seen) > min(s.done for s in seen)


def test_the_heaviest_checks_of_the_plan_start_first(dask_demo):
    """The worker has two threads: the two checks it starts first are the
    plan's first two (runner/planning/planner.py puts the heaviest first)."""
    plan = json.loads((dask_demo.out / "plan.json").read_text())
    planned = [c["problem_id"] for c in sorted(plan["checks"], key=lambda c: c["rank"])]
    started = [r["problem_id"] for r in sorted(dask_demo.table.to_pylist(),
                                               key=lambda r: r["started_at"])]
    assert set(started[:2]) == set(planned[:2]), (started[:6], planned[:6])


def test_a_second_sweep_reuses_the_images_the_worker_holds(scheduler, dask_demo, tmp_path):
    def builds(dask_worker):
        plugin = dask_worker.plugins[PLUGIN]
        return sum(len(s.image_builds) for s in plugin.sessions.values())

    with Client(scheduler) as client:
        before = client.run(builds)
        started = time.monotonic()
        again = run_sweep(prepare(demo_config(tmp_path / "out", only=("arith.add_comm", "logic.drinker"),
                                                 **NATIVE)),
                          DaskExecutor(scheduler))
        elapsed = time.monotonic() - started
        after = client.run(builds)
    assert again.counts == {"OK": 2}
    assert after == before, "the worker built an image it already held"
    # A native cold start takes about 14 s (docs/native.md); this took 2 s here.
    assert elapsed < 10, f"{elapsed:.0f} s: as long as starting HOL Light natively"


def test_attempts_are_drained_per_problem_on_dask_as_locally(scheduler, dask_demo, tmp_path):
    """pass@k on Dask: each problem is one task, so one worker thread drains
    its attempts in order from one loaded image, a repeated answer reuses
    its verdict, and early stop skips what it skips on the local executor."""
    summary = run_sweep(prepare(attempts_config(tmp_path / "out", stop_on_first_ok=True, **NATIVE)),
                        DaskExecutor(scheduler))
    rows = {(r["problem_id"], r["attempt"]): r for r in summary.table.to_pylist()}
    kept = kept_by_early_stop()
    assert {key: (r["verdict"], r["dedup_of"]) for key, r in rows.items()} == kept
    assert any(dedup is not None for _, dedup in kept.values())
    assert sorted(attempts.read_skipped(summary.out)) == sorted(set(expected_attempts()) - set(kept))
    for pid in {pid for pid, _ in rows}:
        run = [r for (p, _), r in sorted(rows.items()) if p == pid]
        assert len({r["worker"] for r in run}) == 1, f"{pid}'s attempts ran on two threads"
        assert [r["started_at"] for r in run] == sorted(r["started_at"] for r in run)
        assert len({r["image_key"] for r in run if r["exit_status"] != "not run"}) == 1


@pytest.mark.slurm
def test_the_example_corpus_gives_the_same_verdicts_on_dask_slurm(dask_sweeps, demo_rows):
    summary = outcome(dask_sweeps["dask-slurm"])
    assert verdicts(summary) == expected_on("dask-slurm")
    assert verdicts(summary) == {p: r["verdict"] for p, r in demo_rows.items() if p in DASK_SLURM_ONLY}
    assert {r["mode"] for r in summary.table.to_pylist() if r["exit_status"] != "not run"} == {"native"}
    assert set(expected_on("dask-slurm").values()) == {"OK", "FAIL", "CHEATING", "ERROR", "TIMEOUT",
                                                       "MEMOUT"}
    # The worker ran as a Slurm job, and its job is gone after the sweep.
    logs = list((summary.out / "dask-slurm" / "logs").glob("*.err"))
    assert logs, "dask-jobqueue wrote no Slurm job log"
    squeue = subprocess.run(["squeue", "-h", "-n", "proofbatch-dask", "-o", "%i %T"],
                            capture_output=True, text=True).stdout
    assert "RUNNING" not in squeue


def test_dask_without_a_scheduler_address_is_bad_input(tmp_path, capsys):
    from runner import cli

    code = cli.main(["run", str(DEMO), "--out", str(tmp_path / "out"), "--cluster", "dask"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--scheduler-address" in err[0] and "tcp://" in err[0]
    assert not (tmp_path / "out").exists(), "bad input must write nothing"


def test_a_problem_whose_worker_dies_is_recorded_as_error_not_lost(scheduler, dask_demo, tmp_path):
    """The worker process is killed (a node lost) while it drains a problem's
    attempts: the driver records each attempt left as ERROR with the reason,
    and the sweep ends. Runs last: the nanny restarts the worker empty."""
    corpus, answers = tmp_path / "corpus", tmp_path / "answers"
    (corpus / "slow.spin").mkdir(parents=True)
    (corpus / "slow.spin" / "setup.ml").write_text("")
    (corpus / "slow.spin" / "query.txt").write_text("`F`\n")
    (answers / "slow.spin").mkdir(parents=True)
    (answers / "slow.spin" / "answers.jsonl").write_text(json.dumps(SPIN) + "\n" + '"ARITH_TAC"\n')
    out = tmp_path / "out"
    prepared = prepare(demo_config(out, corpus=corpus, answers=answers, category_timeouts=None, **NATIVE,
                                   default_timeout=120.0))
    result: dict = {}

    def sweep():
        try:
            result["summary"] = run_sweep(prepared, DaskExecutor(scheduler))
        except BaseException as exc:      # re-raised below
            result["error"] = exc

    def spinning() -> bool:    # the worker's entry on the running board
        return (out / "running").is_dir() and any((out / "running").glob("*.json"))

    thread = threading.Thread(target=sweep)
    thread.start()
    deadline = time.monotonic() + 300
    while not spinning():
        assert time.monotonic() < deadline and thread.is_alive(), "the spin never started"
        time.sleep(0.2)
    with Client(scheduler) as client:
        pids = client.run(os.getpid)
    for pid in pids.values():
        os.kill(pid, signal.SIGKILL)
    thread.join(timeout=300)
    assert not thread.is_alive(), "the driver waits forever for a dead worker"
    # The nanny starts a new worker; a nanny stopped halfway through that
    # takes 30 s to close, so let the new worker come up first.
    with Client(scheduler) as client:
        client.wait_for_workers(1, timeout=120)
    if "error" in result:
        raise result["error"]
    rows = {r["attempt"]: r for r in result["summary"].table.to_pylist()}
    assert sorted(rows) == [0, 1]
    for row in rows.values():
        assert row["verdict"] == "ERROR" and "Dask workers died" in row["reason"], row
        assert row["worker"] == "dask-driver"


# -- leftovers count only rows of the answers as they are (issue 24) ------------------


class _Dropping:
    """A worker's shard stream that loses every row: as if its worker died
    after returning them and before its flush interval published them."""

    def add(self, row) -> None:
        pass

    def close(self) -> None:
        pass


def test_leftovers_of_a_changed_answer_are_recorded_not_dropped(tmp_path, monkeypatch):
    """A worker returns the rows of a resume but never publishes them: the
    driver records them (runner/results/done.py's rule, as local and Slurm). Before,
    it dropped each row whose key had any row on disk, whatever answer that
    row checked, so a changed answer kept its old verdict and every resume
    checked it again. A real Dask LocalCluster; the stand-in Isabelle checks."""
    from distributed import LocalCluster

    from cluster import dask as dask_executor
    from runner.results import shards
    from runner.sweep import SweepConfig

    from ..test_sweep_dir import KEEP, STANDIN, answers_csv, raw_rows, small_corpus

    monkeypatch.setenv("STANDIN_HEAPS", str(tmp_path / "heaps"))
    monkeypatch.setenv("ISABELLE_HOME", str(STANDIN))
    corpus, out = small_corpus(tmp_path), tmp_path / "out"
    answers = answers_csv(tmp_path / "a.csv", {k: "by simp" for k in KEEP})

    def on_dask(**kw):
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                               dashboard_address=":0")
        client = Client(cluster)

        def close():
            client.close()
            cluster.close()
        config = SweepConfig(corpus=corpus, out=out, isabelle=STANDIN, answers=answers, **kw)
        return run_sweep(prepare(config), DaskExecutor(client_factory=lambda: (client, close)))

    first = on_dask()
    assert {r["problem_id"]: r["verdict"] for r in first.table.to_pylist()} == {k: "OK" for k in KEEP}

    answers_csv(answers, {"arith.add_comm": "by (standin_fail)", "lists.rev_rev": "by simp"})
    monkeypatch.setattr(dask_executor.ProverPlugin, "writer", lambda self, out, run_id: _Dropping())
    again = on_dask()
    assert again.ran_now == 1
    current = {r["problem_id"]: r for r in again.table.to_pylist()}
    assert current["arith.add_comm"]["verdict"] == "FAIL", current["arith.add_comm"]
    assert current["arith.add_comm"]["worker"] != "dask-driver"     # the row the worker returned
    # Published by the driver; the verdict of the answer it replaced stays, as history.
    history = sorted(r["verdict"] for r in raw_rows(out) if r["problem_id"] == "arith.add_comm")
    assert history == ["FAIL", "OK"], history
    assert list((out / "shards").glob("*-dask-driver*.parquet"))
    # Recorded: a third resume checks nothing.
    monkeypatch.undo()
    monkeypatch.setenv("STANDIN_HEAPS", str(tmp_path / "heaps"))
    monkeypatch.setenv("ISABELLE_HOME", str(STANDIN))
    third = on_dask()
    assert (third.ran_now, third.resumed) == (0, 2)
    assert shards.scan(out, repair=False).done[("arith.add_comm", 0)]["verdict"] == "FAIL"


def test_importing_the_dask_executor_leaves_ctrl_c_a_keyboard_interrupt():
    # dask_jobqueue sets SIGINT to `sys.exit()` when imported; a sweep's
    # Ctrl-C must still raise KeyboardInterrupt, which stops its children.
    # Python's own handler first: a child of a background job inherits
    # SIGINT ignored, and Python then installs none (CI started with `&`).
    code = ("import signal\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "import cluster.dask\n"
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
            "try:\n    signal.raise_signal(signal.SIGINT)\n"
            "except KeyboardInterrupt:\n    print('KeyboardInterrupt')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "KeyboardInterrupt"
