"""Cutting one proof file into theorems, and naming them as the bench does.

What extract (extract.py) and its following of the bench's map
(extract_ids.py) both need: a theorem's place and setup in its file, the
normal form two statements are compared in, and the ids
s2n-bignum-bench's collect-problems.py gives. It imports neither of them.
"""

from __future__ import annotations

from pathlib import Path

from ..ocaml_lexer import split_phrases, strip_phrase
from .extract_model import ExtractConfig, Skipped
from .extract_scan import Skip, Theorem, scan_bindings


def norm_goal(goal: str) -> str:
    """A statement up to whitespace: what two copies of it share."""
    return " ".join(goal.split())


def file_prefix(cfg: ExtractConfig, path: Path) -> str:
    """The first part of the ids of ``path``'s problems: --prefix, else the
    file's first folder under the context root, else its folder's name."""
    if cfg.prefix is not None:
        return cfg.prefix
    return bench_prefix(cfg.context_root, path) or path.resolve().parent.name


def bench_prefix(root: Path | None, path: Path) -> str | None:
    """The file's first folder under ``root``, as collect-problems.py's
    get_toplevel_dir names arm/proofs/utils/aes.ml "arm"; None outside it."""
    if root is None:
        return None
    try:
        parts = path.resolve().relative_to(root.resolve()).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 else None


def cut_file(path: Path, text: str, phrases: list[str] | None = None
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


def safe_name(name: str) -> str:
    """An OCaml name as a problem id may hold it: OCaml names may contain
    primes, which problem ids (folder names) may not."""
    return name.replace(chr(39), "_")


def problem_ids(prefix: str, path: Path, names: list[str]) -> list[str]:
    """Bench ids for one file's kept theorems, in file order: a name proved
    several times gets ``.0``, ``.1``, ... on every occurrence."""
    stem = path.stem
    bases = [f"{prefix}.{stem}.{safe_name(name)}" for name in names]
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
