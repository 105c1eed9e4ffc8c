"""A Dask scheduler and one worker started with distributed's own commands,
as a user starts them on their machines (tests/cluster/test_dask.py and
test_profile_dask.py)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from distributed import Client


@contextlib.contextmanager
def scheduler_and_worker(d: Path, *, memory: str, env: dict | None = None, cwd: Path | None = None,
                         worker_setup: Callable[[], None] | None = None,
                         stop_s: float = 30) -> Iterator[str]:
    """A scheduler and one worker ``w0`` of two threads and ``memory``, their
    files and logs in ``d``; yields the scheduler's address once the worker
    has joined, and stops both after."""
    sched_file, procs = _scheduler(d, cwd=cwd, env=env)
    try:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(sched_file),
             "--nthreads", "2", "--nworkers", "1", "--memory-limit", memory, "--no-dashboard",
             "--name", "w0"],
            cwd=cwd, env=env, preexec_fn=worker_setup, stdout=(d / "worker.log").open("w"),
            stderr=subprocess.STDOUT))
        address = json.loads(sched_file.read_text())["address"]
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(1, timeout=120)
        yield address
    finally:
        _stop(procs, stop_s)


@contextlib.contextmanager
def scheduler_and_workers(d: Path, workers: dict[str, dict], *, memory: str, nthreads: int = 1,
                          stop_s: float = 30) -> Iterator[str]:
    """A scheduler and one worker per entry of ``workers`` (its name -> its
    environment), each ``nthreads`` threads and ``memory``; yields the
    scheduler's address once all have joined, and stops them after."""
    sched_file, procs = _scheduler(d)
    try:
        for name, env in workers.items():
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                 str(sched_file), "--nthreads", str(nthreads), "--nworkers", "1", "--memory-limit",
                 memory, "--no-dashboard", "--name", name],
                env=env, stdout=(d / f"worker-{name}.log").open("w"), stderr=subprocess.STDOUT))
        address = json.loads(sched_file.read_text())["address"]
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(len(workers), timeout=180)
        yield address
    finally:
        _stop(procs, stop_s)


def _stop(procs: list[subprocess.Popen], stop_s: float) -> None:
    """Terminate the processes, last started first, and kill any that
    outlive ``stop_s``."""
    for p in reversed(procs):
        p.terminate()
    for p in reversed(procs):
        try:
            p.wait(timeout=stop_s)
        except subprocess.TimeoutExpired:
            p.kill()


def _scheduler(d: Path, cwd: Path | None = None,
               env: dict | None = None) -> tuple[Path, list[subprocess.Popen]]:
    """A scheduler started with its scheduler file in ``d``, once the file is
    there: the file, and the process list the caller's workers join."""
    sched_file = d / "scheduler.json"
    procs = [subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", "0", "--no-dashboard", "--scheduler-file", str(sched_file)],
        cwd=cwd, env=env, stdout=(d / "scheduler.log").open("w"), stderr=subprocess.STDOUT)]
    deadline = time.monotonic() + 60
    while not sched_file.exists():
        if time.monotonic() > deadline:
            _stop(procs, 5)
            raise AssertionError(f"no Dask scheduler file after 60 s: see {d / 'scheduler.log'}")
        time.sleep(0.2)
    return sched_file, procs
