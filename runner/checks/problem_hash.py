"""The hash of what a problem's verdicts depend on besides the answer.

A verdict is the answer's on the problem as it was checked: its setup, its
query, whatever its setup loads (HOL Light's ``needs``/``loadt``/``loads``
resolved under the context root) and any other file it reads at run time
that the corpus names (s2n-bignum's proofs read the object files they
verify: one missing, then built, must get its problems checked again, as a
changed setup does; issue 46). The prover says which files those are
(``ProverBackend.problem_inputs``); this hashes them, each file once however
many problems load it, into one digest per problem, which every row records
(``problem_sha256``). A resume checks again a problem whose digest changed
(runner/checks/attempts.py).

Files are named as the prover names them (relative to the corpus or the
context root), never by absolute path: a corpus moved or copied whole hashes
the same.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Mapping, Sequence

from ..corpus import Problem

# A file's hash when it cannot be read: a file read at run time that is
# missing now and built later changes the problem's digest. (A load found
# nowhere is no input: the prover names only the files it found.)
MISSING = "missing"


class FileHashes:
    """sha256 of files by path, each read once."""

    def __init__(self):
        self._seen: dict[Path, str] = {}

    def __call__(self, path: Path) -> str:
        path = Path(path)
        if path not in self._seen:
            digest = hashlib.sha256()
            try:
                with open(path, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        digest.update(block)
                self._seen[path] = digest.hexdigest()
            except OSError:
                self._seen[path] = MISSING
        return self._seen[path]


def digests(problems: Sequence[Problem],
            inputs: Mapping[str, Sequence[tuple[str, Path]]]) -> dict[str, str]:
    """Problem id -> sha256 over its inputs' names and contents (``inputs``:
    problem id -> (name, path) pairs, from ``ProverBackend.problem_inputs``)."""
    hashes = FileHashes()
    out = {}
    for p in problems:
        outer = hashlib.sha256()
        for name, path in inputs.get(p.problem_id, ()):
            # NUL and newline occur in no name the provers give: unambiguous.
            outer.update(f"{name}\0{hashes(path)}\n".encode("utf-8", "surrogateescape"))
        out[p.problem_id] = outer.hexdigest()
    return out
