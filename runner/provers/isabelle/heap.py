"""Finding Isabelle, and the parent session's heap: built once, kept in a
store shared by every node, rebuilt when stale.

Loading a library session from its theories takes minutes to hours; its heap
image loads in seconds. ``isabelle build -b`` writes the heap and the
session's build database under ``$ISABELLE_HEAPS/$ML_IDENTIFIER`` (the
System manual, "Invoking the build process"), and a later build takes them as
current while the sources still match. So the store keeps those two files
per *heap key*, which names the Isabelle version, the session, and the
content of every ROOT and theory it is built from: any change gives a new
key, so a stale heap is never reused, and the entry is built afresh.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ...results.publish import publish_json
from ... import subproc
from ...errors import CommandError, InputError, ProverError

ISABELLE_FIX = ("no package registry carries Isabelle: unpack Isabelle2024 from "
                "https://isabelle.in.tum.de and pass --isabelle DIR (or set ISABELLE_HOME, or "
                "put bin/isabelle on PATH)")
# What a session's sources are made of (ROOT syntax: theories, ML files
# loaded by them, document files): hashing all of them errs on the side of
# rebuilding.
SOURCE_SUFFIXES = (".thy", ".ML", ".ml", ".scala", ".sty", ".tex", ".bib")
SOURCE_NAMES = ("ROOT", "ROOTS")
MANIFEST = "heap.json"


@dataclass(frozen=True)
class IsabelleInstall:
    executable: Path        # bin/isabelle
    version: str            # `isabelle version`, e.g. Isabelle2024
    ml_identifier: str      # e.g. polyml-5.9.1_x86_64_32-linux
    heaps_dir: Path         # $ISABELLE_HEAPS/$ML_IDENTIFIER: where builds write heaps
    # $ISABELLE_HEAPS_SYSTEM/$ML_IDENTIFIER: the heaps a release ships (HOL among
    # them), which `isabelle build -b HOL` finds current and leaves where they are.
    system_heaps_dir: Path | None = None
    # $ISABELLE_HOME_USER: everything a build writes (heaps, databases, its
    # own state) lives under it, so it is the one writable path of a sandbox.
    home_user: Path | None = None

    def argv(self, *args: str) -> list[str]:
        return [str(self.executable), *args]


def locate_isabelle(home: Path | None = None, environ=os.environ) -> Path:
    """bin/isabelle of ``home``, of $ISABELLE_HOME, or on PATH; InputError if none."""
    if home is None and environ.get("ISABELLE_HOME"):
        home = Path(environ["ISABELLE_HOME"])
    if home is not None:
        exe = Path(home) / "bin" / "isabelle"
        if not exe.is_file():
            raise InputError(exe, "Isabelle not found: no bin/isabelle in this directory",
                             "pass --isabelle the directory of an unpacked Isabelle release")
        return exe
    found = shutil.which("isabelle", path=environ.get("PATH"))
    if not found:
        raise InputError("isabelle", "Isabelle not found (no --isabelle, no ISABELLE_HOME, not on PATH)",
                         ISABELLE_FIX)
    return Path(found)


def find_isabelle(home: Path | None = None) -> IsabelleInstall:
    exe = locate_isabelle(home)
    try:
        version = subproc.run([str(exe), "version"], timeout=120).strip()
        env = subproc.run([str(exe), "getenv", "-b", "ML_IDENTIFIER", "ISABELLE_HEAPS",
                           "ISABELLE_HEAPS_SYSTEM", "ISABELLE_HOME_USER"], timeout=120)
    except CommandError as exc:
        raise ProverError(f"Isabelle at {exe} does not run: {exc}") from None
    ml_id, heaps, system, home_user = (env.splitlines() + ["", "", "", ""])[:4]
    if not version or not ml_id or not heaps:
        raise ProverError(f"Isabelle at {exe} did not report its version and heap directory")
    return IsabelleInstall(exe, version, ml_id, Path(heaps) / ml_id,
                           Path(system) / ml_id if system else None,
                           Path(home_user) if home_user else None)


def built_heap_dir(install: IsabelleInstall, session: str) -> Path:
    """Where `isabelle build -b SESSION` left (or found) the session's heap and
    build database: the user's heap directory, else the system one."""
    for d in (install.heaps_dir, install.system_heaps_dir):
        if d is not None and (d / session).is_file() and (d / "log" / f"{session}.db").is_file():
            return d
    return install.heaps_dir


def session_sources(dirs: Sequence[Path]) -> list[tuple[str, str]]:
    """(path, sha256) of every source file under the session directories,
    sorted; paths are relative to their directory, prefixed by its index."""
    out = []
    for n, d in enumerate(dirs):
        for path in sorted(Path(d).rglob("*")):
            if path.is_file() and (path.name in SOURCE_NAMES or path.suffix in SOURCE_SUFFIXES):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out.append((f"{n}/{path.relative_to(d).as_posix()}", digest))
    return out


def heap_key(version: str, ml_identifier: str, session: str, sources: list[tuple[str, str]]) -> str:
    """The key of a session heap: the Isabelle version and platform, the
    session name, and the content of every ROOT and theory it is built from."""
    h = hashlib.sha256()
    for part in (version, ml_identifier, session):
        h.update(part.encode() + b"\0")
    for rel, digest in sources:
        h.update(f"{rel}\0{digest}\n".encode())
    return h.hexdigest()[:20]


def build_heap_argv(install: IsabelleInstall, session: str, dirs: Sequence[Path]) -> list[str]:
    """`isabelle build -b` of the parent session: the one build of a sweep."""
    args = ["build", "-b"]
    for d in dirs:
        args += ["-d", str(d)]
    return install.argv(*args, session)


@dataclass(frozen=True)
class HeapEntry:
    key: str
    session: str
    path: Path            # the store directory of this key
    built_secs: float     # what building it cost, where it was built
    built_here: bool      # this call built it


class HeapStore:
    """Heaps by key under ``root`` (a shared filesystem on a cluster).

    An entry is a directory ``root/<key>/`` holding the heap file, the build
    database and ``heap.json``; it is published whole with one rename, so a
    reader never sees half an entry. A lock file per key (``fcntl.flock``,
    which NFSv4 supports) makes concurrent nodes build it once.
    """

    def __init__(self, root: Path):
        self.root = Path(root)

    def entry(self, key: str) -> Path:
        return self.root / key

    def lookup(self, key: str, session: str) -> HeapEntry | None:
        """The entry for ``key`` if it is complete, else None (stale or partial
        entries are ignored and rebuilt)."""
        d = self.entry(key)
        try:
            meta = json.loads((d / MANIFEST).read_text())
        except (OSError, json.JSONDecodeError):
            return None
        if meta.get("key") != key or meta.get("session") != session:
            return None
        if not (d / session).is_file() or not (d / "log" / f"{session}.db").is_file():
            return None
        return HeapEntry(key, session, d, float(meta.get("secs", 0.0)), False)

    def ensure(self, key: str, session: str, build: Callable[[], Path]) -> HeapEntry:
        """The entry for ``key``, building it with ``build`` (which returns the
        directory where Isabelle left the heap) if no node has yet."""
        found = self.lookup(key, session)
        if found:
            return found
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f".{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            found = self.lookup(key, session)    # another node may have built it meanwhile
            if found:
                return found
            started = time.monotonic()
            built_in = build()
            secs = time.monotonic() - started
            tmp = self.root / f".{key}.{socket.gethostname()}.{os.getpid()}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            (tmp / "log").mkdir(parents=True)
            for rel in (session, f"log/{session}.db"):
                if not (built_in / rel).is_file():
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise ProverError(f"isabelle build -b {session} left no {built_in / rel}")
                shutil.copy2(built_in / rel, tmp / rel)
            meta = {"key": key, "session": session, "secs": secs, "host": socket.gethostname(),
                    "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            publish_json(tmp / MANIFEST, meta, indent=1)
            old = self.entry(key)
            if old.exists():                        # a stale or partial entry: replace it
                shutil.rmtree(old)
            os.replace(tmp, old)
            return HeapEntry(key, session, old, secs, True)

    @staticmethod
    def install(entry: HeapEntry, heaps_dir: Path) -> bool:
        """Copy the entry into this node's heap directory unless it is already
        there; True if it copied. Isabelle then takes the heap as current."""
        copied = False
        for rel in (entry.session, f"log/{entry.session}.db"):
            src, dst = entry.path / rel, Path(heaps_dir) / rel
            if dst.is_file() and _same_file(src, dst):
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
            shutil.copy2(src, tmp)
            os.replace(tmp, dst)
            copied = True
        return copied


def _same_file(a: Path, b: Path) -> bool:
    sa, sb = a.stat(), b.stat()
    if sa.st_size != sb.st_size:
        return False
    return _sha256(a) == _sha256(b)


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
