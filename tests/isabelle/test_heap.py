"""The parent session's heap: its key, the store nodes share, and finding
Isabelle. The build itself is a stand-in callback here (no Isabelle can be
installed on this machine); the live test in test_isabelle.py runs the real one."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from runner.errors import InputError
from runner.provers.isabelle.heap import (HeapStore, IsabelleInstall, build_heap_argv, heap_key, locate_isabelle, session_sources)

DEMO = Path(__file__).resolve().parents[2] / "examples" / "isabelle_demo"


@pytest.fixture
def library(tmp_path) -> Path:
    shutil.copytree(DEMO / "library", tmp_path / "library")
    return tmp_path / "library"


def key_of(library: Path, version="Isabelle2024", session="Demo_Lib") -> str:
    return heap_key(version, "polyml-5.9.1_x86_64_32-linux", session, session_sources([library]))


def test_key_names_version_session_root_and_theory_contents(library):
    base = key_of(library)
    assert key_of(library) == base
    assert key_of(library, version="Isabelle2025") != base
    assert key_of(library, session="Other") != base
    (library / "notes.txt").write_text("not a source")
    assert key_of(library) == base
    thy = library / "Demo_Defs.thy"
    thy.write_text(thy.read_text().replace("n + n", "2 * n"))
    assert key_of(library) != base
    changed = key_of(library)
    (library / "ROOT").write_text((library / "ROOT").read_text() + "\n(* comment *)\n")
    assert key_of(library) != changed


def fake_build(tmp_path: Path, session: str, calls: list, secs: float = 0.0):
    """Stands in for `isabelle build -b`: leaves a heap and a database where
    Isabelle would, under $ISABELLE_HEAPS/$ML_IDENTIFIER."""
    def build() -> Path:
        calls.append(threading.get_ident())
        time.sleep(secs)
        heaps = tmp_path / "heaps"
        (heaps / "log").mkdir(parents=True, exist_ok=True)
        (heaps / session).write_bytes(b"heap " * 1000)
        (heaps / "log" / f"{session}.db").write_bytes(b"db")
        return heaps
    return build


def test_store_builds_a_key_once_and_reuses_it(tmp_path):
    store, calls = HeapStore(tmp_path / "store"), []
    first = store.ensure("k1", "Demo_Lib", fake_build(tmp_path, "Demo_Lib", calls))
    second = store.ensure("k1", "Demo_Lib", fake_build(tmp_path, "Demo_Lib", calls))
    assert len(calls) == 1 and first.built_here and not second.built_here
    assert (first.path / "Demo_Lib").read_bytes() == b"heap " * 1000
    assert second.path == first.path and second.built_secs == first.built_secs


def test_concurrent_nodes_build_once(tmp_path):
    """Two workers (or nodes on the shared store) asking at once: the lock
    makes the second wait for the first's build and take its entry."""
    store, calls, results = HeapStore(tmp_path / "store"), [], []
    build = fake_build(tmp_path, "Demo_Lib", calls, secs=0.3)
    threads = [threading.Thread(target=lambda: results.append(store.ensure("k", "Demo_Lib", build)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and sorted(r.built_here for r in results) == [False, True]


def test_partial_or_foreign_entry_is_rebuilt(tmp_path):
    store, calls = HeapStore(tmp_path / "store"), []
    entry = store.ensure("k", "Demo_Lib", fake_build(tmp_path, "Demo_Lib", calls))
    (entry.path / "Demo_Lib").unlink()          # a heap lost from the store
    assert store.lookup("k", "Demo_Lib") is None
    assert store.ensure("k", "Demo_Lib", fake_build(tmp_path, "Demo_Lib", calls)).built_here
    (store.entry("k") / "heap.json").write_text('{"key": "other", "session": "Demo_Lib"}')
    assert store.lookup("k", "Demo_Lib") is None
    assert len(calls) == 2


def test_no_half_entry_is_ever_visible(tmp_path):
    store = HeapStore(tmp_path / "store")

    def broken_build() -> Path:
        (tmp_path / "empty").mkdir()
        return tmp_path / "empty"        # Isabelle left no heap
    with pytest.raises(Exception, match="left no"):
        store.ensure("k", "Demo_Lib", broken_build)
    assert store.lookup("k", "Demo_Lib") is None
    assert not any(p.name.endswith(".tmp") for p in (tmp_path / "store").iterdir())


def test_install_copies_into_the_node_heap_dir_once(tmp_path):
    store = HeapStore(tmp_path / "store")
    entry = store.ensure("k", "Demo_Lib", fake_build(tmp_path, "Demo_Lib", []))
    node = tmp_path / "node-heaps"
    assert HeapStore.install(entry, node) is True
    assert (node / "Demo_Lib").read_bytes() == (entry.path / "Demo_Lib").read_bytes()
    assert (node / "log" / "Demo_Lib.db").is_file()
    assert HeapStore.install(entry, node) is False
    (node / "Demo_Lib").write_bytes(b"an older heap")
    assert HeapStore.install(entry, node) is True


def test_build_heap_command_line(tmp_path):
    install = IsabelleInstall(Path("/opt/Isabelle2024/bin/isabelle"), "Isabelle2024",
                              "polyml-5.9.1_x86_64_32-linux", tmp_path)
    assert build_heap_argv(install, "Demo_Lib", [Path("/c/library")]) == [
        "/opt/Isabelle2024/bin/isabelle", "build", "-b", "-d", "/c/library", "Demo_Lib"]


def test_locating_isabelle(tmp_path):
    with pytest.raises(InputError, match="no package registry carries Isabelle"):
        locate_isabelle(None, environ={"PATH": str(tmp_path)})
    with pytest.raises(InputError, match="no bin/isabelle"):
        locate_isabelle(tmp_path)
    exe = tmp_path / "bin" / "isabelle"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    os.chmod(exe, 0o755)
    assert locate_isabelle(tmp_path) == exe
    assert locate_isabelle(None, environ={"ISABELLE_HOME": str(tmp_path)}) == exe
    assert locate_isabelle(None, environ={"PATH": str(exe.parent)}) == exe
