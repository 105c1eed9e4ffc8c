"""Cutting s2n-bignum-bench problems out of s2n-bignum's proof files, as the
bench's collect-problems.py and retrieve-problem.py do, for the benchmarks
that run on the real thing (simulate_contexts.py, bench_prefix.py).

A problem ``arm.<file>.<THM>[.N]`` gets as ``setup.ml`` its proof file
``arm/proofs/<file>.ml`` with every ``needs``/``loadt``/``loads`` inlined
once (the shared library prefix), then the file's own phrases up to the
phrase that proves THM (its N-th such phrase for ``.N``). Files come from
the s2n-bignum tree first, then HOL Light's, read from a git mirror at a
commit or from a checkout on disk.
"""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
from runner.provers.hol_light.costs.file_loads import _code_start, theorem_of  # noqa: E402
from runner.provers.hol_light.ocaml_lexer import split_phrases  # noqa: E402

LOAD = re.compile(r"(needs|loadt|loads)\s*\"([^\"]+)\"\s*;;")
DUP = re.compile(r"\.(\d+)$")
# HOL Light's inline_load.ml, which the bench inlines its setups with, drops
# `loads "update_database.ml";;` (it walks the toplevel's own tables, and
# compiles nowhere but in the bytecode toplevel).
OMITTED = frozenset({"update_database.ml"})

Source = Callable[[str], "str | None"]


def git_source(repo: Path, rev: str) -> Source:
    """A file's text at ``rev`` in the git repository ``repo`` (a bare mirror)."""
    def read(path: str) -> str | None:
        r = subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"],
                           capture_output=True, text=True)
        return r.stdout if r.returncode == 0 else None
    return read


def dir_source(root: Path) -> Source:
    """A file's text under the checkout ``root``."""
    def read(path: str) -> str | None:
        f = root / path
        return f.read_text(encoding="utf-8") if f.is_file() else None
    return read


class Inliner:
    """Text of a file with its needs/loadt/loads inlined, each file once."""

    def __init__(self, *sources: Source):
        self.sources = sources
        self.cache: dict[str, str | None] = {}

    def source(self, path: str) -> str | None:
        if path not in self.cache:
            self.cache[path] = next((t for s in self.sources if (t := s(path)) is not None), None)
        return self.cache[path]

    def inline(self, text: str, loaded: set[str]) -> str:
        out = []
        for phrase in split_phrases(text):
            m = LOAD.match(phrase, _code_start(phrase))
            if m is None:
                out.append(phrase)
                continue
            path = m.group(2)
            if path in OMITTED:
                continue
            body = self.source(path)
            if body is None:            # e.g. HOL Light's own core, already in the base image
                out.append(phrase)
                continue
            if path in loaded:
                continue
            loaded.add(path)
            out.append(self.inline(body, loaded))
        return "".join(out)


@dataclass(frozen=True)
class ProofFile:
    """One proof file, cut: its inlined loads, its own phrases, and where
    each theorem's phrase is among them ((name, occurrence) -> index)."""

    stem: str
    head: str
    body: list[str]
    cuts: dict[tuple[str, int], int]

    def cut_of(self, problem_id: str) -> int | None:
        """Index in ``body`` of the phrase proving ``arm.<file>.<THM>[.N]``."""
        m = DUP.search(problem_id)
        k = int(m.group(1)) if m else 0
        name = DUP.sub("", problem_id).rpartition(".")[2]
        return self.cuts.get((name, k))

    def setup(self, index: int) -> str:
        """setup.ml of the problem whose theorem is ``body[index]``."""
        return self.head + "".join(self.body[:index])


def read_proof_file(inliner: Inliner, stem: str, arch: str = "arm") -> ProofFile | None:
    text = inliner.source(f"{arch}/proofs/{stem}.ml")
    if text is None:
        return None
    prefix, body = [], []
    for phrase in split_phrases(text):      # the file's loads first, then its own phrases
        (prefix if LOAD.match(phrase, _code_start(phrase)) else body).append(phrase)
    seen: dict[str, int] = defaultdict(int)
    cuts: dict[tuple[str, int], int] = {}
    for i, phrase in enumerate(body):
        name = theorem_of(phrase)
        if name is not None:
            cuts[(name, seen[name])] = i
            seen[name] += 1
    return ProofFile(stem, inliner.inline("".join(prefix), set()), body, cuts)


def cut_corpus(ids_by_file: dict[str, list[str]], corpus: Path,
               inliner: Inliner) -> tuple[int, int, int]:
    """Write each problem's setup.ml (and a placeholder query); return
    (problems, skipped, longest prefix in lines)."""
    written = skipped = prefix_lines = 0
    for stem, ids in sorted(ids_by_file.items()):
        pf = read_proof_file(inliner, stem)
        if pf is None:
            skipped += len(ids)
            continue
        prefix_lines = max(prefix_lines, pf.head.count("\n"))
        for pid in ids:
            index = pf.cut_of(pid)
            if index is None:
                skipped += 1
                continue
            d = corpus / pid
            d.mkdir(parents=True)
            (d / "setup.ml").write_text(pf.setup(index))
            (d / "query.txt").write_text("`T`\n")
            written += 1
    return written, skipped, prefix_lines
