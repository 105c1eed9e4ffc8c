"""`proofbatch status` reads a running sweep from its directory alone: done
and total, counts per verdict, and the check each worker is running with
its elapsed time against its limit."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import threading
import time
from pathlib import Path

import pytest

from runner import cli, events
from runner.checks.priority import niceness
from runner.reporting.progress import SweepProgress
from runner.reporting.status import read_status
from runner.sweep_dir import NOT_KEPT, resume_command
from runner.planning.sweep_config import SweepConfig

from ..helpers import demo_config, make_corpus, row, sweep_with
from ..helpers import tiny_corpus



@pytest.mark.hol
def test_status_of_a_running_sweep(hol_session, tmp_path, capsys):
    corpus, timeouts = tiny_corpus(tmp_path, spin_limit=5)
    out = tmp_path / "out"
    config = demo_config(out, corpus=corpus, category_timeouts=timeouts)
    sweep = threading.Thread(target=sweep_with, args=(hol_session, config))
    sweep.start()
    try:
        deadline, status = time.monotonic() + 60, None
        while time.monotonic() < deadline:
            if (out / "sweep.json").exists():
                status = read_status(out)
                if any(r.problem_id == "slow.spin" for r in status.running) and status.done == 3:
                    break
            time.sleep(0.2)
        assert status is not None and status.total == 4
        spinning = next(r for r in status.running if r.problem_id == "slow.spin")
        assert 0 <= spinning.elapsed_s < 5 + 3 and spinning.timeout_s == 5
        assert spinning.alive is True
        assert status.counts["OK"] == 3
        assert cli.main(["status", str(out)]) == 0
        printed = " ".join(capsys.readouterr().out.split())
        assert "3 of 4 checks done" in printed and "slow.spin" in printed
    finally:
        sweep.join()
    final = read_status(out)
    assert final.done == 4 and final.running == []
    assert final.counts["TIMEOUT"] == 1


# -- the command that resumes a stopped sweep (no HOL Light) ---------------------
#
# It used to drop --hol-light, --context-proofs and --map-mode, among others,
# so that running it as printed was refused. It is built from the sweep's
# settings, declared once with their flags (runner/planning/sweep_config.py,
# from which `run` makes its parser), and what sweep.json records: parsed
# back with run's parser, it carries the settings of the run it came from.


def _run_parser() -> argparse.ArgumentParser:
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def _config_options() -> list[argparse.Action]:
    """The options of `run` that set a field of the sweep's config a resume keeps."""
    fields = {f.name for f in dataclasses.fields(SweepConfig)} - NOT_KEPT
    return [a for a in _run_parser()._actions
            if a.option_strings and a.dest in fields and a.dest != "out"]


def _effective(args: argparse.Namespace, name: str, cwd: Path):
    """What option ``name`` of a parsed `run` means, run from ``cwd``."""
    value = getattr(args, name)
    if name == "context_root" and value is None:
        return cwd.resolve()                       # HOL Light's context root defaults to the cwd
    if isinstance(value, Path):
        return (cwd / value).resolve()
    if name == "problems" and value:
        return [f"@{(cwd / v[1:]).resolve()}" if v.startswith("@") else v for v in value]
    return value


def _resume_of(argv: list[str], cwd: Path, manifest_extra: dict | None = None) -> list[str]:
    """The resume command of a sweep started as ``proofbatch run argv`` in ``cwd``, as
    sweep.json records it (runner/sweep.py check_manifest), split as a shell would."""
    args = _run_parser().parse_args(argv)
    config = {f.name: getattr(args, f.name, f.default) for f in dataclasses.fields(SweepConfig)}
    config["problems"] = tuple(args.problems) if args.problems else None
    recorded = json.loads(json.dumps({k: str(v) if isinstance(v, Path) else v
                                      for k, v in config.items()}))
    manifest = {"corpus": str((cwd / argv[0]).resolve()), "config": recorded, "cwd": str(cwd),
                "prover": "hol-light", "context_root": str(_effective(args, "context_root", cwd)),
                **(manifest_extra or {})}
    return shlex.split(resume_command(manifest, cwd / "out"))


def test_the_resume_command_gives_every_option_of_the_run_back(tmp_path):
    """Every option of `run` that sets the sweep's config, each given a value
    other than its default (options added later included), comes back."""
    argv = ["corpus", "--out", "out"]
    for action in _config_options():
        flag = max(action.option_strings, key=len)
        if isinstance(action, argparse._StoreTrueAction):
            argv.append(flag)
        elif action.choices:
            argv += [flag, next(c for c in action.choices if c != action.default)]
        elif action.dest == "problems":
            argv += [flag, "arith.*,@lists/subset.txt", flag, "logic.drinker"]
        elif action.dest == "mem_limit":
            argv += [flag, "3G"]
        elif action.type is Path:
            argv += [flag, f"given/{action.dest}"]       # relative: to the run's directory
        elif action.type in (int, float):
            argv += [flag, str((action.default or 0) + 3)]
        elif action.type is niceness:
            argv += [flag, "5"]         # the default is auto (None)
        else:
            argv += [flag, f"value-of-{action.dest}"]
    cwd, elsewhere = tmp_path / "started-here", tmp_path / "status-here"
    resume = _resume_of(argv, cwd)
    assert resume[:2] == ["proofbatch", "run"]
    original, again = _run_parser().parse_args(argv), _run_parser().parse_args(resume[2:])
    for action in _config_options():
        assert _effective(again, action.dest, elsewhere) == _effective(original, action.dest, cwd), \
            action.dest
    assert _effective(again, "corpus", elsewhere) == (cwd / "corpus").resolve()
    assert _effective(again, "out", elsewhere) == (cwd / "out").resolve()
    names = {a.dest for a in _config_options()}
    assert {"hol_light", "context_proofs", "map_mode", "map_build", "mode", "context_root",
            "answers", "timeout_map", "problems"} <= names


def test_the_resume_command_of_a_sweep_with_defaults_is_short(tmp_path):
    resume = _resume_of(["corpus", "--out", "out"], tmp_path)
    # Only the context root, which defaults to where the sweep was started.
    assert resume == ["proofbatch", "run", str(tmp_path / "corpus"), "--out", str(tmp_path / "out"),
                      "--context-root", str(tmp_path)]


def _fake_hol(root: Path) -> Path:
    """A HOL Light checkout as far as validation can tell; started, it fails."""
    (root / "hol").mkdir(parents=True)
    (root / "hol" / "hol.sh").write_text("#!/bin/sh\ncat > /dev/null\nexit 1\n")
    (root / "hol" / "hol.sh").chmod(0o755)
    return root / "hol"


def test_a_stopped_sweep_resumes_with_the_command_status_prints(tmp_path, monkeypatch, capsys):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    elsewhere.mkdir()
    _fake_hol(work)
    for pid in ("a.one", "a.two", "b.three"):
        make_corpus(work / "corpus", {pid: ("let x = 1;;\n", "`T`\n", "ARITH_TAC\n")})
        (work / "answers" / pid).mkdir(parents=True)
        (work / "answers" / pid / "answer.txt").write_text("REWRITE_TAC[]\n")
    (work / "map.json").write_text(json.dumps([{"problem_id": "a.one", "prove_secs": 1.0,
                                                "timeout_sec": 30}]))
    (work / "timeouts.json").write_text(json.dumps({"generic": 45}))
    (work / "subset.txt").write_text("# the a's\na.*\n")
    argv = ["corpus", "--out", "out", "--hol-light", "hol", "--context-proofs", "trust",
            "--timeout-map", "map.json", "--map-mode", "bytecode", "--map-build", "B",
            "--category-timeouts", "timeouts.json", "--default-timeout", "90", "--answers", "answers",
            "--workers", "2", "--mem-limit", "1G", "--grace", "3", "--policy", "naive", "--seed", "7",
            "--sandbox", "none", "--stop-on-first-ok", "--problems", "@subset.txt,b.three"]
    monkeypatch.chdir(work)
    # Past validation, the fake HOL Light fails to boot: exit 1, the sweep stopped.
    assert cli.main(["run", *argv]) == 1, capsys.readouterr().err
    capsys.readouterr()
    monkeypatch.chdir(elsewhere)
    assert cli.main(["status", str(work / "out")]) == 0
    printed = capsys.readouterr().out
    assert "stopped" in printed
    resume = shlex.split(next(line for line in printed.splitlines()
                              if line.startswith("resume with: "))[len("resume with: "):])
    assert resume[:2] == ["proofbatch", "run"]
    original, again = _run_parser().parse_args(argv), _run_parser().parse_args(resume[2:])
    for action in _config_options():
        assert _effective(again, action.dest, elsewhere) == _effective(original, action.dest, work), \
            action.dest
    # Run as printed, from elsewhere, it resumes the sweep: nothing refused
    # (exit 2), the same checks, and the fake HOL Light fails again (exit 1).
    assert cli.main(resume[1:]) == 1, capsys.readouterr().err
    assert json.loads((work / "out" / "sweep.json").read_text())["checks"] == 3


# -- the screen of a stopped sweep -------------------------------------------------
#
# Ctrl-C and SIGTERM kill the images still loading (runner/cli.py): they did
# not fail, and the screen must not say they did.


def _image_fails(name: str) -> None:
    # As runner/provers/hol_light/session/fork_session.py says it when an image's attach ends.
    events.say("image", key=name, name=f"the context of {name}")
    events.say("imaged", key=name, name=f"the context of {name}", ok=False)


def test_images_killed_by_sigterm_are_not_reported_failed(capsys):
    with pytest.raises(cli.Terminated):
        with SweepProgress(None, 1) as bar:
            bar.start(2, 0)
            _image_fails("p.one")
            raise cli.Terminated()      # what SIGTERM raises in the runner
    assert "failed" not in capsys.readouterr().err
    with pytest.raises(KeyboardInterrupt):
        with SweepProgress(None, 1):
            _image_fails("p.one")
            raise KeyboardInterrupt
    assert "failed" not in capsys.readouterr().err


def test_a_compile_killed_by_a_stop_is_not_reported_failed(capsys):
    """Ctrl-C or SIGTERM while a native run compiles kills the compiler: the
    log said "cannot compile natively" of a context that did not fail."""
    from runner.reporting.progress import PrepareLog

    def compile_fails(name: str) -> None:
        events.say("compile", key=name, name=f"the context of {name}")
        events.say("compiled", key=name, name=f"the context of {name}", ok=False)

    with pytest.raises(cli.Terminated):
        with PrepareLog():
            compile_fails("p.one")
            raise cli.Terminated()
    assert "cannot compile" not in capsys.readouterr().err
    # A real failure is said: before the next stage, or as preparation ends.
    with PrepareLog():
        compile_fails("p.one")
        events.say("compile", key="p.two", name="the context of p.two")
        compile_fails("p.three")
    err = capsys.readouterr().err
    assert err.index("cannot compile natively: the context of p.one") < \
        err.index("compiling natively: the context of p.two")
    assert "cannot compile natively: the context of p.three" in err


def test_an_image_that_fails_in_a_running_sweep_is_still_said(capsys):
    with SweepProgress(None, 1) as bar:
        bar.start(2, 0)
        _image_fails("p.one")
        bar.row(dataclasses.replace(row("p.one"), verdict="ERROR", reason="context did not load"))
    err = capsys.readouterr().err
    assert err.index("image failed to load: the context of p.one") < err.index("ERROR    p.one")
    with SweepProgress(None, 1):
        _image_fails("p.two")
    assert "image failed to load: the context of p.two" in capsys.readouterr().err


# -- what status says of a sweep's settings, and whole ids in a log (issue 46) -------

LONG_ID = "arm.bignum_kmul_32_64.BIGNUM_KMUL_32_64_SUBROUTINE_CORRECT_AND_SOME_MORE"


def _running_sweep(out: Path, **manifest) -> None:
    """A sweep directory as a live runner (this process) leaves it, one check
    of a long id running on a worker with a long name."""
    import os
    import socket

    (out / "running").mkdir(parents=True)
    (out / "sweep.json").write_text(json.dumps({"checks": 2, **manifest}))
    now = time.time()
    (out / "status.json").write_text(json.dumps({
        "state": "running", "beat": now, "interval": 2.0, "host": socket.gethostname(),
        "pid": os.getpid(), "total": 2, "done": 1, "skipped": 0, "counts": {"OK": 1},
        "expected_left_s": 5.0, "boot_left_s": 0.0, "workers": 1, "eta_basis": "from the plan",
        "recent": []}))
    (out / "running" / "w0.json").write_text(json.dumps({
        "problem_id": LONG_ID, "attempt": 0, "timeout_s": 600, "dispatched": now - 3,
        "started": now - 3, "worker": f"{socket.gethostname()}-123456-20240101T000000-abcdef/w0",
        "host": socket.gethostname(), "pid": os.getpid()}))


def test_status_says_the_clock_niceness_and_host_factor_of_the_sweep(tmp_path, capsys):
    out = tmp_path / "out"
    _running_sweep(out, limit_clock="cpu", nice=-10, host_factor=1.0000001)
    assert cli.main(["status", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert ("limits on the cpu clock; checks at niceness -10; host factor 1.0000001 (the map's "
            "limits x1.0000001)") in printed, printed
    # A sweep without a map, and one from before the clock was recorded (wall).
    plain = tmp_path / "plain"
    _running_sweep(plain, nice=0, host_factor=None)
    assert cli.main(["status", str(plain)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "limits on the wall clock; checks at niceness 0; no host factor (no timeout map)" in printed


def test_status_and_run_written_to_a_pipe_keep_whole_ids_and_lines(tmp_path):
    """Off a terminal rich laid out for 80 columns: the running table cut
    ids to "arm.bignum_k…", and lines were broken. A log must hold them whole."""
    import os
    import subprocess

    from ..helpers import PROOFBATCH, ROOT
    from ..test_registry import toy_corpus

    out = tmp_path / "out"
    _running_sweep(out, limit_clock="cpu", nice=0)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run([str(PROOFBATCH), "status", str(out)], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert LONG_ID in proc.stdout and "…" not in proc.stdout, proc.stdout
    assert "-abcdef/w0" in proc.stdout, proc.stdout
    # run: a warning naming a long path is one line of the log.
    corpus = toy_corpus(tmp_path / ("a-corpus-with-a-long-enough-name-" * 2) / "corpus",
                        {"quick": ("6 * 7", "42", "OK"), LONG_ID: ("6 * 7", "42", "OK")})
    bench_map = corpus.parent / "map.json"
    bench_map.write_text(json.dumps([{"problem_id": "quick", "prove_secs": 1.0, "timeout_sec": 30}]))
    proc = subprocess.run([str(PROOFBATCH), "run", str(corpus), "--out", str(corpus.parent / "out"),
                           "--timeout-map", str(bench_map), "--sandbox", "none"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**env, "PROOFBATCH_PROVERS": "tests.toy_prover:PROVER",
                               "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout + proc.stderr
    (warning,) = [line for line in said.splitlines() if "covers 1 of the corpus's 2" in line]
    assert str(bench_map) in warning and warning.endswith("get category or default limits"), said
    assert "…" not in said and str(corpus.parent / "out") in said, said


# -- a run that has not started its sweep yet (issue 46) -------------------------------


@pytest.mark.hol
def test_status_of_a_run_still_compiling_its_contexts(tmp_path):
    """For 17-96 s while a native run compiled its contexts, status answered
    "not a sweep directory". A real run of the demo corpus, natively: once it
    is past its input checks, status says it is preparing and what it does."""
    import os
    import signal
    import subprocess

    from runner.results.preparing import PREPARING_FILE
    from ..helpers import DEMO, PROOFBATCH, ROOT

    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "PROOFBATCH_CACHE"}   # the cached build
    runner = subprocess.Popen([str(PROOFBATCH), "run", str(DEMO), "--out", str(out), "--mode", "native",
                               "--category-timeouts", str(DEMO / "timeouts.json"), "--workers", "1",
                               "--context-root", str(DEMO), "--mem-limit", "2G"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    seen: list[str] = []
    try:
        deadline, status = time.monotonic() + 600, None
        while time.monotonic() < deadline and runner.poll() is None:
            if (out / PREPARING_FILE).exists():
                status = read_status(out)
                seen.append(status.stage or status.state)
                if status.state == "preparing" and "compiling natively" in status.stage:
                    break
            time.sleep(0.2)
        assert runner.poll() is None, runner.communicate()[1]
        assert status is not None and status.state == "preparing", seen
        assert "compiling natively" in status.stage, seen
        assert status.clock == "cpu" and status.nice is not None, status
        # As the command says it, to a pipe: no "not a sweep directory".
        proc = subprocess.run([str(PROOFBATCH), "status", str(out)], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        said = " ".join(proc.stdout.split())
        assert f"{out}: sweep preparing (its runner, pid {runner.pid} on host" in said, said
        assert "compiling natively" in said and "limits on the cpu clock" in said, said
    finally:
        os.killpg(runner.pid, signal.SIGTERM)
        runner.communicate(timeout=120)
    # Stopped while it prepared: the record goes with it, and the directory is a sweep's to resume.
    assert not (out / PREPARING_FILE).exists()


def test_a_preparation_record_left_by_a_killed_run_is_not_a_live_run(tmp_path):
    """kill -9 while a run prepares leaves OUT/preparing.json: status sees its
    runner gone, and the next run takes the directory as a sweep's."""
    import subprocess
    import sys

    from runner.errors import InputError
    from runner.results.preparing import PREPARING_FILE, Preparing, read_preparing
    from runner.sweep_dir import check_out_dir

    out = tmp_path / "out"
    child = subprocess.run([sys.executable, "-c", "import os, sys; from pathlib import Path; "
                            "from runner.results.preparing import Preparing; "
                            f"p = Preparing(Path({str(out)!r}), limit_clock='cpu', nice=0).__enter__(); "
                            "os._exit(9)"], cwd=Path(__file__).resolve().parents[2], timeout=60)
    assert child.returncode == 9 and (out / PREPARING_FILE).exists()
    assert read_preparing(out) is None
    with pytest.raises(InputError, match="not a sweep directory"):
        read_status(out)
    check_out_dir(demo_config(out))          # no "someone's files": it is a sweep's
    # Alive, it is read; ended, it is gone, and so is the directory it made.
    fresh = tmp_path / "new" / "out"
    with Preparing(fresh, limit_clock="wall", nice=0, host_factor="auto"):
        s = read_status(fresh)
        assert s.state == "preparing" and s.clock == "wall" and s.host_factor == "auto", s
    assert not (tmp_path / "new").exists()


# -- a heavy check you can watch (issue 44) ----------------------------------------------

def test_a_heavy_checks_cpu_time_against_its_limit_and_what_it_has_left(tmp_path, capsys):
    """An hour-long check's wall time says little on a loaded host: status
    shows the CPU time its guard published (RunningBoard.progress) against
    its CPU limit, and the ETA counts what the heavy check has left."""
    import os
    import socket

    from runner.results.running import RunningBoard

    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"checks": 3, "limit_clock": "cpu", "nice": -10}))
    now = time.time()
    heavy = "arm.mldsa_intt.MLDSA_INTT_CORRECT"
    (out / "status.json").write_text(json.dumps({
        "state": "running", "beat": now, "interval": 2.0, "host": socket.gethostname(),
        "pid": os.getpid(), "total": 3, "done": 1, "skipped": 0, "counts": {"OK": 1},
        # One light check left beside the heavy one: shared out, 5 s; the heavy
        # check still has 1,500 - 412 s of its plan's time.
        "expected_left_s": 1510.0, "boot_left_s": 0.0, "workers": 2, "eta_basis": "from the plan",
        "running_expected": [[heavy, 0, 1500.0]], "recent": []}))
    board = RunningBoard(out, "w0", "w0")
    board.start(heavy, 0, 1639.0, host_factor=1.25)
    board.started()
    board.progress(412.4, 900 << 20, "cpu")
    status = read_status(out)
    (r,) = status.running
    assert (r.cpu_s, r.peak_rss_mb, r.clock) == (412.4, 900, "cpu")
    assert r.against_limit() == "412 s of 1,639 s CPU"
    assert status.eta_s == pytest.approx(1500.0 - 412.4)
    assert cli.main(["status", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert heavy in printed and "412 s of 1,639 s CPU" in printed and " 900 " in printed
    import socket as _socket
    assert f"host factors by node: {_socket.gethostname()} x1.25 (1 running)" in printed
    # While it waits for its image, none of its limit has run, and it says so.
    board.start("arm.x.Y", 0, 300.0)
    (r,) = read_status(out).running
    assert r.against_limit().startswith("waiting ") and r.against_limit().endswith(
        " s for its image; limit 300 s"), r.against_limit()
    # Once it runs, before its guard has said anything, its wall time stands in, and says so.
    board.started()
    (r,) = read_status(out).running
    assert r.against_limit().endswith("s of 300 s wall")
