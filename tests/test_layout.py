"""The house: runner/ is grouped by the stage of a sweep each module serves,
and stages depend one way only; cluster/ and benchmarks/ keep to it too.

A newcomer finds their room from the layout (README, "Layout"): a dozen
core modules at the top, one subpackage per stage. The order of the stages
is the order in which a sweep's data flows: results are written by checks
and read by maps, planning and reporting; reporting reads everything and
nothing reads it. The drivers (the sweep, its directory, profiling, the
command line) sit above all stages and may import any of them.

Beside the stages: the prover registry (runner/prover_registry.py) is a
base module, below every stage that asks it, and reaches a prover's package
by name, when asked. A prover's package (runner/provers/<prover>/) may
import the core's base modules and the stages below planning (results,
checks, maps), never planning, the screen, a driver or another prover;
runner/provers/ itself holds only the packages. The executors (cluster/)
may import the base and the stages below reporting, never a prover's
modules; the benchmark scripts (benchmarks/) may import anything, and
nothing imports them.

Inside a prover's package grouped in subpackages ("rooms", PROVER_ROOMS),
the modules at the package's top are what every room shares and import no
room; each room imports the top, itself and the rooms it lists; only the
package's ``__init__`` (the descriptor) reaches every room.

The checker (tests/layout_checker.py, with the rules) reads every import of
every module of runner/, cluster/ and benchmarks/, the ones inside
functions and under TYPE_CHECKING too, and names each that runs the wrong
way or names a module that does not exist, and every circle of modules that
import each other, however far round (two modules of one stage may: a
circle makes neither readable alone). Outside a prover's package no module
decides by a prover's name, and nowhere is a backend or session probed with
getattr/hasattr: what differs is the descriptor's or the interface's to say
(issue 49).
"""


from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .layout_checker import (BASE, DRIVERS, KNOWN_UPWARD, PROVER_ROOMS, ROOT, RUNNER, STAGES, circles,
                             imports_of, modules, name_branches, probes, prover_names, wrong_way)


def test_the_top_of_runner_holds_about_a_dozen_modules():
    # Nine core modules (the registry, below every stage that asks it, among
    # them: issue 49) and four drivers.
    top = sorted(p.stem for p in RUNNER.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 13, f"runner/ has {len(top)} modules at its top: {top}"
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
    scanned = {module.split(".")[0] for _, module in modules(ROOT)}
    assert scanned == {"runner", "cluster", "benchmarks"}
    assert ("cluster/base.py", "runner.checks.tasks") in {
        (str(p.relative_to(ROOT)), t) for p, m in modules(ROOT) for _, t in imports_of(ROOT, p, m)}
    assert any(t == "benchmarks.common" for p, m in modules(ROOT) if m == "benchmarks.checks.overhead"
               for _, t in imports_of(ROOT, p, m))
    # A group's script imports another group's helper by bare name (benchmarks/on_path.py).
    assert any(t == "benchmarks.s2n.s2n_readme_path" for p, m in modules(ROOT)
               if m == "benchmarks.limits.loaded_host" for _, t in imports_of(ROOT, p, m))


def test_no_import_runs_against_the_layout():
    wrong = wrong_way(ROOT, KNOWN_UPWARD)
    assert not wrong, "imports against the layout:\n" + "\n".join(wrong)


def test_no_two_modules_import_each_other_even_by_a_detour():
    found = circles(ROOT)
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_module_outside_a_prover_s_package_decides_by_a_prover_s_name():
    assert prover_names(ROOT) >= {"hol-light", "isabelle"}
    found = name_branches(ROOT)
    assert not found, "branches on a prover's name:\n" + "\n".join(found)


def test_no_backend_or_session_is_probed_by_attribute():
    found = probes(ROOT)
    assert not found, "probes:\n" + "\n".join(found)


def test_each_known_upward_import_is_still_there():
    """An entry of KNOWN_UPWARD whose import is gone would excuse the next one: delete it."""
    found = {(m.rsplit(".", 1)[-1], t) for p, m in modules(ROOT) if m.startswith("runner.provers.")
             for _, t in imports_of(ROOT, p, m)}
    assert KNOWN_UPWARD <= found, f"fixed, remove from KNOWN_UPWARD: {sorted(KNOWN_UPWARD - found)}"


# -- the checker itself: it must fail on what is wrong -------------------------

PLANTED = {
    # The layout's own modules, importing only what they may.
    "runner/__init__.py": "",
    "runner/errors.py": "",
    "runner/prover.py": "class Prover:\n    TOY = 'toy'\n",
    "runner/prover_registry.py": "from .prover import Prover\n",
    "runner/sweep.py": "from runner.reporting import progress\nimport cluster\n",
    "runner/cli.py": "from runner import sweep\n",
    "runner/results/__init__.py": "",
    "runner/results/shards.py": "from ..errors import InputError\n",
    "runner/checks/__init__.py": "",
    "runner/checks/worker.py": "from runner.results import shards\nfrom runner import prover_registry\n",
    "runner/maps/__init__.py": "",
    "runner/planning/__init__.py": "",
    "runner/planning/sweep_config.py": "from ..prover_registry import names\nfrom ..maps import late\n",
    "runner/reporting/__init__.py": "",
    "runner/reporting/progress.py": "from ..checks import worker\n",
    "runner/provers/__init__.py": '"""The packages of the provers."""\n',
    "runner/provers/toy/__init__.py": ("from ...prover_registry import ProverDescriptor\n"
                                       "PROVER = ProverDescriptor(name='toy')\n"),
    "runner/provers/toy/reads.py": "from ...maps import late\nfrom runner.checks import worker\n",
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
    # The registry's old place, above the stages that ask it, and a stage
    # above the provers' packages (issue 49).
    "runner/checks/asks.py": "from .. import provers\n",
    "runner/maps/late.py": "def f():\n    from runner.provers import registry\n",
    "runner/provers/toy/command.py": "from ...planning.sweep_config import SweepConfig\n",
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
    assert "runner/checks/asks.py:1 (checks) imports runner.provers (provers)" in wrong
    assert "runner/maps/late.py:2 (maps) imports runner.provers (provers)" in wrong
    assert "runner/provers/toy/command.py:1 (provers) imports runner.planning.sweep_config (planning)" \
        in wrong
    assert len(wrong.splitlines()) == 12, wrong         # and nothing that keeps to the layout


def test_the_checker_names_each_planted_branch_on_a_prover_s_name(tmp_path):
    """A prover's name (a registered one: its package's descriptor says it)
    compared outside its package, as a literal, in a literal tuple, as the
    Prover enum's member or as a match case; not in the prover's own
    package, not a name merely mentioned, not another word, not in a
    benchmark script."""
    root = _plant(tmp_path)
    planted = {
        "runner/sweep_dir.py": 'def resume(m):\n    if m.get("prover", "toy") == "toy":\n        return 1\n',
        "runner/checks/picks.py": 'def f(p):\n    return p in ("other", "toy")\n',
        "runner/maps/enum_cmp.py": "from runner.prover import Prover\n\ndef f(p):\n    return p != Prover.TOY\n",
        "cluster/matcher.py": 'def f(p):\n    match p:\n        case "toy":\n            return 1\n',
        # None of these decides by a prover's name outside its package.
        "runner/provers/toy/own.py": 'def g(p):\n    return p == "toy"\n',
        "runner/reporting/says.py": ('TITLES = {"toy": "Toy"}\n\ndef f(p):\n'
                                     '    return p == "toyish" or f"{p}" == "Toy"\n'),
        "benchmarks/bench_toy.py": 'def f(p):\n    return p == "toy"\n',
    }
    for name, text in planted.items():
        (root / name).write_text(text)
    assert prover_names(root) == {"toy"}
    found = sorted(name_branches(root))
    assert found == [
        "cluster/matcher.py:3 compares with 'toy', a prover's name: ask the prover's descriptor "
        "(runner.prover_registry)",
        "runner/checks/picks.py:2 compares with 'toy', a prover's name: ask the prover's descriptor "
        "(runner.prover_registry)",
        "runner/maps/enum_cmp.py:4 compares with Prover.TOY, a prover's name: ask the prover's "
        "descriptor (runner.prover_registry)",
        "runner/sweep_dir.py:2 compares with 'toy', a prover's name: ask the prover's descriptor "
        "(runner.prover_registry)",
    ], found


def test_the_checker_names_each_planted_probe_of_a_backend_or_session(tmp_path):
    """getattr/hasattr on a backend or a session, in a stage, in a prover's
    package or in an executor; not on anything else (a parsed args, a config
    asked for a field named backend), and not in a benchmark script."""
    root = _plant(tmp_path)
    planted = {
        "runner/checks/probe.py": 'def f(self):\n    return getattr(self.backend, "log_dir", None)\n',
        "runner/provers/toy/peek.py": 'def f(hol_session):\n    return hasattr(hol_session, "backend")\n',
        "cluster/peek.py": ('def f(s):\n    return getattr(getattr(s.session, "backend", None), '
                            '"context_root", None)\n'),
        # Not probes of a backend or session.
        "runner/checks/fine.py": ('def f(args, config):\n    return getattr(args, "out", None) or '
                                  'getattr(config, "backend", None)\n'),
        "benchmarks/bench_peek.py": 'def f(session):\n    return getattr(session, "_native", None)\n',
    }
    for name, text in planted.items():
        (root / name).write_text(text)
    found = "\n".join(probes(root))
    assert "runner/checks/probe.py:2 getattr probes self.backend: declare what it has in its " \
        "interface (runner/prover.py)" in found
    assert "runner/provers/toy/peek.py:2 hasattr probes hol_session" in found
    assert "cluster/peek.py:2 getattr probes s.session" in found
    assert len(found.splitlines()) == 3, found


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
    "runner/prover_registry.py": "",
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
