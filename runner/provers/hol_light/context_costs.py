"""What loading each context image costs, estimated before anyone loads it.

An image loads its ``segment`` (runner.provers.hol_light.contexts.ImageNode) on top of its
parent. Its build time is, in this order:

1. measured: a build of the same image recorded by a sweep or a profile
   (``OUT/images/*.json``, runner.planning.learned_costs.measured_builds);
2. estimated, phrase by phrase, in the mode the sweep runs in (``LoadModel``:
   bytecode or native) and by the choice of ``--context-proofs``
   (runner.checks.context_proofs):

   - every phrase that runs (comments and blanks aside) costs the mode's
     ``phrase_s`` plus ``per_kb_s`` per KB of its normal form
     (contexts.normal_form: comments out, blanks collapsed);
   - ``trust``: a proof phrase costs just that, like a definition of its
     size: a trusted proof returns its statement without running its tactic;
   - ``replay``: a proof phrase costs besides its proof: the map's
     ``prove_secs`` when its theorem is a problem of the map (*measured*,
     converted to the mode by the caller), else ``proof_s`` plus
     ``proof_per_kb_s`` per KB (*estimated* from its size);
   - native only: compiling the segment and every file it loads
     (``compile_chunk_s`` per compiled module, ``compile_per_kb_s`` per KB),
     and its problems' answers (``answer_batch_s`` per batch of at most
     ``ANSWER_BATCH``, ``answer_per_kb_s`` per KB of their text), costs
     bytecode does not pay.

Loads. A ``needs``/``loadt``/``loads`` phrase costs the phrases of the files
it really loads (``FileLoads``), resolved offline as the toplevel resolves
them (runner/provers/hol_light/load_graph.py): ``needs``/``loadt`` in the
context root, then in HOL Light's directory; ``loads`` in HOL Light's
directory only; ``loads "update_database.ml"`` is dropped (HOL Light's
inline_load.ml and proofbatch drop it). Recursively, and each file once per
image chain: HOL Light records every file it loads (hol_loader.ml
``load_on_path``), so ``needs`` of a file loaded on the chain before (by an
ancestor image, by an earlier phrase, by hol.ml's core) costs nothing, while
``loadt``/``loads`` load it every time. A load found nowhere is *unknown*: it
is charged the stand-in ``LOAD_S`` (Library/words.ml as measured) and
counted as such.

Which proofs a segment holds. A problem cut from a proof file has the file's
earlier theorems in its context, and its id is ``<prefix>.<file stem>.<THM>``,
with a 0-based ``.N`` when the file proves a name more than once
(s2n-bignum-bench's collect-problems.py); its *origin* is the id without
``.<THM>[.N]``. A phrase is a proof phrase when, comments aside, it reads
``let NAME = prove``, ``let NAME = time prove`` or ``let NAME =
prove_by_refinement`` (``let rec``, ``and`` and patterns are not matched).
Its theorem is priced when, over the origins of the problems whose images
lie at or below the segment's image, exactly one candidate id is in the map:
``<origin>.NAME``, or ``<origin>.NAME.<k>`` where ``k`` counts earlier proofs
of NAME along the chain from the base. Failing that (a file inlined by
another's ``needs``, such as s2n-bignum's ``common/`` files in every
``arm`` context, or a proof of a file a ``needs`` loads), it is priced when
the map holds exactly one problem of that theorem name and no ``.N`` variant
of it. A proof of a file a load reads is priced as ``<first folder>.<file
stem>.NAME`` when the map has it (s2n-bignum's common/words2.ml proves the
map's ``common.words2.*``), else by that unique name. Anything else is
estimated from its size under ``replay``.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Sequence

from ...checks.context_proofs import ContextProofs
from .contexts import ContextTree, _skip_comment, normal_form, split_phrases
# The model and its measured figures, priced with here (callers import them from here too).
from .load_model import (ANSWER_BATCH, LOAD_S, MEASURED_BYTECODE, MODELS,  # noqa: F401
                         PHRASE_S, PHRASE_SOURCE, SWEEP_FIT, LoadModel, flat_model)

DEFAULT_MODE = "bytecode"


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
            i = _skip_comment(phrase, i + 2)
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
        from .load_graph import DROPPED_LOADS, LoadGraph

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
            from .native_cache import compiled_libraries

            self._compiled = compiled_libraries(self.hol_dir)
        return self._compiled
    def resolve(self, kind: str, name: str) -> Path | None:
        from .native_build import resolve

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
        load order, each ``needs``'d file once (benchmarks/load_cost.py)."""
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
        from .native_cache import library_marker

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


class _Lookup:
    """A loaded file's proof -> its problem of the map, by origin, else the
    one problem of that name."""

    def __init__(self, unique: Mapping[str, str | None], secs: Mapping[str, float]):
        self.unique, self.secs = unique, secs

    def __call__(self, name: str, origin: str | None = None) -> str | None:
        if origin is not None and f"{origin}.{name}" in self.secs:
            return f"{origin}.{name}"
        return self.unique.get(name)


@dataclass(frozen=True)
class SegmentCost:
    """One image's estimated build, by both choices, in one mode."""

    key: str
    phrases: int                # phrases that run, the loaded files' included
    proofs: int                 # proof phrases among them
    priced: tuple[str, ...]     # problem ids of the map whose prove_secs are charged under replay
    proof_s: float              # their prove_secs summed, as given (the model's mode)
    unpriced: int               # proofs no problem of the map matched: estimated by size
    loads: int                  # files first loaded here (found), plus unknown loads
    model: LoadModel = None     # type: ignore[assignment]
    kb: float = 0.0
    trust_s: float = 0.0        # the phrases under trust (files measured whole as measured)
    replay_base_s: float = 0.0  # the same, files measured whole under replay as measured
    unpriced_kb: float = 0.0
    in_measured: int = 0        # proofs inside files measured whole under replay
    files: tuple[str, ...] = ()         # files loaded here, in order
    measured_files: tuple[str, ...] = ()  # of them, charged as benchmarks/load_cost.py measured
    unknown: tuple[str, ...] = ()       # loads found nowhere (charged the stand-in)
    dropped: int = 0
    chunks: int = 0
    execs: int = 0              # machine-code EXEC rules among the phrases (machine_code.py)
    exec_bytes: int = 0         # the machine code they decode
    compile_kb: float = 0.0     # native: KB compiled (files the cache holds left out)
    cached: tuple[str, ...] = ()  # files loaded here that the native cache holds compiled
    answer_batches: int = 0     # native: answer batches compiled for its problems
    answer_kb: float = 0.0      # native: the answers' text they compile

    def load_s(self, choice: ContextProofs) -> float:
        """The phrases (proofs as their statements) and the unknown loads' stand-ins."""
        choice = ContextProofs(choice)
        base = self.replay_base_s if choice is ContextProofs.REPLAY else self.trust_s
        return base + len(self.unknown) * self.model.load_s[choice.value] + self.model.image_s

    def replay_proofs_s(self) -> float:
        """What replay adds: the priced proofs, the rest by size."""
        est = self.unpriced * self.model.proof_s + self.unpriced_kb * self.model.proof_per_kb_s
        return self.proof_s + max(0.0, est)

    def compile_s(self) -> float:
        """Native: compiling the segment, the files it loads that the cache
        does not hold, and its problems' answers; 0 in bytecode."""
        return (self.chunks * self.model.compile_chunk_s + self.compile_kb * self.model.compile_per_kb_s
                + self.model.answers_cost(self.answer_batches, self.answer_kb))

    def build_s(self, choice: ContextProofs) -> float:
        base = self.load_s(choice) + self.compile_s()
        return base + self.replay_proofs_s() if ContextProofs(choice) is ContextProofs.REPLAY else base


def _by_name(ids) -> dict[str, str | None]:
    """Theorem name -> the one problem id of that name, or None when the
    name is repeated or numbered (``.N``)."""
    out: dict[str, str | None] = {}
    for pid in ids:
        numbered = _DUPLICATE.search(pid) is not None
        name = _DUPLICATE.sub("", pid).rpartition(".")[2]
        out[name] = None if numbered or name in out else pid
    return out


def estimate(tree: ContextTree, prove_secs: Mapping[str, float], phrase_s: float | None = None, *,
             mode: str = DEFAULT_MODE, files: FileLoads | None = None,
             model: LoadModel | None = None,
             answers: Mapping[str, Sequence[int]] | None = None) -> dict[str, SegmentCost]:
    """The estimated build of every image of ``tree`` but the base, in
    ``mode`` (MODELS[mode] unless ``model`` is given); loads resolved by
    ``files`` (none given: no file is found, every load is unknown);
    ``prove_secs`` in ``mode`` already (plans.in_mode converts them).
    ``phrase_s``, given, makes every phrase cost that flat (flat_model).
    ``answers``: problem id -> the byte sizes of its distinct answers (its
    attempts'), what a native image compiles for its problems; none given,
    one batch of empty answers per image that has problems."""
    model = model or (flat_model(phrase_s, mode) if phrase_s is not None else MODELS[mode])
    files = files or FileLoads()
    unique = _by_name(prove_secs)
    lookup = _Lookup(unique, prove_secs)
    children: dict[str, list[str]] = defaultdict(list)
    for node in tree.nodes.values():
        if node.parent is not None:
            children[node.parent].append(node.key)
    # Origins at or below each image, children before parents.
    order, todo = [], [tree.base]
    while todo:
        key = todo.pop()
        order.append(key)
        todo.extend(children[key])
    origins: dict[str, frozenset[str]] = {}
    for key in reversed(order):
        own = {o for pid in tree.nodes[key].problems if (o := origin_of(pid)) is not None}
        for child in children[key]:
            own |= origins[child]
        origins[key] = frozenset(own)
    out: dict[str, SegmentCost] = {}
    # Walk down, carrying how often each name was proved along the chain and
    # the files loaded on it.
    stack: list[tuple[str, dict[str, int], frozenset]] = [(tree.base, {}, frozenset())]
    while stack:
        key, seen, loaded_before = stack.pop()
        node = tree.nodes[key]
        seen = dict(seen)
        loaded = set(loaded_before)
        t = Tally()
        t.chunks = 1 if node.segment else 0
        for phrase in read_phrases(node.segment, root=files.root) if node.segment else ():
            t.phrase(phrase, model)
            if phrase.load is not None:
                t.chunks += 1
                t.add(files.load(*phrase.load, loaded, lookup, model))
                continue
            name = phrase.theorem
            if name is None:
                continue
            k = seen.get(name, 0)
            seen[name] = k + 1
            found = {c for o in origins[key] for c in (f"{o}.{name}", f"{o}.{name}.{k}")
                     if c in prove_secs}
            if not found and unique.get(name):
                found = {unique[name]}
            t.proof(phrase, next(iter(found)) if len(found) == 1 else None, prove_secs)
        if node.parent is not None:
            batches, answer_kb = _answer_batches(node.problems, answers)
            out[key] = SegmentCost(
                key, t.phrases, t.proofs, tuple(t.priced), t.proof_s, t.estimated,
                len(t.files) + len(t.unknown), model, t.kb, t.trust_s, t.replay_base_s,
                t.estimated_kb, t.in_measured, tuple(files.graph.show(f) for f in t.files),
                tuple(files.graph.show(f) for f in t.measured_files),
                tuple(f'{k} "{n}"' for k, n in t.unknown), t.dropped, t.chunks, t.execs,
                t.exec_bytes, t.compile_kb, tuple(files.graph.show(f) for f in t.cached),
                batches, answer_kb)
        stack.extend((child, seen, frozenset(loaded)) for child in children[key])
    return out


def _answer_batches(problems: Sequence[str], answers: Mapping[str, Sequence[int]] | None
                    ) -> tuple[int, float]:
    """The answer batches an image's problems compile natively, and their KB."""
    if answers is None:
        return (1 if problems else 0), 0.0
    sizes = [n for pid in problems for n in answers.get(pid, ())]
    return -(-len(sizes) // ANSWER_BATCH), sum(sizes) / 1024


def translate_measured(tree: ContextTree, profiled: Mapping[str, str],
                       builds: Mapping[str, tuple[str | None, float]]) -> dict[str, float]:
    """Measured builds of ``tree``'s images, from builds recorded under other
    keys (another salt: a profile run with another prover build path or
    driver): for each problem whose profiled image key is known, its chain
    of measured builds is laid over its chain in ``tree`` when both have the
    same length; an image given two different measured keys is dropped."""
    mapped: dict[str, str] = {}
    clash: set[str] = set()
    for pid, key in tree.image_of.items():
        theirs = profiled.get(pid)
        if theirs is None or theirs not in builds:
            continue
        ours = [n.key for n in tree.chain(key)][1:]        # the base boots, it is not a context
        chain: list[str] = []
        k: str | None = theirs
        while k is not None and k in builds:
            chain.append(k)
            k = builds[k][0]
        chain.reverse()
        if chain and builds[chain[0]][0] is None:
            chain = chain[1:]                              # their base
        if len(chain) != len(ours):
            continue
        for a, b in zip(ours, chain):
            if mapped.setdefault(a, b) != b:
                clash.add(a)
    return {a: builds[b][1] for a, b in mapped.items() if a not in clash}


def totals(costs: Mapping[str, SegmentCost], measured: Mapping[str, float],
           choice: ContextProofs) -> dict:
    """The images' build seconds summed once each, with what stands behind them."""
    choice = ContextProofs(choice)
    est = [c for k, c in costs.items() if k not in measured]
    replay = choice is ContextProofs.REPLAY
    return {"images": len(costs), "measured": sum(1 for k in costs if k in measured),
            "build_s": sum(measured[k] for k in costs if k in measured)
            + sum(c.build_s(choice) for c in est),
            "phrases": sum(c.phrases for c in est),
            "compile_s": sum(c.compile_s() for c in est),
            "priced_proofs": sum(len(c.priced) for c in est) if replay else 0,
            "priced_proofs_s": sum(c.proof_s for c in est) if replay else 0.0,
            "unpriced_proofs": sum(c.unpriced for c in est) if replay else 0,
            "proofs_in_measured_files": sum(c.in_measured for c in est) if replay else 0,
            "trusted_proofs": 0 if replay else sum(c.proofs for c in est),
            "loads": sum(c.loads for c in est),
            "files_loaded": sum(len(c.files) for c in est),
            "files_measured": sum(len(c.measured_files) for c in est),
            "unknown_loads": sum(len(c.unknown) for c in est),
            "dropped_loads": sum(c.dropped for c in est),
            "machine_code_rules": sum(c.execs for c in est),
            "files_compiled_cached": sum(len(c.cached) for c in est),
            "machine_code_bytes": sum(c.exec_bytes for c in est)}
