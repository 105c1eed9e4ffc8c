"""Compiling contexts for native images: the preloaded libraries, one
image's segment (announced, and recorded as a build), and a whole context
tree ahead of a sweep's limits (NativeHolLightBackend.classify).

A context that cannot be compiled (native_compile.NotNative) is not an
error here: its image, and every image below it, is refused with the reason,
and its checks run in bytecode (native_session.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from .. import contexts
from .... import events
from ....errors import ProverError
from ....prover import COMPILE_KEY, ImageBuild
from ..native.native_compile import NativeCompiler, NotNative, Scope

T = TypeVar("T")


def refused_natively(reason: str) -> str:
    """The ERROR reason of a check that --no-fallback keeps out of bytecode."""
    return f"context cannot run natively (--no-fallback): {reason}"


class SessionCompiler(NativeCompiler):
    """A session's compiler, which also finds the modules ``classify``
    compiled (``extra``) when it compiles answers and contexts on them."""

    def __init__(self, *args, extra: Sequence[Path] = (), **kw):
        super().__init__(*args, **kw)
        self.extra = [Path(d) for d in extra]

    @property
    def includes(self) -> list[Path]:
        return [*super().includes, *self.extra]


def preloaded(compiler: NativeCompiler, preload: Sequence[Path]) -> tuple[Scope, tuple[Path, ...]]:
    """The base image's scope with the ``preload`` libraries compiled, and
    their plugins, which the server loads at start: loaded in every image,
    but visible only where a context needs them. Raises ProverError when
    one cannot be compiled: no image could start."""
    scope = Scope(compiler.base_opens)
    if preload:
        text = "".join(f'needs "{p}";;\n' for p in preload)
        try:
            scope = compiler.compile_context(text, "Pb_preload", scope)
        except NotNative as exc:
            raise ProverError(f"cannot preload {', '.join(map(str, preload))}: {exc}") from None
    return Scope(compiler.base_opens, scope.loaded, frozenset(), (), weak=scope.weak), scope.plugins


def announced(key: str, name: str, compile: Callable[[], T]) -> tuple[T, float]:
    """``compile()``, announced (events ``compile``/``compiled``, keyed
    ``key``, which the screen shows: a big context compiles for minutes);
    (its result, seconds)."""
    events.say("compile", key=key, name=name)
    started, ok = time.monotonic(), False
    try:
        result = compile()
        ok = True
    finally:
        events.say("compiled", key=key, name=name, ok=ok)
    return result, time.monotonic() - started


def compile_node(compiler: NativeCompiler, node: contexts.ImageNode, parent: Scope,
                 name: str) -> tuple[Scope, float]:
    """Compile one image's segment, announced; (its scope, seconds)."""
    return announced(COMPILE_KEY + node.key, name,
                     lambda: compiler.compile_context(node.segment, f"Pb_ctx_{node.key}", parent))


def compile_tree(compiler: NativeCompiler, tree: contexts.ContextTree, base: Scope,
                 refused: dict[str, str]) -> tuple[dict[str, Scope], list[ImageBuild]]:
    """Compile every image of ``tree`` below its base (scope ``base``),
    parents first: (image key -> scope, the compiles as image builds).
    An image that cannot be compiled, or whose parent could not, goes into
    ``refused`` (key -> why) instead."""
    scopes = {tree.base: base}
    compiles: list[ImageBuild] = []
    nodes = sorted((n for n in tree.nodes.values() if n.parent is not None), key=lambda n: n.depth)
    for i, node in enumerate(nodes, 1):
        if node.parent in refused:
            refused[node.key] = refused[node.parent]
            continue
        try:
            name = f"context {i} of {len(nodes)}: {contexts.context_name(node)}"
            scopes[node.key], secs = compile_node(compiler, node, scopes[node.parent], name)
        except NotNative as exc:
            refused[node.key] = str(exc)
            continue
        # Before the sweep starts: paid as the boot is (no parent).
        compiles.append(ImageBuild(COMPILE_KEY + node.key, None, secs, time.time()))
    del scopes[tree.base]
    return scopes, compiles
