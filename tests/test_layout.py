"""The house: runner/ is grouped by the stage of a sweep each module serves,
and stages depend one way only.

A newcomer finds their room from the layout (README, "Layout"): a dozen
core modules at the top, one subpackage per stage. The order of the stages
is the order in which a sweep's data flows: results are written by checks
and read by maps, planning and reporting; reporting reads everything and
nothing reads it. The drivers (the sweep, its directory, profiling, the
command line) sit above all stages and may import any of them. This test
reads every import of every module, the ones inside functions and under
TYPE_CHECKING too, and names each that runs the wrong way.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[1] / "runner"

# The core's leaves: what every stage may use.
BASE = {"errors", "verdicts", "settings", "subproc", "events", "answers", "corpus", "prover"}
# The stages, lowest first: each may import the base and the stages before it.
STAGES = ["results", "checks", "maps", "planning", "reporting"]
# Above every stage: they run sweeps and may import anything.
DRIVERS = {"sweep", "sweep_dir", "profile", "cli", "commands"}


def _modules():
    for path in sorted(RUNNER.rglob("*.py")):
        parts = list(path.relative_to(RUNNER.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, ".".join(parts)


def _imports(path: Path, module: str):
    """(line, imported runner module) for every import in ``path``."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                # "from runner.results import shards" imports the module runner.results.shards
                named = full if _exists(full) else target
                if named.startswith("runner"):
                    yield node.lineno, named
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("runner"):
                    yield node.lineno, alias.name


def _exists(module: str) -> bool:
    path = RUNNER.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _place(module: str) -> str:
    """The room of a runner module: base, a stage, driver, provers or the package."""
    parts = module.split(".")
    if len(parts) == 1:
        return "package"
    head = parts[1]
    if head in STAGES:
        return head
    if head == "provers":
        return "provers"
    if head in DRIVERS:
        return "driver"
    assert head in BASE, f"{module}: not in the layout's map; add it to BASE, STAGES or DRIVERS"
    return "base"


def _allowed(source: str, target: str) -> bool:
    if source in ("driver", "provers") or target == "package":
        return True
    if target == "base":
        return True
    if source == "base":
        return False
    if target in STAGES:
        return STAGES.index(target) <= STAGES.index(source)
    if target == "provers":
        return True       # the registry: ask a prover, import none of its modules (test_registry)
    return False          # a stage importing a driver


def test_the_top_of_runner_holds_about_a_dozen_modules():
    top = sorted(p.stem for p in RUNNER.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 12, f"runner/ has {len(top)} modules at its top: {top}"
    assert set(top) == BASE | (DRIVERS - {"commands"}), (
        "a module at runner/'s top that is neither a base module nor a driver: "
        f"{sorted(set(top) ^ (BASE | (DRIVERS - {'commands'})))}")


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_is_a_subpackage_that_says_what_it_owns_and_may_import(stage):
    init = RUNNER / stage / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    assert "May import" in doc, f"{init}: its docstring does not say what it may import"
    prefixed = [p.name for p in (RUNNER / stage).glob("*.py") if p.stem.startswith(stage.rstrip("s"))]
    assert not prefixed, f"runner/{stage}/ repeats its folder's name in {prefixed}"


def test_no_import_runs_from_a_lower_stage_back_up():
    wrong = []
    for path, module in _modules():
        source = _place(module)
        for line, target in _imports(path, module):
            if target.startswith(module + ".") or target == module:
                continue
            if target.startswith("runner.provers.") and not module.startswith("runner.provers"):
                wrong.append(f"{path.relative_to(RUNNER.parent)}:{line} imports {target}: "
                             "the core asks a prover's interface and imports none of its modules")
                continue
            if not _allowed(source, _place(target)):
                wrong.append(f"{path.relative_to(RUNNER.parent)}:{line} ({source}) imports "
                             f"{target} ({_place(target)})")
    assert not wrong, "imports against the stages' direction:\n" + "\n".join(wrong)


def test_the_checker_catches_a_wrong_way_import(tmp_path):
    """A check importing the screen is exactly what the rule forbids."""
    assert not _allowed("checks", "reporting")
    assert not _allowed("results", "planning")
    assert not _allowed("base", "results")
    assert not _allowed("maps", "driver")
    assert _allowed("reporting", "results") and _allowed("planning", "maps")
