"""What a HOL Light problem's verdict depends on besides its answer: its
setup.ml and query.txt, and every file its setup loads, directly or not
(``needs``/``loadt`` under the context root, then HOL Light's directory;
``loads`` in HOL Light's directory), as the toplevel finds them
(load_graph.py). The runner hashes them into each row
(``ProverBackend.problem_inputs``, runner/checks/problem_hash.py), so a resume
checks again a problem one of whose files changed. The object files the
setup and its loaded files read when they load (s2n-bignum's
``define_assert_from_elf "x" "arm/p521/unopt/x.o"``, object_reads.py) count
too, named as written (``read:arm/p521/unopt/x.o``) and opened under the
context root as a check opens them: a missing object, then built, gets its
problems checked again (issue 46).

Files are read for loads with one regular expression rather than split
into phrases: setups are the bulk of a corpus's bytes (the bench's hold the
proof file up to the theorem), and splitting them all again would double
what planning pays. A load named in a comment or a string counts too: a
needless recheck when that file changes, never a missed one. Each file
loaded, shared by many setups, is read once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from ....corpus import Problem
from ..load_graph import LoadGraph, resolve
from ..object_reads import object_path, reads_in_text

_LOAD = re.compile(rb'\b(needs|loadt|loads)\s*\(?\s*"([^"\\\n]+)"')


def context_inputs(problems: Sequence[Problem], root: Path | None, hol_dir: Path | None
                   ) -> dict[str, tuple[tuple[str, Path], ...]]:
    """Problem id -> (name, path) of its setup, its query and each file its
    setup loads, directly or not, named relative to the context root or HOL
    Light's directory."""
    graph = LoadGraph(root, hol_dir)        # where loads look, and how files are named
    found: dict[tuple[str, str], Path | None] = {}
    closure: dict[Path, frozenset[Path]] = {}
    reads_of: dict[Path, list[str]] = {}       # a loaded file -> the objects it reads
    workdir = Path(root) if root is not None else Path.cwd()   # where a check opens them

    def targets(text: bytes) -> set[Path]:
        out = set()
        for m in _LOAD.finditer(text):
            kind, name = m.group(1).decode(), m.group(2).decode("utf-8", "surrogateescape")
            if kind == "loads" and name in graph.dropped:
                continue
            if (kind, name) not in found:
                target = resolve(name, graph.search(kind))
                found[(kind, name)] = target.resolve() if target is not None else None
            if found[(kind, name)] is not None:
                out.add(found[(kind, name)])
        return out

    def loaded_by(start: Path) -> frozenset[Path]:
        """Every file ``start`` loads, directly or not, and itself."""
        if start in closure:
            return closure[start]
        seen, todo = {start}, [start]
        closure[start] = frozenset(seen)        # a file loading itself ends here
        while todo:
            f = todo.pop()
            if f != start and f in closure:
                seen |= closure[f]
                continue
            try:
                text = f.read_bytes()
            except OSError:
                continue
            for t in targets(text) - seen:
                seen.add(t)
                todo.append(t)
        closure[start] = frozenset(seen)
        return closure[start]

    def reads(f: Path) -> list[str]:
        if f not in reads_of:
            try:
                reads_of[f] = reads_in_text(f.read_bytes())
            except OSError:
                reads_of[f] = []
        return reads_of[f]

    out = {}
    for p in problems:
        try:
            text = p.setup_path.read_bytes()
        except OSError:
            text = b""
        files: set[Path] = set()
        for target in targets(text):
            files |= loaded_by(target)
        objects = sorted({*reads_in_text(text), *(n for f in files for n in reads(f))})
        out[p.problem_id] = (("setup", p.setup_path), ("query", p.query_path),
                             *(("load:" + graph.show(f), f) for f in sorted(files)),
                             *(("read:" + n, object_path(n, workdir)) for n in objects))
    return out
