"""proofbatch extract: HOL Light proof files cut into a corpus of problems.

Each top-level theorem (``let NAME = prove (`GOAL`, TACTIC);;`` and its
variants, see runner/provers/hol_light/extract/extract_scan.py) becomes a problem folder in
s2n-bignum-bench's retrieve layout (runner/corpus.py)::

    CORPUS/<id>/setup.ml      the file's phrases before the theorem, as written
    CORPUS/<id>/query.txt     the goal: its term quotation, backquotes included
    CORPUS/<id>/answer.txt    the proof: a tactic expression (the ground truth)
    CORPUS/<id>/category.txt  from --category
    CORPUS/extract.json       sources with sha256, counts, problems, skipped items

Ids follow the bench's collect-problems.py: ``<prefix>.<file stem>.<NAME>``;
a name proved several times in one file gets ``.0``, ``.1``, ... on every
occurrence, in file order. A statement proved again later in the same file
(the same text up to whitespace) is kept once, under its first id, and the
repeats are listed as skipped. Duplicates are looked for within a file only,
so a problem's id, and whether it is kept, depend on its own file alone, not
on which files are extracted together (the bench dedups across its whole,
fixed tree; here the set of files varies from run to run). A statement that
another file of the run also proves is kept in both, and extract.json names
the earlier one (``same_statement_as``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..ocaml_lexer import classify, split_phrases
from ....errors import InputError
from .extract_cut import cut_file, file_prefix, norm_goal, problem_ids
from .extract_ids import follow_map
from .extract_prefix import PrefixStep, describe, loader_prefix, prefix_text
from .extract_scan import Theorem
from ..load_graph import LoadGraph, resolve
from .extract_model import Extract, ExtractConfig, Problem, Refused, Skipped, Source
from .extract_files import Tell, check_config, check_stems, expand, read_files
from .extract_objects import Reads, file_reads
from .extract_out import check_out, publish

def extract(cfg: ExtractConfig, tell: Tell = lambda stage, done, total: None) -> Extract:
    """Cut ``cfg.files`` into problems and publish the corpus at ``cfg.out``.

    A file that gives no problem (proves no top-level theorem, or none that
    can be extracted, or is not UTF-8) is refused, listed with its reason,
    and the others are extracted; with ``cfg.strict`` a refused file or a
    load found nowhere writes nothing (``published`` is False). Raises
    InputError, with nothing written, on a missing path, no file giving any
    problem, an invalid prefix or category, ids of two files colliding, or
    an ``out`` that holds anything but an earlier extract of the same files.
    ``tell`` hears how far it is (`proofbatch extract` shows it).
    """
    check_config(cfg)
    files, links = expand(cfg.files)
    texts, digests, refused = read_files(files, tell)
    check_out(cfg, files)
    check_stems(cfg, files)
    phrases, cut = _cut_files(files, texts, refused, tell)
    usable = _usable(files, refused)

    # Loads, recursively, before any id: the map's owners of a statement
    # may be in a file that only gets loaded (common/*.ml).
    tell("following loads", 0, None)
    loads = _follow_loads(cfg, files, texts, phrases, usable)

    # Duplicates within a file, then ids.
    kept, skipped_of, dup_of = _drop_duplicates(usable, cut)
    ids = {path: problem_ids(file_prefix(cfg, path), path, [t.name for _, t, _ in kept[path]])
           for path in usable}
    report = None
    owner_of: dict[str, str] = {}   # goal -> the map id it is skipped for (--ids-from)
    if cfg.ids_from is not None:
        report = follow_map(cfg, files, usable, refused, cut, kept, ids, skipped_of, loads.graph,
                            loads.root, owner_of)

    listing = _Listing()
    # Where a check opens the objects the proofs read: the sweep's context root.
    reads = Reads(loads.graph, loads.root or Path.cwd())
    for k, path in enumerate(files):
        tell("listing problems", k, len(files))
        if path in refused:
            listing.add_refused(path, digests[path], refused[path], cut.get(path))
        else:
            listing.add_file(path, digests[path], cut[path], ids[path], kept[path],
                             skipped_of[path], dup_of[path], owner_of, loads.graph,
                             loads.prefix_of[path], file_reads(
                                 reads, path, [s.loader for s in loads.prefix_of[path]]))
    result = Extract(cfg.out, tuple(listing.sources), tuple(listing.problems),
                     tuple(listing.skipped), loads.root, loads.note, loads.unresolved, listing.same,
                     tuple(Refused(str(p), refused[p]) for p in files if p in refused),
                     loads.missing_loads, tuple(listing.library), loads.dropped, report,
                     skipped_links=links)
    if cfg.strict and result.failed_strict:
        return replace(result, published=False)
    publish(cfg, result, lambda done: tell("writing problems", done, len(listing.problems)))
    return result


def _cut_files(files: list[Path], texts: dict[Path, str], refused: dict[Path, str], tell: Tell
               ) -> tuple[dict[Path, list[str]], dict[Path, tuple[list, list]]]:
    """Each readable file's phrases, and its theorems cut (found, skipped);
    a file that gives none is added to ``refused`` with why."""
    phrases: dict[Path, list[str]] = {}
    cut: dict[Path, tuple[list, list]] = {}
    for k, path in enumerate(files):
        tell("cutting theorems", k, len(files))
        if path in refused:
            continue
        phrases[path] = split_phrases(texts[path])
        found, skips = cut_file(path, texts[path], phrases[path])
        cut[path] = (found, skips)
        if not found and not skips:
            refused[path] = "proves no top-level theorem (no `let NAME = prove ...`)"
        elif not found:
            refused[path] = (f"none of its {len(skips)} proofs can be extracted "
                             f"(first: line {skips[0].line}: {skips[0].reason})")
    return phrases, cut


def _usable(files: list[Path], refused: dict[Path, str]) -> list[Path]:
    """The files not refused; raises InputError when there is none."""
    usable = [p for p in files if p not in refused]
    if not usable:
        if len(files) == 1:
            raise InputError(files[0], refused[files[0]],
                             "pass a HOL Light proof file with top-level "
                             "`let NAME = prove (`GOAL`, TACTIC);;`")
        first = files[0]
        raise InputError(first, f"none of the {len(files)} files gives a problem (this one "
                         f"{refused[first]})", "pass HOL Light proof files")
    return usable


@dataclass(frozen=True)
class _Loads:
    """What the files load: the graph of loads, the context root (and why),
    each usable file's loader prefix (extract_prefix.py), and what
    extract.json reports of them: loads found nowhere and loads dropped."""

    graph: LoadGraph
    root: Path | None
    note: str
    prefix_of: dict[Path, tuple[PrefixStep, ...]]
    unresolved: tuple[str, ...]
    missing_loads: tuple[dict, ...]
    dropped: tuple[str, ...]


def _follow_loads(cfg: ExtractConfig, files: list[Path], texts: dict[Path, str],
                  phrases: dict[Path, list[str]], usable: list[Path]) -> _Loads:
    """Follow the files' loads, recursively (``_Loads``)."""
    by_resolved = {p.resolve(): p for p in phrases}
    root, note = _context_root(cfg, texts)
    graph = LoadGraph(root, cfg.hol_dir, lambda p: phrases.get(by_resolved.get(p)))
    # A library file's problems start with what its loader loads first
    # (extract_prefix.py); that loader's loads are checked as the file's own.
    loaders = graph.loaders(p.resolve() for p in texts)
    prefix_of = {path: loader_prefix(graph, path, loaders) for path in usable}
    loader_files = sorted({s.loader for steps in prefix_of.values() for s in steps})
    misses = graph.missing([*(files[k] for k in range(len(files)) if files[k] in texts),
                            *loader_files])
    given_of = {p.resolve(): str(p) for p in files}
    unresolved = [graph.describe(m, given_of.get(m.chain[0].source)) for m in misses]
    missing_loads = tuple(
        {"kind": m.kind, "name": m.name, "loaded_by": graph.show(m.loader),
         "chain": graph.describe_lines(m), "given_files_reaching_it": m.reached_from,
         "searched": [str(d) for d in graph.search(m.kind)]} for m in misses)
    dropped = sorted({ld.name for f in [*(p.resolve() for p in texts), *graph.loaded_files(
        p.resolve() for p in texts)] for ld in graph.loads(f) if ld.dropped})
    return _Loads(graph, root, note, prefix_of, tuple(unresolved), missing_loads, tuple(dropped))


def _drop_duplicates(usable: list[Path], cut: dict[Path, tuple[list, list]]
                     ) -> tuple[dict[Path, list[tuple[int, Theorem, str]]], dict[Path, list[Skipped]],
                                dict[Path, list[tuple[int, Theorem, str]]]]:
    """Per file: the theorems kept, (line, theorem, setup) each, the
    theorems it could not cut, and the repeats of a statement it proved
    before, (line, theorem, normal goal) each."""
    kept: dict[Path, list[tuple[int, Theorem, str]]] = {}
    skipped_of: dict[Path, list[Skipped]] = {}
    dup_of: dict[Path, list[tuple[int, Theorem, str]]] = {}
    for path in usable:
        found, skips = cut[path]
        mine: set[str] = set()
        kept[path], dup_of[path] = [], []
        for line, thm, setup in found:
            goal = norm_goal(thm.query)
            if goal in mine:
                dup_of[path].append((line, thm, goal))
            else:
                mine.add(goal)
                kept[path].append((line, thm, setup))
        skipped_of[path] = list(skips)
    return kept, skipped_of, dup_of


@dataclass
class _Listing:
    """The corpus as extract.json lists it, file by file in the given order:
    problems, skipped theorems, sources, ids whose statement an earlier
    file of the run proves (``same``) and library files with why."""

    problems: list[Problem] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    first: dict[str, str] = field(default_factory=dict)  # goal -> first id of the run
    same: dict[str, str] = field(default_factory=dict)   # (extract.json's same_statement_as)
    library: list[tuple[str, str]] = field(default_factory=list)

    def add_refused(self, path: Path, digest: str, reason: str,
                    cut: tuple[list, list] | None) -> None:
        """A refused file: its source, and what it could not cut."""
        n = len(cut[1]) if cut is not None else 0
        self.sources.append(Source(str(path), digest, n, 0, n, refused=reason))
        self.skipped += cut[1] if cut is not None else []

    def add_file(self, path: Path, digest: str, cut: tuple[list, list], ids: list[str],
                 kept: list[tuple[int, Theorem, str]], skipped: list[Skipped],
                 dups: list[tuple[int, Theorem, str]], owner_of: dict[str, str],
                 graph: LoadGraph, steps: tuple[PrefixStep, ...], reads: tuple = ()) -> None:
        """A usable file: its problems (their setup after its loader
        prefix), its skipped theorems and duplicates, and its source."""
        mine = {}
        before = prefix_text(graph, steps)
        for pid, (line, thm, setup) in zip(ids, kept):
            goal = norm_goal(thm.query)
            mine[goal] = pid
            if goal in self.first:
                self.same[pid] = self.first[goal]
            self.problems.append(Problem(pid, str(path), line, thm.name, thm.form, before + setup,
                                         thm.query, thm.answer))
        self.first.update((g, pid) for g, pid in mine.items() if g not in self.first)
        skips = skipped + [Skipped(str(path), line, thm.name,
                                   f"duplicate statement of {mine.get(goal) or owner_of[goal]}")
                           for line, thm, goal in dups]
        self.skipped += sorted(skips, key=lambda s: s.line)
        why = _library_why(graph, steps)
        if why:
            self.library.append((str(path), why))
        n_found = len(cut[0]) + len(cut[1])
        self.sources.append(Source(str(path), digest, n_found, len(kept), len(skips), library=why,
                                   context_prefix=tuple(s.provenance(graph) for s in steps),
                                   object_files=tuple(r.as_json() for r in reads)))


def _library_why(graph: LoadGraph, steps: tuple[PrefixStep, ...]) -> str:
    """Why a file's problems start with a loader prefix ``steps`` ("" when
    they do not)."""
    if not steps:
        return ""
    loader = steps[-1].loader
    base = next(ld.target for ld in graph.loads(loader) if ld.target is not None)
    return (f"loaded by {graph.show(loader)} after {graph.show(base)}, which it does not "
            f"load itself: its problems' contexts start with {describe(graph, steps)}, "
            "where it is loaded")


_LOAD_WORDS = re.compile(r"\b(needs|loadt|loads)\b")


def _context_root(cfg: ExtractConfig, texts: dict[Path, str]) -> tuple[Path | None, str]:
    """The --context-root a sweep of this corpus needs, and why.

    HOL Light's needs/loadt look in the load path: proofbatch puts the
    context root first, then HOL Light's own directory. A name that HOL Light
    finds needs no root; any other must resolve under one folder above its
    source file, the development's root. ``cfg.context_root``, when given,
    is the root.
    """
    if cfg.context_root is not None:
        root = cfg.context_root.resolve()
        return root, f"given: sweep with --context-root {root}"
    hol = [cfg.hol_dir] if cfg.hol_dir else []
    roots: set[Path] = set()
    for path, text in texts.items():
        for phrase in split_phrases(text):
            if not _LOAD_WORDS.search(phrase):
                continue
            kind, name = classify(phrase)
            if kind not in ("needs", "loadt") or resolve(name, hol) is not None:
                continue
            folder = path.resolve().parent
            root = next((d for d in (folder, *folder.parents) if resolve(name, [d])), None)
            if root is not None:
                roots.add(root)
    if len(roots) > 1:
        raise InputError(cfg.files[0], "the files' needs resolve under different roots ("
                         + ", ".join(sorted(map(str, roots))) + ")",
                         "extract files of one development at a time, or pass --context-root")
    where = f"HOL Light's directory {cfg.hol_dir}" if cfg.hol_dir else "HOL Light's directory"
    if roots:
        root = roots.pop()
        return root, f"its needs/loadt resolve under {root}: sweep with --context-root {root}"
    return None, f"every needs/loadt resolves in {where} (or there is none): no --context-root needed"
