"""Ctrl-C of `proofbatch profile --cluster dask` while the Dask worker boots
HOL Light: the installed CLI on a real scheduler and worker, a real SIGINT.

The boot runs in the worker's task thread. The driver's stop runs
`_close_run` on the worker's event loop (client.run); while the boot held
the lock close_run takes, the loop froze for the whole boot ("Event loop was
unresponsive in Worker for 213 s") and the driver waited as long: 76 s on a
quiet host, 2-4 min on a busy one. Only the boot's first seconds are paid
here: the driver is stopped as soon as the boot's log appears, and the boot
left running in the worker is killed with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from ..helpers import DEMO, PROOFBATCH
from .dask_cluster import scheduler_and_worker
from .test_slurm import wait_for

pytestmark = pytest.mark.hol

# A stop sends close_run to the worker, cancels the run's tasks, marks the
# profile's run stopped and prints the resume line: a few seconds, even on a
# loaded 2-core host. The old driver waited out the boot, 70 s of CPU or more.
STOP_S = 20


def boots(tmp: Path) -> list[Path]:
    """The base logs of the sessions the worker has started booting."""
    return list(tmp.glob("proofbatch-dask-*/s*/images/base.log"))


def test_ctrl_c_while_a_dask_worker_boots_hol_light_stops_the_driver_in_seconds(tmp_path):
    tmp = tmp_path / "worker-tmp"
    tmp.mkdir()
    # The worker's session lives under its TMPDIR (ProverPlugin.workdir): its
    # base log shows the boot has begun.
    env = {**os.environ, "TMPDIR": str(tmp)}
    leftovers: list[psutil.Process] = []
    # Processes this test did not start (the session fixtures' HOL Light
    # images, which later tests share) are never its to kill.
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with scheduler_and_worker(tmp_path, memory="4GiB", env=env, cwd=tmp_path) as address:
        driver = subprocess.Popen(
            [str(PROOFBATCH), "profile", str(DEMO), "--out", str(tmp_path / "profile"),
             "--problems", "arith.add_comm", "--context-root", str(DEMO), "--ceiling", "300",
             "--cluster", "dask", "--scheduler-address", address],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)
        try:
            wait_for(lambda: boots(tmp) or driver.poll() is not None, 300, "the worker's boot")
            assert driver.poll() is None, driver.communicate()[0]
            time.sleep(2)      # well into the boot: HOL Light reads hol.ml for 70-90 s
            leftovers = [p for p in psutil.Process().children(recursive=True)
                         if p.pid != driver.pid and p.pid not in before]
            driver.send_signal(signal.SIGINT)
            stopped = time.monotonic()
            try:
                output, _ = driver.communicate(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                # Where it waits: every thread's stack (runner/cli.py's SIGUSR1).
                driver.send_signal(signal.SIGUSR1)
                time.sleep(2)
                driver.kill()
                output, _ = driver.communicate()
                pytest.fail(f"the driver was still running {STOP_S} s after Ctrl-C: {output}\n"
                            f"{(tmp_path / 'worker.log').read_text()[-2000:]}")
            took = time.monotonic() - stopped
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
    # The boot the worker was left with (its HOL Light runs in a session of
    # its own) goes with the worker.
    for p in leftovers:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    assert driver.returncode == 130, output
    assert took < STOP_S
    assert "run the same command again to resume" in output.splitlines()[-1], output
    assert "unresponsive" not in (tmp_path / "worker.log").read_text()
