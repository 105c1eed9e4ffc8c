"""Every `--help` points a user to the guide, never into the source.

A user reads `proofbatch run --help` on a machine where runner/ is an
installed package they never open; the guide (docs/*.md) is where each
flag's behaviour is told. Each subcommand's help runs through the installed
`proofbatch` script, as a user types it, and is read for names of source
files or modules; each docs page it names must exist.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from runner.commands import all_commands

from ..helpers import ROOT

PROOFBATCH = Path(sys.executable).parent / "proofbatch"

# What names the source: a path into one of the repository's code folders, a
# Python file, or a dotted module of the runner or the executors.
SOURCE = re.compile(r"\b(?:runner|cluster|benchmarks|tests|scripts)/|\w\.py\b|\b(?:runner|cluster)\.[a-z_]+")
DOC_PAGE = re.compile(r"\bdocs/[\w.-]+\.md\b")


def source_names(text: str) -> list[str]:
    """Each line of ``text`` (argparse's help, wrapped) that names source."""
    flat = re.sub(r"\s+", " ", text)    # argparse wraps lines anywhere, inside a path too
    return [flat[max(0, m.start() - 60):m.end() + 20] for m in SOURCE.finditer(flat)]


def help_of(*argv: str) -> str:
    proc = subprocess.run([str(PROOFBATCH), *argv, "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


COMMANDS = [name for name, _, _ in all_commands()]


@pytest.mark.parametrize("argv", [[], *([name] for name in COMMANDS)],
                         ids=["proofbatch", *COMMANDS])
def test_help_names_no_source_file_and_only_real_docs_pages(argv):
    text = help_of(*argv)
    assert "usage:" in text
    assert source_names(text) == [], f"`proofbatch {' '.join(argv)} --help` names source"
    assert missing_pages(text) == [], f"`proofbatch {' '.join(argv)} --help` names missing pages"


def missing_pages(text: str) -> list[str]:
    # argparse breaks lines at spaces and after hyphens (pass-at-k)
    flat = re.sub(r"-\s+", "-", re.sub(r"\s+", " ", text))
    return [page for page in DOC_PAGE.findall(flat) if not (ROOT / page).is_file()]


def test_every_subcommand_is_asked():
    assert {"run", "status", "profile", "report", "serve", "extract", "build-native"} <= set(COMMANDS)


def test_the_reader_finds_source_names_and_passes_docs_pages():
    """The reader must flag what the old helps said, wrapped as argparse wraps."""
    assert source_names("the box checks run in; see runner/checks/sandbox.py (default auto)")
    assert source_names("others (runner/corpus.py\n      select_problems)")
    assert source_names("bytecode or native (native_auto.py): a profile")
    assert source_names("as runner.sweep.prepare does")
    assert source_names("the executors (cluster/slurm.py)")
    assert source_names("see docs/sandbox.md; setup.ml, timeout-map.json, answers.jsonl, "
                        "OUT/images/*.json, ISABELLE_HOME") == []


def test_run_points_to_the_pages_that_tell_its_flags():
    text = re.sub(r"-\s+", "-", re.sub(r"\s+", " ", help_of("run")))
    for page in ("docs/sandbox.md", "docs/native.md", "docs/trust.md", "docs/running.md"):
        assert page in text
    assert missing_pages("see docs/no-such-page.md") == ["docs/no-such-page.md"]
