"""proofbatch extract: HOL Light proof files cut into a corpus of problems.

Each top-level theorem (``let NAME = prove (`GOAL`, TACTIC);;`` and its
variants, see runner/provers/hol_light/extract_scan.py) becomes a problem folder in
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

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .contexts import split_phrases
from ...corpus import PROBLEM_ID
from ...errors import InputError
from ...settings import setting as _help
from .extract_scan import Skip, Theorem, scan_bindings
from .load_graph import DROPPED_NOTE, LoadGraph
from .native_build import classify, resolve, strip_phrase

MANIFEST = "extract.json"
FORMAT = 1


@dataclass(frozen=True)
class ExtractConfig:
    files: tuple[Path, ...] = _help("HOL Light proof files (.ml) to cut into problems, in order, or "
                                    "folders (their *.ml, recursively); each `let NAME = prove (...)` "
                                    "becomes a problem")
    out: Path = _help("corpus directory to write (new, empty, or an earlier extract of the same "
                      "files); replaced whole, atomically")
    prefix: str | None = _help("first part of each id <prefix>.<file stem>.<NAME>; default: the "
                               "file's first folder under --context-root (as the bench names "
                               "arm/proofs/utils/aes.ml arm.aes...), else its parent folder's name",
                               default=None)
    category: str = _help("category of every problem, written to its category.txt", default="generic")
    hol_dir: Path | None = _help("HOL Light directory that needs/loadt/loads resolve against besides "
                                 "the context root; None: do not check", default=None)
    context_root: Path | None = _help("folder that needs/loadt resolve in first, as a sweep's "
                                      "--context-root; default: found from the files' needs",
                                      default=None)
    ids_from: Path | None = _help("the bench's timeout map (a JSON list of {problem_id: ...}, or of "
                                  "ids): keep each problem under the bench's id; a statement the "
                                  "map keeps under another id is skipped as its duplicate",
                                  default=None)
    strict: bool = _help("write nothing and exit 2 if a file is refused or a load is found nowhere",
                         default=False)


@dataclass(frozen=True)
class Problem:
    problem_id: str
    source: str       # the file, as given
    line: int         # 1-based line where the theorem's phrase starts
    theorem: str      # the name bound in the file
    form: str         # prove, time prove, prove_by_refinement
    setup: str = field(repr=False)
    query: str = field(repr=False)
    answer: str = field(repr=False)


@dataclass(frozen=True)
class Skipped:
    source: str
    line: int
    theorem: str
    reason: str


@dataclass(frozen=True)
class Refused:
    """A file that gives no problem: listed, the others extracted."""

    source: str
    reason: str


@dataclass(frozen=True)
class Source:
    path: str
    sha256: str
    theorems: int     # phrases that prove something
    problems: int
    skipped: int
    refused: str = ""   # why the file gives no problem; "" when it gives some
    library: str = ""   # why it is a library file (contexts not self-contained); "" if not


@dataclass(frozen=True)
class MapReport:
    """How the ids compare with the bench's map (--ids-from)."""

    path: str
    prefixes: tuple[str, ...]          # the id prefixes of the extracted files
    wanted: int                        # the map's ids with those prefixes
    matched: int                       # of them, problems of this corpus
    renamed: dict[str, str]            # corpus id -> the map's id (a prime is no id character)
    misses: dict[str, str]             # the map's id -> why it is not in the corpus
    not_in_map: dict[str, str]         # corpus id -> why the map (likely) leaves it out
    dropped_duplicates: int            # problems skipped as the statement of a map id elsewhere
    missed_folders: dict[str, list[str]]  # folder -> files there the map's ids need, not given


@dataclass(frozen=True)
class Extract:
    out: Path
    sources: tuple[Source, ...]
    problems: tuple[Problem, ...]
    skipped: tuple[Skipped, ...]
    context_root: Path | None   # what a sweep of the corpus must pass as --context-root
    context_note: str           # why, in one sentence
    unresolved: tuple[str, ...]  # loads found nowhere: "file: needs "a" -> a: loadt "b"" chains
    # problem id -> the id, in an earlier file of the run, of the same statement
    same_statement_as: dict[str, str] = field(default_factory=dict)
    refused: tuple[Refused, ...] = ()
    missing_loads: tuple[dict, ...] = ()   # extract.json's entries: name, loader, chain with lines
    library_files: tuple[tuple[str, str], ...] = ()   # (file as given, why)
    dropped_loads: tuple[str, ...] = ()
    ids: MapReport | None = None
    published: bool = True      # False: --strict refused it, nothing written

    @property
    def failed_strict(self) -> bool:
        return bool(self.refused or self.unresolved)


def extract(cfg: ExtractConfig) -> Extract:
    """Cut ``cfg.files`` into problems and publish the corpus at ``cfg.out``.

    A file that gives no problem (proves no top-level theorem, or none that
    can be extracted, or is not UTF-8) is refused, listed with its reason,
    and the others are extracted; with ``cfg.strict`` a refused file or a
    load found nowhere writes nothing (``published`` is False). Raises
    InputError, with nothing written, on a missing path, no file giving any
    problem, an invalid prefix or category, ids of two files colliding, or
    an ``out`` that holds anything but an earlier extract of the same files.
    """
    if not cfg.files:
        raise InputError("extract", "no proof files given", "pass one or more HOL Light .ml files")
    _check_word(cfg.category, "--category", "a category name such as generic")
    if cfg.prefix is not None:
        _check_word(cfg.prefix, "--prefix", "letters, digits and _ . + - only")
    if cfg.context_root is not None and not cfg.context_root.is_dir():
        raise InputError(cfg.context_root, "--context-root is not a directory", "check the path")
    files = _expand(cfg.files)
    texts, digests, refused = {}, {}, {}
    for path in files:
        data = _read(path)
        digests[path] = hashlib.sha256(data).hexdigest()
        try:
            texts[path] = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            refused[path] = f"is not UTF-8 ({exc.reason} at byte {exc.start})"
    _check_out(cfg, files)
    stems: dict[str, Path] = {}
    for path in files:
        key = f"{_prefix(cfg, path)}.{path.stem}"
        if not PROBLEM_ID.fullmatch(key):
            raise InputError(path, f"ids would start {key!r}, which has characters outside "
                             "[A-Za-z0-9_.+-]", "pass --prefix, or copy the file under such a name")
        if key in stems:
            raise InputError(path, f"its ids would start {key}., as those of {stems[key]} do",
                             "extract the two files into separate corpora, or rename one")
        stems[key] = path

    phrases: dict[Path, list[str]] = {}
    cut: dict[Path, tuple[list, list]] = {}
    for path in files:
        if path in refused:
            continue
        phrases[path] = split_phrases(texts[path])
        found, skips = _cut(path, texts[path], phrases[path])
        cut[path] = (found, skips)
        if not found and not skips:
            refused[path] = "proves no top-level theorem (no `let NAME = prove ...`)"
        elif not found:
            refused[path] = (f"none of its {len(skips)} proofs can be extracted "
                             f"(first: line {skips[0].line}: {skips[0].reason})")
    usable = [p for p in files if p not in refused]
    if not usable:
        if len(files) == 1:
            raise InputError(files[0], refused[files[0]],
                             "pass a HOL Light proof file with top-level "
                             "`let NAME = prove (`GOAL`, TACTIC);;`")
        first = files[0]
        raise InputError(first, f"none of the {len(files)} files gives a problem (this one "
                         f"{refused[first]})", "pass HOL Light proof files")

    # Loads, recursively, before any id: the map's owners of a statement
    # may be in a file that only gets loaded (common/*.ml).
    by_resolved = {p.resolve(): p for p in phrases}
    root, note = _context_root(cfg, texts)
    graph = LoadGraph(root, cfg.hol_dir, lambda p: phrases.get(by_resolved.get(p)))
    misses = graph.missing(files[k] for k in range(len(files)) if files[k] in texts)
    given_of = {p.resolve(): str(p) for p in files}
    unresolved = [graph.describe(m, given_of.get(m.chain[0].source)) for m in misses]
    missing_loads = tuple(
        {"kind": m.kind, "name": m.name, "loaded_by": graph.show(m.loader),
         "chain": graph.describe_lines(m), "given_files_reaching_it": m.reached_from,
         "searched": [str(d) for d in graph.search(m.kind)]} for m in misses)
    dropped = sorted({ld.name for f in [*(p.resolve() for p in texts), *graph.loaded_files(
        p.resolve() for p in texts)] for ld in graph.loads(f) if ld.dropped})

    # Duplicates within a file, then ids.
    kept: dict[Path, list[tuple[int, Theorem, str]]] = {}
    skipped_of: dict[Path, list[Skipped]] = {}
    dup_of: dict[Path, list[tuple[int, Theorem, str]]] = {}
    for path in usable:
        found, skips = cut[path]
        mine: set[str] = set()
        kept[path], dup_of[path] = [], []
        for line, thm, setup in found:
            goal = _norm(thm.query)
            if goal in mine:
                dup_of[path].append((line, thm, goal))
            else:
                mine.add(goal)
                kept[path].append((line, thm, setup))
        skipped_of[path] = list(skips)
    ids = {path: _ids(_prefix(cfg, path), path, [t.name for _, t, _ in kept[path]])
           for path in usable}
    report = None
    owner_of: dict[str, str] = {}   # goal -> the map id it is skipped for (--ids-from)
    if cfg.ids_from is not None:
        report = _follow_map(cfg, files, usable, refused, cut, kept, ids, skipped_of, graph, root,
                             owner_of)

    problems: list[Problem] = []
    skipped: list[Skipped] = []
    sources: list[Source] = []
    first: dict[str, str] = {}   # goal -> first id of the run (extract.json's same_statement_as)
    same: dict[str, str] = {}
    library: list[tuple[str, str]] = []
    universe = [p.resolve() for p in texts]
    for path in files:
        if path in refused:
            n = len(cut[path][1]) if path in cut else 0
            sources.append(Source(str(path), digests[path], n, 0, n, refused=refused[path]))
            skipped += cut[path][1] if path in cut else []
            continue
        mine = {}
        for pid, (line, thm, setup) in zip(ids[path], kept[path]):
            goal = _norm(thm.query)
            mine[goal] = pid
            if goal in first:
                same[pid] = first[goal]
            problems.append(Problem(pid, str(path), line, thm.name, thm.form, setup, thm.query,
                                    thm.answer))
        first.update((g, pid) for g, pid in mine.items() if g not in first)
        skips = skipped_of[path] + [Skipped(str(path), line, thm.name,
                                            f"duplicate statement of {mine.get(goal) or owner_of[goal]}")
                                    for line, thm, goal in dup_of[path]]
        skipped += sorted(skips, key=lambda s: s.line)
        lib = graph.library_file(path, universe)
        why = ""
        if lib is not None:
            loader, base = lib
            why = (f"loaded by {graph.show(loader)} after {graph.show(base)}, which it does not "
                   f"load itself: its problems' contexts are not self-contained")
            library.append((str(path), why))
        n_found = len(cut[path][0]) + len(cut[path][1])
        sources.append(Source(str(path), digests[path], n_found, len(kept[path]),
                              len(skips), library=why))
    result = Extract(cfg.out, tuple(sources), tuple(problems), tuple(skipped), root, note,
                     tuple(unresolved), same, tuple(Refused(str(p), refused[p]) for p in files
                                                    if p in refused),
                     missing_loads, tuple(library), tuple(dropped), report)
    if cfg.strict and result.failed_strict:
        return replace(result, published=False)
    _publish(cfg, result)
    return result


def _norm(goal: str) -> str:
    return " ".join(goal.split())


def _expand(given: tuple[Path, ...]) -> list[Path]:
    """The files: each folder's *.ml (recursively, sorted), each file once."""
    out: list[Path] = []
    seen: set[Path] = set()
    for path in given:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.ml") if p.is_file())
            if not found:
                raise InputError(path, "folder holds no .ml file", "pass HOL Light proof files")
        else:
            found = [path]
        for p in found:
            if p.resolve() not in seen:
                seen.add(p.resolve())
                out.append(p)
    return out


def _check_word(value: str, flag: str, fix: str) -> None:
    if not PROBLEM_ID.fullmatch(value):
        raise InputError(flag, f"{value!r} has characters outside [A-Za-z0-9_.+-]", f"use {fix}")


def _prefix(cfg: ExtractConfig, path: Path) -> str:
    if cfg.prefix is not None:
        return cfg.prefix
    return _bench_prefix(cfg.context_root, path) or path.resolve().parent.name


def _bench_prefix(root: Path | None, path: Path) -> str | None:
    """The file's first folder under ``root``, as collect-problems.py's
    get_toplevel_dir names arm/proofs/utils/aes.ml "arm"; None outside it."""
    if root is None:
        return None
    try:
        parts = path.resolve().relative_to(root.resolve()).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 else None


def _read(path: Path) -> bytes:
    if not path.is_file():
        raise InputError(path, "proof file does not exist" if not path.exists() else
                         "is not a file", "check the path")
    return path.read_bytes()


def _cut(path: Path, text: str, phrases: list[str] | None = None
         ) -> tuple[list[tuple[int, Theorem, str]], list[Skipped]]:
    """(line, theorem, setup) of each theorem of one file, and its skipped proofs."""
    found, skips = [], []
    offset = 0
    phrases = split_phrases(text) if phrases is None else phrases
    for k, phrase in enumerate(phrases):
        start, offset = offset, offset + len(phrase)
        got = scan_bindings(phrase)
        if not got:
            continue
        # The line of the phrase's first token, past blank lines and comments.
        body = len(phrase.rstrip()) - len(strip_phrase(phrase))
        for at, item in got:
            line = text.count("\n", 0, start + (at or body)) + 1
            if isinstance(item, Skip):
                skips.append(Skipped(str(path), line, item.name, item.reason))
            else:
                found.append((line, item, "".join(phrases[:k])))
    return found, skips


def _safe(name: str) -> str:
    # OCaml names may contain primes, which problem ids (folder names) may not.
    return name.replace(chr(39), "_")


def _ids(prefix: str, path: Path, names: list[str]) -> list[str]:
    """Bench ids for one file's kept theorems, in file order."""
    stem = path.stem
    bases = [f"{prefix}.{stem}.{_safe(name)}" for name in names]
    counts = {b: bases.count(b) for b in bases}
    seen: dict[str, int] = {}
    out = []
    for b in bases:
        if counts[b] == 1:
            out.append(b)
        else:
            out.append(f"{b}.{seen.get(b, 0)}")
            seen[b] = seen.get(b, 0) + 1
    return out


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


# -- the bench's map: its ids, its duplicates -----------------------------------

# collect-problems.py's categorize: theorems it drops by name (their ids take
# a .N slot but are in no map).
_BENCH_DROPS = (("_EQUIV", "the bench drops _EQUIV theorems (not functional correctness)"),
                ("SUBROUTINE_SAFE", "the bench drops SUBROUTINE_SAFE theorems (not functional "
                                    "correctness)"),
                ("SUBROUTINE_CORRECT", "the bench drops SUBROUTINE_CORRECT theorems (they just "
                                       "use the core's _CORRECT)"))


def _read_map(path: Path) -> list[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(path, f"--ids-from cannot be read ({exc})", "pass the bench's "
                         "timeout-map.json") from None
    if isinstance(data, dict):
        data = list(data)
    ids = []
    for e in data if isinstance(data, list) else []:
        pid = e.get("problem_id") if isinstance(e, dict) else e
        if isinstance(pid, str):
            ids.append(pid)
    if not ids:
        raise InputError(path, "--ids-from holds no problem ids", "pass a JSON list of "
                         "{\"problem_id\": ...} entries, such as the bench's timeout-map.json")
    return ids


def _follow_map(cfg, files, usable, refused, cut, kept, ids, skipped_of, graph, root,
                owner_of: dict[str, str]) -> MapReport:
    """Make the ids the bench's: skip what the map keeps under another id.

    collect-problems.py walks the whole tree, files loaded first, and skips
    a statement seen before (in any file) before it numbers the names: a
    name proved twice in a file whose first statement some other file
    proves is numbered once (``NAME``, not ``NAME.1``). Its order cannot be
    seen from here; the map says which copy it kept. So a problem whose id
    is not in the map is skipped when another problem (or a theorem of a
    loaded file under the context root, such as common/*.ml) holds its
    statement under a map id, and the file's ids are numbered again,
    until nothing changes.
    """
    map_ids = _read_map(cfg.ids_from)
    safe = {_safe(m): m for m in map_ids}
    # Theorems of loaded files under the root that are not extracted.
    outside: dict[str, str] = {}     # goal -> map id
    given = {p.resolve() for p in files}
    loaded = graph.loaded_files(given)
    for f in sorted(loaded - given):
        pre = _bench_prefix(root, f)
        if pre is None:
            continue
        try:
            found, _ = _cut(f, f.read_text(encoding="utf-8"), graph.phrases(f))
        except (OSError, UnicodeDecodeError):
            continue
        mine: dict[str, tuple] = {}
        for _, thm, _s in found:
            mine.setdefault(_norm(thm.query), thm)
        for pid, (g, thm) in zip(_ids(pre, f, [t.name for t in mine.values()]), mine.items()):
            if pid in safe:
                outside.setdefault(g, pid)
    dropped = 0
    for _ in range(20):
        owners: dict[str, set[str]] = {}
        for path in usable:
            for pid, (_, thm, _s) in zip(ids[path], kept[path]):
                if pid in safe:
                    owners.setdefault(_norm(thm.query), set()).add(pid)
        changed = False
        for path in usable:
            keep, gone = [], []
            for pid, item in zip(ids[path], kept[path]):
                goal = _norm(item[1].query)
                owner = sorted(owners.get(goal, set()) - {pid}) or (
                    [outside[goal]] if goal in outside else [])
                if pid not in safe and owner:
                    gone.append((item, safe.get(owner[0], owner[0])))
                    owner_of[goal] = gone[-1][1]
                else:
                    keep.append(item)
            if gone:
                changed = True
                dropped += len(gone)
                kept[path] = keep
                ids[path] = _ids(_prefix(cfg, path), path, [t.name for _, t, _ in keep])
                skipped_of[path] += [Skipped(str(path), line, thm.name,
                                             f"duplicate statement of {owner}, the id the bench's "
                                             "map keeps it under") for (line, thm, _), owner in gone]
        if not changed:
            break
    prefixes = sorted({_prefix(cfg, p) for p in files})
    wanted = [m for m in map_ids if m.split(".")[0] in prefixes]
    have = {pid: (path, item) for path in usable for pid, item in zip(ids[path], kept[path])}
    renamed = {pid: safe[pid] for pid in have if pid in safe and safe[pid] != pid}
    matched = [m for m in wanted if _safe(m) in have]
    # Why each of the map's ids is not here.
    by_stem: dict[tuple[str, str], Path] = {(_prefix(cfg, p), p.stem): p for p in files}
    elsewhere = _ml_files(root, files)
    misses: dict[str, str] = {}
    missed_folders: dict[str, list[str]] = {}
    for m in wanted:
        if _safe(m) in have:
            continue
        parts = m.split(".")
        pre, stem, name = parts[0], parts[1], ".".join(parts[2:])
        path = by_stem.get((pre, stem))
        if path is None:
            where = elsewhere.get(stem, [])
            if where:
                misses[m] = f"its file {where[0]} was not given"
                missed_folders.setdefault(str(where[0].parent), [])
                if str(where[0]) not in missed_folders[str(where[0].parent)]:
                    missed_folders[str(where[0].parent)].append(str(where[0]))
            else:
                misses[m] = f"no file {stem}.ml was given or found under the context root"
            continue
        if path in refused:
            misses[m] = f"{path} is refused: {refused[path]}"
            continue
        base = name.rsplit(".", 1)[0] if name.rsplit(".", 1)[-1].isdigit() else name
        skips = [s for s in skipped_of[path] if _safe(s.theorem) in (name, base)]
        ours = [pid for pid in ids[path] if pid.startswith(f"{pre}.{stem}.{_safe(base)}")]
        if skips:
            s = skips[0]
            misses[m] = f"{path}:{s.line} {s.theorem}: {s.reason}"
        elif ours:
            misses[m] = f"{path} numbers {base} differently: " + ", ".join(ours)
        else:
            misses[m] = f"{path} proves no top-level theorem named {base}"
    not_in_map = {}
    stems_in_map = {".".join(m.split(".")[:2]) for m in map_ids}
    for pid, (path, (line, thm, _)) in have.items():
        if pid in safe:
            continue
        why = next((w for key, w in _BENCH_DROPS if key in thm.name), None)
        key = f"{_prefix(cfg, path)}.{path.stem}"
        if why is None and key not in stems_in_map:
            why = f"the map has no id of {path.name} ({key}.*): the bench did not collect that file"
        not_in_map[pid] = why or "not in the map"
    return MapReport(str(cfg.ids_from), tuple(prefixes), len(wanted), len(matched), renamed,
                     misses, not_in_map, dropped, missed_folders)


def _ml_files(root: Path | None, files: list[Path]) -> dict[str, list[Path]]:
    """stem -> .ml files under the context root (or the given files' folders)."""
    tops = [root] if root is not None else sorted({p.resolve().parent for p in files})
    out: dict[str, list[Path]] = {}
    for top in tops:
        for p in sorted(top.rglob("*.ml")):
            out.setdefault(p.stem, []).append(p)
    return out


def _check_out(cfg: ExtractConfig, files: list[Path]) -> None:
    out = cfg.out
    if not out.exists():
        return
    if not out.is_dir():
        raise InputError(out, "--out exists and is not a directory", "pass a new directory")
    if not any(out.iterdir()):
        return
    fix = "pass a new --out directory, or remove this one"
    try:
        earlier = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        old = sorted(s["path"] for s in earlier["sources"])
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(out, f"--out is not empty and is not a corpus made by proofbatch extract "
                         f"(no readable {MANIFEST})", fix) from None
    if old != sorted(str(p.resolve()) for p in files):
        raise InputError(out, "--out holds an extract of other files (" + ", ".join(old) + ")", fix)


def manifest(result: Extract, cfg: ExtractConfig) -> dict:
    reasons: dict[str, int] = {}
    for s in result.skipped:
        key = "duplicate statement" if s.reason.startswith("duplicate statement") else s.reason
        reasons[key] = reasons.get(key, 0) + 1
    libs = {p for p, _ in result.library_files}
    return {
        "format": FORMAT,
        "made_by": "proofbatch extract",
        "prefix": cfg.prefix,
        "category": cfg.category,
        "hol_light_dir": None if cfg.hol_dir is None else str(cfg.hol_dir),
        "context_root": None if result.context_root is None else str(result.context_root),
        "context_root_note": result.context_note,
        "unresolved_loads": list(result.unresolved),
        "missing_loads": list(result.missing_loads),
        "dropped_loads": list(result.dropped_loads),
        "dropped_loads_note": f"not followed: {DROPPED_NOTE}" if result.dropped_loads else "",
        "refused": [asdict(r) for r in result.refused],
        "library_files": [{"path": p, "why": why} for p, why in result.library_files],
        "ids_from": None if result.ids is None else {
            k: v for k, v in asdict(result.ids).items()},
        "sources": [dict(asdict(s), path=str(Path(s.path).resolve()), given=s.path)
                    for s in result.sources],
        "counts": {"theorems": sum(s.theorems for s in result.sources),
                   "problems": len(result.problems), "skipped": len(result.skipped),
                   "skipped_by_reason": reasons},
        "problems": [{"problem_id": p.problem_id, "source": p.source, "line": p.line,
                      "theorem": p.theorem, "form": p.form,
                      **({"bench_id": result.ids.renamed[p.problem_id]}
                         if result.ids and p.problem_id in result.ids.renamed else {}),
                      **({"library_file": True} if p.source in libs else {}),
                      **({"same_statement_as": result.same_statement_as[p.problem_id]}
                         if p.problem_id in result.same_statement_as else {})}
                     for p in result.problems],
        "skipped": [asdict(s) for s in result.skipped],
    }


def _publish(cfg: ExtractConfig, result: Extract) -> None:
    """Build the corpus beside ``out`` and move it into place whole."""
    out = cfg.out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.extract-", dir=out.parent))
    try:
        for p in result.problems:
            d = tmp / p.problem_id
            d.mkdir()
            (d / "setup.ml").write_text(p.setup, encoding="utf-8")
            (d / "query.txt").write_text(p.query, encoding="utf-8")
            (d / "answer.txt").write_text(p.answer, encoding="utf-8")
            (d / "category.txt").write_text(cfg.category, encoding="utf-8")
        (tmp / MANIFEST).write_text(json.dumps(manifest(result, cfg), indent=2) + "\n",
                                    encoding="utf-8")
        os.chmod(tmp, 0o755)
        if out.exists():
            # A directory cannot replace a non-empty one in one rename: move
            # the earlier extract aside first, then drop it.
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, old / "corpus")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
