"""benchmarks/README.md covers every script in benchmarks/, and every
script answers --help.

A script is a file of benchmarks/ that runs (it has a ``__main__`` guard);
each needs a section ``## NAME.py: ...`` saying what it measures
(``**What**``) and the command that runs it. A helper module (no guard:
common.py, the baselines) needs a line under "Helpers and baselines". A
section naming a script that is gone is stale. The scripts' ``--help``
builds their parser only, so it is cheap and must exit 0; where a script
takes ``--json``, its help says what it means (one JSON object instead of
the text report, as common.arg_parser says).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..helpers import ROOT

BENCHMARKS = ROOT / "benchmarks"
HELPERS_HEADING = "## Helpers and baselines"


def runs(path: Path) -> bool:
    """Whether the module has an ``if __name__ == "__main__":`` guard."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return True
    return False


def gaps(folder: Path, readme: str) -> list[str]:
    """What ``readme`` misses or gets wrong about the modules of ``folder``."""
    sections = {m.group(1): m for m in re.finditer(r"^## (\S+\.py):.*$", readme, flags=re.M)}
    bodies = {}
    for name, m in sections.items():
        nxt = readme.find("\n## ", m.end())
        bodies[name] = readme[m.end():nxt if nxt >= 0 else len(readme)]
    helpers_at = readme.find(HELPERS_HEADING)
    helpers = readme[helpers_at:] if helpers_at >= 0 else ""
    found = []
    modules = {p.name: p for p in sorted(folder.glob("*.py"))}
    for name, path in modules.items():
        if not runs(path):
            if f"`{name}`" not in helpers:
                found.append(f"{name}: a helper module not listed under {HELPERS_HEADING!r}")
            continue
        body = bodies.get(name)
        if body is None:
            found.append(f"{name}: no section '## {name}: ...'")
            continue
        if "**What**" not in body:
            found.append(f"{name}: its section does not say what it measures (**What**)")
        if not re.search(r"python benchmarks/" + re.escape(name), body):
            found.append(f"{name}: its section gives no command (python benchmarks/{name} ...)")
    found += [f"{name}: a section for a script that does not exist" for name in sections
              if name not in modules]
    return found


def test_the_readme_covers_every_script_and_helper():
    assert gaps(BENCHMARKS, (BENCHMARKS / "README.md").read_text()) == []


def test_the_checker_names_what_a_readme_misses(tmp_path):
    (tmp_path / "measured.py").write_text('if __name__ == "__main__":\n    pass\n')
    (tmp_path / "undocumented.py").write_text('if __name__ == "__main__":\n    pass\n')
    (tmp_path / "vague.py").write_text('if __name__ == "__main__":\n    pass\n')
    (tmp_path / "shared.py").write_text("X = 1\n")
    (tmp_path / "baseline.py").write_text("Y = 2\n")
    readme = ("# Benchmarks\n\n## measured.py: a figure\n\n- **Run**: `python benchmarks/measured.py`\n"
              "- **What**: a figure.\n\n## vague.py: something\n\nIt measures things.\n\n"
              "## gone.py: removed\n\n- **What**: x. `python benchmarks/gone.py`\n\n"
              f"{HELPERS_HEADING}\n\n- **`shared.py`**: what they share.\n")
    assert sorted(gaps(tmp_path, readme)) == [
        f"baseline.py: a helper module not listed under {HELPERS_HEADING!r}",
        "gone.py: a section for a script that does not exist",
        "undocumented.py: no section '## undocumented.py: ...'",
        "vague.py: its section does not say what it measures (**What**)",
        "vague.py: its section gives no command (python benchmarks/vague.py ...)",
    ]


def _help(path: Path) -> tuple[str, int, str]:
    proc = subprocess.run([sys.executable, str(path), "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    return path.name, proc.returncode, proc.stdout + proc.stderr


def test_every_script_answers_help_and_says_what_json_means():
    scripts = [p for p in sorted(BENCHMARKS.glob("*.py")) if runs(p)]
    assert len(scripts) >= 20
    with ThreadPoolExecutor(max_workers=2) as pool:     # the host has two cores
        answers = list(pool.map(_help, scripts))
    failed = [f"{name}: exit {code}: {text[-300:]}" for name, code, text in answers
              if code != 0 or "usage:" not in text]
    assert failed == [], "\n".join(failed)
    vague = [name for name, _, text in answers if "--json" in text
             and "print one JSON object instead of the text report" not in re.sub(r"\s+", " ", text)]
    assert vague == [], f"--json that does not say it prints one JSON object instead: {vague}"
