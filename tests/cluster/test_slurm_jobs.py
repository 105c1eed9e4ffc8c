"""What the Slurm driver asks Slurm (cluster/slurm_jobs.py), on the real dev
cluster: a controller out of reach is no answer. Read as "the job is gone",
it would make the driver submit again the checks of a job still running."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from cluster.slurm_jobs import queued_names
from runner.errors import CommandError


pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

STATE = Path("/var/lib/proofbatch-slurm")


def controller_pid() -> int:
    return int((STATE / "run" / "slurmctld.pid").read_text().strip())


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def controller_up() -> bool:
    return "UP" in subprocess.run(["scontrol", "ping"], capture_output=True, text=True).stdout


def stop_controller() -> None:
    pid = controller_pid()
    # SIGTERM: slurmctld saves its state, so the jobs it knew come back with it;
    # slurmd goes on running them meanwhile.
    subprocess.run(["kill", str(pid)], check=True)
    assert wait_until(lambda: not Path(f"/proc/{pid}").exists(), 30), "slurmctld did not stop"


def start_controller() -> None:
    subprocess.run(["/usr/sbin/slurmctld"], check=True)
    assert wait_until(controller_up, 60), "slurmctld did not come back"


def test_a_controller_out_of_reach_is_asked_again_never_read_as_gone():
    job = subprocess.run(["sbatch", "--parsable", "-J", "pb-ask", "-o", "/dev/null",
                          "--wrap", "sleep 300"], capture_output=True, text=True,
                         check=True).stdout.strip()
    try:
        assert wait_until(lambda: queued_names([job]) == {job: "pb-ask"}, 30)
        stop_controller()
        try:
            # Out of patience: an error, not an empty queue.
            with pytest.raises(CommandError, match="squeue"):
                queued_names([job], patience_s=0)
            # With patience, the answer that comes once the controller is back.
            answer: dict = {}
            asking = threading.Thread(target=lambda: answer.update(queued_names([job])))
            asking.start()
            time.sleep(3)
        finally:
            start_controller()
        asking.join(120)
        assert answer == {job: "pb-ask"}
        # An id Slurm does not know is an answer: nothing queued under it.
        assert queued_names(["999999"]) == {}
    finally:
        subprocess.run(["scancel", job], check=False)
