"""`proofbatch serve`: the served backend is a sweep's, with its logs kept.

A runner that checks through `run --server DIR` sees only its rows; the
output of each check and the log of an image that failed to load are kept
where the server runs, in DIR/logs, as a sweep keeps them in OUT/logs. (The
server itself, forked from a loaded image, is tests/test_faults.py's.)
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.cli import build_parser
from runner.provers.hol_light.session.command_serve import served_backend


def _args(argv: list[str]):
    return build_parser(argv).parse_args(argv)


def test_the_served_backend_keeps_its_logs_beside_the_socket(tmp_path):
    args = _args(["serve", str(tmp_path / "srv"), "--context-proofs", "trust", "--max-images", "3"])
    backend = served_backend(args)
    assert backend.log_dir == tmp_path / "srv" / "logs"
    assert str(backend.context_proofs) == "trust" and backend.max_images == 3
    assert backend.context_root == Path.cwd()


def test_serve_says_run_s_words_for_the_settings_they_share_without_importing_planning():
    """serve's settings are its own layer's (ServeSettings): it imported
    planning's SweepConfig, a stage above the prover's package (issue 49).
    Their help and defaults stay run's, word for word."""
    import dataclasses

    from runner.planning.sweep_config import SweepConfig
    from runner.provers.hol_light.session import command_serve
    from runner.settings import default_of, help_of

    from ..layout_checker import ROOT, imports_of

    shared = [f.name for f in dataclasses.fields(command_serve.ServeSettings)]
    assert shared == ["hol_light", "context_root", "max_images", "grace", "context_proofs",
                      "no_fallback", "runtime"]
    for name in shared:
        assert help_of(command_serve.ServeSettings, name) == help_of(SweepConfig, name), name
        assert default_of(command_serve.ServeSettings, name) == default_of(SweepConfig, name), name
    args = _args(["serve", "srv"])
    assert {name: getattr(args, name) for name in shared} == {
        name: default_of(SweepConfig, name) for name in shared}
    path = Path(command_serve.__file__)
    imported = [t for _, t in imports_of(ROOT, path, command_serve.__name__)]
    assert not [t for t in imported if t.startswith("runner.planning")], imported


def test_a_runner_on_another_clock_than_the_server_s_is_refused(tmp_path, capsys):
    """`serve --limit-clock wall` serves checks limited as s2n-bignum-bench
    limits them; a runner on the default CPU clock would record rows of the
    other clock, so it is refused in one line, naming the fix."""
    from runner import cli
    from runner.checks.image_server import ImageServer, RemoteSession
    from runner.prover import BackendInfo

    from ..helpers import DEMO

    class Session:
        info = BackendInfo(prover="hol-light", build="test", mode="bytecode", context_proofs="replay")
        backend = None      # none at hand: the server says no context root

    assert _args(["serve", str(tmp_path / "s"), "--limit-clock", "wall"]).limit_clock == "wall"
    server = ImageServer(Session(), tmp_path / "srv", clock="wall").start()
    try:
        assert RemoteSession(tmp_path / "srv").clock() == "wall"
        code = cli.main(["run", str(DEMO), "--out", str(tmp_path / "out"), "--problems", "arith.add_comm",
                         "--server", str(tmp_path / "srv"), "--context-root", str(DEMO)])
    finally:
        server.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "serves checks limited on the wall clock, not cpu" in err[0]
    assert "pass --limit-clock wall" in err[0]
    assert not (tmp_path / "out").exists()          # refused before anything was written


@pytest.mark.hol        # the first server starts booting HOL Light; it is stopped seconds later
def test_a_second_server_on_a_held_folder_is_refused_before_booting(tmp_path):
    """A folder a running server holds (from before its boot) is refused at
    once: one line naming the folder and the holder's pid, exit 2, and no
    second HOL Light boots. (It used to start booting a second session.)"""
    import psutil

    from ..helpers import ROOT

    folder = tmp_path / "srv"
    argv = [sys.executable, "-m", "runner.cli", "serve", str(folder)]
    first = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert first.stderr.readline().startswith("proofbatch serve: starting an image server")
        second = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)
        try:
            _, err = second.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("a second server on the held folder was still running after 30 s: "
                        f"{[p.name() for p in psutil.Process(second.pid).children(recursive=True)]}")
        finally:
            if second.poll() is None:
                os.killpg(second.pid, signal.SIGKILL)
                second.wait()
        lines = err.strip().splitlines()
        assert second.returncode == 2 and len(lines) == 1, lines
        assert lines[0] == (f"proofbatch: error: {folder}: an image server (pid {first.pid}) holds "
                            f"this folder already; use it with `proofbatch run --server {folder}`, "
                            f"stop it first (kill {first.pid}), or serve another folder")
    finally:
        _stop(first, 30)
        first.stderr.close()


def test_a_runner_in_another_mode_than_the_server_s_is_refused(tmp_path, capsys):
    """A native server's rows would say native under a bytecode run's limits
    (and the reverse): refused in one line naming both fixes, before the
    runner compiles anything."""
    from runner import cli
    from runner.checks.image_server import ImageServer
    from runner.prover import BackendInfo

    from ..helpers import DEMO

    class Session:
        info = BackendInfo(prover="hol-light", build="test", mode="native", context_proofs="replay")
        backend = None      # none at hand: the server says no context root

    server = ImageServer(Session(), tmp_path / "srv").start()
    try:
        codes = [cli.main(["run", str(DEMO), "--out", str(tmp_path / f"out-{mode}"), "--mode", mode,
                           "--problems", "arith.add_comm", "--server", str(tmp_path / "srv")])
                 for mode in ("bytecode", "auto")]
    finally:
        server.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert codes == [2, 2] and len(err) == 2, err
    assert err[0].endswith("serves native images, not bytecode; pass --mode native, or serve with "
                           "--mode bytecode")
    assert "not auto" in err[1] and "a server serves bytecode or native" in err[1]
    assert not (tmp_path / "out-bytecode").exists() and not (tmp_path / "out-auto").exists()


def test_a_native_server_s_images_serve_a_second_runner_without_loading_again(native_build, tmp_path):
    """`serve --mode native`: runners check natively in the server's images,
    with the verdicts a sweep of their own gives, and a second runner (a
    rerun with other answers, a resumed sweep) loads no image again: the
    server says each image it loads, and says none for the second."""
    from runner import cli

    from ..helpers import DEMO, ROOT, expected_verdicts

    folder, log = tmp_path / "srv", tmp_path / "serve.log"
    picked = ["arith.add_comm", "arith.false_claim", "fault.cheat_tac", "ring.defs_step2"]
    with open(log, "w") as err:
        server = subprocess.Popen([sys.executable, "-m", "runner.cli", "serve", str(folder), "--mode",
                                   "native", "--context-root", str(DEMO)], cwd=ROOT, stderr=err,
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while "serving HOL Light images" not in log.read_text():
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        assert "--mode native" in log.read_text()       # what a runner must pass, said
        rows = {}
        for out in ("first", "second"):
            code = cli.main(["run", str(DEMO), "--out", str(tmp_path / out), "--mode", "native",
                             "--problems", ",".join(picked), "--server", str(folder)])
            assert code == 0
            rows[out] = {r["problem_id"]: r for r in
                         _csv_rows(tmp_path / out / "results.csv")}
            if out == "first":
                loaded = log.read_text().count("proofbatch serve: loading ")
        assert loaded >= 2          # an empty context and ring.defs_step2's, each once
        assert log.read_text().count("proofbatch serve: loading ") == loaded
        expected = expected_verdicts()
        for out, got in rows.items():
            assert {p: r["verdict"] for p, r in got.items()} == {p: expected[p] for p in picked}, out
            assert {r["mode"] for r in got.values()} == {"native"}, out
    finally:
        _stop(server, 60)


# A context whose function reads, when the proof runs, the collector's
# settings in the check's own process (an answer may not name Gc: the screen
# refuses it), and an answer that proves only under a 4M-word minor heap,
# and else says what it ran under.
READS_ITS_HEAP = ('let pb_minor_words () = (Gc.get ()).Gc.minor_heap_size;;\n'
                  'let pb_gc () = let c = Gc.get () in Printf.sprintf "s=%d,o=%d,i=%d" '
                  'c.Gc.minor_heap_size c.Gc.space_overhead c.Gc.major_heap_increment;;\n')
PROVES_UNDER_4M = ('(fun g -> if pb_minor_words () = 4194304 then ARITH_TAC g else '
                   'failwith ("not the runtime asked for: " ^ pb_gc ()))\n')


def test_served_checks_run_under_their_runner_s_runtime_in_the_server_s_images(native_build, tmp_path):
    """One server's images serve runners of several --runtime settings: a
    check sets its own minor heap, space_overhead and major increment as it
    starts (hol_check.ml), whatever the server's images started with, and
    its row says the runner's setting; without one, native's default (the
    tuned setting), and OCaml's own under --runtime default. What an image
    did before it served (settle) it cannot redo: a runner asking for
    another is refused."""
    from ..helpers import ROOT, make_corpus

    corpus = make_corpus(tmp_path / "corpus", {"rt.heap": (READS_ITS_HEAP, "`x + 0 = x`\n",
                                                           PROVES_UNDER_4M)})
    folder, log = tmp_path / "srv", tmp_path / "serve.log"
    with open(log, "w") as err:
        server = subprocess.Popen([sys.executable, "-m", "runner.cli", "serve", str(folder), "--mode",
                                   "native", "--context-root", str(corpus)], cwd=ROOT, stderr=err,
                                  start_new_session=True)

    def run(out: str, *extra: str):
        return subprocess.run([sys.executable, "-m", "runner.cli", "run", str(corpus), "--out",
                               str(tmp_path / out), "--mode", "native", "--server", str(folder),
                               "--default-timeout", "300", *extra], cwd=ROOT, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while "serving HOL Light images" not in log.read_text():
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        asked, plain, ocaml = run("asked", "--runtime", "s=4M"), run("plain"), \
            run("ocaml", "--runtime", "default")
        assert {asked.returncode, plain.returncode, ocaml.returncode} == {0}, (asked.stderr, plain.stderr,
                                                                              ocaml.stderr)
        (row,) = _csv_rows(tmp_path / "asked" / "results.csv")
        assert (row["verdict"], row["runtime"]) == ("OK", "s=4M"), row
        # Without --runtime: native's default. Under `default`: OCaml 4.13.1's
        # own values, though the server's images started under native's.
        for out, key, gc in (("plain", "s=16M,o=200", f"s={16 << 20},o=200,i=15"),
                             ("ocaml", "default", f"s={256 << 10},o=120,i=15")):
            (row,) = _csv_rows(tmp_path / out / "results.csv")
            assert (row["verdict"], row["runtime"]) == ("FAIL", key), row
            assert f"not the runtime asked for: {gc}" in row["reason"], row
        refused = run("compact", "--runtime", "s=4M,settle=compact")
        assert refused.returncode == 2, refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert "settled with settle=collect" in line and "not settle=compact" in line, line
        assert not (tmp_path / "compact").exists()
    finally:
        _stop(server, 60)


def _stop(server, grace_s: float) -> None:
    """SIGTERM a server's process group (it stops cleanly), SIGKILL after ``grace_s``."""
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def _csv_rows(path):

    with open(path, newline="") as f:
        return list(csv.DictReader(f))
