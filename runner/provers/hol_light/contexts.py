"""Contexts and images: all problems' contexts, each a setup.ml split into
top-level phrases (ocaml_lexer.py), arranged as a tree of images that share
prefixes.

A worker loads a context once into an image and forks checks from it. Setups
cut from the same proof file are prefixes of one another, phrase by phrase, so
the shared prefix is loaded once and each image loads only its ``segment`` on
top of its parent's.

Images are keyed by what the toplevel runs: each phrase's ``normal_form``,
without its comments and with its blanks collapsed. The bench's setups open
with comments naming their own proof file and then inline the same 35,000
lines of library, so keyed on raw text two files would part at line 4.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

from .ocaml_lexer import normal_form, split_from, split_phrases


def normal_phrases(text: str, cache: dict[str, str] | None = None,
                   phrases: list[str] | None = None) -> list[tuple[str, str]]:
    """(phrase as written, its normal form) for each phrase of ``text`` that
    runs something (comment-only and blank ones are left out). ``cache``
    (phrase -> normal form) saves normalizing a phrase seen before;
    ``phrases``, when given, is ``split_phrases(text)``."""
    out = []
    for phrase in split_phrases(text) if phrases is None else phrases:
        norm = None if cache is None else cache.get(phrase)
        if norm is None:
            norm = normal_form(phrase)
            if cache is not None:
                cache[phrase] = norm
        if norm:
            out.append((phrase, norm))
    return out


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    lo, hi = 0, min(len(a), len(b)) + 1       # a[:lo] == b[:lo]; a[:hi] != b[:hi] (or hi too long)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class _Splitter:
    """split_phrases over setups in turn, reusing the phrases of the
    previous setup that lie inside the text both share: setups cut from one
    proof file share all but their last phrases, and splitting is most of
    the cost of building a tree."""

    def __init__(self):
        self.text, self.phrases, self.ends = "", [], []

    def split(self, text: str) -> list[str]:
        # A phrase's end depends on at most the two characters after it (the
        # blanks after ";;" and an optional "\r\n"), so only phrases ending
        # two characters inside the shared text are the same in both.
        k = bisect.bisect_left(self.ends, _common_prefix(self.text, text) - 1)
        start = self.ends[k - 1] if k else 0
        phrases = self.phrases[:k] + split_from(text, start)
        self.ends = self.ends[:k] + list(itertools.accumulate(map(len, phrases[k:]), initial=start))[1:]
        self.text, self.phrases = text, phrases
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


def _feed(hasher, norm: str) -> None:
    """One phrase's normal form, length first, so that no two sequences of
    phrases hash alike."""
    data = _encode(norm)
    hasher.update(len(data).to_bytes(8, "big"))
    hasher.update(data)


def image_key(setup_text: str, salt: str) -> str:
    """Key of the image a problem with this setup forks from.

    The first 20 hex digits of sha256 over the salt, NUL, and the normal
    form of each phrase that runs something (see ``normal_form``), each
    after its length; a setup with none (blank, or comments only) is the
    base image. Equals ``tree.image_of[problem]`` in any tree built with the
    same salt.
    """
    h = _hasher(salt)
    for _, norm in normal_phrases(setup_text):
        _feed(h, norm)
    return _key(h)


@dataclass(frozen=True)
class ImageNode:
    """One image: a process that has loaded its chain's segments in order."""

    key: str  # sha256 hex (first 20 chars) of salt + the normal forms of the context's phrases
    parent: str | None  # None only for the base image
    segment: str  # text loaded on top of the parent, as one of its problems' setups
                  # has it (comments included); empty for the base
    depth: int  # 0 for the base
    problems: tuple[str, ...]  # problems whose full context is exactly this image


def context_name(node: ImageNode) -> str:
    """What a person calls an image: the problems whose context it is."""
    if not node.problems:
        return "a shared context prefix" if node.segment else "an empty context"
    more = f" and {len(node.problems) - 1} more" if len(node.problems) > 1 else ""
    return f"the context of {node.problems[0]}{more}"


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
    run of phrases; no others. Setups are compared phrase by phrase in
    normal form (``normal_form``): phrases that differ only in comments and
    blanks are one. An image's segment is the text of the first problem (by
    id) that reaches it, so its comments are that problem's. ``salt`` names
    the prover build, so keys differ across builds. A problem's key depends
    only on its own setup and the salt (see ``image_key``); setups that run
    nothing map to the base.
    """
    # A trie node: (children by normal form, problems ending here, the phrase
    # as first written).
    root: tuple[dict, list[str], str] = ({}, [], "")
    # The bench's setups repeat the same library phrases thousands of times.
    cache: dict[str, str] = {}
    splitter = _Splitter()
    for pid in sorted(setups):
        tnode = root
        text = setups[pid]
        for phrase, norm in normal_phrases(text, cache, splitter.split(text)):
            child = tnode[0].get(norm)
            if child is None:
                child = tnode[0][norm] = ({}, [], phrase)
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
        for norm, child in tnode[0].items():
            h_child, parts = h.copy(), [child[2]]
            _feed(h_child, norm)
            while not child[1] and len(child[0]) == 1:
                ((norm, child),) = child[0].items()
                parts.append(child[2])
                _feed(h_child, norm)
            stack.append((child, key, depth + 1, h_child, "".join(parts)))
    return ContextTree(MappingProxyType(nodes), base, MappingProxyType(image_of))
