"""Which object files a proof file's problems read, whether they exist, and
how to build those that do not (object_reads.py says why it matters).

A file reads the objects its own phrases name and those of every file it
loads, directly or not, and, for a library file, of the loader prefix its
problems start with. Names are resolved as a check opens them: under the
context root the sweep will run in (extract's, or the folder the sweep is
started in when the corpus needs none).

The build command is the Makefile's own: the nearest folder at or above the
object (up to the context root) that holds a Makefile, with the phony-style
target whose prerequisites are just the variable listing the object
(s2n-bignum's ``unopt: $(UNOPT_OBJ)``), else the object itself as the
target (``make -C arm p521/bignum_mul_p521.o``, built by its ``%.o: %.S``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..load_graph import LoadGraph
from ..object_reads import object_path, reads_in_phrase

_VARIABLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*[:+?]?=(.*)$")
_RULE = re.compile(r"^([A-Za-z0-9_.-]+)\s*:(?!=)\s*\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]\s*(?:;.*)?$")


@dataclass(frozen=True)
class ObjectRead:
    name: str          # as the proof names it
    path: str          # where a check opens it
    exists: bool
    build: str         # the command that builds it ("" when no Makefile was found)

    def as_json(self) -> dict:
        return {"name": self.name, "path": self.path, "exists": self.exists,
                **({"build": self.build} if not self.exists and self.build else {})}


class Reads:
    """What extract learns of object files once for all the files it cuts:
    the objects each file names itself, and each folder's Makefile (s2n-bignum's
    base.ml and its dozens of loads are loaded by every proof file)."""

    def __init__(self, graph: LoadGraph, workdir: Path):
        self.graph, self.workdir = graph, workdir
        self.named: dict[Path, list[str]] = {}
        self.makefiles: dict[Path, str | None] = {}

    def of(self, f: Path) -> list[str]:
        if f not in self.named:
            try:
                phrases = self.graph.phrases(f)
            except OSError:
                phrases = []
            self.named[f] = [n for phrase in phrases for n in reads_in_phrase(phrase)]
        return self.named[f]


def file_reads(reads: Reads, path: Path, loaders: Iterable[Path]) -> tuple[ObjectRead, ...]:
    """The objects ``path``'s problems read (its phrases, what it loads, its
    ``loaders``' prefix), each once, in the order first named."""
    graph, workdir, makefiles = reads.graph, reads.workdir, reads.makefiles
    names: dict[str, None] = {}
    for f in [graph.real(path), *loaders, *sorted(graph.closure(path))]:
        for name in reads.of(f):
            names.setdefault(name, None)
    out = []
    for name in names:
        where = object_path(name, workdir)
        exists = where.is_file()
        out.append(ObjectRead(name, str(where), exists,
                              "" if exists else build_command(where, workdir, makefiles)))
    return tuple(out)


def build_command(obj: Path, root: Path, makefiles: dict[Path, str | None]) -> str:
    """``make -C DIR TARGET`` that builds ``obj``: of the Makefiles at or
    above it up to ``root``, the nearest with a target whose prerequisites
    are a variable listing it, else the nearest Makefile, asked for the
    object by name; "" when there is none. ``makefiles`` caches each
    folder's Makefile text (None: none there)."""
    root, obj = root.resolve(), obj.resolve()
    nearest = None
    for d in (obj.parent, *obj.parent.parents):
        if d not in makefiles:
            try:
                makefiles[d] = (d / "Makefile").read_text(encoding="utf-8", errors="replace")
            except OSError:
                makefiles[d] = None
        if makefiles[d] is not None:
            rel = str(obj.relative_to(d))
            if target := _target(makefiles[d], rel):
                return f"make -C {d} {target}"
            nearest = nearest or f"make -C {d} {rel}"
        if d == root or root not in d.parents:
            break
    return nearest or ""


_REF = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_]*)(?::([^=)}]*)=([^)}]*))?[)}]")


def _target(makefile: str, rel: str) -> str | None:
    """The first rule ``T: $(VAR)`` whose VAR lists ``rel``, a variable's
    references (``$(OBJ)``, ``$(OBJ:.o=.obj)``) expanded."""
    text = makefile.replace("\\\n", " ")
    values: dict[str, str] = {}
    for line in text.splitlines():
        if m := _VARIABLE.match(line):
            values[m.group(1)] = m.group(2)

    def words(name: str, depth: int = 0) -> list[str]:
        out = []
        for w in values.get(name, "").split():
            ref = _REF.fullmatch(w)
            if ref is None or depth > 4:
                out.append(w)
                continue
            inner = words(ref.group(1), depth + 1)
            if ref.group(2) is not None:
                old, new = ref.group(2), ref.group(3)
                inner = [x[:-len(old)] + new if old and x.endswith(old) else x for x in inner]
            out += inner
        return out

    for line in text.splitlines():
        if (m := _RULE.match(line)) and "%" not in m.group(1) and rel in words(m.group(2)):
            return m.group(1)
    return None


def summary(source: str, reads: tuple[dict, ...]) -> str | None:
    """``bignum_mul_p521.ml: reads 2 object files, 1 missing: NAME (build it:
    make -C DIR unopt) ...`` of a Source's ``object_files``; None when the
    file reads none."""
    if not reads:
        return None
    missing = [r for r in reads if not r["exists"]]
    head = f"{source}: reads {len(reads)} object file{'s' if len(reads) != 1 else ''}"
    if not missing:
        return f"{head}, all present"
    builds = list(dict.fromkeys(r["build"] for r in missing if r.get("build")))
    them = "it" if len(missing) == 1 else "them"
    how = (f" (build {them}: {'; '.join(builds)})" if builds else
           f" (no Makefile above {them}: build {them} as the development says)")
    return (f"{head}, {len(missing)} missing: {', '.join(r['name'] for r in missing)}{how}; "
            f"until then the problems that read {them} are ERROR")
