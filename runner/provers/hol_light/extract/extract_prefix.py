"""The start of a library file's problems' contexts: what its loader loads first.

s2n-bignum's ``arm/proofs/instruction.ml`` is loaded by ``base.ml`` after
``Library/records.ml`` and everything else base.ml loads before it; cut
alone, its theorems' contexts stop at ``Unbound value
define_auto_record_type`` (docs/native.md, issue 32). The bench gets these
problems from proof files with their loads inlined (its collect-problems.py
over ``make build_proofs``' inlined files; retrieve-problem.py's setup.ml is
the inlined file up to the theorem), so their setups hold base.ml up to its
load of instruction.ml, then instruction.ml up to the theorem. Extract gives
the same: the loader's phrases before the phrase that loads the library
file, as written (loads kept, so everything that prefix loads is loaded),
then the file's own phrases. A loader that is itself a library file gets
its own loader's prefix first. Of several loaders (s2n-bignum's
``neon_helper.ml`` has 18, proof files that load it after base.ml), the one
with the fewest phrases before its load is chosen, then the first in path
order (relative to the context root); extract.json names it and the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..load_graph import LoadGraph


CHOSEN = "the loader with the fewest phrases before its load of the file, then path order"


@dataclass(frozen=True)
class PrefixStep:
    """``loader``'s phrases before the one at ``line``, which loads ``loads``."""

    loader: Path
    line: int
    loads: Path
    phrases: int                   # how many of the loader's phrases come first
    others: tuple[Path, ...] = ()  # the loaders not chosen

    def provenance(self, graph: LoadGraph) -> dict:
        return {"loader": graph.show(self.loader), "up_to_line": self.line,
                "loads": graph.show(self.loads),
                "other_loaders": [graph.show(o) for o in self.others],
                "chosen": CHOSEN}


def loader_prefix(graph: LoadGraph, path: Path, loaders: dict[Path, list[Path]],
                  seen: frozenset[Path] = frozenset()) -> tuple[PrefixStep, ...]:
    """The steps, outermost loader first, whose phrases come before ``path``'s
    when the tree is loaded; () when ``path`` is no library file."""
    path = graph.real(path)
    if graph.library_file(path, loaders) is None:
        return ()
    # The loader that loads it soonest: the least to put before it.
    found = []
    for f in graph.loaders_of(path, loaders):
        load = next(ld for ld in graph.loads(f) if ld.target == path)
        found.append(((load.phrase, load.line, graph.show(f)), f, load))
    _, chosen, load = min(found, key=lambda t: t[0])
    others = tuple(f for _, f, _ in found if f != chosen)
    step = PrefixStep(chosen, load.line, path, load.phrase, others)
    seen = seen | {path}
    if chosen in seen:   # files that load each other: stop at the first repeat
        return (step,)
    return loader_prefix(graph, chosen, loaders, seen) + (step,)


def prefix_text(graph: LoadGraph, steps: tuple[PrefixStep, ...]) -> str:
    """The text to put before a library file's own phrases in each setup."""
    out = []
    for s in steps:
        out.append(f"(* proofbatch extract: {graph.show(s.loader)} before its line {s.line}, "
                   f"which loads {graph.show(s.loads)} *)\n")
        body = "".join(graph.phrases(s.loader)[:s.phrases])
        out.append(body if body.endswith("\n") or not body else body + "\n")
    if steps:
        out.append(f"(* proofbatch extract: {graph.show(steps[-1].loads)} *)\n")
    return "".join(out)


def describe(graph: LoadGraph, steps: tuple[PrefixStep, ...]) -> str:
    """``arm/proofs/base.ml up to line 73`` (with each outer loader first)."""
    return " then ".join(f"{graph.show(s.loader)} up to line {s.line}" for s in steps)
