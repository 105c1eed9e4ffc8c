"""Exit codes and messages that must say what is true (issue 33, point 8).

Real sweeps here run the toy prover (tests/toy_prover: each check a real
process, no HOL Light to load) through the installed CLI, as users run it;
the other cases of the point are in the hostile catalogue's command-line
cases (examples/hostile/cli_cases.json, tests/test_hostile_replay.py).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from runner import cli
from runner.reporting.status import read_status
from runner.results import heartbeat

from ..helpers import PROOFBATCH, ROOT

TOY = {"PROOFBATCH_PROVERS": "tests.toy_prover:PROVER", "PYTHONPATH": str(ROOT)}
HOURS = "sum(range(10**12))"        # the toy's check that takes hours


def toy_corpus(root: Path, goals: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    (root / "toy.toml").write_text("# the toy prover's corpus (tests/toy_prover)\n")
    for pid, goal in goals.items():
        (root / pid).mkdir()
        (root / pid / "goal.txt").write_text(goal + "\n")
        (root / pid / "answer.txt").write_text("42\n")
    return root


def proofbatch(*argv, **kw) -> subprocess.CompletedProcess:
    # Wide: rich folds lines at 80 columns when it writes to no terminal.
    return subprocess.run([str(PROOFBATCH), *map(str, argv)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **TOY, "COLUMNS": "400"}, **kw)


def test_a_closed_output_pipe_is_no_failure_of_the_sweep(tmp_path):
    """`proofbatch run ... | head -1`: the reader goes after one line. The
    sweep runs to its end and exits 0, and status says finished (it exited
    1, and a pipe closed mid-sweep left it marked stopped)."""
    corpus = toy_corpus(tmp_path / "corpus", {f"p{i}": "6 * 7" for i in range(5)})
    out = tmp_path / "out"
    read, write = os.pipe()
    os.close(read)                      # the reader is gone before the first line
    proc = subprocess.Popen([str(PROOFBATCH), "run", str(corpus), "--out", str(out),
                             "--sandbox", "none"], cwd=ROOT, env={**os.environ, **TOY},
                            stdout=write, stderr=write, stdin=subprocess.DEVNULL)
    os.close(write)
    assert proc.wait(timeout=120) == 0
    status = proofbatch("status", out)
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[:2] == [f"{out}: 5 of 5 checks done  OK 5", "sweep finished"]


def test_a_stopped_runner_is_not_beating_and_named_not_dead(tmp_path):
    """A runner stopped by SIGSTOP holds its sweep: status says it is not
    beating (stopped?), names its pid and host, and offers no resume
    command, which would be refused while it holds the sweep."""
    corpus = toy_corpus(tmp_path / "corpus", {"a.heavy": HOURS, "b": "6 * 7", "c": "6 * 7"})
    out = tmp_path / "out"
    runner = subprocess.Popen([str(PROOFBATCH), "run", str(corpus), "--out", str(out), "--sandbox",
                               "none", "--workers", "1", "--policy", "naive", "--default-timeout",
                               "600"], cwd=ROOT, env={**os.environ, **TOY},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not list((out / "running").glob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.2)
        os.kill(runner.pid, signal.SIGSTOP)
        # A minute without a beat, as a stopped runner leaves its files
        # (stopped, it writes nothing more).
        beat = json.loads((out / heartbeat.STATUS_FILE).read_text())
        beat["beat"] -= 60
        (out / heartbeat.STATUS_FILE).write_text(json.dumps(beat))
        status = proofbatch("status", out)
        lines = status.stdout.splitlines()
        assert status.returncode == 0, status.stderr
        assert lines[1].startswith(f"sweep not beating (stopped?): its runner, pid {runner.pid} on "
                                   f"host {socket.gethostname()}, is still there"), lines
        assert f"kill -CONT {runner.pid}" in lines[2]
        assert not any(line.startswith("resume with:") for line in lines), lines
    finally:
        os.killpg(runner.pid, signal.SIGTERM)
        os.killpg(runner.pid, signal.SIGCONT)
        runner.wait(timeout=60)


def test_the_eta_counts_the_checks_behind_one_past_its_plan(tmp_path):
    """One check has run 300 s against the plan's 1 s, and four of 1 s wait
    behind it on one worker: the ETA is their 4 s, and says the running one
    may run on (it read 0 s: the running check's elapsed time was credited
    beyond its planned share)."""
    out = tmp_path / "out"
    (out / "running").mkdir(parents=True)
    (out / "sweep.json").write_text(json.dumps({"checks": 5}))
    now = time.time()
    (out / heartbeat.STATUS_FILE).write_text(json.dumps({
        "state": "running", "beat": now, "interval": 2.0, "host": socket.gethostname(),
        "pid": os.getpid(), "total": 5, "done": 0, "skipped": 0, "counts": {},
        "expected_left_s": 5.0, "boot_left_s": 0.0, "workers": 1, "eta_basis": "from the plan",
        "recent": [], "running_expected": [["heavy", 0, 1.0]]}))
    (out / "running" / "w0.json").write_text(json.dumps({
        "problem_id": "heavy", "attempt": 0, "timeout_s": 600, "dispatched": now - 300,
        "started": now - 300, "worker": "w0", "host": socket.gethostname(), "pid": os.getpid()}))
    s = read_status(out)
    assert s.state == "running"
    assert abs(s.eta_s - 4.0) < 0.01, s
    assert "1 running check is past the plan's time and may run up to 300 s more" in s.eta_basis


def test_the_heartbeat_publishes_the_planned_seconds_of_running_checks(tmp_path):
    """What the ETA above reads: a live toy sweep's status.json names the
    plan's seconds of the check on its board."""
    corpus = toy_corpus(tmp_path / "corpus", {"a.heavy": HOURS, "b": "6 * 7"})
    out = tmp_path / "out"
    runner = subprocess.Popen([str(PROOFBATCH), "run", str(corpus), "--out", str(out), "--sandbox",
                               "none", "--workers", "1", "--policy", "naive", "--default-timeout",
                               "600"], cwd=ROOT, env={**os.environ, **TOY},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        deadline, expected = time.monotonic() + 60, None
        while not expected and time.monotonic() < deadline:
            time.sleep(0.3)
            expected = (heartbeat.read(out) or {}).get("running_expected")
        assert expected and expected[0][:2] == ["a.heavy", 0] and expected[0][2] > 0, expected
    finally:
        os.killpg(runner.pid, signal.SIGTERM)
        err = runner.communicate(timeout=60)[1]
    # And a run stopped says that the sweep is marked stopped: it is a sweep.
    assert err.strip().splitlines()[-1].startswith(
        "proofbatch: terminated (SIGTERM); stopped cleanly: the sweep is marked stopped"), err


def test_debian_s_build_is_named_without_dpkg_query_on_path(monkeypatch):
    """A PATH without /usr/bin recorded the build as 'unknown', and the same
    HOL Light was then refused on resume as another build."""
    from runner.provers.hol_light.install import find_hol_light

    named = find_hol_light().build
    monkeypatch.setenv("PATH", "/nonexistent")
    assert find_hol_light().build == named
    assert "unknown" not in named


def test_mem_limit_help_says_mib_and_a_number_of_bytes_is_refused(tmp_path, capsys):
    """`--mem-limit 8589934592` (8 GiB meant in bytes) is 8 PiB read as MiB:
    refused in one line naming the flag and the fix, exit 2, before any
    prover starts; the help says a plain number is MiB."""
    for command in ("run", "profile"):
        parser = cli.build_parser([command])
        sub = next(a for a in parser._actions if a.dest == "command").choices[command]
        help_text = next(a.help for a in sub._actions if a.dest == "mem_limit")
        assert "a plain number is MiB" in help_text and "in bytes" not in help_text, command
    corpus = tmp_path / "corpus"
    (corpus / "a.one").mkdir(parents=True)
    (corpus / "a.one" / "query.txt").write_text("`T`\n")
    (corpus / "a.one" / "setup.ml").write_text("\n")
    code = cli.main(["run", str(corpus), "--out", str(tmp_path / "out"), "--sandbox", "none",
                     "--mem-limit", "8589934592"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("proofbatch: error: --mem-limit: 8 PiB per check is more than any node "
                             "has"), err
    assert "8589934592B if the number was bytes" in err[0]
    assert not (tmp_path / "out").exists()


def test_run_server_takes_the_server_s_context_root_and_refuses_another(tmp_path, capsys):
    """`run --server` checks in images that resolve needs/loadt under the
    server's context root: a --context-root of the run's own was recorded
    in sweep.json but never used. The server says its root; another one
    given to the run is refused in one line before anything is written."""
    from types import SimpleNamespace

    from runner.checks.image_server import ImageServer, RemoteSession
    from runner.prover import BackendInfo

    from ..helpers import DEMO

    root = (tmp_path / "served-root").resolve()
    root.mkdir()

    class Session:      # what the server asks of its session: info, and its backend's root
        info = BackendInfo(prover="hol-light", build="test", mode="bytecode", context_proofs="replay")
        backend = SimpleNamespace(context_root=root)

    server = ImageServer(Session(), tmp_path / "srv").start()
    try:
        assert RemoteSession(tmp_path / "srv").context_root() == root
        code = cli.main(["run", str(DEMO), "--out", str(tmp_path / "out"), "--problems",
                         "arith.add_comm", "--server", str(tmp_path / "srv"), "--context-root",
                         str(DEMO)])
    finally:
        server.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"proofbatch: error: --context-root: {DEMO} is not the context root of "
                             f"the image server on {tmp_path / 'srv'} ({root})"), err
    assert not (tmp_path / "out").exists()


def test_a_stop_says_what_it_left_by_command(capsys):
    """Only a sweep is marked stopped and resumes: `extract` and `serve`
    said "a sweep is marked stopped" too (a stopped `serve` through the
    installed CLI is in the hostile catalogue: serve.stopped_says_what_it_left)."""
    said = {}
    for command in ("run", "extract", "serve", "report"):
        assert cli._stopped(cli.Terminated, command) == 143
        said[command] = capsys.readouterr().err.strip()
    assert said["run"] == ("proofbatch: terminated (SIGTERM); stopped cleanly: the sweep is marked "
                           "stopped: run the same command again to resume")
    assert "nothing was written to --out" in said["extract"]
    assert "the server is down and its images are gone" in said["serve"]
    assert all("sweep" not in said[c] for c in ("extract", "serve", "report")), said


def test_status_after_problems_says_how_many_were_not_selected(tmp_path):
    """A sweep of 2 of a corpus's 5 problems said only "sweep finished":
    sweep.json records the problems run and the corpus's, and status says
    how many were left out and how to check them."""
    corpus = toy_corpus(tmp_path / "corpus", {f"p{i}": "6 * 7" for i in range(5)})
    out = tmp_path / "out"
    run = proofbatch("run", corpus, "--out", out, "--sandbox", "none", "--problems", "p1,p3")
    assert run.returncode == 0, run.stderr
    manifest = json.loads((out / "sweep.json").read_text())
    assert (manifest["problems"], manifest["corpus_problems"]) == (2, 5)
    status = proofbatch("status", out)
    assert status.stdout.splitlines()[1] == (
        "sweep finished; 3 of the corpus's 5 problems were not selected (--problems p1,p3): run "
        "without --problems to check them too"), status.stdout


def test_sigusr1_prints_where_a_running_sweep_waits_and_the_sweep_goes_on(tmp_path):
    """`kill -USR1 PID`: every thread's stack on stderr (runner/cli.py), and
    the sweep goes on; its Ctrl-C then stops it as before."""
    corpus = toy_corpus(tmp_path / "corpus", {"a.heavy": HOURS})
    out = tmp_path / "out"
    runner = subprocess.Popen([str(PROOFBATCH), "run", str(corpus), "--out", str(out), "--sandbox",
                               "none", "--workers", "1", "--default-timeout", "600"], cwd=ROOT,
                              env={**os.environ, **TOY}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (heartbeat.read(out) or {}).get("running_expected") and time.monotonic() < deadline:
            time.sleep(0.3)
        runner.send_signal(signal.SIGUSR1)
        time.sleep(1)
        assert runner.poll() is None
        runner.send_signal(signal.SIGINT)
        err = runner.communicate(timeout=60)[1]
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
    assert "Current thread" in err and "runner/sweep.py" in err, err
    assert runner.returncode == 130, err
    assert "interrupted; stopped cleanly" in err.strip().splitlines()[-1], err
