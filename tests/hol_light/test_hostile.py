"""Every answer is hostile: the catalogue in examples/hostile, swept through
the real path, each with its expected verdict and a proof that the host was
untouched.

The story: answers that name the system are refused before anything runs;
answers that shadow the kernel's names or print fake verdicts get the
verdict their proof earns; and answers that reach the system through escape
hatches a context defined (so the driver's screen is bypassed) meet the
operating-system box: no shell, no file outside their scratch directory, no
ground truth, no network, a bounded number of processes, no signals to
others, no forged record. Nothing they tried is left on the host.
"""

from __future__ import annotations

import csv
import re
import socket
import threading
import time
from pathlib import Path

import psutil
import pytest

from runner.checks import sandbox
from runner.verdicts import Verdict

from ..helpers import DEMO, ROOT, demo_config, sweep_with
from ..helpers import check, problem

# Every test here boots HOL Light or checks in it.
pytestmark = pytest.mark.hol

HOSTILE = ROOT / "examples" / "hostile"
MARKERS = (Path("/tmp/proofbatch-hostile-shell"), Path("/tmp/proofbatch-hostile-write"))
PORT = 47321        # jail.network connects here


def expected() -> dict[str, tuple[str, str]]:
    with open(HOSTILE / "expected_verdicts.csv", newline="") as f:
        return {row["Problem"]: (row["Verdict"], row["Reason"]) for row in csv.DictReader(f)}


def jailed_processes(session) -> list[psutil.Process]:
    """Live processes under a check's own uid (runner/checks/sandbox.py) that this
    session's images started, or that lost their parent. (Other sessions on
    the host jail their own checks.)"""
    images = {image.pid for image in session._images.values()}
    found = []
    for proc in psutil.process_iter(["uids", "ppid", "status"]):
        info = proc.info
        if (info["uids"] and info["uids"].real >= sandbox.JAIL_UID_BASE
                and info["status"] != psutil.STATUS_ZOMBIE and info["ppid"] in images | {1}):
            found.append(proc)
    return found


class Listener:
    """A TCP server on the host's loopback that counts who reaches it."""

    def __init__(self, port: int):
        self.sock = socket.create_server(("127.0.0.1", port))
        self.sock.settimeout(0.2)
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture(scope="module")
def hostile(hol_session, tmp_path_factory):
    """Sweep the catalogue once, with a listener up and the checks' logs kept."""
    if hol_session.backend.sandbox_kind != "bwrap":
        pytest.skip("the catalogue's jail.* cases need the bwrap sandbox (bubblewrap, root)")
    for marker in MARKERS:
        marker.unlink(missing_ok=True)
    tmp = tmp_path_factory.mktemp("hostile")
    listener = Listener(PORT)
    # The control of jail.network: the host's own loopback does accept.
    socket.create_connection(("127.0.0.1", PORT), timeout=5).close()
    time.sleep(0.3)
    control_connections = listener.accepted
    backend, saved = hol_session.backend, hol_session.backend.log_dir
    backend.log_dir = tmp / "logs"
    try:
        summary = sweep_with(hol_session, demo_config(tmp / "out", corpus=HOSTILE, category_timeouts=None,
                                                      default_timeout=30.0, workers=2))
    finally:
        backend.log_dir = saved
        time.sleep(0.3)
        listener.close()
    rows = {row["problem_id"]: row for row in summary.table.to_pylist()}
    return {"rows": rows, "logs": tmp / "logs", "out": tmp / "out",
            "connections": listener.accepted - control_connections,
            "control_connections": control_connections}


def test_every_hostile_answer_gets_its_expected_verdict(hostile):
    got = {pid: (row["verdict"], row["reason"]) for pid, row in hostile["rows"].items()}
    assert set(got) == set(expected())
    for pid, (verdict, fragment) in expected().items():
        assert got[pid][0] == verdict, (pid, got[pid])
        assert fragment in got[pid][1], (pid, got[pid])


def test_no_hostile_answer_is_ok_but_the_scratch_control(hostile):
    ok = {pid for pid, row in hostile["rows"].items() if row["verdict"] == "OK"}
    assert ok == {"jail.write_scratch"}


def test_the_host_was_untouched(hostile, hol_session, tmp_path):
    for marker in MARKERS:
        assert not marker.exists(), f"{marker} was written from inside a check"
    assert hostile["control_connections"] == 1
    assert hostile["connections"] == 0, "a check reached the host's network"
    # The fork bomb's children and everything else a check started are gone.
    deadline = time.monotonic() + 10
    while jailed_processes(hol_session) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert jailed_processes(hol_session) == []
    # The image that jail.kill_image aimed at still serves checks.
    assert check(hol_session, problem(tmp_path, "after.add", "x + 0 = x", "ARITH_TAC")) \
        .outcome.verdict is Verdict.OK


def test_the_fork_bomb_is_stopped_at_the_process_limit(hostile, hol_session):
    """In the sweep the memory guard stops the bomb first: it counts each
    copy's resident image pages. With that guard out of reach, the process
    limit of the check's own uid stops it."""
    from runner.corpus import load_corpus
    from runner.prover import CheckLimits

    bomb = [p for p in load_corpus(HOSTILE) if p.problem_id == "jail.fork_bomb"][0]
    hol_session.prepare([bomb])
    result = hol_session.check(bomb, CheckLimits(time_s=30, time_source="default",
                                                 mem_bytes=64 * 2**30, expected_mem_bytes=2**20))
    assert result.outcome.verdict is Verdict.FAIL, result.outcome
    forks = int(re.search(r"Resource temporarily unavailable after (\d+) forks",
                          result.outcome.reason).group(1))
    assert 0 < forks < hol_session.backend.sandbox_config.nproc
    deadline = time.monotonic() + 10
    while jailed_processes(hol_session) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert jailed_processes(hol_session) == []      # the sleeping copies were killed


def test_every_row_and_the_manifest_record_the_sandbox(hostile):
    import json

    # Every check that ran; a context refused before any (load.*) ran none.
    ran = {pid: row for pid, row in hostile["rows"].items() if row["exit_status"] != "not run"}
    assert {row["sandbox"] for row in ran.values()} == {"bwrap"}
    assert set(hostile["rows"]) - set(ran) == {"load.passwd", "load.shadow"}
    assert json.loads((hostile["out"] / "sweep.json").read_text())["sandbox"] == "bwrap"


def test_the_answers_output_is_kept_truncated_and_never_parsed(hostile, hol_session):
    fake = (hostile["logs"] / "print.fake_verdict.log").read_text()
    assert "PBV1\t0123456789abcdef\tOK" in fake          # printed, kept...
    assert hostile["rows"]["print.fake_verdict"]["verdict"] == "FAIL"    # ...and ignored
    keep = hol_session.backend.sandbox_config.log_keep_bytes
    flood = (hostile["logs"] / "print.flood.log").read_bytes()
    assert flood.startswith(b"flood flood flood\n")
    assert flood.endswith(f"[proofbatch: output truncated at {keep} bytes]\n".encode())
    assert keep < len(flood) < keep + 100


def test_a_100_mb_answer_is_an_error_without_a_check(hol_session, tmp_path):
    huge = problem(tmp_path, "huge.answer", "x + 0 = x", "ARITH_TAC")
    huge = huge.__class__(**{**huge.__dict__, "answer": b"(ARITH_TAC)" + b" " * (100 * 2**20)})
    started = time.monotonic()
    result = check(hol_session, huge)
    assert result.outcome.verdict is Verdict.ERROR
    assert "over the" in result.outcome.reason and result.exit_status == "not run"
    assert time.monotonic() - started < 5
    assert not any((hol_session.workdir / "checks").iterdir())     # nothing left behind


def test_non_utf8_bytes_are_a_syntax_error(hol_session, tmp_path):
    bad = problem(tmp_path, "bytes.invalid", "x + 0 = x", "ARITH_TAC")
    bad = bad.__class__(**{**bad.__dict__, "answer": b"ARITH_TAC \xff\xfe\xc3("})
    result = check(hol_session, bad)
    assert result.outcome.verdict is Verdict.ERROR
    assert result.outcome.reason.startswith("syntax:"), result.outcome.reason


def test_the_catalogue_reads_the_demo_ground_truth_as_its_control():
    """jail.read_truth's refusal means something only if the file is there."""
    assert (DEMO / "arith.add_comm" / "answer.txt").stat().st_size > 0
