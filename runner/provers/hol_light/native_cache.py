"""Which library files the native compile cache already holds, for pricing.

A native sweep compiles every library file its contexts load (camlp5 +
ocamlopt, about 23 s for s2n-bignum's arm/proofs/base.ml at load 1) into
the build's cache (native_compile.py, ``libs/``), where every later session of
that build finds it: the same library prefix measured 22.8 s of compiles in a
sweep on an empty cache and 2.3 s on a warm one (benchmarks/predictions.py,
seeds 5 and 6). The cached modules are named by digests of translated
chunks, which pricing cannot recompute without the compiler, so the compiler
leaves a marker per library file whose modules all went into the cache
(``libs/files/<marker>``: the file's path and content), and the planner
prices a marked file's compile at nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

MARKERS = "files"


def library_marker(path: Path, digest: str) -> str:
    """The marker of a library file: its resolved path and content digest
    (sha256 hex of its bytes, at least its first 12 characters)."""
    return hashlib.sha256(f"{Path(path).resolve()}\0{digest[:12]}".encode()).hexdigest()[:24]


def content_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def mark_compiled(libdir: Path, path: Path) -> None:
    """Record that ``path``'s modules are all in ``libdir``."""
    try:
        marker = library_marker(path, content_digest(Path(path).read_bytes()))
        (libdir / MARKERS).mkdir(parents=True, exist_ok=True)
        (libdir / MARKERS / marker).touch()
    except OSError:
        pass            # a marker is a pricing hint; the compile itself succeeded


def compiled_libraries(hol_dir: Path | None, cache_root: Path | None = None) -> frozenset[str]:
    """Markers of library files compiled by any native build of ``hol_dir``
    in the cache (native_build.default_cache_root unless given)."""
    from .native_build import default_cache_root

    if hol_dir is None:
        return frozenset()
    root = cache_root or default_cache_root()
    found: set[str] = set()
    want = str(Path(hol_dir).resolve())
    for build in root.glob("*/build.json") if root.is_dir() else ():
        try:
            if str(Path(json.loads(build.read_text()).get("hol_dir", "")).resolve()) != want:
                continue
        except (OSError, ValueError, AttributeError):
            continue
        markers = build.parent / "libs" / MARKERS
        if markers.is_dir():
            found.update(p.name for p in markers.iterdir())
    return frozenset(found)
