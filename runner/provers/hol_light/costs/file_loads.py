"""What a context's text loads and what its phrases are, for pricing
(context_costs.py's doc says how): its phrases read once each (``Phrase``),
the files its loads reach resolved as the toplevel resolves them
(``FileLoads``), and the sums a segment's phrases and files make
(``Tally``), priced by a LoadModel."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from ..load_graph import DROPPED_LOADS, LoadGraph, resolve
from ..ocaml_lexer import normal_form, skip_comment, split_phrases
from .load_model import LoadModel

_PROOF = re.compile(r"let\s+([A-Za-z_][A-Za-z0-9_']*)\s*=\s*(?:time\s+)?(?:prove|prove_by_refinement)\b")
_LOAD = re.compile(r"(needs|loadt|loads)\s*\"([^\"]*)\"\s*;;")
_DUPLICATE = re.compile(r"\.(\d+)$")


def _code_start(phrase: str) -> int:
    """Where the phrase's code begins, after blanks and comments."""
    i = 0
    while True:
        while i < len(phrase) and phrase[i].isspace():
            i += 1
        if phrase.startswith("(*", i):
            i = skip_comment(phrase, i + 2)
        else:
            return i


def theorem_of(phrase: str) -> str | None:
    """NAME when the phrase is ``let NAME = [time] prove[_by_refinement] ...``."""
    m = _PROOF.match(phrase, _code_start(phrase))
    return m.group(1) if m else None


def loaded_file(phrase: str) -> tuple[str, str] | None:
    """(``needs``, ``loadt`` or ``loads``, the file) of a literal load phrase."""
    m = _LOAD.match(phrase, _code_start(phrase))
    return (m.group(1), m.group(2)) if m else None


def origin_of(problem_id: str) -> str | None:
    """``<prefix>.<file stem>`` of a ``<prefix>.<file stem>.<THM>[.N]`` id."""
    base = _DUPLICATE.sub("", problem_id)
    head, dot, _ = base.rpartition(".")
    return head if dot and head else None


@dataclass(frozen=True)
class Phrase:
    """What pricing needs of one phrase that runs."""

    kb: float                         # its normal form's size
    theorem: str | None = None        # a proof phrase's theorem
    load: tuple[str, str] | None = None   # (kind, name) of a literal load
    text: str = field(default="", compare=False, repr=False)   # as written (benchmarks)
    exec_bytes: int | None = None     # machine code an EXEC rule decodes (machine_code.py)


def read_phrases(text: str, keep_text: bool = False, root: Path | None = None) -> list[Phrase]:
    """The phrases of ``text`` that run; ``root``: where object files that
    machine-code definitions name resolve (the context root)."""
    from .machine_code import exec_bytes

    kept = [(phrase, norm) for phrase in split_phrases(text) if (norm := normal_form(phrase))]
    decoded = exec_bytes([norm for _, norm in kept], root)
    return [Phrase(len(norm.encode()) / 1024, theorem_of(phrase), loaded_file(phrase),
                   phrase if keep_text else "", code)
            for (phrase, norm), code in zip(kept, decoded)]


@dataclass
class Tally:
    """What a segment loads, summed, priced by one model."""

    phrases: int = 0                  # phrases that run (the loaded files' included)
    kb: float = 0.0                   # their normal forms (what native mode compiles)
    trust_s: float = 0.0              # their cost under trust: by the model, or files measured whole
    replay_base_s: float = 0.0        # the same, with files measured whole under replay as measured
    proofs: int = 0                   # proof phrases
    priced: list = field(default_factory=list)   # problem ids whose prove_secs are charged
    proof_s: float = 0.0              # those prove_secs, summed
    estimated: int = 0                # proofs priced by size under replay
    estimated_kb: float = 0.0
    in_measured: int = 0              # proofs inside files whose replay was measured whole
    files: list = field(default_factory=list)    # files loaded, in order
    measured_files: list = field(default_factory=list)   # of them, charged as measured
    unknown: list = field(default_factory=list)  # loads found nowhere: (kind, name)
    dropped: int = 0                  # loads dropped (update_database.ml)
    chunks: int = 0                   # native compile units
    execs: int = 0                    # machine-code EXEC rules (machine_code.py)
    exec_bytes: int = 0               # the machine code they decode
    compile_kb: float = 0.0           # native: KB to compile (files the cache holds left out)
    cached: list = field(default_factory=list)   # files the native cache holds compiled

    def add(self, other: "Tally") -> None:
        for name in ("phrases", "kb", "trust_s", "replay_base_s", "proofs", "proof_s", "estimated",
                     "estimated_kb", "in_measured", "dropped", "chunks", "execs", "exec_bytes",
                     "compile_kb"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("priced", "files", "measured_files", "unknown", "cached"):
            getattr(self, name).extend(getattr(other, name))

    def phrase(self, ph: "Phrase", model: LoadModel) -> None:
        cost = model.phrase_cost(ph.kb, ph.theorem is not None)
        if ph.exec_bytes is not None:
            cost += model.exec_cost(ph.exec_bytes)
            self.execs += 1
            self.exec_bytes += ph.exec_bytes
        self.phrases += 1
        self.kb += ph.kb
        self.compile_kb += ph.kb
        self.trust_s += cost
        self.replay_base_s += cost

    def proof(self, ph: "Phrase", pid: str | None, secs: Mapping[str, float]) -> None:
        self.proofs += 1
        if pid is None:
            self.estimated += 1
            self.estimated_kb += ph.kb
        else:
            self.priced.append(pid)
            self.proof_s += secs[pid]


class FileLoads:
    """The files loads reach, resolved as the toplevel resolves them, and
    their phrases, read once each. ``hol_dir``: HOL Light's directory;
    ``root``: the context root (the sweep's --context-root). ``compiled``:
    markers of library files the native cache holds (native_cache.py; by
    default read from the cache for ``hol_dir``), whose compile costs nothing."""

    def __init__(self, root: Path | None = None, hol_dir: Path | None = None,
                 keep_text: bool = False, compiled: frozenset[str] | None = None):
        self.root = Path(root).resolve() if root is not None else None
        self.hol_dir = Path(hol_dir).resolve() if hol_dir is not None else None
        self.graph = LoadGraph(self.root, self.hol_dir)
        self.dropped = tuple(DROPPED_LOADS)
        self.keep_text = keep_text
        self._compiled = compiled
        self._phrases: dict[Path, list[Phrase]] = {}
        self._digests: dict[Path, str] = {}
        self._memo: dict = {}
        self._memo_owner: tuple | None = None
        self.core: frozenset[Path] = frozenset()
        if self.hol_dir is not None and (self.hol_dir / "hol.ml").is_file():
            hol = (self.hol_dir / "hol.ml").resolve()
            self.core = LoadGraph(None, self.hol_dir).closure(hol) | {hol}

    def compiled(self) -> frozenset[str]:
        """Markers of the library files the native cache holds, read when a
        native compile is first priced (bytecode plans never ask)."""
        if self._compiled is None:
            from ..native.native_cache import compiled_libraries

            self._compiled = compiled_libraries(self.hol_dir)
        return self._compiled

    def resolve(self, kind: str, name: str) -> Path | None:
        return resolve(name, self.graph.search(kind))

    def phrases(self, path: Path) -> list[Phrase]:
        if path not in self._phrases:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            self._phrases[path] = read_phrases(text, self.keep_text, self.root)
        return self._phrases[path]

    def digest(self, path: Path) -> str:
        if path not in self._digests:
            try:
                self._digests[path] = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
            except OSError:
                self._digests[path] = ""
        return self._digests[path]

    def origin(self, path: Path) -> str | None:
        """``<first folder>.<stem>`` of a file under the context root, as
        the bench (and extract) name its problems: common/words2.ml's
        theorems are ``common.words2.<THM>``."""
        if self.root is None:
            return None
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return None
        return f"{rel.parts[0]}.{path.stem}" if len(rel.parts) > 1 else path.stem

    def closure(self, path: Path) -> frozenset[Path]:
        return self.graph.closure(path)

    def order(self, path: Path, loaded: set | None = None) -> list[tuple[Path, Phrase]]:
        """The phrases the toplevel runs for ``loadt path``, files inlined in
        load order, each ``needs``'d file once (benchmarks/images/load_cost.py)."""
        loaded = set(self.core) if loaded is None else loaded
        out: list[tuple[Path, Phrase]] = []

        def walk(f: Path, stack: tuple) -> None:
            loaded.add(f)
            for ph in self.phrases(f):
                if ph.load is None:
                    out.append((f, ph))
                    continue
                kind, name = ph.load
                if kind == "loads" and name in self.dropped:
                    continue
                t = self.resolve(kind, name)
                if t is None or t in stack or (kind == "needs" and t in loaded):
                    continue
                walk(t, stack + (t,))
        walk(path.resolve(), (path.resolve(),))
        return out

    def load(self, kind: str, name: str, loaded: set, lookup, model: LoadModel) -> Tally:
        """What the phrase ``kind "name";;`` loads on top of files ``loaded``
        (updated in place), priced by ``model`` (the phrase itself aside);
        ``lookup(theorem, origin) -> problem id or None`` prices a loaded
        file's proofs."""
        tally = Tally()
        if kind == "loads" and name in self.dropped:
            tally.dropped += 1
            return tally
        target = self.resolve(kind, name)
        if target is None:
            # Found nowhere: the stand-in, once per chain for needs (by name:
            # the toplevel would have recorded the file).
            if not (kind == "needs" and ("?", name) in loaded):
                loaded.add(("?", name))
                tally.unknown.append((kind, name))
            return tally
        if kind == "needs" and (target in loaded or target in self.core):
            return tally
        self._file(target, loaded, lookup, model, (target,), tally)
        return tally

    def _file(self, path: Path, loaded: set, lookup, model: LoadModel, stack: tuple,
              tally: Tally) -> None:
        if self._memo_owner != (id(lookup), id(model)):     # another map's prices, or model
            self._memo.clear()
            self._memo_owner = (id(lookup), id(model))
            self._memo_refs = (lookup, model)                # keeps the ids alive
        closure = self.closure(path)
        memo_key = (path, frozenset(x for x in loaded if isinstance(x, tuple) or x in closure))
        hit = self._memo.get(memo_key)
        if hit is not None:
            part, added = hit
            tally.add(_copy(part))
            loaded |= added
            return
        from ..native.native_cache import library_marker

        before = set(loaded)
        part = Tally()
        loaded.add(path)
        part.files.append(path)
        cached = library_marker(path, self.digest(path)) in self.compiled()
        if cached:
            part.cached.append(path)
        part.chunks += 0 if cached else 1
        origin = self.origin(path)
        measured = model.measured_files.get((self.graph.show(path), self.digest(path)))
        own = Tally()                      # this file's own phrases
        for ph in self.phrases(path):
            own.phrase(ph, model)
            if ph.load is None:
                if ph.theorem is not None:
                    own.proof(ph, lookup(ph.theorem, origin), lookup.secs)
                continue
            kind, name = ph.load
            part.chunks += 0 if cached else 1
            if kind == "loads" and name in self.dropped:
                part.dropped += 1
                continue
            target = self.resolve(kind, name)
            if target is None:
                if not (kind == "needs" and ("?", name) in loaded):
                    loaded.add(("?", name))
                    part.unknown.append((kind, name))
            elif target in stack:
                continue                  # a load cycle: the toplevel would loop; not charged twice
            elif not (kind == "needs" and (target in loaded or target in self.core)):
                self._file(target, loaded, lookup, model, stack + (target,), part)
        if measured is not None:
            # Measured whole (its own phrases; what it loads is charged apart).
            trust_s, replay_s = measured
            part.measured_files.append(path)
            own.trust_s = trust_s
            if replay_s is None:
                own.replay_base_s = trust_s          # its proofs priced as usual on top
            else:
                own.replay_base_s = replay_s         # its proofs are in the measure
                own.in_measured, own.priced, own.proof_s = own.proofs, [], 0.0
                own.estimated, own.estimated_kb = 0, 0.0
        if cached:
            own.compile_kb = 0.0
        part.add(own)
        self._memo[memo_key] = (part, frozenset(loaded - before))
        tally.add(_copy(part))


def _copy(t: Tally) -> Tally:
    return replace(t, priced=list(t.priced), files=list(t.files),
                   measured_files=list(t.measured_files), unknown=list(t.unknown),
                   cached=list(t.cached))
