"""The house: runner/ is grouped by the stage of a sweep each module serves,
and stages depend one way only; cluster/ and benchmarks/ keep to it too.

A newcomer finds their room from the layout (README, "Layout"): a dozen
core modules at the top, one subpackage per stage. The order of the stages
is the order in which a sweep's data flows: results are written by checks
and read by maps, planning and reporting; reporting reads everything and
nothing reads it. The drivers (the sweep, its directory, profiling, the
command line) sit above all stages and may import any of them.

Beside the stages: a prover's package (runner/provers/<prover>/) may import
the core's base modules, the stages below reporting and the registry, never
a driver, the screen or another prover; the executors (cluster/) may import
the same, never a prover's modules; the benchmark scripts (benchmarks/) may
import anything, and nothing imports them.

Inside a prover's package grouped in subpackages ("rooms", PROVER_ROOMS),
the modules at the package's top are what every room shares and import no
room; each room imports the top, itself and the rooms it lists; only the
package's ``__init__`` (the descriptor) reaches every room.

This test reads every import of every module of runner/, cluster/ and
benchmarks/, the ones inside functions and under TYPE_CHECKING too, and
names each that runs the wrong way or names a module that does not exist,
and every circle of modules that import each other, however far round
(two modules of one stage may: a circle makes neither readable alone).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "runner"

# The core's leaves: what every stage may use.
BASE = {"errors", "verdicts", "settings", "subproc", "events", "answers", "corpus", "prover"}
# The stages, lowest first: each may import the base and the stages before it.
STAGES = ["results", "checks", "maps", "planning", "reporting"]
# Above every stage: they run sweeps and may import anything.
DRIVERS = {"sweep", "sweep_dir", "profile", "cli", "commands"}
# What a prover's package and an executor may import: below the screen.
BELOW_REPORTING = {"base", *STAGES[:STAGES.index("reporting")]}

# A prover's rooms: each subpackage of its package -> the rooms it may import
# besides itself and the package's top (its __init__ says the same in words).
# The HOL Light backends price their images (costs) and run native plugins
# (native); pricing a native compile asks native's cache what it holds.
PROVER_ROOMS: dict[str, dict[str, set[str]]] = {
    "runner.provers.hol_light": {
        "native": set(),
        "costs": {"native"},
        "session": {"native", "costs"},
        "extract": set(),
    },
}

# Provers' imports that run up, known and waiting on a fix: none since issue
# 35, point 2 (provers emit events instead of drawing the screen). Keyed by
# the module's own name (moving a file into a subpackage keeps its entry);
# any other arrow up fails.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def _modules(root: Path):
    """(path, dotted name) of every Python module of runner/, cluster/ and
    benchmarks/ under ``root``."""
    for package in ("runner", "cluster", "benchmarks"):
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield path, ".".join(parts)


def _exists(root: Path, module: str) -> bool:
    path = root.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(root: Path, path: Path, module: str):
    """(line, imported module of runner/, cluster/ or benchmarks/) for every
    import in ``path``. A benchmark script imports its neighbours by bare name
    (``import common``): Python puts the script's folder first on sys.path."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    script = module.startswith("benchmarks.")

    def ours(name: str) -> str | None:
        if script and _exists(root, f"benchmarks.{name}"):
            return f"benchmarks.{name}"
        return name if name.split(".")[0] in ("runner", "cluster", "benchmarks") else None

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = ours(node.module or "") or ""
            if not target:
                continue
            for alias in node.names:
                full = f"{target}.{alias.name}"
                # "from runner.results import shards" imports the module runner.results.shards
                yield node.lineno, full if _exists(root, full) else target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if named := ours(alias.name):
                    yield node.lineno, named


def _place(module: str) -> str:
    """The room of a module: base, a stage, driver, provers, the runner
    package, cluster or benchmarks."""
    parts = module.split(".")
    if parts[0] in ("cluster", "benchmarks"):
        return parts[0]
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
    if target == "benchmarks":
        return source == "benchmarks"     # scripts run by hand; no module leans on one
    if source in ("driver", "benchmarks") or target == "package":
        return True
    if source in ("provers", "cluster"):
        return target in BELOW_REPORTING or target == source or target == "provers"
    if target == "cluster":
        return False                      # a stage or base module reaching an executor
    if target == "base":
        return True
    if source == "base":
        return False
    if target in STAGES:
        return STAGES.index(target) <= STAGES.index(source)
    if target == "provers":
        return True       # the registry: ask a prover, import none of its modules (test_registry)
    return False          # a stage importing a driver


def _prover(module: str) -> str | None:
    """The prover package a module of runner/provers/ belongs to; None for
    the registry (runner.provers, runner.provers.registry)."""
    parts = module.split(".")
    if parts[:2] != ["runner", "provers"] or len(parts) < 3 or parts[2] == "registry":
        return None
    return ".".join(parts[:3])


def _room(module: str, rooms: dict[str, dict[str, set[str]]]) -> tuple[str, str] | None:
    """(prover package, room) of a module of a prover whose package has rooms:
    the room is "top" for the modules the rooms share, "" for the package's
    own __init__ (the descriptor); None outside such a package."""
    prover = _prover(module)
    if prover not in rooms:
        return None
    rest = module[len(prover) + 1:].split(".") if module != prover else []
    if not rest:
        return prover, ""
    return prover, rest[0] if len(rest) > 1 or rest[0] in rooms[prover] else "top"


def _room_wrong(root: Path, module: str, target: str, rooms) -> str | None:
    """Why ``module`` may not import ``target``, a module of its own
    prover's package with rooms; None if it may."""
    source, dest = _room(module, rooms), _room(target, rooms)
    if source is None or dest is None or source[0] != dest[0]:
        return None
    allowed = rooms[source[0]]
    for room in {source[1], dest[1]} - {"", "top"}:
        if room not in allowed:
            return f"room {room}/ is not in PROVER_ROOMS: add it, with what it may import"
    if source[1] == "" or dest[1] in (source[1], "top"):
        return None
    if dest[1] == "":
        return "the descriptor (the package's __init__): no room imports it"
    if source[1] == "top":
        return f"a shared module imports room {dest[1]}/"
    if dest[1] not in allowed[source[1]]:
        return f"room {source[1]}/ may not import room {dest[1]}/"
    return None


def wrong_way(root: Path, known: set[tuple[str, str]] = frozenset(),
              rooms: dict[str, dict[str, set[str]]] = PROVER_ROOMS) -> list[str]:
    """Every import under ``root`` that runs against the layout, as
    "path:line ... imports target ...", less the ``known`` (module's own
    name, target) pairs; inside a prover's package, against its ``rooms``."""
    wrong = []
    for path, module in _modules(root):
        source = _place(module)
        where = path.relative_to(root)
        for line, target in _imports(root, path, module):
            if target.startswith(module + ".") or target == module:
                continue
            if not _exists(root, target):
                wrong.append(f"{where}:{line} imports {target}, which does not exist")
                continue
            if (module.rsplit(".", 1)[-1], target) in known:
                continue
            if _prover(target) and _prover(target) != _prover(module) and source != "benchmarks":
                whose = "another prover's" if _prover(module) else "a prover's"
                wrong.append(f"{where}:{line} ({source}) imports {target}: {whose} module; "
                             "the core and the executors ask a prover's interface (runner.provers)")
                continue
            if not _allowed(source, _place(target)):
                wrong.append(f"{where}:{line} ({source}) imports {target} ({_place(target)})")
            elif why := _room_wrong(root, module, target, rooms):
                wrong.append(f"{where}:{line} imports {target}: {why}")
    return wrong


def circles(root: Path) -> list[list[str]]:
    """Every import circle among the modules under ``root`` (the imports
    inside functions and under TYPE_CHECKING too: a circle there still ties
    the modules together), each as its modules, sorted; Tarjan's strongly
    connected components. A package's own modules do not count as importing
    it back through its ``__init__``."""
    paths = {module: path for path, module in _modules(root)}
    arrows = {module: sorted({t for _, t in _imports(root, path, module)
                              if t in paths and t != module and not t.startswith(module + ".")})
              for module, path in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for start in arrows:
        if start in index:
            continue
        # Iterative, so a deep chain of imports cannot exhaust Python's stack.
        index[start] = low[start] = len(index)
        stack.append(start)
        work = [(start, iter(arrows[start]))]
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    work.append((target, iter(arrows[target])))
                elif target in stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


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


@pytest.mark.parametrize("prover,room", [(p, r) for p, rs in PROVER_ROOMS.items() for r in rs])
def test_each_room_of_a_prover_says_what_it_owns_and_may_import(prover, room):
    init = ROOT.joinpath(*prover.split("."), room, "__init__.py")
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    assert "May import" in doc, f"{init}: its docstring does not say what it may import"


def test_every_subpackage_of_a_prover_with_rooms_is_a_room():
    for prover, rooms in PROVER_ROOMS.items():
        folder = ROOT.joinpath(*prover.split("."))
        found = {p.parent.name for p in folder.glob("*/__init__.py")}
        assert found == set(rooms), f"{folder}: subpackages {sorted(found)}, PROVER_ROOMS {sorted(rooms)}"


def test_the_checker_reads_runner_cluster_and_benchmarks():
    scanned = {module.split(".")[0] for _, module in _modules(ROOT)}
    assert scanned == {"runner", "cluster", "benchmarks"}
    assert ("cluster/base.py", "runner.checks.tasks") in {
        (str(p.relative_to(ROOT)), t) for p, m in _modules(ROOT) for _, t in _imports(ROOT, p, m)}
    assert any(t == "benchmarks.common" for p, m in _modules(ROOT) if m == "benchmarks.overhead"
               for _, t in _imports(ROOT, p, m))


def test_no_import_runs_against_the_layout():
    wrong = wrong_way(ROOT, KNOWN_UPWARD)
    assert not wrong, "imports against the layout:\n" + "\n".join(wrong)


def test_no_two_modules_import_each_other_even_by_a_detour():
    found = circles(ROOT)
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_each_known_upward_import_is_still_there():
    """An entry of KNOWN_UPWARD whose import is gone would excuse the next one: delete it."""
    found = {(m.rsplit(".", 1)[-1], t) for p, m in _modules(ROOT) if m.startswith("runner.provers.")
             for _, t in _imports(ROOT, p, m)}
    assert KNOWN_UPWARD <= found, f"fixed, remove from KNOWN_UPWARD: {sorted(KNOWN_UPWARD - found)}"


# -- the checker itself: it must fail on what is wrong -------------------------

PLANTED = {
    # The layout's own modules, importing only what they may.
    "runner/__init__.py": "",
    "runner/errors.py": "",
    "runner/sweep.py": "from runner.reporting import progress\nimport cluster\n",
    "runner/cli.py": "from runner import sweep\n",
    "runner/results/__init__.py": "",
    "runner/results/shards.py": "from ..errors import InputError\n",
    "runner/checks/__init__.py": "",
    "runner/checks/worker.py": "from runner.results import shards\n",
    "runner/reporting/__init__.py": "",
    "runner/reporting/progress.py": "from ..checks import worker\n",
    "runner/provers/__init__.py": "from .registry import registered\n",
    "runner/provers/registry.py": "",
    "runner/provers/toy/__init__.py": "from ..registry import registered\n",
    "runner/provers/other/__init__.py": "",
    "cluster/__init__.py": "from .local import LocalExecutor\n",
    "cluster/local.py": "from runner.checks.worker import work\n",
    "benchmarks/common.py": "from runner import sweep\n",
    "benchmarks/fine.py": "import common\nfrom runner.provers.toy import serve\nfrom cluster import local\n",
    # Each of these runs the wrong way.
    "runner/checks/screen.py": "def f():\n    from ..reporting import progress\n",
    "runner/results/typed.py": ("from typing import TYPE_CHECKING\n"
                                "if TYPE_CHECKING:\n    from runner.checks import worker\n"),
    "runner/provers/toy/serve.py": "from ...sweep import run\n",
    "runner/provers/toy/draws.py": "from runner.reporting.progress import Screen\n",
    "runner/provers/toy/borrows.py": "from runner.provers.other import thing\n",
    "cluster/slurm.py": "from runner import cli\nfrom runner.provers.toy import serve\n",
    "runner/checks/leans.py": "import benchmarks.common\n",
    "benchmarks/moved.py": "from runner.provers.toy.gone import x\n",
}


def _plant(tmp_path: Path) -> Path:
    for name, text in PLANTED.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_checker_names_each_planted_wrong_way_import(tmp_path):
    wrong = "\n".join(wrong_way(_plant(tmp_path)))
    assert "runner/checks/screen.py:2 (checks) imports runner.reporting.progress (reporting)" in wrong
    assert "runner/results/typed.py:3 (results) imports runner.checks.worker (checks)" in wrong
    assert "runner/provers/toy/serve.py:1 (provers) imports runner.sweep (driver)" in wrong
    assert "runner/provers/toy/draws.py:1 (provers) imports runner.reporting.progress" in wrong
    assert "runner/provers/toy/borrows.py:1 (provers) imports runner.provers.other: another prover's" \
        in wrong
    assert "cluster/slurm.py:1 (cluster) imports runner.cli (driver)" in wrong
    assert "cluster/slurm.py:2 (cluster) imports runner.provers.toy.serve: a prover's module" in wrong
    assert "runner/checks/leans.py:1 (checks) imports benchmarks.common (benchmarks)" in wrong
    assert "benchmarks/moved.py:1 imports runner.provers.toy, which does not exist" not in wrong
    assert "benchmarks/moved.py:1 imports runner.provers.toy.gone, which does not exist" in wrong
    assert len(wrong.splitlines()) == 9, wrong          # and nothing that keeps to the layout


def test_a_known_exception_excuses_only_its_own_import(tmp_path):
    root = _plant(tmp_path)
    wrong = "\n".join(wrong_way(root, {("serve", "runner.sweep")}))
    assert "toy/serve.py" not in wrong
    assert "runner/provers/toy/draws.py:1 (provers) imports runner.reporting.progress" in wrong


def test_the_checker_finds_a_planted_circle(tmp_path):
    """Two modules that import each other (one of them inside a function,
    as extract.py and extract_ids.py did), and a detour of three; a
    package's modules importing its ``__init__`` are none."""
    root = _plant(tmp_path)
    (root / "runner/checks/ring_a.py").write_text("from . import ring_b\n")
    (root / "runner/checks/ring_b.py").write_text("def f():\n    from .ring_a import x\n")
    (root / "runner/results/one.py").write_text("from .two import x\n")
    (root / "runner/results/two.py").write_text("from . import three\n")
    (root / "runner/results/three.py").write_text("from runner.results.one import y\n")
    assert circles(root) == [["runner.checks.ring_a", "runner.checks.ring_b"],
                             ["runner.results.one", "runner.results.three", "runner.results.two"]]


# A prover's package with rooms, as HOL Light's: every room reaching only
# what PROVER_ROOMS lets it, then one of each wrong way.
ROOMS_PLANTED = {
    "runner/__init__.py": "",
    "runner/errors.py": "",
    "runner/provers/__init__.py": "",
    "runner/provers/registry.py": "",
    "runner/provers/hol/__init__.py": "def build():\n    from .session.backend import Backend\n",
    "runner/provers/hol/lexer.py": "from ...errors import InputError\n",
    "runner/provers/hol/native/__init__.py": "",
    "runner/provers/hol/native/build.py": "from ..lexer import split\n",
    "runner/provers/hol/costs/__init__.py": "",
    "runner/provers/hol/costs/plans.py": "from ..native import build\nfrom . import model\n",
    "runner/provers/hol/costs/model.py": "",
    "runner/provers/hol/session/__init__.py": "",
    "runner/provers/hol/session/backend.py": "from ..costs.plans import plan\nfrom ..native.build import b\n",
    "runner/provers/hol/extract/__init__.py": "",
    # Each of these runs the wrong way.
    "runner/provers/hol/native/compile.py": "def f():\n    from ..session.backend import Backend\n",
    "runner/provers/hol/extract/cut.py": "from runner.provers.hol.costs import plans\n",
    "runner/provers/hol/loads.py": "from .native import build\n",
    "runner/provers/hol/session/serve.py": "from .. import build\n",
    "runner/provers/hol/misc/__init__.py": "",
    "runner/provers/hol/misc/odd.py": "from ..lexer import split\n",
}
ROOMS = {"runner.provers.hol": {"native": set(), "costs": {"native"}, "session": {"native", "costs"},
                                "extract": set()}}


def test_the_checker_names_each_planted_import_between_rooms(tmp_path):
    for name, text in ROOMS_PLANTED.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    wrong = "\n".join(wrong_way(tmp_path, rooms=ROOMS))
    assert ("runner/provers/hol/native/compile.py:2 imports runner.provers.hol.session.backend: "
            "room native/ may not import room session/") in wrong
    assert ("runner/provers/hol/extract/cut.py:1 imports runner.provers.hol.costs.plans: "
            "room extract/ may not import room costs/") in wrong
    assert ("runner/provers/hol/loads.py:1 imports runner.provers.hol.native.build: "
            "a shared module imports room native/") in wrong
    assert ("runner/provers/hol/session/serve.py:1 imports runner.provers.hol: the descriptor "
            "(the package's __init__): no room imports it") in wrong
    assert ("runner/provers/hol/misc/odd.py:1 imports runner.provers.hol.lexer: room misc/ is not in "
            "PROVER_ROOMS") in wrong
    assert len(wrong.splitlines()) == 5, wrong      # and nothing that keeps to the rooms
