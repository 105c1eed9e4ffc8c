"""The corpus of benchmarks/context_proofs.py, cut from a real HOL Light
development: each top-level ``let NAME = prove (`statement`, tactic);;`` of a
file becomes a problem whose setup.ml is the file up to that phrase. Written
before `proofbatch extract` (runner/provers/hol_light/extract.py) landed, and kept so that the
benchmark reproduces the corpus its recorded figures were measured on; it
takes only that plain form, a subset of what extract takes."""

from __future__ import annotations

import re
from pathlib import Path

from runner.provers.hol_light import contexts

LIBRARY = Path("/usr/share/hol-light/Library")
_PROVE = re.compile(r"^let\s+([A-Z][A-Z0-9_']*)\s*=\s*prove\s*\(\s*(`[^`]*`)\s*,(.*)\)\s*;;\s*$", re.S)


def cut(source: Path, out: Path, prefix: str = "lib", upto: str | None = None,
        names: set[str] | None = None, header: str = "") -> list[str]:
    """Write one problem per top-level prove of ``source`` (up to the theorem
    named ``upto``, or those in ``names``) under ``out``; returns their ids.
    ``header`` goes before each setup (e.g. a ``needs``)."""
    text = source.read_text()
    done, ids = [], []
    for phrase in contexts.split_phrases(text):
        m = _PROVE.match(phrase.strip())
        if m and (names is None or m.group(1) in names):
            pid = f"{prefix}.{source.stem}.{m.group(1)}"
            folder = out / pid
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "setup.ml").write_text(header + "".join(done))
            (folder / "query.txt").write_text(m.group(2) + "\n")
            (folder / "answer.txt").write_text(m.group(3).strip() + "\n")
            ids.append(pid)
            if m.group(1) == upto:
                break
        done.append(phrase)
    return ids
