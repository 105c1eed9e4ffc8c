"""What HOL Light proof files load, recursively, found as the toplevel finds it.

``needs "x.ml"`` and ``loadt "x.ml"`` look in the context root (the folder a
sweep passes as ``--context-root``), then in HOL Light's own directory;
``loads "x.ml"`` looks in HOL Light's directory only. Only literal names are
followed (``needs "a/b.ml";;`` as a phrase of its own, what the toplevel and
the native compiler load too); a name computed at run time is not seen.

``LoadGraph.missing`` walks every load from a set of files down and names
each file found nowhere with the chain of loads that reaches it, so a
corpus whose contexts cannot load is refused before any prover starts.
``LoadGraph.library_file`` tells a proof file from a file meant to be loaded
by another one after other files (s2n-bignum's ``arm/proofs/arm.ml``,
loaded by ``base.ml`` after everything base.ml loads first): the contexts of
such a file's theorems lack what its loader loaded before it. It reads the
index ``LoadGraph.loaders`` builds once for all files: walking every file
for each file made extracting 2,000 files take minutes (docs/extract.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from .ocaml_lexer import classify, split_phrases, strip_phrase

# HOL Light's own inline_load.ml (the bench's pipeline) drops these loads:
# update_database.ml walks the toplevel's symbol tables, which native code
# does not have, and its OCaml 4.13 variant segfaults (s2n-bignum's
# arm/proofs/base.ml loads it). One list: they are skipped natively in any
# context or library (native_compile.py), in bytecode by the driver's
# `loads` (backend.py), and extract records them.
DROPPED_LOADS = ("update_database.ml",)

# Why a dropped load is not followed (extract.json's dropped_loads_note).
DROPPED_NOTE = ("dropped by the bench's pipeline (HOL Light's inline_load.ml) and by proofbatch, "
                "natively and in bytecode: it walks the toplevel's symbol tables, which native code "
                "lacks, and crashes OCaml 4.13's toplevel")

_LOAD_WORDS = re.compile(r"\b(needs|loadt|loads)\b")
_QUOTED_ML = re.compile(r'"([^"\\\n]+\.ml)"')


def resolve(name: str, search: Sequence[Path]) -> Path | None:
    """Where HOL Light's file_on_path would find ``name``: an absolute name
    as it is, else the first folder of ``search`` that holds it."""
    if Path(name).is_absolute():
        return Path(name) if Path(name).is_file() else None
    for d in search:
        if (d / name).is_file():
            return (d / name).resolve()
    return None


@dataclass(frozen=True)
class Load:
    kind: str            # needs, loadt, loads
    name: str            # as written
    line: int            # 1-based line of the phrase's first token
    target: Path | None  # the file found; None when found nowhere (or dropped)
    dropped: bool = False
    phrase: int = -1     # index of the phrase among the file's phrases


@dataclass(frozen=True)
class Step:
    """One load on the way down: ``source`` (line) loads ``name``."""

    source: Path
    line: int
    kind: str
    name: str


@dataclass(frozen=True)
class MissingLoad:
    """A load found nowhere, and the loads that reach it from a given file."""

    kind: str
    name: str
    chain: tuple[Step, ...]   # from a given file down to the load found nowhere
    reached_from: int         # how many of the given files reach it

    @property
    def loader(self) -> Path:
        return self.chain[-1].source


class LoadGraph:
    """The loads of files, resolved against ``root`` then ``hol_dir``.

    ``phrases_of`` may hand over phrases already split (extract splits the
    files it cuts anyway); other files are read and split once each.
    """

    def __init__(self, root: Path | None, hol_dir: Path | None,
                 phrases_of: Callable[[Path], list[str] | None] | None = None,
                 dropped: Sequence[str] = DROPPED_LOADS):
        self.root = root.resolve() if root is not None else None
        self.hol_dir = hol_dir
        self.dropped = tuple(dropped)
        self._given_phrases = phrases_of or (lambda p: None)
        self._loads: dict[Path, list[Load]] = {}
        self._closure: dict[Path, frozenset[Path]] = {}
        self._real: dict[Path, Path] = {}      # resolve() costs a stat per folder of the path
        self._quoted: dict[str, list[Path]] | None = None   # see quoting()

    def real(self, path: Path) -> Path:
        got = self._real.get(path)
        if got is None:
            got = self._real[path] = path.resolve()
        return got

    # -- one file ------------------------------------------------------------

    def search(self, kind: str) -> list[Path]:
        hol = [self.hol_dir] if self.hol_dir is not None else []
        if kind == "loads":
            return hol
        return ([self.root] if self.root is not None else []) + hol

    def phrases(self, path: Path) -> list[str]:
        got = self._given_phrases(path)
        if got is not None:
            return got
        return split_phrases(path.read_text(encoding="utf-8", errors="replace"))

    def loads(self, path: Path) -> list[Load]:
        path = self.real(path)
        if path in self._loads:
            return self._loads[path]
        out: list[Load] = []
        line = 0
        try:
            phrases = self.phrases(path)
        except OSError:
            phrases = []
        for k, phrase in enumerate(phrases):
            if not _LOAD_WORDS.search(phrase):
                line += phrase.count("\n")
                continue
            kind, name = classify(phrase)
            if kind in ("needs", "loadt", "loads"):
                body = len(phrase.rstrip()) - len(strip_phrase(phrase))
                at = line + phrase.count("\n", 0, body) + 1
                if kind == "loads" and name in self.dropped:
                    out.append(Load(kind, name, at, None, dropped=True, phrase=k))
                else:
                    out.append(Load(kind, name, at, resolve(name, self.search(kind)), phrase=k))
            line += phrase.count("\n")
        self._loads[path] = out
        return out

    # -- recursively -----------------------------------------------------------

    def closure(self, path: Path) -> frozenset[Path]:
        """Every file ``path`` loads, directly or not (not ``path`` itself)."""
        path = self.real(path)
        if path in self._closure:
            return self._closure[path]
        seen: set[Path] = set()
        todo = [path]
        while todo:
            f = todo.pop()
            for ld in self.loads(f):
                t = ld.target
                if t is not None and t not in seen:
                    seen.add(t)
                    if t in self._closure:
                        seen |= self._closure[t]
                    else:
                        todo.append(t)
        seen.discard(path)
        self._closure[path] = frozenset(seen)
        return self._closure[path]

    def missing(self, starts: Iterable[Path]) -> list[MissingLoad]:
        """Each load found nowhere under ``starts``, once, with the first chain to it."""
        found: dict[tuple[Path, str, str], list] = {}   # (loader, kind, name) -> [chain, starts]
        for start in starts:
            start = self.real(start)
            chains: dict[Path, tuple[Step, ...]] = {start: ()}
            todo = [start]
            while todo:
                f = todo.pop(0)
                for ld in self.loads(f):
                    step = Step(f, ld.line, ld.kind, ld.name)
                    if ld.dropped:
                        continue
                    if ld.target is None:
                        key = (f, ld.kind, ld.name)
                        entry = found.setdefault(key, [chains[f] + (step,), set()])
                        entry[1].add(start)
                    elif ld.target not in chains:
                        chains[ld.target] = chains[f] + (step,)
                        todo.append(ld.target)
        return [MissingLoad(k[1], k[2], chain, len(st)) for k, (chain, st) in found.items()]

    def loaded_files(self, starts: Iterable[Path]) -> set[Path]:
        out: set[Path] = set()
        for s in starts:
            out |= self.closure(s)
        return out

    def loaders(self, universe: Iterable[Path]) -> dict[Path, list[Path]]:
        """Each file loaded by a file of ``universe`` (or of what they load)
        -> the files that load it, sorted: ``library_file``'s index, built once."""
        universe = [self.real(p) for p in universe]
        out: dict[Path, list[Path]] = {}
        for f in sorted(set(universe) | self.loaded_files(universe)):
            for target in dict.fromkeys(ld.target for ld in self.loads(f) if ld.target is not None):
                if target != f:
                    out.setdefault(target, []).append(f)
        return out

    def quoting(self, name: str) -> list[Path]:
        """The ``*.ml`` files under the context root whose text quotes ``"name"``.

        Extracting ``arm/proofs/instruction.ml`` alone must still find
        ``base.ml``, which loads it (and whose start its problems need): the
        root's files are read once, and only those naming a file are split.
        """
        if self._quoted is None:
            self._quoted = {}
            if self.root is not None:
                for f in sorted(self.root.rglob("*.ml")):
                    try:
                        text = f.read_text(encoding="utf-8", errors="replace")
                    except OSError:
                        continue
                    for quoted in set(_QUOTED_ML.findall(text)):
                        self._quoted.setdefault(quoted, []).append(f)
        return self._quoted.get(name, [])

    def loaders_of(self, path: Path, loaders: dict[Path, list[Path]]) -> Iterator[Path]:
        """The files that load ``path``: those of ``loaders`` (``self.loaders(universe)``)
        and those under the context root, sorted as shown, each checked lazily."""
        path = self.real(path)
        known = set(loaders.get(path, ()))
        found = {self.real(f) for f in self.quoting(self.show(path))} if self.root else set()
        for f in sorted(known | found, key=lambda f: (self.show(f), str(f))):
            if f == path:
                continue
            if f in known or any(ld.target == path for ld in self.loads(f)):
                yield f

    def library_file(self, path: Path, loaders: dict[Path, list[Path]]) -> tuple[Path, Path] | None:
        """(loader, what it loads first) when ``path`` is a library file;
        ``loaders`` is ``self.loaders(universe)``, completed by the files
        under the context root that load ``path``.

        ``path`` is one when some file loads it, and no file that loads it
        has its first load among what ``path`` loads itself: its text lacks
        what its loaders load first (arm.ml is loaded by base.ml, whose
        first load it does not load). A proof file loaded by another proof
        file (after both load base.ml) is no library file. The loader given
        is the first in path order (``loaders_of``).
        """
        path = self.real(path)
        mine = self.closure(path) | {path}
        verdict = None
        for f in self.loaders_of(path, loaders):
            first = next((ld.target for ld in self.loads(f) if ld.target is not None), None)
            if first is None or first in mine:
                return None
            verdict = verdict or (f, first)
        return verdict

    def show(self, path: Path) -> str:
        """``path`` relative to the context root or HOL Light's directory when under one."""
        for base in (self.root, self.hol_dir):
            if base is not None:
                try:
                    return str(path.relative_to(base.resolve()))
                except ValueError:
                    pass
        return str(path)

    def describe(self, miss: MissingLoad, given: str | None = None) -> str:
        """``a.ml: needs "arm/proofs/base.ml" -> arm/proofs/base.ml: loadt "Library/records.ml"``
        (the first file as ``given``, when given)."""
        parts = []
        for k, s in enumerate(miss.chain):
            where = given if (given is not None and k == 0) else self.show(s.source)
            parts.append(f'{where}: {s.kind} "{s.name}"')
        return " -> ".join(parts)

    def describe_lines(self, miss: MissingLoad) -> list[str]:
        """The chain with line numbers: ``["arm/proofs/bignum_add.ml:10 needs ...", ...]``."""
        return [f'{self.show(s.source)}:{s.line} {s.kind} "{s.name}"' for s in miss.chain]
