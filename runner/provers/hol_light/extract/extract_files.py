"""Which files extract reads, and reading them: folders expanded to their
*.ml, symlinks that lead to no file listed (a loop or a dangling link),
settings and file names checked before anything is cut, and each file's
text and sha256 (extract.py).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from pathlib import Path
from typing import Callable

from ....corpus import PROBLEM_ID
from ....errors import InputError
from .extract_cut import file_prefix
from .extract_model import ExtractConfig, Refused

# How far extract is: (stage, done, total), total None when not counted.
Tell = Callable[[str, int, "int | None"], None]


def check_config(cfg: ExtractConfig) -> None:
    """Refuse settings no file needs to be read for: no files, a category
    or prefix that cannot be part of an id, a context root that is no
    directory."""
    if not cfg.files:
        raise InputError("extract", "no proof files given", "pass one or more HOL Light .ml files")
    _check_word(cfg.category, "--category", "a category name such as generic")
    if cfg.prefix is not None:
        _check_word(cfg.prefix, "--prefix", "letters, digits and _ . + - only")
    if cfg.context_root is not None and not cfg.context_root.is_dir():
        raise InputError(cfg.context_root, "--context-root is not a directory", "check the path")


def read_files(files: list[Path], tell: Tell
               ) -> tuple[dict[Path, str], dict[Path, str], dict[Path, str]]:
    """Each file's text and sha256, and the files refused as not UTF-8 (path
    -> why)."""
    texts, digests, refused = {}, {}, {}
    for k, path in enumerate(files):
        tell("reading files", k, len(files))
        data = _read(path)
        digests[path] = hashlib.sha256(data).hexdigest()
        try:
            # An editor's byte order mark is no OCaml: HOL Light's lexer
            # would stop at it, and so would the first theorem's `let`.
            texts[path] = data.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as exc:
            refused[path] = f"is not UTF-8 ({exc.reason} at byte {exc.start})"
    return texts, digests, refused


def check_stems(cfg: ExtractConfig, files: list[Path]) -> None:
    """Refuse files whose ids would start with characters outside an id's,
    or as another file's do."""
    stems: dict[str, Path] = {}
    for path in files:
        key = f"{file_prefix(cfg, path)}.{path.stem}"
        if not PROBLEM_ID.fullmatch(key):
            if not PROBLEM_ID.fullmatch(path.stem):
                # The stem is part of every id, whatever --prefix says.
                raise InputError(path, f"its name {path.stem!r} has characters outside "
                                 "[A-Za-z0-9_.+-], and every id of its problems holds it",
                                 "rename the file, or copy it under such a name (e.g. "
                                 f"{_safe_stem(path.stem)}{path.suffix}), and extract that")
            raise InputError(path, f"ids would start {key!r}: the prefix, its folder's name by "
                             "default, has characters outside [A-Za-z0-9_.+-]",
                             "pass --prefix NAME (letters, digits and _ . + - only)")
        if key in stems:
            raise InputError(path, f"its ids would start {key}., as those of {stems[key]} do",
                             "extract the two files into separate corpora, or rename one")
        stems[key] = path


def _safe_stem(stem: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", stem).strip(".") or "proofs"


def expand(given: tuple[Path, ...]) -> tuple[list[Path], tuple[Refused, ...]]:
    """The files: each folder's *.ml (recursively, sorted), each file once;
    and the symlinks among a folder's *.ml that lead to no file (dangling,
    or a loop), which are skipped and listed. A given path that is such a
    link is refused (InputError)."""
    out: list[Path] = []
    links: list[Refused] = []
    seen: set[Path] = set()
    for path in given:
        if (why := _broken_link(path)) is not None:
            raise InputError(path, why, "pass the proof file itself, or fix the link")
        if path.is_dir():
            found, broken = [], []
            for p in sorted(path.rglob("*.ml")):
                if (why := _broken_link(p)) is not None:
                    broken.append(Refused(str(p), why))
                elif p.is_file():
                    found.append(p)
            links += broken
            if not found:
                raise InputError(path, "folder holds no .ml file" + (
                    f" (only {len(broken)} symlinks that lead nowhere, e.g. {broken[0].source}: "
                    f"{broken[0].reason})" if broken else ""), "pass HOL Light proof files")
        else:
            found = [path]
        for p in found:
            if p.resolve() not in seen:
                seen.add(p.resolve())
                out.append(p)
    return out, tuple(links)


def _broken_link(path: Path) -> str | None:
    """Why ``path`` is a symlink that leads to no file (a loop, or a
    dangling link); None for anything else."""
    if not path.is_symlink():
        return None
    try:
        path.resolve(strict=True)
    except RuntimeError:            # Python 3.11's resolve() on a loop
        return "is a symlink loop: it leads back to itself"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symlink loop: it leads back to itself"
        return f"is a dangling symlink: its target {os.readlink(path)} does not exist"
    return None


def _check_word(value: str, flag: str, fix: str) -> None:
    if not value:
        raise InputError(flag, "is empty, and every problem id starts with it",
                         f"use {fix}, or leave {flag} out for its default")
    if not PROBLEM_ID.fullmatch(value):
        raise InputError(flag, f"{value!r} has characters outside [A-Za-z0-9_.+-]", f"use {fix}")


def _read(path: Path) -> bytes:
    if not path.is_file():
        raise InputError(path, "proof file does not exist" if not path.exists() else
                         "is not a file", "check the path")
    return path.read_bytes()
