"""The layout's rules and the checker that reads every import against them
(tests/test_layout.py tells the story and shows the checker failing on
planted violations).

The checker reads every import of every module of runner/, cluster/ and
benchmarks/, the ones inside functions and under TYPE_CHECKING too, and
names each that runs the wrong way or names a module that does not exist
(``wrong_way``), and every circle of modules that import each other,
however far round (``circles``). It also reads two things the interfaces
say instead: a prover's name compared outside its package
(``name_branches``), and a backend or session probed with getattr/hasattr
(``probes``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "runner"

# The core's leaves: what every stage may use.
# The prover registry (prover_registry) is one of them: the stages ask it, and
# it reaches a prover's package by name, when asked, never by an import.
BASE = {"errors", "verdicts", "settings", "subproc", "events", "answers", "corpus", "prover",
        "prover_registry"}
# The stages, lowest first: each may import the base and the stages before it.
STAGES = ["results", "checks", "maps", "planning", "reporting"]
# Above every stage: they run sweeps and may import anything.
DRIVERS = {"sweep", "sweep_dir", "profile", "cli", "commands"}
# What an executor may import: below the screen.
BELOW_REPORTING = {"base", *STAGES[:STAGES.index("reporting")]}
# What a prover's package may import: below planning, which asks the
# registry, which reaches the package (issue 49: serve imported SweepConfig).
BELOW_PLANNING = {"base", *STAGES[:STAGES.index("planning")]}

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


def modules(root: Path):
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


def imports_of(root: Path, path: Path, module: str):
    """(line, imported module of runner/, cluster/ or benchmarks/) for every
    import in ``path``. A benchmark script imports the modules of benchmarks/
    and of its group folders by bare name (``import common``): Python puts the
    script's folder first on sys.path, and benchmarks/on_path.py the others."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    script = module.startswith("benchmarks.")
    folders = ["benchmarks", *(f"benchmarks.{p.parent.name}"
                               for p in sorted((root / "benchmarks").glob("*/on_path.py")))]

    def ours(name: str) -> str | None:
        for folder in folders if script else ():
            if _exists(root, f"{folder}.{name}"):
                return f"{folder}.{name}"
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
    if source == "provers":
        return target in BELOW_PLANNING or target == "provers"   # its own package: see wrong_way
    if source == "cluster":
        return target in BELOW_REPORTING or target == "cluster"
    if target == "cluster":
        return False                      # a stage or base module reaching an executor
    if target == "base":
        return True
    if source == "base":
        return False
    if target in STAGES:
        return STAGES.index(target) <= STAGES.index(source)
    # A driver, or runner.provers: the provers' packages, above every stage
    # that asks them through the registry (runner.prover_registry, a base module).
    return False


def _prover(module: str) -> str | None:
    """The prover package a module of runner/provers/ belongs to; None
    outside one (runner.provers itself holds only a docstring)."""
    parts = module.split(".")
    if parts[:2] != ["runner", "provers"] or len(parts) < 3:
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
    for path, module in modules(root):
        source = _place(module)
        where = path.relative_to(root)
        for line, target in imports_of(root, path, module):
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
                             "the core and the executors ask a prover's interface "
                             "(runner.prover_registry)")
                continue
            if not _allowed(source, _place(target)):
                wrong.append(f"{where}:{line} ({source}) imports {target} ({_place(target)})")
            elif why := _room_wrong(root, module, target, rooms):
                wrong.append(f"{where}:{line} imports {target}: {why}")
    return wrong


def prover_names(root: Path) -> set[str]:
    """The registered provers' names, as their packages declare them: the
    ``name=`` of the ``ProverDescriptor(...)`` in runner/provers/<p>/__init__.py."""
    found = set()
    for init in sorted((root / "runner" / "provers").glob("*/__init__.py")):
        for node in ast.walk(ast.parse(init.read_text())):
            if isinstance(node, ast.Call) and _last_name(node.func) == "ProverDescriptor":
                found |= {k.value.value for k in node.keywords if k.arg == "name"
                          and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)}
    return found


def _last_name(node: ast.AST) -> str | None:
    """``x`` of a name ``x`` or of an attribute ``a.b.x``."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _checked(root: Path):
    """(path, module) of every module of runner/ and cluster/: benchmark
    scripts measure a prover's insides by hand and may."""
    return ((p, m) for p, m in modules(root) if not m.startswith("benchmarks."))


def name_branches(root: Path) -> list[str]:
    """Every place outside a prover's package that decides by a prover's
    name: a comparison (==, !=, in, not in, is, is not) or a ``match`` case
    one of whose operands is a string literal equal to a registered prover's
    name (``prover_names``), alone or in a literal tuple, list or set, or a
    member of the Prover enum (``Prover.X``). What differs between provers
    is their descriptor's to say (runner.prover_registry). Naming a prover
    elsewhere (a message, a docstring, a BackendInfo's prover) is no branch."""
    names = prover_names(root)

    def named(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and node.value in names:
            return repr(node.value)
        if isinstance(node, ast.Attribute) and _last_name(node.value) == "Prover":
            return f"Prover.{node.attr}"
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return next(filter(None, map(named, node.elts)), None)
        return None

    found = []
    for path, module in _checked(root):
        if _prover(module):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
            elif isinstance(node, ast.MatchValue):
                operands = [node.value]
            else:
                continue
            if hit := next(filter(None, map(named, operands)), None):
                found.append(f"{path.relative_to(root)}:{node.lineno} compares with {hit}, a "
                             "prover's name: ask the prover's descriptor (runner.prover_registry)")
    return found


def _backend_or_session(node: ast.AST) -> bool:
    name = _last_name(node) or ""
    return name in ("backend", "session") or name.endswith(("_backend", "_session"))


def probes(root: Path) -> list[str]:
    """Every getattr(x, ...) or hasattr(x, ...) in runner/ and cluster/
    (a prover's package too) whose ``x`` is a backend or a session: a name or
    attribute called ``backend`` or ``session``, or ending in ``_backend`` or
    ``_session``. What a backend or session has is declared in its interface
    (runner/prover.py, or the prover's own base class), None meaning none."""
    found = []
    for path, module in _checked(root):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("getattr", "hasattr") and node.args \
                    and _backend_or_session(node.args[0]):
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.func.id} probes "
                             f"{ast.unparse(node.args[0])}: declare what it has in its interface "
                             "(runner/prover.py)")
    return found


def circles(root: Path) -> list[list[str]]:
    """Every import circle among the modules under ``root`` (the imports
    inside functions and under TYPE_CHECKING too: a circle there still ties
    the modules together), each as its modules, sorted; Tarjan's strongly
    connected components. A package's own modules do not count as importing
    it back through its ``__init__``."""
    paths = {module: path for path, module in modules(root)}
    arrows = {module: sorted({t for _, t in imports_of(root, path, module)
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
