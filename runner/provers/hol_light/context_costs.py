"""What loading each context image costs, estimated before anyone loads it.

An image loads its ``segment`` (runner.provers.hol_light.contexts.ImageNode) on top of its
parent. Its build time is, in this order:

1. measured: a build of the same image recorded by a sweep or a profile
   (``OUT/images/*.json``, runner.planner_inputs.measured_builds);
2. estimated, phrase by phrase, in the mode the sweep runs in (``LoadModel``:
   bytecode or native) and by the choice of ``--context-proofs``
   (runner.context_proofs):

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
     a cost bytecode does not pay.

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
from typing import Mapping

from ...context_proofs import ContextProofs
from .contexts import ContextTree, _skip_comment, normal_form, split_phrases

DEFAULT_MODE = "bytecode"


@dataclass(frozen=True)
class LoadModel:
    """CPU seconds phrases cost to load in one mode; see the module doc.
    Each phrase cost is floored at 0 (a fit's intercept may be negative)."""

    mode: str
    phrase_s: float                  # a phrase that is no proof (a load phrase too)
    per_kb_s: float                  # + per KB of its normal form
    trusted_proof_s: float           # a proof phrase, its proof not run (trust)
    trusted_proof_per_kb_s: float    # + per KB
    proof_s: float                   # replay, a proof the map does not know: + this
    proof_per_kb_s: float            # + per KB
    compile_chunk_s: float = 0.0     # native: per compiled module (a file's code between loads)
    compile_per_kb_s: float = 0.0    # native: per KB compiled
    answer_batch_s: float = 0.0      # native: compiling the answers of an image's problems
    image_s: float = 0.0             # any image: forking it and what a segment costs beyond its phrases
    exec_s: float = 0.0              # a top-level *_MK_EXEC_RULE phrase (machine_code.py)
    exec_per_kb_s: float = 0.0       # + per KB of machine code it decodes
    load_s: Mapping[str, float] = field(default_factory=dict)   # a file found nowhere, by choice
    # Files measured whole: (name as shown, sha256[:12] of the file) ->
    # (trust s, replay s or None when the replay run did not reach its end).
    measured_files: Mapping[tuple[str, str], tuple[float, float | None]] = field(default_factory=dict)
    source: str = ""

    def phrase_cost(self, kb: float, proof: bool = False) -> float:
        """A phrase under trust (a proof as its statement alone)."""
        if proof:
            return max(0.0, self.trusted_proof_s + self.trusted_proof_per_kb_s * kb)
        return max(0.0, self.phrase_s + self.per_kb_s * kb)

    def exec_cost(self, code_bytes: int) -> float:
        """What decoding ``code_bytes`` of machine code adds to its phrase."""
        return max(0.0, self.exec_s + self.exec_per_kb_s * code_bytes / 1024)

    def proof_cost(self, kb: float) -> float:
        """What replaying a proof the map does not know adds."""
        return max(0.0, self.proof_s + self.proof_per_kb_s * kb)


def flat_model(phrase_s: float, mode: str = "bytecode") -> LoadModel:
    """Every phrase ``phrase_s``, proofs the map does not know nothing more
    (the model before issue 25; tests)."""
    return LoadModel(mode, phrase_s, 0.0, phrase_s, 0.0, 0.0, 0.0,
                     load_s=MODELS[mode].load_s, source=f"flat {phrase_s} s per phrase")


# -- measured figures ----------------------------------------------------------
# Bytecode: `nice .venv/bin/python benchmarks/load_cost.py --skip-native
# --budget 120` here (2 shared cores, load average 6.1-9.9 during the run,
# 5.8 at its end): the bench's HOL Light checkout (5e62421, module build,
# OCaml 4.13.1) booted by hol.sh, s2n-bignum 51147aa's arm/proofs/base.ml
# run phrase by phrase with its loads inlined (33 files, 4,086 phrases,
# 1,509 KB of normal form, 2,441 proof phrases), one forked child trusting
# and one replaying, each stopped at 120 s of CPU: trust reached 3,822
# phrases (112.9 s), replay 2,794 (121.7 s). Least squares over the trust
# child's phrases: a phrase that is no proof 30.49 ms + 62.72 ms/KB (1,502
# phrases), a proof phrase under trust -1.64 ms + 41.97 ms/KB (2,320; a
# trusted proof costs less than the mean definition: s2n-bignum's
# definitions compute, e.g. arm/proofs/instruction.ml's SIMD expansions);
# over the replay child's proof phrases, replay adds -16.3 ms + 159.8 ms/KB
# (2,106). Per file, the size model misses by 75 s in all of 112.9 s (summed
# absolute errors; instruction.ml alone: 55.8 s measured, 22.2 s fitted), so
# files measured whole are charged as measured (MEASURED_BYTECODE) and the
# fit prices the rest. Whole base.ml, bytecode: trust 124 s (112.9 s
# measured + 11.2 s fitted), replay 224 s (121.7 s measured + 87.0 s of the
# rest measured under trust + 15.4 s of its proofs fitted); the bench's whole
# contexts measured 114-337 s. Cross-check, Debian's toplevel
# (benchmarks/phrase_cost.py): Library/words.ml 12.04 s trust, 29.74 s
# replay; here the checkout's words.ml 14.26 s and 38.21 s.
MEASURED_BYTECODE: dict[tuple[str, str], tuple[float, float | None]] = {
    ("Library/iter.ml", "fef70bb7ab3c"): (0.27, 1.03),
    ("Library/rstc.ml", "3bfe6fa7995a"): (0.61, 1.84),
    ("Library/bitsize.ml", "6f01574b26e1"): (0.32, 0.55),
    ("Library/prime.ml", "640f709c4b1e"): (2.70, 11.46),
    ("Library/pocklington.ml", "06f8198b41cf"): (3.82, 8.52),
    ("Library/integer.ml", "d58b730cd0de"): (1.34, 5.25),
    ("Library/bdd.ml", "21130afeb344"): (0.36, 0.28),
    ("Library/words.ml", "38ebbbb2b342"): (14.26, 38.21),
    ("Library/bitmatch.ml", "7ffbaa2ea98f"): (1.14, 1.22),
    ("Library/components.ml", "5a8ea87bad6a"): (0.41, 0.45),
    ("Library/records.ml", "b59901fee08c"): (0.05, 0.05),
    ("common/overlap.ml", "32284db090d5"): (1.73, 3.81),
    ("common/for_hollight.ml", "da3a4588e9f5"): (0.39, 0.37),
    ("common/words2.ml", "8c63d90e3722"): (1.22, 1.30),
    ("Library/floor.ml", "ae30e4c5a508"): (1.14, 2.03),
    ("common/misc.ml", "6747680a2acd"): (3.77, 14.40),
    ("common/actions_merger.ml", "203ac691851e"): (0.08, 0.13),
    ("common/components.ml", "893b5b1cc858"): (4.43, None),
    ("common/alignment.ml", "86ea8c7f80a7"): (0.03, None),
    ("common/relational.ml", "1f83d69177b0"): (4.37, None),
    ("common/relational_n.ml", "d667b4816e31"): (0.54, None),
    ("common/interval.ml", "7b3932d1241e"): (1.37, None),
    ("common/elf.ml", "f7ac6cebccde"): (0.10, None),
    ("common/safety.ml", "f66e9760449b"): (0.23, None),
    ("arm/proofs/sha256.ml", "1cbcac612094"): (0.71, None),
    ("arm/proofs/sha512.ml", "0896d34cb854"): (0.59, None),
    ("common/aes.ml", "157fcb948e7b"): (5.12, None),
    ("arm/proofs/utils/aes.ml", "81c6e52acf53"): (0.08, None),
    ("arm/proofs/instruction.ml", "7c000ae11e7f"): (55.81, None),
}
# A load found nowhere: Library/words.ml as Debian's toplevel loads it
# (benchmarks/phrase_cost.py), a stand-in for a file of unknown size.
LOAD_S = {"replay": 29.74, "trust": 12.04}
# Native: `nice .venv/bin/python benchmarks/load_cost.py --skip-bytecode
# [--native-choice trust]` here, the same base.ml compiled into 39 modules
# (1,778 KB of source; camlp5 + ocamlopt, CPU of the children): 22.6 s CPU
# compiled for replay at load 7.8, 19.5 s for trust at load 1.9; per KB of
# normal form, (22.6 + 19.5) / 2 / 1,509 KB = 14.0 ms, the total kept below
# with a fixed cost per compiled chunk (SWEEP_FIT) taken out of it. The native
# server with them preloaded reached READY in 47.1 s
# CPU under --trust against 14.5 s with nothing preloaded (load 2.0), so
# base.ml loads natively in 32.6 s trusting, against 124 s in bytecode: x3.81
# for phrases. Replaying (libraries compiled without the switchable prove):
# 66.2 s and 63.8 s to READY against 15.1 s (load 10.1 and 6.8): 49.9 s, so
# the proofs add 17.3 s natively against 100 s in bytecode (224 - 124, part
# of it fitted, see above): x5.78 for proofs the map does not know.
# Expected proof times move between modes by plans.RATIO_CENTRAL.
NATIVE_REPLAY_RATIO = 5.78
NATIVE_TRUST_RATIO = 3.81
# What sweeps' image builds measured beyond the phrase model, by
# `.venv/bin/python benchmarks/file_head_cost.py OUT...` over 11 sweeps of 2
# workers, --context-proofs trust, 4 random arm files each (s2n_readme_path.py's
# seeds 1-3, benchmarks/predictions.py's seeds 6-8; load average 0.5-6.7 from
# other work, each build scaled by its sweep's library prefix): an image's own
# cost beyond its phrases (image_s; 13 native, 6 bytecode chain images), the
# machine code a file head decodes (exec_s per EXEC rule + exec_per_kb_s per
# KB of code, machine_code.py; 24 native, 20 bytecode file heads of 20-524
# bytes), a native context's compile per chunk (37 contexts) and the median
# compile of an image's answers (37 batches). And the library prefix's native
# load, a sweep's image build (fork, Dynlink of its ~200 plugins) against
# load_cost.py's preloaded server: 38.5 s in the least loaded of those sweeps
# (seed 6, load 2.2-2.4) against 33.0 s, x1.167 on every native phrase.
SWEEP_FIT = {
    "bytecode": dict(image_s=0.1755, exec_s=0.8701, exec_per_kb_s=25.2885),
    "native": dict(image_s=0.0313, exec_s=0.0, exec_per_kb_s=10.2528, compile_chunk_s=0.1270,
                   answer_batch_s=0.4258),
}
NATIVE_LOAD_FACTOR = 1.167
# base.ml's 87 compile chunks by this model, 1,509 KB: the cold total as measured above.
NATIVE_COMPILE_PER_KB_S = (0.0140 * 1509 - 87 * SWEEP_FIT["native"]["compile_chunk_s"]) / 1509
_B = dict(phrase_s=0.03049, per_kb_s=0.06272, trusted_proof_s=-0.00164,
          trusted_proof_per_kb_s=0.04197, proof_s=-0.0163, proof_per_kb_s=0.1598)
MODELS: dict[str, LoadModel] = {
    "bytecode": LoadModel("bytecode", **_B, load_s=LOAD_S, measured_files=MEASURED_BYTECODE,
                          **SWEEP_FIT["bytecode"],
                          source="benchmarks/load_cost.py, the bench's bytecode toplevel; "
                                 "benchmarks/file_head_cost.py"),
    "native": LoadModel(
        "native", **{k: v / NATIVE_REPLAY_RATIO if k.startswith("proof")
                     else v / NATIVE_TRUST_RATIO * NATIVE_LOAD_FACTOR for k, v in _B.items()},
        compile_per_kb_s=NATIVE_COMPILE_PER_KB_S, **SWEEP_FIT["native"],
        load_s={"replay": LOAD_S["replay"] / NATIVE_REPLAY_RATIO,
                "trust": LOAD_S["trust"] / NATIVE_TRUST_RATIO},
        source="benchmarks/load_cost.py, bytecode figures over the measured native ratios; "
               "benchmarks/file_head_cost.py"),
}
# The flat figure charged before (benchmarks/phrase_cost.py, Debian's
# words.ml and prime.ml, trust): kept for flat_model and old benchmarks.
PHRASE_S = 0.015
PHRASE_SOURCE = "benchmarks/load_cost.py"


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
        from .native_cache import compiled_libraries

        self.root = Path(root).resolve() if root is not None else None
        self.hol_dir = Path(hol_dir).resolve() if hol_dir is not None else None
        self.graph = LoadGraph(self.root, self.hol_dir)
        self.dropped = tuple(DROPPED_LOADS)
        self.keep_text = keep_text
        self.compiled = compiled_libraries(self.hol_dir) if compiled is None else compiled
        self._phrases: dict[Path, list[Phrase]] = {}
        self._digests: dict[Path, str] = {}
        self._memo: dict = {}
        self._memo_owner: tuple | None = None
        self.core: frozenset[Path] = frozenset()
        if self.hol_dir is not None and (self.hol_dir / "hol.ml").is_file():
            hol = (self.hol_dir / "hol.ml").resolve()
            self.core = LoadGraph(None, self.hol_dir).closure(hol) | {hol}

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
        cached = library_marker(path, self.digest(path)) in self.compiled
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
    answer_batches: int = 0     # native: answer batches compiled for its problems (0 or 1)

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
                + self.answer_batches * self.model.answer_batch_s)

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
             model: LoadModel | None = None) -> dict[str, SegmentCost]:
    """The estimated build of every image of ``tree`` but the base, in
    ``mode`` (MODELS[mode] unless ``model`` is given); loads resolved by
    ``files`` (none given: no file is found, every load is unknown);
    ``prove_secs`` in ``mode`` already (plans.in_mode converts them).
    ``phrase_s``, given, makes every phrase cost that flat (flat_model)."""
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
            out[key] = SegmentCost(
                key, t.phrases, t.proofs, tuple(t.priced), t.proof_s, t.estimated,
                len(t.files) + len(t.unknown), model, t.kb, t.trust_s, t.replay_base_s,
                t.estimated_kb, t.in_measured, tuple(files.graph.show(f) for f in t.files),
                tuple(files.graph.show(f) for f in t.measured_files),
                tuple(f'{k} "{n}"' for k, n in t.unknown), t.dropped, t.chunks, t.execs,
                t.exec_bytes, t.compile_kb, tuple(files.graph.show(f) for f in t.cached),
                1 if node.problems else 0)
        stack.extend((child, seen, frozenset(loaded)) for child in children[key])
    return out


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
