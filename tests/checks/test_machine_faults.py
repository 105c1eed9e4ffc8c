"""A fault of the machine is never an answer's verdict (issue 33, point 2):
the prover's "infra:" ERRORs and an image killed under its check are run
again on a fresh fork and counted as infrastructure retries; one that
persists stops the run with one line (ProverError, exit 1), recording
nothing; an unusable TMPDIR is replaced before anything starts.

No HOL Light here: sessions are scripted, the driver's record is built by
hand (tests/hol_light/test_loads.py runs the real driver)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from runner import events
from runner.checks import janitor
from runner.checks.guard import OUTSIDE_RETRIES, Observation
from runner.checks.tasks import CheckTask
from runner.checks.worker import work
from runner.errors import ProverError
from runner.prover import CheckLimits, CheckResult
from runner.provers.hol_light.session.verdict_record import interpret, machine_fault
from runner.reporting.progress import NowDoing
from runner.results.shards import ShardWriter
from runner.verdicts import Outcome, Verdict

from ..helpers import ROOT, problem
from .test_infra_deaths import Scripted

LIMITS = CheckLimits(time_s=30, time_source="default", mem_bytes=2**31, expected_mem_bytes=2**20)
NO_TEMP = ('infra: cannot create a temporary file (tried /nonexistent/tmp, /tmp, /var/tmp, /usr/tmp): '
           '/nonexistent/tmp/proofbatch-parse1.txt: No such file or directory')


def infra(cause: str = NO_TEMP) -> CheckResult:
    return CheckResult(Outcome(Verdict.ERROR, cause), None, 0.1, None, "k", "exit 0", interrupted=cause)


def ok() -> CheckResult:
    return CheckResult(Outcome(Verdict.OK, "proved in 0.1 s"), 0.1, 0.2, None, "k", "exit 0")


def run_one(tmp_path, session) -> list:
    p = problem(tmp_path / "corpus", "machine.one", "x + 0 = x", "ARITH_TAC")
    rows = []
    with ShardWriter(tmp_path / "out", "w0") as writer:
        work(session, iter([CheckTask(p, LIMITS)]), writer, worker="w0", run_id="r", on_row=rows.append)
    return rows


def test_a_machine_fault_runs_again_and_counts_an_infrastructure_retry(tmp_path):
    session = Scripted([infra(), ok()])
    (row,) = run_one(tmp_path, session)
    assert (row.verdict, row.infra_retries, session.calls) == ("OK", 1, 2)


def test_a_machine_fault_every_time_stops_the_run_and_records_nothing(tmp_path):
    session = Scripted([infra()] * (OUTSIDE_RETRIES + 1))
    with pytest.raises(ProverError) as caught:
        run_one(tmp_path, session)
    message = str(caught.value)
    assert message.startswith("cannot create a temporary file"), message
    assert "fault of this machine" in message and "\n" not in message
    assert session.calls == OUTSIDE_RETRIES + 1
    assert not list((tmp_path / "out" / "shards").glob("*.parquet"))


def record(verdict: str, reason: str) -> bytes:
    return f"PBV2\tabc\t{verdict}\t0.000000\t0.000000\t100\t{reason}\n".encode()


@pytest.mark.parametrize("reason, fault", [
    (NO_TEMP, True),
    ("infra: cannot read the query's file: /x/q: No such file or directory", True),
    ("driver: Unix.Unix_error(Unix.EBADF, \"write\", \"\")", True),
    # An answer's own: a context function it called raised Sys_error.
    ("exception: Sys_error(\"/secret: No such file or directory\")", False),
    ("syntax: unexpected token", False),
])
def test_the_driver_says_which_errors_are_the_machines(reason, fault):
    obs = Observation(record=record("ERROR", reason), wall_secs=0.5)
    result = interpret(obs, "exit 0", "abc", "k")
    assert result.outcome.verdict is Verdict.ERROR
    assert bool(result.interrupted) is fault, result
    assert bool(machine_fault(reason)) is fault


def test_an_unusable_tmpdir_is_replaced_before_anything_starts(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", "/nonexistent/tmp")
    monkeypatch.setattr(janitor.tempfile, "tempdir", None)
    janitor.usable_tmpdir()
    now = os.environ["TMPDIR"]
    assert now != "/nonexistent/tmp" and os.path.isdir(now) and os.access(now, os.W_OK)
    # One that works is left alone.
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    janitor.usable_tmpdir()
    assert os.environ["TMPDIR"] == str(tmp_path)


def test_no_usable_tmpdir_is_one_line_exit_1(tmp_path):
    """Every candidate unusable (TMPDIR, TEMP, TMP and, as Python's own
    last resort, the working directory, made read-only-looking by chdir to
    /proc): one line naming it, before any prover starts."""
    env = {**os.environ, "TMPDIR": "/nonexistent/tmp", "TEMP": "/nonexistent/a", "TMP": "/nonexistent/b"}
    code = ("import tempfile, sys\n"
            "tempfile._candidate_tempdir_list = lambda: ['/nonexistent/tmp', '/proc']\n"
            "from runner import cli\n"
            "sys.exit(cli.main(['run', 'nowhere', '--out', 'nowhere-out']))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("proofbatch: no usable temporary folder: TMPDIR=/nonexistent/tmp"), lines


def test_a_rebuilt_image_is_said_as_a_rebuild_not_a_build_past_the_plan():
    now = NowDoing(None, workers=1)
    assert now.event(events.Event("image", key="k1", name="the context of a")).startswith("building image 1")
    again = now.event(events.Event("image", key="k1", name="the context of a"))
    assert again == "rebuilding image (it was evicted or its process died): the context of a"
