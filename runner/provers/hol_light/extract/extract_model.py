"""What `proofbatch extract` is asked and what it gives: its settings, the
problems, skipped theorems, refused files and sources it reports, and how
the ids compare with the bench's map."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ....settings import setting as _help

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
    library: str = ""   # why it is a library file, and what its contexts start with; "" if not
    # A library file's loaders whose start its problems' setups begin with,
    # outermost first (extract_prefix.PrefixStep.provenance); () if none.
    context_prefix: tuple[dict, ...] = ()
    # The object files its problems read (extract_objects.ObjectRead.as_json):
    # name, path, exists, and how to build a missing one.
    object_files: tuple[dict, ...] = ()


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
    ids: MapReport | None = None    # with --ids-from
    # Symlinks among a folder's *.ml that lead to no file (dangling, or a loop): skipped.
    skipped_links: tuple[Refused, ...] = ()
    published: bool = True      # False: --strict refused it, nothing written

    @property
    def failed_strict(self) -> bool:
        return bool(self.refused or self.unresolved)
