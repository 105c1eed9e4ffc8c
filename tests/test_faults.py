"""Every failure is expected: kill -9 of the runner at random points, a
worker dying mid-check, a full disk, an image process crashing. (A torn
shard: tests/test_resume.py.)

The design that keeps this cheap: a runner that owns its HOL Light session
pays 70-90 s of CPU to load it again after every kill. Here the loaded
images live in an image server (runner/checks/image_server.py, `proofbatch serve`)
inside the test process, serving the session the other tests share, and
each runner is a real `proofbatch run --server` subprocess: killing one
costs only its Python start-up. What a kill can break lives in the runner:
dispatch, shard publishing, merging. The images surviving a runner are the
feature under test, not a shortcut.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from runner.corpus import Problem
from runner.prover import CheckLimits
from runner.results import shards
from runner.errors import ProverError
from runner.checks.image_server import ImageServer
from runner.provers.hol_light.session.fork_server import ImageProcess
from runner.verdicts import Verdict

from .helpers import DEMO, ROOT
from .helpers import check, problem

# Every test here boots HOL Light or checks in it.
pytestmark = pytest.mark.hol

SEED = 20260601
KILLS = 20
# Every kill must land on a running runner, so the sweep must outlast the
# kills: a run records about one slow check on average before its kill (the
# seeded delays), so 20 runs record about 20 of them. With 16 the sweep
# sometimes finished before the last kill (CI saw 19 of 20 land).
TRIVIAL, SLOW = 30, 32
# Allocates until the prover's own alarm stops it: TIMEOUT after 1.5 s, a
# check long enough to be killed in, and "heavy", so its row is published at
# once. Its limit is the longest, so these checks go first.
ALLOC = "(fun g -> let rec go l = go (g :: l) in go [])"


def corpus(root: Path) -> Path:
    c = root / "corpus"
    for i in range(TRIVIAL):
        d = c / f"trivial.{i:02d}"
        d.mkdir(parents=True)
        (d / "setup.ml").write_text("")
        (d / "query.txt").write_text(f"`v{i} + 0 = v{i}`\n")
        (d / "answer.txt").write_text("ARITH_TAC\n")
        (d / "category.txt").write_text("light\n")
    for i in range(SLOW):
        d = c / f"slow.{i:02d}"
        d.mkdir(parents=True)
        (d / "setup.ml").write_text("")
        (d / "query.txt").write_text("`F`\n")
        (d / "answer.txt").write_text(ALLOC + "\n")
        (d / "category.txt").write_text("slow\n")
    (root / "timeouts.json").write_text('{"light": 1.2, "slow": 1.5}')
    return c


@pytest.fixture(scope="module")
def server(hol_session, tmp_path_factory):
    srv = ImageServer(hol_session, tmp_path_factory.mktemp("image-server")).start()
    yield srv
    srv.close()


def runner_argv(c: Path, out: Path, server: ImageServer, workers: int = 2) -> list[str]:
    return [sys.executable, "-m", "runner.cli", "run", str(c), "--out", str(out),
            "--category-timeouts", str(c.parent / "timeouts.json"), "--workers", str(workers),
            "--context-root", str(DEMO), "--mem-limit", "2G", "--grace", "0.5",
            # The kills are timed in wall seconds after the workers start: the
            # slow checks must end in 1.5 s of wall time however loaded the host.
            "--limit-clock", "wall", "--server", str(server.dir)]


def shard_keys(out: Path) -> Counter:
    """How often each check appears across all readable shards."""
    keys: Counter = Counter()
    for path in (out / "shards").glob("*.parquet"):
        table = pq.read_table(path, columns=["problem_id", "attempt"])
        keys.update(zip(table.column("problem_id").to_pylist(), table.column("attempt").to_pylist()))
    return keys


def test_kill_9_at_random_points_then_resume_every_time(server, tmp_path):
    c, out = corpus(tmp_path), tmp_path / "out"
    rng = random.Random(SEED)
    landed, progress = 0, []
    for _ in range(KILLS):
        runner = subprocess.Popen(runner_argv(c, out, server), cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # A runner spends its first seconds starting (imports, validation,
        # scan). One kill in five lands there or in the merge; the others
        # while its workers dispatch, check and publish.
        if rng.random() < 0.2:
            time.sleep(rng.uniform(0.2, 4.0))
        else:
            delay = rng.uniform(0.0, 2.5)
            while runner.poll() is None and not running(out, runner.pid):
                time.sleep(0.02)
            time.sleep(delay)
        if runner.poll() is None:
            runner.send_signal(signal.SIGKILL)
            landed += 1
        _, err = runner.communicate()
        assert runner.returncode in (0, -signal.SIGKILL), err.decode()
        progress.append(len(shard_keys(out)))
        # Whatever the kill interrupted, what is on disk is whole and single.
        assert max(shard_keys(out).values(), default=1) == 1
    assert landed >= 20, f"only {landed} of {KILLS} kills landed while the runner ran"

    final = subprocess.run(runner_argv(c, out, server), cwd=ROOT, capture_output=True, timeout=300)
    assert final.returncode == 0, final.stderr.decode()

    keys = shard_keys(out)
    expected = {(f"trivial.{i:02d}", 0) for i in range(TRIVIAL)} | {(f"slow.{i:02d}", 0) for i in range(SLOW)}
    assert set(keys) == expected and set(keys.values()) == {1}     # exactly one verdict each
    assert not (out / "shards" / shards.QUARANTINE_DIR).exists()   # no shard was ever torn
    assert not [p for p in (out / "shards").iterdir() if p.name.endswith(".tmp")]
    rows = pq.read_table(out / "results.parquet").to_pylist()
    verdicts = Counter(row["verdict"] for row in rows)
    assert verdicts == {"OK": TRIVIAL, "TIMEOUT": SLOW}
    # Work recorded before a kill was kept: the rows come from several runs.
    assert len({row["run_id"] for row in rows}) > 1, progress
    assert progress == sorted(progress), "a kill lost rows that were already recorded"


def running(out: Path, pid: int) -> set[str]:
    """Problems the workers of runner ``pid`` show as running (runner/reporting/status.py;
    a killed runner's entries stay behind)."""
    found = set()
    for path in (out / "running").glob("*.json"):
        try:
            entry = json.loads(path.read_text())
            if entry["pid"] == pid:
                found.add(entry["problem_id"])
        except (OSError, ValueError, KeyError):
            pass
    return found


def test_a_worker_dying_mid_check_loses_only_that_check(server, tmp_path):
    c, out = corpus(tmp_path), tmp_path / "out"
    for d in list(c.iterdir()):
        if d.name not in ("trivial.00", "slow.00"):
            shutil.rmtree(d)
    (c / "slow.00" / "answer.txt").write_text(
        "(fun g -> let rec a = 0 :: a and b = 0 :: b in if compare a b = 0 then ALL_TAC g else ALL_TAC g)\n")
    dropped = server.dropped
    runner = subprocess.Popen(runner_argv(c, out, server, workers=1), cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The spinning check runs until the outside kill at 1 s + 0.5 s grace;
    # its worker dies while it runs.
    deadline = time.monotonic() + 60
    while "slow.00" not in running(out, runner.pid):
        assert runner.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    # The server finishes the orphaned check, drops its verdict, and serves on.
    deadline = time.monotonic() + 30
    while server.dropped == dropped and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.dropped == dropped + 1
    assert (("slow.00", 0) not in shard_keys(out))
    final = subprocess.run(runner_argv(c, out, server, workers=1), cwd=ROOT, capture_output=True,
                           timeout=120)
    assert final.returncode == 0, final.stderr.decode()
    rows = {r["problem_id"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    assert sorted(rows) == ["slow.00", "trivial.00"]
    assert rows["slow.00"]["verdict"] == "TIMEOUT" and rows["trivial.00"]["verdict"] == "OK"


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True,
                       capture_output=True)
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        pytest.skip(f"cannot mount a small tmpfs here: {exc}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_full_disk_is_one_clear_error_and_loses_nothing_published(server, tmp_path, small_disk):
    c, out = corpus(tmp_path), small_disk / "out"
    for d in list(c.iterdir()):
        if d.name.startswith("slow."):
            shutil.rmtree(d)
    first = runner_argv(c, out, server) + ["--default-timeout", "30"]
    half = [f"trivial.{i:02d}" for i in range(TRIVIAL // 2)]
    aside = tmp_path / "aside"
    aside.mkdir()
    for i in range(TRIVIAL // 2, TRIVIAL):      # sweep half of the corpus first
        shutil.move(str(c / f"trivial.{i:02d}"), aside)
    done = subprocess.run(first, cwd=ROOT, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    before = {r["problem_id"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    assert sorted(before) == half
    for d in aside.iterdir():
        shutil.move(str(d), c)
    # Fill the disk, then ask for the rest.
    filler = small_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    full = subprocess.run(first, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert full.returncode == 1
    # One line says what happened and what to do (the progress display may
    # have said "resuming: ..." before it); no traceback.
    err = full.stderr.strip().splitlines()
    assert "Traceback" not in full.stderr, full.stderr
    assert err[-1].startswith(f"proofbatch: {out}") and "No space left on device" in err[-1], err
    assert err[-1].endswith("free space and run the same command again to resume")
    assert shards.scan(out, repair=False).quarantined == []
    kept = {(r["problem_id"], r["attempt"]): r for r in shards.scan(out, repair=False).done.values()}
    for pid, row in before.items():
        assert kept[(pid, 0)]["finished_at"] == row["finished_at"]      # nothing earlier lost
    filler.unlink()
    again = subprocess.run(first, cwd=ROOT, capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr.decode()
    after = {r["problem_id"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    assert sorted(after) == sorted(f"trivial.{i:02d}" for i in range(TRIVIAL))
    assert all(after[p]["run_id"] == before[p]["run_id"] for p in half)


# -- an image process crashing ---------------------------------------------------------

def image_pid(session, p) -> int:
    return session._images[session.image_key(p)].pid


def test_a_crashed_image_is_rebuilt_and_the_next_check_runs(hol_session, tmp_path):
    setup = "let PB_CRASH_A = new_definition `pb_crash_a = 1`;;\n"
    first = problem(tmp_path, "crash.first", "pb_crash_a = 1", "REWRITE_TAC[PB_CRASH_A]", setup=setup)
    second = problem(tmp_path, "crash.second", "pb_crash_a + 0 = 1",
                     "REWRITE_TAC[PB_CRASH_A] THEN ARITH_TAC", setup=setup)
    assert check(hol_session, first).outcome.verdict is Verdict.OK
    os.kill(image_pid(hol_session, first), signal.SIGKILL)
    builds = [b.key for b in hol_session.image_builds].count(hol_session.image_key(first))
    result = check(hol_session, second)
    assert result.outcome.verdict is Verdict.OK, result.outcome
    assert [b.key for b in hol_session.image_builds].count(hol_session.image_key(first)) == builds + 1


SLOWISH = "(fun g -> let rec go n acc = if n = 0 then ARITH_TAC g else go (n - 1) (n :: acc) in go 400000 [])"


def kill_image_while_checking(session, p) -> None:
    """SIGKILL the image of ``p`` once its check is running."""
    pid = image_pid(session, p)

    def kill():
        proc = psutil.Process(pid)
        deadline = time.monotonic() + 30
        while not proc.children() and time.monotonic() < deadline:
            time.sleep(0.005)
        os.kill(pid, signal.SIGKILL)

    threading.Thread(target=kill, daemon=True).start()


def check_retrying(session, p: Problem):
    """A check as a worker runs it: a fault of the machine (its image killed
    under it) runs again (runner/checks/worker.py); (result, retries)."""
    from runner.checks.tasks import CheckTask
    from runner.checks.worker import check_retrying as retrying

    session.prepare([p])
    limits = CheckLimits(time_s=10.0, time_source="default", mem_bytes=2 * 2**30, expected_mem_bytes=2**20)
    return retrying(session, CheckTask(p, limits), threading.Event())


def test_an_image_crashing_mid_check_is_rebuilt_and_the_check_retried(hol_session, tmp_path):
    setup = "let PB_CRASH_B = new_definition `pb_crash_b = 2`;;\n"
    warm = problem(tmp_path, "crash.warm", "pb_crash_b = 2", "REWRITE_TAC[PB_CRASH_B]", setup=setup)
    assert check(hol_session, warm).outcome.verdict is Verdict.OK
    victim = problem(tmp_path, "crash.mid", "x + 0 = x", SLOWISH, setup=setup)
    key = hol_session.image_key(warm)
    builds = [b.key for b in hol_session.image_builds].count(key)
    kill_image_while_checking(hol_session, warm)
    result, retries = check_retrying(hol_session, victim)
    assert result.outcome.verdict is Verdict.OK, result.outcome
    # The context rebuilt after its image was killed is an infrastructure retry (issue 33, point 2).
    assert retries == 1
    assert [b.key for b in hol_session.image_builds].count(key) == builds + 1


def test_image_crashes_past_the_bound_stop_the_sweep(hol_session, tmp_path, monkeypatch):
    from runner.checks import worker

    monkeypatch.setattr(worker, "OUTSIDE_RETRIES", 0)
    setup = "let PB_CRASH_C = new_definition `pb_crash_c = 3`;;\n"
    warm = problem(tmp_path, "crash.warm3", "pb_crash_c = 3", "REWRITE_TAC[PB_CRASH_C]", setup=setup)
    assert check(hol_session, warm).outcome.verdict is Verdict.OK
    kill_image_while_checking(hol_session, warm)
    with pytest.raises(ProverError, match="died under the check.*fault of this machine"):
        check_retrying(hol_session, problem(tmp_path, "crash.bound", "x + 0 = x", SLOWISH, setup=setup))


# -- an evicted image closed as its key is built again -----------------------------

def test_closing_an_evicted_image_spares_the_new_image_of_its_key(hol_session, tmp_path, monkeypatch):
    """Eviction takes an image out under the session's lock and closes it
    after: meanwhile another worker may start the same key again. Closing
    the old image must leave the new one whole; had it unlinked the new
    image's pipes, that image would exit while loading and its context be
    recorded as failed, every later check in it an ERROR."""
    setup = "let PB_EVICT = new_definition `pb_evict = 4`;;\n"
    first = problem(tmp_path, "evict.first", "pb_evict = 4", "REWRITE_TAC[PB_EVICT]", setup=setup)
    assert check(hol_session, first).outcome.verdict is Verdict.OK
    key = hol_session.image_key(first)
    with hol_session._lock:
        evicted = hol_session._images.pop(key)
    attach = ImageProcess.attach

    def attach_as_the_evicted_one_closes(image, timeout):
        if image.key == key:
            evicted.close()
        return attach(image, timeout)

    monkeypatch.setattr(ImageProcess, "attach", attach_as_the_evicted_one_closes)
    second = problem(tmp_path, "evict.second", "pb_evict + 0 = 4",
                     "REWRITE_TAC[PB_EVICT] THEN ARITH_TAC", setup=setup)
    result = check(hol_session, second)
    assert result.outcome.verdict is Verdict.OK, result.outcome
    # The old image quits (its parent, the base image, reaps it later).
    deadline = time.monotonic() + 30
    while evicted.alive():
        assert time.monotonic() < deadline, "the evicted image outlived its close"
        time.sleep(0.1)
