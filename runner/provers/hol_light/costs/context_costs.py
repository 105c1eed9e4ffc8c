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
     (ocaml_lexer.normal_form: comments out, blanks collapsed);
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

from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping, Sequence

from ....checks.context_proofs import ContextProofs
from ..contexts import ContextTree
from .file_loads import _DUPLICATE, FileLoads, Tally, origin_of, read_phrases
from .load_model import ANSWER_BATCH, MODELS, LoadModel, flat_model

DEFAULT_MODE = "bytecode"


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
    measured_files: tuple[str, ...] = ()  # of them, charged as benchmarks/images/load_cost.py measured
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
