"""Contexts and images: a problem's setup.ml split into top-level phrases, and
all problems' contexts arranged as a tree of images that share prefixes.

A worker loads a context once into an image and forks checks from it. Setups
cut from the same proof file are prefixes of one another, phrase by phrase, so
the shared prefix is loaded once and each image loads only its ``segment`` on
top of its parent's.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

# The lexical classes below follow OCaml's lexer (parsing/lexer.mll): inside a
# comment it also lexes identifiers, string literals, quoted strings and
# character literals, so none of them can close the comment.
_IDENT_WITH_PRIME = r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*'[A-Za-z0-9_']*"
_CHAR = r"""'(?:[^\\'\n\r]|\r*\n|\\(?:[\\"'ntbr ]|[0-9]{3}|o[0-3][0-7]{2}|x[0-9a-fA-F]{2}))'"""
_QUOTED = r"(?P<quoted>\{(?:%%?[A-Za-z_][A-Za-z0-9_'.]*(?:[ \t]+(?P<d1>[a-z_]*))?|(?P<d2>[a-z_]*))\|)"
_MAIN = re.compile(
    rf"(?P<semi>;;)|(?P<comment>\(\*)|(?P<string>\")|{_QUOTED}|(?P<quote>`)|{_CHAR}|{_IDENT_WITH_PRIME}"
)
# In a comment OCaml also skips '' as a unit, so ''' cannot start a char there.
_IN_COMMENT = re.compile(
    rf"(?P<open>\(\*)|(?P<close>\*\))|(?P<string>\")|{_QUOTED}|''|{_CHAR}|{_IDENT_WITH_PRIME}"
)
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_AFTER_SEMI = re.compile(r"[ \t]*(?:\r?\n)?")


def _skip_string(text: str, i: int) -> int:
    """End of the string literal whose opening quote ends at ``i``."""
    m = _STRING_REST.match(text, i)
    return m.end() if m else len(text)


def _skip_quoted(text: str, i: int, opening: re.Match) -> int:
    """End of the quoted string ``{id|...|id}`` whose opening ends at ``i``."""
    closing = "|" + (opening.group("d1") or opening.group("d2") or "") + "}"
    j = text.find(closing, i)
    return len(text) if j < 0 else j + len(closing)


def _skip_comment(text: str, i: int) -> int:
    """End of the (nested) comment whose ``(*`` ends at ``i``."""
    depth = 1
    while m := _IN_COMMENT.search(text, i):
        i, kind = m.end(), m.lastgroup
        if kind == "open":
            depth += 1
        elif kind == "close":
            depth -= 1
            if depth == 0:
                return i
        elif kind == "string":
            i = _skip_string(text, i)
        elif kind == "quoted":
            i = _skip_quoted(text, i, m)
    return len(text)


def split_phrases(text: str) -> list[str]:
    """Split OCaml / HOL Light source into its top-level phrases.

    Each phrase ends with its ``;;`` plus the blanks after it and the end of
    that line, if nothing else follows on it. A remainder with no ``;;``
    (blank, comments, or an unterminated phrase) is the last element. A
    ``;;`` inside a comment, a string, a quoted string, a character literal
    or a HOL term quotation `...` does not end a phrase. Always
    ``"".join(split_phrases(text)) == text``, and splitting the text of the
    first k phrases (k below the count, or all of them) gives those phrases.
    """
    phrases: list[str] = []
    start = i = 0
    while m := _MAIN.search(text, i):
        i, kind = m.end(), m.lastgroup
        if kind == "semi":
            i = _AFTER_SEMI.match(text, i).end()
            phrases.append(text[start:i])
            start = i
        elif kind == "comment":
            i = _skip_comment(text, i)
        elif kind == "string":
            i = _skip_string(text, i)
        elif kind == "quoted":
            i = _skip_quoted(text, i, m)
        elif kind == "quote":
            j = text.find("`", i)
            i = len(text) if j < 0 else j + 1
    if start < len(text):
        phrases.append(text[start:])
    return phrases


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _hasher(salt: str):
    """A sha256 fed with the salt and a separator, ready for context text."""
    h = hashlib.sha256(_encode(salt))
    h.update(b"\0")
    return h


def _key(hasher) -> str:
    return hasher.hexdigest()[:20]


def image_key(setup_text: str, salt: str) -> str:
    """Key of the image a problem with this setup forks from.

    The first 20 hex digits of sha256(salt, NUL, text); a blank setup is the
    base image, whose text is empty. Equals ``tree.image_of[problem]`` in any
    tree built with the same salt.
    """
    h = _hasher(salt)
    if setup_text.strip():
        h.update(_encode(setup_text))
    return _key(h)


@dataclass(frozen=True)
class ImageNode:
    """One image: a process that has loaded its chain's segments in order."""

    key: str  # sha256 hex (first 20 chars) of salt + the full context text loaded
    parent: str | None  # None only for the base image
    segment: str  # text loaded on top of the parent; empty for the base
    depth: int  # 0 for the base
    problems: tuple[str, ...]  # problems whose full context is exactly this image


@dataclass(frozen=True)
class ContextTree:
    """The images needed for a corpus, as a radix tree over phrase sequences."""

    nodes: Mapping[str, ImageNode]
    base: str
    image_of: Mapping[str, str]  # problem id -> key of the image it forks from

    def chain(self, key: str) -> list[ImageNode]:
        """The images from the base down to ``key``, both included."""
        out = []
        current: str | None = key
        while current is not None:
            node = self.nodes[current]
            out.append(node)
            current = node.parent
        out.reverse()
        return out

    @cached_property
    def _children(self) -> Mapping[str, tuple[str, ...]]:
        kids: dict[str, list[str]] = {k: [] for k in self.nodes}
        for node in self.nodes.values():
            if node.parent is not None:
                kids[node.parent].append(node.key)
        return {k: tuple(v) for k, v in kids.items()}

    def descendants_problems(self, key: str) -> set[str]:
        """Problems whose image is ``key`` or any image below it."""
        if key not in self.nodes:
            raise KeyError(key)
        found: set[str] = set()
        todo = [key]
        while todo:
            current = todo.pop()
            found.update(self.nodes[current].problems)
            todo.extend(self._children[current])
        return found


def build_context_tree(setups: Mapping[str, str], salt: str) -> ContextTree:
    """Arrange the problems' setups (problem id -> setup.ml text) into images.

    There is an image for the base (empty context), one for the end of each
    distinct setup, and one wherever setups diverge after a shared non-empty
    run of phrases; no others. ``salt`` names the prover build, so keys differ
    across builds. A problem's key depends only on its own setup and the salt
    (see ``image_key``); blank setups map to the base.
    """
    root: tuple[dict, list[str]] = ({}, [])
    for pid in sorted(setups):
        text = setups[pid]
        tnode = root
        if text.strip():
            for phrase in split_phrases(text):
                child = tnode[0].get(phrase)
                if child is None:
                    child = tnode[0][phrase] = ({}, [])
                tnode = child
        tnode[1].append(pid)

    nodes: dict[str, ImageNode] = {}
    image_of: dict[str, str] = {}
    base = _key(_hasher(salt))
    stack = [(root, None, 0, _hasher(salt), "")]
    while stack:
        tnode, parent, depth, h, segment = stack.pop()
        key = _key(h)
        assert key not in nodes, f"two images with key {key}"
        nodes[key] = ImageNode(key, parent, segment, depth, tuple(tnode[1]))
        image_of.update((pid, key) for pid in tnode[1])
        for phrase, child in tnode[0].items():
            h_child, parts = h.copy(), [phrase]
            h_child.update(_encode(phrase))
            while not child[1] and len(child[0]) == 1:
                ((phrase, child),) = child[0].items()
                parts.append(phrase)
                h_child.update(_encode(phrase))
            stack.append((child, key, depth + 1, h_child, "".join(parts)))
    return ContextTree(MappingProxyType(nodes), base, MappingProxyType(image_of))
