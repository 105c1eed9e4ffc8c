"""benchmarks/ is grouped by what it measures (issue 45): every script sits
in benchmarks/ itself (the shared modules and tables.py) or in a group
folder, whose README.md covers it and which the top README lists, and every
script answers --help.

A script is a file that runs (it has a ``__main__`` guard); each needs a
section ``## NAME.py: ...`` in its folder's README saying what it measures
(``**What**``) and the command that runs it (``python benchmarks/GROUP/NAME.py``).
A helper module (no guard: common.py, the baselines) needs a line under
"Helpers and baselines". A section naming a script that is gone is stale.
Each group folder links benchmarks/on_path.py, which puts benchmarks/ and
the groups on sys.path. The scripts' ``--help`` builds their parser only, so
it is cheap and must exit 0; where a script takes ``--json``, its help says
what it means (one JSON object instead of the text report, as
common.arg_parser says).
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


def groups() -> list[Path]:
    return sorted(p for p in BENCHMARKS.iterdir() if p.is_dir() and any(p.glob("*.py")))


def modules_of(folder: Path) -> dict[str, Path]:
    """The folder's own modules: not a group's link to on_path.py."""
    return {p.name: p for p in sorted(folder.glob("*.py")) if not p.is_symlink()}


def gaps(folder: Path, readme: str) -> list[str]:
    """What ``readme`` misses or gets wrong about the modules of ``folder``."""
    prefix = "benchmarks/" + ("" if folder.name == "benchmarks" else f"{folder.name}/")
    sections = {m.group(1): m for m in re.finditer(r"^## (\S+\.py):.*$", readme, flags=re.M)}
    bodies = {}
    for name, m in sections.items():
        nxt = readme.find("\n## ", m.end())
        bodies[name] = readme[m.end():nxt if nxt >= 0 else len(readme)]
    helpers_at = readme.find(HELPERS_HEADING)
    helpers = readme[helpers_at:] if helpers_at >= 0 else ""
    found = []
    modules = modules_of(folder)
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
        if not re.search(r"python " + re.escape(prefix + name), body):
            found.append(f"{name}: its section gives no command (python {prefix}{name} ...)")
    found += [f"{name}: a section for a script that does not exist" for name in sections
              if name not in modules]
    return found


def test_each_readme_covers_every_script_and_helper_of_its_folder():
    found = gaps(BENCHMARKS, (BENCHMARKS / "README.md").read_text())
    for group in groups():
        readme = group / "README.md"
        assert readme.is_file(), f"{group.name}/ has no README.md"
        found += [f"{group.name}/{g}" for g in gaps(group, readme.read_text())]
    assert found == []


def test_the_groups_are_listed_link_on_path_and_keep_no_shared_module():
    top = (BENCHMARKS / "README.md").read_text()
    assert len(groups()) >= 6
    for group in groups():
        assert f"]({group.name}/README.md)" in top, f"the top README does not list {group.name}/"
        link = group / "on_path.py"
        assert link.is_symlink() and link.resolve() == BENCHMARKS / "on_path.py", link
    # What every group shares stays at the top, and so do the records.
    assert {"common.py", "record.py", "tables.py", "on_path.py"} <= set(modules_of(BENCHMARKS))
    assert not list(BENCHMARKS.glob("*/results")), "records stay in benchmarks/results/"


def test_a_script_of_a_group_imports_across_groups_from_any_folder(tmp_path):
    """on_path, as a script in a group runs it: s2n/ (s2n_readme_path) from
    limits/loaded_host, and common from the top, with another cwd."""
    proc = subprocess.run([sys.executable, "-c", "import runpy, sys; sys.path.insert(0, sys.argv[1]); "
                           "import on_path, loaded_host, s2n_readme_path, common; "
                           "print(loaded_host.PROOFBATCH == s2n_readme_path.PROOFBATCH)",
                           str(BENCHMARKS / "limits")], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stderr


def test_the_checker_names_what_a_readme_misses(tmp_path):
    tmp_path = tmp_path / "benchmarks"      # the top folder: its commands read benchmarks/NAME.py
    tmp_path.mkdir()
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
    return str(path.relative_to(BENCHMARKS)), proc.returncode, proc.stdout + proc.stderr


def test_every_script_answers_help_and_says_what_json_means():
    scripts = [p for folder in (BENCHMARKS, *groups()) for p in modules_of(folder).values() if runs(p)]
    assert len(scripts) >= 20
    with ThreadPoolExecutor(max_workers=2) as pool:     # the host has two cores
        answers = list(pool.map(_help, scripts))
    failed = [f"{name}: exit {code}: {text[-300:]}" for name, code, text in answers
              if code != 0 or "usage:" not in text]
    assert failed == [], "\n".join(failed)
    vague = [name for name, _, text in answers if "--json" in text
             and "print one JSON object instead of the text report" not in re.sub(r"\s+", " ", text)]
    assert vague == [], f"--json that does not say it prints one JSON object instead: {vague}"


def test_a_group_readme_gives_the_script_s_path_in_its_group(tmp_path):
    group = tmp_path / "benchmarks" / "s2n"
    group.mkdir(parents=True)
    (group / "moved.py").write_text('if __name__ == "__main__":\n    pass\n')
    readme = "# s2n\n\n## moved.py: a figure\n\n- **What**: x.\n- **Run**: `python benchmarks/moved.py`\n"
    assert gaps(group, readme) == [
        "moved.py: its section gives no command (python benchmarks/s2n/moved.py ...)"]
    assert gaps(group, readme.replace("benchmarks/moved.py", "benchmarks/s2n/moved.py")) == []
