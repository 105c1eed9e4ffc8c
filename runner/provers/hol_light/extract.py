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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .contexts import split_phrases
from ...corpus import PROBLEM_ID
from ...errors import InputError
from ...settings import setting as _help
from .extract_scan import Skip, Theorem, scan_phrase
from .native_build import classify, resolve, strip_phrase

MANIFEST = "extract.json"
FORMAT = 1


@dataclass(frozen=True)
class ExtractConfig:
    files: tuple[Path, ...] = _help("HOL Light proof files (.ml) to cut into problems, in order; "
                                    "each `let NAME = prove (...)` becomes a problem")
    out: Path = _help("corpus directory to write (new, empty, or an earlier extract of the same "
                      "files); replaced whole, atomically")
    prefix: str | None = _help("first part of each id <prefix>.<file stem>.<NAME>; default: each "
                               "file's parent folder name, e.g. Library",
                               default=None)
    category: str = _help("category of every problem, written to its category.txt", default="generic")
    hol_dir: Path | None = _help("HOL Light directory that needs/loadt resolve against besides the "
                                 "context root; None: do not check", default=None)


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
class Source:
    path: str
    sha256: str
    theorems: int     # phrases that prove something
    problems: int
    skipped: int


@dataclass(frozen=True)
class Extract:
    out: Path
    sources: tuple[Source, ...]
    problems: tuple[Problem, ...]
    skipped: tuple[Skipped, ...]
    context_root: Path | None   # what a sweep of the corpus must pass as --context-root
    context_note: str           # why, in one sentence
    unresolved: tuple[str, ...]  # needs/loadt names found nowhere
    # problem id -> the id, in an earlier file of the run, of the same statement
    same_statement_as: dict[str, str] = field(default_factory=dict)


def extract(cfg: ExtractConfig) -> Extract:
    """Cut ``cfg.files`` into problems and publish the corpus at ``cfg.out``.

    Raises InputError, with nothing written, on a missing or unreadable file,
    a file that proves no theorem, an invalid prefix or category, or an
    ``out`` that holds anything but an earlier extract of the same files.
    """
    if not cfg.files:
        raise InputError("extract", "no proof files given", "pass one or more HOL Light .ml files")
    _check_word(cfg.category, "--category", "a category name such as generic")
    if cfg.prefix is not None:
        _check_word(cfg.prefix, "--prefix", "letters, digits and _ . + - only")
    texts, digests = {}, {}
    for path in cfg.files:
        data = _read(path)
        texts[path], digests[path] = data.decode("utf-8"), hashlib.sha256(data).hexdigest()
    if len({p.resolve() for p in cfg.files}) != len(cfg.files):
        raise InputError(cfg.files[0], "a proof file is given twice", "pass each file once")
    _check_out(cfg)
    stems: dict[str, Path] = {}
    for path in cfg.files:
        key = f"{_prefix(cfg, path)}.{path.stem}"
        if not PROBLEM_ID.fullmatch(key):
            raise InputError(path, f"ids would start {key!r}, which has characters outside "
                             "[A-Za-z0-9_.+-]", "pass --prefix, or copy the file under such a name")
        if key in stems:
            raise InputError(path, f"its ids would start {key}., as those of {stems[key]} do",
                             "extract the two files into separate corpora, or rename one")
        stems[key] = path

    problems: list[Problem] = []
    skipped: list[Skipped] = []
    sources: list[Source] = []
    # Normalised goal -> id of the first problem of the run that proves it:
    # only reported (extract.json's same_statement_as), never used for ids.
    first: dict[str, str] = {}
    same: dict[str, str] = {}       # problem id -> earlier id of another file, same goal
    for path in cfg.files:
        text = texts[path]
        found, skips = _cut(path, text)
        if not found and not skips:
            raise InputError(path, "proves no top-level theorem (no `let NAME = prove ...`)",
                             "pass a HOL Light proof file")
        if not found:
            raise InputError(path, f"none of its {len(skips)} proofs can be extracted "
                             f"(first: line {skips[0].line}: {skips[0].reason})",
                             "pass a file with top-level `let NAME = prove (`GOAL`, TACTIC);;`")
        # Duplicates within this file only: ids depend on the file alone.
        kept: list[tuple[int, Theorem, str]] = []
        dups: list[tuple[int, Theorem, str]] = []
        mine: dict[str, str] = {}       # normalised goal -> id in this file
        for line, thm, setup in found:
            goal = " ".join(thm.query.split())
            if goal in mine:
                dups.append((line, thm, goal))
            else:
                mine[goal] = ""
                kept.append((line, thm, setup))
        ids = _ids(_prefix(cfg, path), path, [thm.name for _, thm, _ in kept])
        for pid, (line, thm, setup) in zip(ids, kept):
            goal = " ".join(thm.query.split())
            mine[goal] = pid
            if goal in first:
                same[pid] = first[goal]
            problems.append(Problem(pid, str(path), line, thm.name, thm.form, setup, thm.query,
                                    thm.answer))
        first.update((g, pid) for g, pid in mine.items() if g not in first)
        skips += [Skipped(str(path), line, thm.name, f"duplicate statement of {mine[goal]}")
                  for line, thm, goal in dups]
        skipped += sorted(skips, key=lambda s: s.line)
        sources.append(Source(str(path), digests[path], len(found) + len(skips) - len(dups), len(kept),
                              len(skips)))
    root, note, unresolved = _context_root(cfg, texts)
    result = Extract(cfg.out, tuple(sources), tuple(problems), tuple(skipped), root, note,
                     tuple(unresolved), same)
    _publish(cfg, result)
    return result


def _check_word(value: str, flag: str, fix: str) -> None:
    if not PROBLEM_ID.fullmatch(value):
        raise InputError(flag, f"{value!r} has characters outside [A-Za-z0-9_.+-]", f"use {fix}")


def _prefix(cfg: ExtractConfig, path: Path) -> str:
    return cfg.prefix if cfg.prefix is not None else path.resolve().parent.name


def _read(path: Path) -> bytes:
    if not path.is_file():
        raise InputError(path, "proof file does not exist" if not path.exists() else
                         "is not a file", "check the path")
    data = path.read_bytes()
    try:
        data.decode("utf-8")
        return data
    except UnicodeDecodeError as exc:
        raise InputError(path, f"is not UTF-8 ({exc.reason} at byte {exc.start})",
                         "pass a HOL Light source file") from None


def _cut(path: Path, text: str) -> tuple[list[tuple[int, Theorem, str]], list[Skipped]]:
    """(line, theorem, setup) of each theorem of one file, and its skipped proofs."""
    found, skips = [], []
    offset = 0
    phrases = split_phrases(text)
    for k, phrase in enumerate(phrases):
        start, offset = offset, offset + len(phrase)
        got = scan_phrase(phrase)
        if got is None:
            continue
        # The line of the phrase's first token, past blank lines and comments.
        body = len(phrase.rstrip()) - len(strip_phrase(phrase))
        line = text.count("\n", 0, start + body) + 1
        if isinstance(got, Skip):
            skips.append(Skipped(str(path), line, got.name, got.reason))
        else:
            found.append((line, got, "".join(phrases[:k])))
    return found, skips


def _ids(prefix: str, path: Path, names: list[str]) -> list[str]:
    """Bench ids for one file's kept theorems, in file order."""
    stem = path.stem
    # OCaml names may contain primes, which problem ids may not.
    bases = [f"{prefix}.{stem}.{name.replace(chr(39), '_')}" for name in names]
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


def _context_root(cfg: ExtractConfig, texts: dict[Path, str]) -> tuple[Path | None, str, list[str]]:
    """The --context-root a sweep of this corpus needs, why, and names found nowhere.

    HOL Light's needs/loadt look in the load path: proofbatch puts the
    context root first, then HOL Light's own directory. A name that HOL Light
    finds needs no root; any other must resolve under one folder above its
    source file, the development's root.
    """
    hol = [cfg.hol_dir] if cfg.hol_dir else []
    roots: set[Path] = set()
    unresolved: list[str] = []
    for path, text in texts.items():
        for phrase in split_phrases(text):
            if not _LOAD_WORDS.search(phrase):
                continue
            kind, name = classify(phrase)
            if kind not in ("needs", "loadt", "loads") or resolve(name, hol) is not None:
                continue
            folder = path.resolve().parent
            root = next((d for d in (folder, *folder.parents) if resolve(name, [d])), None)
            if root is None or kind == "loads":
                unresolved.append(f"{path}: {kind} \"{name}\"")
            else:
                roots.add(root)
    if len(roots) > 1:
        raise InputError(cfg.files[0], "the files' needs resolve under different roots ("
                         + ", ".join(sorted(map(str, roots))) + ")",
                         "extract files of one development at a time")
    where = f"HOL Light's directory {cfg.hol_dir}" if cfg.hol_dir else "HOL Light's directory"
    if roots:
        root = roots.pop()
        return root, f"its needs/loadt resolve under {root}: sweep with --context-root {root}", unresolved
    return None, f"every needs/loadt resolves in {where} (or there is none): no --context-root needed", unresolved


def _check_out(cfg: ExtractConfig) -> None:
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
        files = sorted(s["path"] for s in earlier["sources"])
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(out, f"--out is not empty and is not a corpus made by proofbatch extract "
                         f"(no readable {MANIFEST})", fix) from None
    if files != sorted(str(p.resolve()) for p in cfg.files):
        raise InputError(out, "--out holds an extract of other files (" + ", ".join(files) + ")", fix)


def manifest(result: Extract, cfg: ExtractConfig) -> dict:
    reasons: dict[str, int] = {}
    for s in result.skipped:
        key = "duplicate statement" if s.reason.startswith("duplicate statement") else s.reason
        reasons[key] = reasons.get(key, 0) + 1
    return {
        "format": FORMAT,
        "made_by": "proofbatch extract",
        "prefix": cfg.prefix,
        "category": cfg.category,
        "hol_light_dir": None if cfg.hol_dir is None else str(cfg.hol_dir),
        "context_root": None if result.context_root is None else str(result.context_root),
        "context_root_note": result.context_note,
        "unresolved_loads": list(result.unresolved),
        "sources": [dict(asdict(s), path=str(Path(s.path).resolve()), given=s.path)
                    for s in result.sources],
        "counts": {"theorems": sum(s.theorems for s in result.sources),
                   "problems": len(result.problems), "skipped": len(result.skipped),
                   "skipped_by_reason": reasons},
        "problems": [{"problem_id": p.problem_id, "source": p.source, "line": p.line,
                      "theorem": p.theorem, "form": p.form,
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
