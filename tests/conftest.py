"""Shared fixtures. HOL Light is loaded once per test session: the base image
and every context image built here are reused by all tests that check
proofs, as a sweep reuses them across checks."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

import psutil
import pytest

from runner.provers.hol_light.session.backend import HolLightBackend
from runner.provers.hol_light.install import find_hol_light

from .helpers import DEMO, EXTRACTED_FILES, HOL_LIBRARY, ROOT, demo_config, extracted_config, sweep_with


# -- the hol marker holds by construction ---------------------------------------

# Fixtures that boot HOL Light (or build it natively): a test using any of
# them, directly or through another fixture, is a `hol` test.
HOL_FIXTURES = {"hol_session", "trust_session", "demo_sweep", "demo_rows", "native_build", "extracted_library",
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


@pytest.fixture(scope="session")
def hol_backend() -> HolLightBackend:
    return HolLightBackend(find_hol_light(), context_root=DEMO)


@pytest.fixture(scope="session")
def hol_session(hol_backend, tmp_path_factory):
    session = hol_backend.start(tmp_path_factory.mktemp("hol-session"))
    yield session
    session.close()


@pytest.fixture(scope="session")
def trust_session(tmp_path_factory):
    """The bytecode session under --context-proofs trust: a second base
    image, booted once for every test module that needs it."""
    from runner.checks.context_proofs import ContextProofs

    backend = HolLightBackend(find_hol_light(), context_root=DEMO, context_proofs=ContextProofs.TRUST)
    session = backend.start(tmp_path_factory.mktemp("trust-session"))
    yield session
    session.close()


@pytest.fixture(scope="session")
def context_lib():
    """A folder for files contexts load, under the sessions' context root
    (the demo corpus: a load outside it is refused), and its name relative
    to the root, for ``needs "<name>/x.ml"``. Hidden, so never a problem of
    the demo corpus; removed after the session."""
    import secrets

    name = f".pytest-context-lib-{secrets.token_hex(4)}"
    folder = DEMO / name
    folder.mkdir()
    try:
        yield folder, name
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def demo_sweep(hol_session, tmp_path_factory):
    """The whole example corpus, swept once with two workers."""
    return sweep_with(hol_session, demo_config(tmp_path_factory.mktemp("demo") / "out"))


@pytest.fixture(scope="session")
def demo_rows(demo_sweep) -> dict[str, dict]:
    return {row["problem_id"]: row for row in demo_sweep.table.to_pylist()}


@pytest.fixture(scope="session")
def native_build(tmp_path_factory):
    """HOL Light compiled natively (runner/provers/hol_light/native/native_build.py), from scratch,
    once per test session, into a cache under the session's tmp directory.
    PROOFBATCH_CACHE points there, so sweeps run with mode native find it."""
    import os

    from runner.provers.hol_light.native.native_build import build_native

    cache = tmp_path_factory.mktemp("proofbatch-cache")
    os.environ["PROOFBATCH_CACHE"] = str(cache)
    return build_native(find_hol_light(), cache / "native")


# -- corpora cut from real developments by `proofbatch extract` ---------------


@pytest.fixture(scope="session")
def extracted_library(tmp_path_factory):
    """Debian's Library/binomial.ml and Library/agm.ml cut into one corpus by
    runner/provers/hol_light/extract/extract.py; the Extract result (corpus at ``.out``, ground truths
    in answer.txt). Their needs resolve in HOL Light's own directory, so
    ``extracted_config`` can run them on the shared ``hol_session``."""
    from runner.provers.hol_light.extract.extract import extract
    from runner.provers.hol_light.extract.extract_model import ExtractConfig

    return extract(ExtractConfig(files=tuple(HOL_LIBRARY / f for f in EXTRACTED_FILES),
                                 out=tmp_path_factory.mktemp("extracted") / "corpus",
                                 hol_dir=HOL_LIBRARY.parent))


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


def _up() -> bool:
    if shutil.which("scontrol") is None:
        return False
    return subprocess.run(["scontrol", "ping"], capture_output=True, text=True).stdout.count("UP") > 0


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    if not _up():
        if os.geteuid() != 0:
            reason = "the dev Slurm cluster needs root (slurm/start-dev-cluster.sh)"
            if os.environ.get("CI"):
                pytest.fail(reason)
            pytest.skip(reason)
        proc = subprocess.run(["bash", str(ROOT / "slurm" / "start-dev-cluster.sh")],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            reason = f"slurm/start-dev-cluster.sh failed: {proc.stderr.strip()[-400:]}"
            if os.environ.get("CI"):
                pytest.fail(reason)
            pytest.skip(reason)
    assert _up(), "slurmctld does not answer scontrol ping"
