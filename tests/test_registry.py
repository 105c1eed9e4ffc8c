"""The prover registry (issue 26, part 2): a prover is one package exporting
a ProverDescriptor plus one line in runner/prover_registry.py's BUILTIN, or
a PROOFBATCH_PROVERS=module:attr registration.

The registry's code names no prover; the toy prover (tests/toy_prover/), a
real process behind every check and registered by these tests alone, is
swept through `proofbatch run`, `simulate` and `report` in subprocesses that
see it only through the environment.
"""

from __future__ import annotations

import ast
import csv
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runner import prover_registry as provers
from runner.cli import main
from runner.errors import InputError
from runner.prover_registry import ENV, ProverDescriptor
from runner.planning.sweep_config import SweepConfig
from runner.sweep import prepare

from .helpers import ROOT
from .toy_prover import PROVER as TOY

TOY_REF = "tests.toy_prover:PROVER"
HOL_DEMO = ROOT / "examples" / "hol_light_demo"
ISABELLE_DEMO = ROOT / "examples" / "isabelle_demo"
# A prover's name as code or text would spell it: HOL Light, hol-light,
# hol_light, HOL, Isabelle; not words that merely contain "hol" (whole, holds).
PROVER_NAME = re.compile(r"isabelle|hol[-_ ]?light|\bhol\b", re.IGNORECASE)

# problem id -> (goal, claimed value, verdict)
TOY_PROBLEMS = {
    "ok": ("6 * 7", "42", "OK"),
    "fail": ("2 + 2", "5", "FAIL"),
    "slow": ("sum(range(10**12))", "0", "TIMEOUT"),      # hours; the limit is 1 s
    "bad": ("1 +", "2", "ERROR"),
}


def toy_corpus(root: Path, problems=TOY_PROBLEMS) -> Path:
    root.mkdir(parents=True)
    (root / "toy.toml").write_text("# the toy prover's corpus (tests/toy_prover)\n")
    for pid, (goal, claim, _) in problems.items():
        (root / pid).mkdir()
        (root / pid / "goal.txt").write_text(goal + "\n")
        (root / pid / "answer.txt").write_text(claim + "\n")
    return root


@pytest.fixture
def toy(monkeypatch):
    """The toy prover registered, in this process and in its children."""
    monkeypatch.setenv(ENV, TOY_REF)


# -- the registry names no prover ----------------------------------------------------


def test_the_registry_names_no_prover_but_in_its_one_list_line():
    """Every mention of a prover in the registry's source (code, strings,
    comments and docstrings alike) is on the one line listing the
    descriptors. The registry is runner/prover_registry.py, below the stages
    that ask it (issue 49); runner/provers/ holds the packages, its
    ``__init__`` a docstring only."""
    registry = (ROOT / "runner" / "prover_registry.py").read_text()
    mentions = [line for line in registry.splitlines() if PROVER_NAME.search(line)]
    assert len(mentions) == 1, mentions
    assert mentions[0].startswith("BUILTIN = (")
    package = ast.parse((ROOT / "runner" / "provers" / "__init__.py").read_text())
    assert len(package.body) == 1 and ast.get_docstring(package), "runner/provers/__init__.py"
    assert not (ROOT / "runner" / "provers" / "registry.py").exists()
    # That line lists each built-in prover package's descriptor, and only those.
    packages = sorted(d.name for d in (ROOT / "runner" / "provers").iterdir()
                      if (d / "__init__.py").is_file()
                      and "\nPROVER = ProverDescriptor(" in (d / "__init__.py").read_text())
    assert sorted(ref.split(":")[0].rsplit(".", 1)[1] for ref in provers.BUILTIN) == packages
    assert all(ref.endswith(":PROVER") for ref in provers.BUILTIN)


def test_the_built_in_descriptors(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert provers.names() == ("hol-light", "isabelle")
    assert provers.modal_maps("hol-light") and not provers.modal_maps("isabelle")
    assert provers.detect(HOL_DEMO) == "hol-light" and provers.detect(ISABELLE_DEMO) == "isabelle"
    # Each prover's subcommands are its descriptor's, and say what their modules say.
    for name, module_name, help_text in provers.commands():
        module = importlib.import_module(module_name)
        assert (module.NAME, module.HELP) == (name, help_text)
    assert provers.command_modules() == [f"runner.provers.hol_light.{room}.command_{m}" for room, m in
                                         (("session", "serve"), ("native", "build_native"),
                                          ("extract", "extract"))]


def test_a_descriptor_is_frozen_and_every_field_says_what_it_is():
    import dataclasses

    fields = dataclasses.fields(ProverDescriptor)
    assert {f.name for f in fields} >= {"name", "recognises", "load", "check_config", "build",
                                        "offline_plans", "commands"}
    assert all(f.metadata.get("help") for f in fields), [f.name for f in fields if not f.metadata]
    with pytest.raises(dataclasses.FrozenInstanceError):
        TOY.name = "other"          # type: ignore[misc]


# -- registering a prover ------------------------------------------------------------


def test_unregistered_the_toy_corpus_is_nobody_s(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    corpus = toy_corpus(tmp_path / "c")
    assert "toy" not in provers.names()
    assert provers.detect(corpus) == "hol-light"        # the default layout, which refuses it
    with pytest.raises(InputError, match="'toy' is not a prover"):
        provers.detect(corpus, "toy")


def test_registered_the_toy_prover_is_detected_read_and_checked(tmp_path, toy):
    corpus = toy_corpus(tmp_path / "c")
    assert provers.names() == ("hol-light", "isabelle", "toy")
    assert provers.detect(corpus) == "toy" and provers.detect(corpus, "toy") == "toy"
    assert provers.detect(ISABELLE_DEMO) == "isabelle" and provers.detect(HOL_DEMO) == "hol-light"
    problems = provers.load_problems(corpus)
    assert [p.problem_id for p in problems] == sorted(TOY_PROBLEMS)
    assert not provers.modal_maps("toy")
    assert provers.commands()[-1] == TOY.commands[0]
    with pytest.raises(InputError, match="not a toy corpus: it has no toy.toml"):
        provers.detect(HOL_DEMO, "toy")
    # Another prover's flag is refused for a toy corpus, by the registry.
    with pytest.raises(InputError) as err:
        prepare(SweepConfig(corpus=corpus, out=tmp_path / "o", hol_light=tmp_path))
    assert (err.value.where, err.value.problem) == ("--hol-light", "given for a toy corpus")
    with pytest.raises(InputError, match="given for a toy corpus"):
        prepare(SweepConfig(corpus=corpus, out=tmp_path / "o", isabelle=tmp_path))
    # And the toy prover's own check refuses what it has no use for.
    with pytest.raises(InputError, match="one way to check"):
        prepare(SweepConfig(corpus=corpus, out=tmp_path / "o", mode="native"))
    assert not (tmp_path / "o").exists()


def test_a_corpus_two_provers_recognise_needs_prover(tmp_path, toy):
    corpus = toy_corpus(tmp_path / "c")
    (corpus / "isabelle.toml").write_text("[isabelle]\n")
    with pytest.raises(InputError, match=r"laid out for several provers \(isabelle, toy\)"):
        provers.detect(corpus)
    assert provers.detect(corpus, "toy") == "toy"


@pytest.mark.parametrize("value, message", [
    ("no_colon", "is not a module:attr reference"),
    ("tests.no_such_module:PROVER", "does not import"),
    ("tests.toy_prover:IMAGE", "is not a runner.prover_registry.ProverDescriptor"),
])
def test_a_bad_registration_is_bad_input(monkeypatch, value, message):
    monkeypatch.setenv(ENV, value)
    with pytest.raises(InputError, match=message) as err:
        provers.names()
    assert err.value.where == ENV


def test_two_provers_of_one_name_are_refused(monkeypatch):
    import dataclasses

    import tests.toy_prover as package

    monkeypatch.setattr(package, "TWIN", dataclasses.replace(TOY), raising=False)
    monkeypatch.setenv(ENV, f"{TOY_REF},tests.toy_prover:TWIN")
    with pytest.raises(InputError, match="a second prover named 'toy'"):
        provers.names()
    monkeypatch.setenv(ENV, f"{TOY_REF},{TOY_REF}")     # the same one twice is once
    assert provers.names()[-1] == "toy"


def test_the_toy_prover_s_subcommand(tmp_path):
    """A prover's subcommands come from its descriptor: (name, module, help)."""
    name, module_name, help_text = TOY.commands[0]
    module = importlib.import_module(module_name)
    assert (module.NAME, module.HELP) == (name, help_text)
    corpus = toy_corpus(tmp_path / "c")
    import argparse

    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    assert module.run(parser.parse_args([str(corpus / "ok" / "goal.txt"),
                                         str(corpus / "ok" / "answer.txt")])) == 0
    assert module.run(parser.parse_args([str(corpus / "fail" / "goal.txt"),
                                         str(corpus / "fail" / "answer.txt")])) == 1


# -- the toy prover through the command line --------------------------------------------


def proofbatch(*argv, cwd: Path) -> subprocess.CompletedProcess:
    """`proofbatch ARGV` in a fresh interpreter that knows the toy prover
    from the environment only."""
    env = {**os.environ, ENV: TOY_REF,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "runner.cli", *map(str, argv)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def verdicts(out: Path) -> dict[str, str]:
    with open(out / "results.csv", newline="") as f:
        return {row["problem_id"]: row["verdict"] for row in csv.DictReader(f)}


def test_the_toy_prover_sweeps_through_run_simulate_and_report(tmp_path):
    corpus = toy_corpus(tmp_path / "c")
    out = tmp_path / "out"
    run = proofbatch("run", corpus, "--out", out, "--workers", "2", "--default-timeout", "1",
                     "--grace", "0.5", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert verdicts(out) == {pid: v for pid, (_, _, v) in TOY_PROBLEMS.items()}
    manifest = json.loads((out / "sweep.json").read_text())
    assert (manifest["prover"], manifest["mode"]) == ("toy", "process")
    with open(out / "results.csv", newline="") as f:
        rows = {row["problem_id"]: row for row in csv.DictReader(f)}
    assert "the goal is 4, not 5" in rows["fail"]["reason"]
    assert float(rows["slow"]["wall_secs"]) >= 1.0
    # Resumed: every verdict is recorded, nothing runs again.
    again = proofbatch("run", corpus, "--out", out, "--default-timeout", "1", "--grace", "0.5",
                       "--workers", "2", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "ran 0 checks now, 4 were already recorded" in " ".join(again.stdout.split())

    # simulate: the sweep's own plan, and the corpus planned offline (the
    # descriptor's planner) from a map that says nothing of its mode, which
    # a prover of one mode does not need.
    planned = proofbatch("simulate", "--plan", out / "plan.json", "--json", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["checks"] == len(TOY_PROBLEMS)
    timeout_map = tmp_path / "map.json"
    timeout_map.write_text(json.dumps([{"problem_id": pid, "timeout_sec": 1.0, "prove_secs": 0.1}
                                       for pid in TOY_PROBLEMS]))
    offline = proofbatch("simulate", "--timeout-map", timeout_map, "--corpus", corpus,
                         "--workers", "2", "--json", cwd=tmp_path)
    assert offline.returncode == 0, offline.stderr
    figures = json.loads(offline.stdout)
    assert figures["checks"] == len(TOY_PROBLEMS) and figures["durations_from"] == {"map": 4}
    mapped = proofbatch("run", corpus, "--out", tmp_path / "mapped", "--timeout-map", timeout_map,
                        "--problems", "ok,fail", "--prover", "toy", cwd=tmp_path)
    assert mapped.returncode == 0, mapped.stderr
    assert verdicts(tmp_path / "mapped") == {"ok": "OK", "fail": "FAIL"}

    report = proofbatch("report", out, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    text = " ".join(report.stdout.split())
    assert "4 checks" in text and all(f"{v} 1" in text for v in ("OK", "FAIL", "TIMEOUT", "ERROR"))


def test_in_process_the_cli_offers_a_registered_prover(tmp_path, toy, capsys):
    corpus = toy_corpus(tmp_path / "c", {"ok": TOY_PROBLEMS["ok"]})
    assert main(["run", str(corpus), "--out", str(tmp_path / "o"), "--prover", "toy"]) == 0
    assert verdicts(tmp_path / "o") == {"ok": "OK"}
    assert main(["run", str(corpus), "--out", str(tmp_path / "p"), "--prover", "coq"]) == 2
    assert "--prover: 'coq' is not a choice; choose one of hol-light, isabelle, toy" \
        in capsys.readouterr().err
