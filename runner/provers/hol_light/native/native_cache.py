"""Which library files the native compile cache already holds, for pricing.

A native sweep compiles every library file its contexts load (camlp5 +
ocamlopt, about 23 s for s2n-bignum's arm/proofs/base.ml at load 1) into
the build's cache (native_compile.py, ``libs/``), where every later session of
that build finds it: the same library prefix measured 22.8 s of compiles in a
sweep on an empty cache and 2.3 s on a warm one (benchmarks/planning/predictions.py,
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
    """Markers of library files the native build a sweep of ``hol_dir``
    would use now holds (native_build.default_cache_root unless
    ``cache_root``). A cached build is that one when its key is what
    native_build.build_key gives now for its recorded toolchain: the same
    checkout and this code. An older build of the same HOL Light is another
    cache: a sweep after an upgrade compiles its libraries again, and is
    priced so. Starts no process (a plan is made before any may start)."""
    from ....errors import InputError
    from ..install import DEBIAN_DIR, find_hol_light
    from .native_build import build_key, default_cache_root

    if hol_dir is None:
        return frozenset()
    # As --hol-light resolves: Debian's package when omitted, else a checkout.
    given = Path(hol_dir).resolve()
    try:
        install = find_hol_light(None if given == DEBIAN_DIR.resolve() else given)
    except (InputError, OSError):
        return frozenset()          # no HOL Light to build natively here: nothing is cached
    root = Path(cache_root or default_cache_root())
    for build in sorted(root.glob("*/build.json")) if root.is_dir() else ():
        try:
            data = json.loads(build.read_text())
            if Path(data.get("hol_dir", "")).resolve() != install.hol_dir.resolve():
                continue
            now = build_key(install, {"ocaml": data["ocaml"], "camlp5": data["camlp5"]})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        markers = build.parent / "libs" / MARKERS
        if now == data.get("key") == build.parent.name and markers.is_dir():
            return frozenset(p.name for p in markers.iterdir())
    return frozenset()
