"""Start-up (issue 24, part 4): `proofbatch --version`, `--help` and `status`
import only what they use. Building the parser used to import every
subcommand, report's matplotlib included, and took seconds on a loaded host.

Each command runs in a fresh interpreter, which then lists the heavy modules
it holds. No timings here (benchmarks/checks/startup.py measures them): a heavy
import is a fact, on any host.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap

import pytest

from .helpers import ROOT

HEAVY = ("matplotlib", "pyarrow", "dask", "distributed", "submitit", "numpy",
         "runner.provers.hol_light.session.backend", "runner.provers.isabelle.backend")

PROBE = textwrap.dedent("""
    import json, sys
    from runner.cli import main
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:          # --version and --help exit from argparse
        code = exc.code
    heavy = sorted({h for m in sys.modules for h in json.loads(%r)
                    if m == h or m.startswith(h + ".")})
    print("\\nPROBE " + json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
""") % json.dumps(HEAVY)


def probe(*argv: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    line = next(l for l in proc.stderr.splitlines() if l.startswith("PROBE "))
    return {**json.loads(line[len("PROBE "):]), "stdout": proc.stdout, "stderr": proc.stderr}


def a_sweep(tmp_path):
    """A sweep directory as a running sweep leaves it: sweep.json and status.json."""
    from runner.results import heartbeat
    from runner.results.done import Done

    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"checks": 3, "corpus": str(tmp_path / "c"),
                                                "config": {}, "prover": "hol-light"}))
    beat = heartbeat.Heartbeat(out, total=3, done=Done(None), skipped=0, workers=1,
                               resume="proofbatch run c --out out")
    beat.publish("stopped")
    return out


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["status"]],
                         ids=["--version", "--help", "status"])
def test_version_help_and_status_import_nothing_heavy(tmp_path, argv):
    if argv == ["status"]:
        argv = ["status", str(a_sweep(tmp_path))]
    got = probe(*argv)
    assert got["code"] == 0, got["stderr"]
    assert got["heavy"] == [], f"`proofbatch {' '.join(argv)}` imported {got['heavy']}"
    if argv == ["--version"]:
        assert got["stdout"].startswith("proofbatch ")
    if argv == ["--help"]:
        for name in ("run", "status", "report", "serve", "extract"):
            assert name in got["stdout"]
    if argv[0] == "status":
        assert "stopped" in got["stdout"], got["stdout"]


def test_a_command_still_gets_its_own_arguments():
    """Only the named command is filled in, and it is filled in whole."""
    got = probe("simulate", "--help")
    assert got["code"] == 0 and "--timeout-map" in got["stdout"], got["stderr"]
    got = probe("no-such-command")
    assert got["code"] == 2 and "is not a choice" in got["stderr"], got["stderr"]


def test_the_command_table_matches_the_commands():
    """runner.commands.all_commands says each command's name and help
    without importing it: it must say what the module says, for every
    command, ours and the provers'."""
    from runner.commands import all_commands

    listed = all_commands()
    ours = [m for _, m, _ in listed if m.startswith("runner.commands.")]
    assert ours == [f"runner.commands.{n}" for n in
                    ("run", "status", "profile", "timeout_map", "calibrate", "simulate", "report")]
    assert {"serve", "build-native", "extract"} <= {name for name, _, _ in listed}
    for name, module_name, help_text in listed:
        module = importlib.import_module(module_name)
        assert (module.NAME, module.HELP) == (name, help_text), module_name
