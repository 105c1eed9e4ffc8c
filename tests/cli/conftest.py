"""Fixtures of the command-line tests: a valid corpus, a HOL Light checkout
that trips a wire if it is ever started, an --out fresh or left by an earlier
sweep, and a runner of `proofbatch` that checks nothing ran."""

from __future__ import annotations
import subprocess
import time
from pathlib import Path
import pytest
from runner import cli
from ..helpers import ADD
from ..helpers import FAST_S, NO_BOX, WORD, make_problem, previous_sweep, snapshot


@pytest.fixture
def corpus(tmp_path) -> Path:
    """Two valid problems: one in category bit_vector, one in the default category."""
    root = tmp_path / "corpus"
    make_problem(root, WORD, category="bit_vector\n")
    make_problem(root, ADD, query="`1 + 1 = 2`\n", answer="ARITH_TAC\n")
    return root


@pytest.fixture
def tripwire(tmp_path) -> Path:
    """The file the fake HOL Light writes when something starts it."""
    return tmp_path / "hol-light-was-started"


@pytest.fixture
def hol(tmp_path, tripwire) -> Path:
    """A HOL Light checkout as far as validation can tell, that only trips the wire."""
    checkout = tmp_path / "hol-light"
    checkout.mkdir()
    hol_sh = checkout / "hol.sh"
    # It reads the phrases it is sent before giving up, as a toplevel would
    # (one that exits unread makes runner/provers/hol_light/session/backend.py _boot's stdin write race
    # into an unhandled BrokenPipeError).
    hol_sh.write_text(f"#!/bin/sh\necho \"$0 $*\" >> '{tripwire}'\ncat > /dev/null\nexit 1\n")
    hol_sh.chmod(0o755)
    return checkout


@pytest.fixture(params=["fresh", "previous-sweep"])
def out(request, tmp_path):
    """--out either does not exist yet or holds a previous sweep; yields a checker
    that asserts it is exactly as it was."""
    path = tmp_path / "out"
    if request.param == "previous-sweep":
        previous_sweep(path)
    before = snapshot(path) if path.exists() else None

    class Out:
        def __init__(self):
            self.path = path

        def assert_untouched(self):
            if before is None:
                assert not path.exists(), f"--out was created: {sorted(map(str, path.rglob('*')))}"
            else:
                assert snapshot(path) == before, "--out changed"

    return Out()


@pytest.fixture
def no_processes(monkeypatch):
    """Fail the test if anything in this process starts a program (HOL Light,
    dpkg-query, ocaml -vnum, git...): validating input needs none."""
    started = []

    def refuse(argv, *args, **kwargs):
        started.append(argv)
        raise AssertionError(f"a process was started during validation: {argv!r}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    return started


@pytest.fixture
def run(capsys, no_processes, tripwire, out):
    """Run ``proofbatch run CORPUS --out OUT ARGS`` in-process; return
    (exit code, stdout, stderr lines), after checking that it was fast, started
    nothing and left --out alone."""

    def run_cli(corpus: Path, *args) -> tuple[int, str, list[str]]:
        argv = ["run", str(corpus), "--out", str(out.path), *NO_BOX, *map(str, args)]
        started = time.monotonic()
        try:
            code = cli.main(argv)
        except SystemExit as exc:        # argparse's own errors
            code = exc.code
        elapsed = time.monotonic() - started
        captured = capsys.readouterr()
        assert elapsed < FAST_S, f"rejecting bad input took {elapsed:.1f} s"
        assert no_processes == []
        assert not tripwire.exists(), f"HOL Light was started: {tripwire.read_text()}"
        out.assert_untouched()
        return code, captured.out, captured.err.splitlines()

    return run_cli
