"""What loading each context image costs, estimated before anyone loads it.

An image loads its ``segment`` (runner.provers.hol_light.contexts.ImageNode) on top of its
parent. Its build time is, in this order:

1. measured: a build of the same image recorded by a sweep or a profile
   (``OUT/images/*.json``, runner.planner_inputs.measured_builds);
2. estimated from the segment's phrases, by the choice of
   ``--context-proofs`` (runner.context_proofs):

   - ``replay``: every phrase costs ``phrase_s``, and every proof phrase
     whose theorem is a problem of the map costs that problem's
     ``prove_secs`` besides;
   - ``trust``: every phrase costs ``phrase_s``: a trusted proof returns its
     statement without running its tactic.

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
``arm`` context), it is priced when the map holds exactly one problem of
that theorem name and no ``.N`` variant of it. Anything else leaves the
proof unpriced: under ``replay`` it is charged ``phrase_s`` like any
phrase (an underestimate), and the count of unpriced proofs is reported.
A ``needs``/``loadt``/``loads`` phrase loads a whole file, which is not read
here: the first load of each file along a chain is charged what loading
Library/words.ml (6,512 lines, 785 phrases) measured, by the choice
(``LOAD_S``); a ``needs`` of a file an ancestor image already loaded costs
a phrase, as HOL Light loads a file once per process.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping

from ...context_proofs import ContextProofs
from .contexts import ContextTree, _skip_comment, split_phrases

# CPU seconds one top-level phrase of a context costs to load in Debian's
# bytecode HOL Light toplevel (OCaml 4.13.1, camlp5 8.00.04) when no proof
# runs in it. Measured by benchmarks/phrase_cost.py here (2 shared cores):
# one booted toplevel forks a child per file, which loads the file with a
# Sys.time marker after each phrase (the markers' own 0.61 ms subtracted),
# with `prove` returning its statement unproved, as under trust. Library/
# words.ml: 785 phrases, 12.04 s CPU (non-proof phrases: median 10.6 ms,
# mean 19.0 ms); Library/prime.ml: 280 phrases, 3.97 s. Pooled mean: 16.01 s
# / 1,065 phrases = 15.0 ms. A mean, because build times are summed. Native
# code was not measured; the figure is bytecode's.
PHRASE_S = 0.015
# A file loaded by needs/loadt: Library/words.ml in the same runs of
# benchmarks/phrase_cost.py, 29.74 s CPU as written and 12.04 s with its
# proofs trusted (../shared/notes/hol-light.md: `needs "Library/words.ml"`
# takes about 25 s). A stand-in for a file of unknown size, not a measure
# of it.
LOAD_S = {"replay": 29.74, "trust": 12.04}
PHRASE_SOURCE = "benchmarks/phrase_cost.py, Debian bytecode toplevel"

_PROOF = re.compile(r"let\s+([A-Za-z_][A-Za-z0-9_']*)\s*=\s*(?:time\s+)?(?:prove|prove_by_refinement)\b")
_LOAD = re.compile(r"(needs|loadt|loads)\s*\"([^\"]*)\"")
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
    """(``needs``, ``loadt`` or ``loads``, the file) of a load phrase."""
    m = _LOAD.match(phrase, _code_start(phrase))
    return (m.group(1), m.group(2)) if m else None


def origin_of(problem_id: str) -> str | None:
    """``<prefix>.<file stem>`` of a ``<prefix>.<file stem>.<THM>[.N]`` id."""
    base = _DUPLICATE.sub("", problem_id)
    head, dot, _ = base.rpartition(".")
    return head if dot and head else None


@dataclass(frozen=True)
class SegmentCost:
    """One image's estimated build, by both choices."""

    key: str
    phrases: int
    proofs: int                 # proof phrases in the segment
    priced: tuple[str, ...]     # problem ids of the map whose prove_secs are charged under replay
    proof_s: float              # their prove_secs summed
    unpriced: int               # proof phrases no problem of the map matched
    loads: int                  # files first loaded here by needs/loadt/loads (LOAD_S each)
    phrase_s: float

    def build_s(self, choice: ContextProofs) -> float:
        base = self.phrases * self.phrase_s + self.loads * LOAD_S[ContextProofs(choice).value]
        return base + self.proof_s if choice is ContextProofs.REPLAY else base


def _by_name(ids) -> dict[str, str | None]:
    """Theorem name -> the one problem id of that name, or None when the
    name is repeated or numbered (``.N``)."""
    out: dict[str, str | None] = {}
    for pid in ids:
        numbered = _DUPLICATE.search(pid) is not None
        name = _DUPLICATE.sub("", pid).rpartition(".")[2]
        out[name] = None if numbered or name in out else pid
    return out


def estimate(tree: ContextTree, prove_secs: Mapping[str, float],
             phrase_s: float = PHRASE_S) -> dict[str, SegmentCost]:
    """The estimated build of every image of ``tree`` but the base; see the
    module doc for the rule that prices a segment's proofs."""
    unique = _by_name(prove_secs)
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
    # Walk down, carrying how often each name was proved along the chain.
    stack: list[tuple[str, dict[str, int], frozenset[str]]] = [(tree.base, {}, frozenset())]
    while stack:
        key, seen, files = stack.pop()
        node = tree.nodes[key]
        seen = dict(seen)
        phrases = proofs = unpriced = loads = 0
        priced: list[str] = []
        proof_s = 0.0
        for phrase in split_phrases(node.segment) if node.segment else ():
            if not phrase.strip():
                continue
            phrases += 1
            load = loaded_file(phrase)
            if load is not None and (load[0] != "needs" or load[1] not in files):
                loads += 1
                files |= {load[1]}
            name = theorem_of(phrase)
            if name is None:
                continue
            proofs += 1
            k = seen.get(name, 0)
            seen[name] = k + 1
            found = {c for o in origins[key] for c in (f"{o}.{name}", f"{o}.{name}.{k}")
                     if c in prove_secs}
            if not found and unique.get(name):
                found = {unique[name]}
            if len(found) == 1:
                (pid,) = found
                priced.append(pid)
                proof_s += prove_secs[pid]
            else:
                unpriced += 1
        if node.parent is not None:
            out[key] = SegmentCost(key, phrases, proofs, tuple(priced), proof_s, unpriced, loads,
                                   phrase_s)
        stack.extend((child, seen, files) for child in children[key])
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
    """The images' build seconds summed once each, with where they came from."""
    est = [c for k, c in costs.items() if k not in measured]
    return {"images": len(costs), "measured": sum(1 for k in costs if k in measured),
            "build_s": sum(measured[k] for k in costs if k in measured)
            + sum(c.build_s(choice) for c in est),
            "phrases": sum(c.phrases for c in est), "priced_proofs": sum(len(c.priced) for c in est),
            "unpriced_proofs": sum(c.unpriced for c in est), "loads": sum(c.loads for c in est)}
