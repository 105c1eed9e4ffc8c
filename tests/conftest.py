"""Shared fixtures. HOL Light is loaded once per test session: the base image
and every context image built here are reused by all tests that check
proofs, as a sweep reuses them across checks."""

from __future__ import annotations

import csv
import threading
from pathlib import Path

import psutil
import pytest

from runner.provers.hol_light.backend import HolLightBackend
from runner.provers.hol_light.install import find_hol_light
from runner.sweep import SweepConfig, prepare, run_sweep

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "hol_light_demo"
TEST_MEM_LIMIT = 2 * 2**30


# -- the hol marker holds by construction ---------------------------------------

# Fixtures that boot HOL Light (or build it natively): a test using any of
# them, directly or through another fixture, is a `hol` test.
HOL_FIXTURES = {"hol_session", "demo_sweep", "demo_rows", "native_build", "extracted_library",
                "extracted_sweep"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HOL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.hol)


class _OcamlWatch:
    """Samples this process's descendants while tests run: a test that is
    not marked `hol` and starts OCaml (HOL Light's toplevel or compiler) is
    reported, and fails the run, so `-m "not hol"` really runs without it."""

    def __init__(self):
        self.current, self.offenders = None, set()
        self.before: set[int] = set()       # OCaml already running when the test began
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="ocaml-watch")
        self._thread.start()

    def _loop(self):
        me, last, seen = psutil.Process(), None, {}
        while not self._stop.wait(0.25):
            item = self.current
            if item is None or item.get_closest_marker("hol") is not None:
                continue
            # A toplevel that lives a second or more: HOL Light booting or
            # loading, not a probe such as `ocamlfind query`.
            new = self.ocaml(me) - self.before
            seen = {pid: (seen.get(pid, 0) if item is last else 0) + 1 for pid in new}
            last = item
            if any(n >= 4 for n in seen.values()):
                self.offenders.add(item.nodeid)

    @staticmethod
    def ocaml(me=None) -> set[int]:
        """Pids of OCaml processes under this one (session fixtures' images included)."""
        found = set()
        try:
            children = (me or psutil.Process()).children(recursive=True)
        except psutil.Error:
            return found
        for child in children:
            try:
                if child.name().startswith("ocaml"):
                    found.add(child.pid)
            except psutil.Error:
                continue
        return found

    def stop(self):
        self._stop.set()


_WATCH: _OcamlWatch | None = None


def pytest_sessionstart(session):
    global _WATCH
    _WATCH = _OcamlWatch()


def pytest_runtest_setup(item):
    if _WATCH is not None:
        _WATCH.before = _WATCH.ocaml()
        _WATCH.current = item


def pytest_runtest_teardown(item):
    if _WATCH is not None:
        _WATCH.current = None


def pytest_sessionfinish(session, exitstatus):
    if _WATCH is None:
        return
    _WATCH.stop()
    if _WATCH.offenders:
        print("\ntests not marked `hol` that started OCaml (mark them, or use a HOL fixture):")
        for nodeid in sorted(_WATCH.offenders):
            print(f"  {nodeid}")
        session.exitstatus = 1


# -- the demo corpus ------------------------------------------------------------

def expected_verdicts() -> dict[str, str]:
    with open(DEMO / "expected_verdicts.csv", newline="") as f:
        return {row["Problem"]: row["Verdict"] for row in csv.DictReader(f)}


@pytest.fixture(scope="session")
def hol_backend() -> HolLightBackend:
    return HolLightBackend(find_hol_light(), context_root=DEMO)


@pytest.fixture(scope="session")
def hol_session(hol_backend, tmp_path_factory):
    session = hol_backend.start(tmp_path_factory.mktemp("hol-session"))
    yield session
    session.close()


def beside_coverage(prepared) -> tuple[str, ...]:
    """The warnings other than the map's coverage of the corpus (these maps
    name a few demo problems: runner/map_provenance.coverage says so)."""
    return tuple(w for w in prepared.warnings if not (w.startswith("MAP: ") and " covers " in w))


def make_corpus(root: Path, problems: dict[str, tuple[str, str, str]],
                category: str | None = None) -> Path:
    """problem id -> (setup.ml, query, answer); ``category`` written to each
    problem's category.txt when given."""
    for pid, (setup, query, answer) in problems.items():
        d = root / pid
        d.mkdir(parents=True)
        (d / "setup.ml").write_text(setup)
        (d / "query.txt").write_text(query)
        (d / "answer.txt").write_text(answer)
        if category is not None:
            (d / "category.txt").write_text(category)
    return root


def demo_config(out: Path, **overrides) -> SweepConfig:
    settings = dict(corpus=DEMO, out=out, category_timeouts=DEMO / "timeouts.json",
                    workers=2, mem_limit=TEST_MEM_LIMIT, context_root=DEMO)
    settings.update(overrides)
    return SweepConfig(**settings)


def sweep_with(session, config: SweepConfig):
    """Run a sweep on the local executor, reusing the shared session."""
    from cluster.local import LocalExecutor

    return run_sweep(prepare(config), LocalExecutor(workers=config.workers, session=session))


@pytest.fixture(scope="session")
def demo_sweep(hol_session, tmp_path_factory):
    """The whole example corpus, swept once with two workers."""
    return sweep_with(hol_session, demo_config(tmp_path_factory.mktemp("demo") / "out"))


@pytest.fixture(scope="session")
def demo_rows(demo_sweep) -> dict[str, dict]:
    return {row["problem_id"]: row for row in demo_sweep.table.to_pylist()}


@pytest.fixture(scope="session")
def native_build(tmp_path_factory):
    """HOL Light compiled natively (runner/provers/hol_light/native_build.py), from scratch,
    once per test session, into a cache under the session's tmp directory.
    PROOFBATCH_CACHE points there, so sweeps run with mode native find it."""
    import os

    from runner.provers.hol_light.native_build import build_native

    cache = tmp_path_factory.mktemp("proofbatch-cache")
    os.environ["PROOFBATCH_CACHE"] = str(cache)
    return build_native(find_hol_light(), cache / "native")


# -- corpora cut from real developments by `proofbatch extract` ---------------

HOL_LIBRARY = Path("/usr/share/hol-light/Library")
# binomial.ml needs nothing; agm.ml's context starts with needs "Library/products.ml".
EXTRACTED_FILES = ("binomial.ml", "agm.ml")


@pytest.fixture(scope="session")
def extracted_library(tmp_path_factory):
    """Debian's Library/binomial.ml and Library/agm.ml cut into one corpus by
    runner/provers/hol_light/extract.py; the Extract result (corpus at ``.out``, ground truths
    in answer.txt). Their needs resolve in HOL Light's own directory, so
    ``extracted_config`` can run them on the shared ``hol_session``."""
    from runner.provers.hol_light.extract import ExtractConfig, extract

    return extract(ExtractConfig(files=tuple(HOL_LIBRARY / f for f in EXTRACTED_FILES),
                                 out=tmp_path_factory.mktemp("extracted") / "corpus",
                                 hol_dir=HOL_LIBRARY.parent))


def extracted_config(corpus: Path, out: Path, **overrides) -> SweepConfig:
    """A sweep of an extracted Library corpus. Its needs resolve in HOL
    Light's directory whatever the root; the demo's root keeps the salt of
    ``hol_backend``, so the sweep shares ``hol_session`` and its base image."""
    settings = dict(corpus=corpus, out=out, workers=2, mem_limit=TEST_MEM_LIMIT,
                    context_root=DEMO, default_timeout=300.0)
    settings.update(overrides)
    return SweepConfig(**settings)


@pytest.fixture(scope="session")
def extracted_sweep(hol_session, extracted_library, tmp_path_factory):
    """The extracted corpus's ground truths swept once, bytecode, contexts
    replayed as written: (summary, rows by id, wall seconds)."""
    import time

    started = time.monotonic()
    summary = sweep_with(hol_session, extracted_config(
        extracted_library.out, tmp_path_factory.mktemp("extracted-sweep") / "out"))
    rows = {row["problem_id"]: row for row in summary.table.to_pylist()}
    return summary, rows, time.monotonic() - started
