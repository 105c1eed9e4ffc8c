"""The real dev Slurm cluster for tests (slurm/start-dev-cluster.sh).

CI (scripts/test.sh) starts it before pytest and stops it after. Run alone
as root, the fixture starts it itself and leaves it running. The tests skip
only where Slurm cannot run at all (not root); under CI they fail instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from .conftest import ROOT


def _up() -> bool:
    if shutil.which("scontrol") is None:
        return False
    return subprocess.run(["scontrol", "ping"], capture_output=True, text=True).stdout.count("UP") > 0


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    if not _up():
        if os.geteuid() != 0:
            reason = "the dev Slurm cluster needs root (slurm/start-dev-cluster.sh)"
            if os.environ.get("CI"):
                pytest.fail(reason)
            pytest.skip(reason)
        proc = subprocess.run(["bash", str(ROOT / "slurm" / "start-dev-cluster.sh")],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            reason = f"slurm/start-dev-cluster.sh failed: {proc.stderr.strip()[-400:]}"
            if os.environ.get("CI"):
                pytest.fail(reason)
            pytest.skip(reason)
    assert _up(), "slurmctld does not answer scontrol ping"


def sacct(job_id: str, fields: str = "JobID,State,ExitCode") -> list[list[str]]:
    out = subprocess.run(["sacct", "-n", "-P", "-D", "-j", job_id, "-o", fields],
                         capture_output=True, text=True, check=True).stdout
    return [line.split("|") for line in out.splitlines() if line]
