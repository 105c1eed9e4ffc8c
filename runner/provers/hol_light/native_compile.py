"""Compiling checks for the native HOL Light server: answer batches, contexts
and libraries, each into a plugin (.cmxs) that the server Dynlink-loads.

- **Answers** go through ``hol-native-front`` in batches: it applies the
  bytecode driver's rules to each answer on its own (no ";;", exactly one
  expression, the forbidden identifiers) and types it on its own, so a bad
  answer gets ERROR and the rest compile in one ``ocamlopt -shared``. If
  that compile still fails, the batch is bisected.
- **Contexts** (setup.ml segments) become modules ``Pb_ctx_<image key>``
  that later segments and answers open, so problems sharing a prefix share
  its compiled and loaded module. A literal ``needs "F";;`` becomes an
  ``include`` of F's library module, compiled once into the build's cache.
- What cannot be compiled (a toplevel directive, a computed load path, a
  compile error) raises NotNative with the reason; the session then runs
  that context in bytecode.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import contexts
from ... import subproc
from ...context_proofs import ContextProofs
from ...errors import CommandError
from .native_build import (UNLIMITED_STACK, NativeBuild, camlp5_argv, classify, inline_core, resolve,
                           strip_phrase)
from .install import HolLightInstall

# Under --context-proofs trust every context segment and library is compiled
# with this opened after the core, so its phrases and functions name the
# switchable prove (hol_trust.ml) rather than the core's.
TRUST_OPEN = "Hol_trust.Switch"

# Code that loads files at run time has no native equivalent: compiled
# code has no toplevel to load into.
_RUNTIME_LOAD = re.compile(r"\b(needs|loadt|loads|load_on_path|use_file|Toploop|Topdirs)\b")
COMPILE_TIMEOUT_S = 900.0
# A top-level `open M;;`, after any `#N "file"` line directives (HOL Light's
# inline_load.ml starts every inlined file with `open Hol_lib;; open Hol_loader;;`).
_OPEN = re.compile(r"^(?:#\s*\d+\s*\"[^\"\n]*\"\s*)*open!?\s+([A-Z][A-Za-z0-9_'.]*)\s*(;;)?\s*$")


class NotNative(Exception):
    """This context cannot run natively; the message says why."""


@dataclass(frozen=True)
class Compiled:
    """One answer after compilation: a plugin and its entry, or a refusal."""

    plugin: Path | None
    entry: str | None
    refusal: str | None
    batch_size: int
    compile_secs: float      # the batch's compile time divided by its size


@dataclass
class Scope:
    """What an image has loaded and what its code can see, base to leaf."""

    opens: tuple[str, ...]                      # modules opened, in order
    loaded: frozenset[Path] = frozenset()       # library files loaded in the process
    visible: frozenset[Path] = frozenset()      # library files needs'd along the chain
    plugins: tuple[Path, ...] = ()              # plugins to load for this image alone


def _first_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if line.startswith("Error"):
            rest = " ".join(lines[i:i + 3])
            return rest[:240]
    return (lines[-1] if lines else "no output")[:240]


def _ocamlopt_shared(build: NativeBuild, source: Path, opens: Sequence[str], includes: Sequence[Path],
                     out: Path) -> None:
    argv = build.ocamlopt()
    for d in includes:
        argv += ["-I", str(d)]
    for m in opens:
        argv += ["-open", m]
    subproc.run(UNLIMITED_STACK + argv + ["-shared", "-o", str(out), str(source)],
                cwd=source.parent, timeout=COMPILE_TIMEOUT_S)


class NativeCompiler:
    """Compiles plugins for one session: answers and contexts into
    ``workdir``, libraries into the build's cache (shared across sessions)."""

    def __init__(self, build: NativeBuild, install: HolLightInstall, context_root: Path,
                 workdir: Path, context_proofs: ContextProofs = ContextProofs.REPLAY):
        self.build, self.install = build, install
        self.context_proofs = ContextProofs(context_proofs)
        # What every context and library module opens first.
        self.base_opens: tuple[str, ...] = build.core_opens + (
            (TRUST_OPEN,) if self.context_proofs is ContextProofs.TRUST else ())
        self.context_root, self.workdir = context_root, workdir
        self.libdir = build.dir / "libs"
        for d in (workdir, self.libdir):
            d.mkdir(parents=True, exist_ok=True)
        self.core_files = self._core_files()
        self._counter = itertools.count(1)     # atomic: worker threads compile at once
        self._library_names: dict[Path, str] = {}

    def _core_files(self) -> frozenset[Path]:
        if self.build.core_module != "Hol_core":
            return frozenset()
        return frozenset(inline_core(self.install.hol_dir)[1])

    @property
    def includes(self) -> list[Path]:
        return [*self.build.include_dirs, self.libdir, self.workdir]

    def _name(self, prefix: str) -> str:
        return f"{prefix}{next(self._counter)}_{os.getpid()}"

    # -- answers -------------------------------------------------------------

    def compile_answers(self, answers: dict[str, bytes], opens: Sequence[str]) -> dict[str, Compiled]:
        """Compile answers (key -> text) into one plugin; one Compiled per key."""
        started = time.monotonic()
        out: dict[str, Compiled] = {}
        keys = list(answers)
        self._batch(keys, answers, opens, out)
        per = (time.monotonic() - started) / max(1, len(keys))
        return {k: Compiled(c.plugin, c.entry, c.refusal, len(keys), per) for k, c in out.items()}

    def _batch(self, keys: list[str], answers: dict[str, bytes], opens: Sequence[str],
               out: dict[str, Compiled]) -> None:
        name = self._name("pb_batch")
        folder = self.workdir / name
        folder.mkdir()
        entries = {f"a{i}": k for i, k in enumerate(keys)}
        lines = []
        for entry, key in entries.items():
            path = folder / f"{entry}.txt"
            path.write_bytes(answers[key])
            lines.append(f"{entry}\t{path}\n")
        (folder / "batch.tsv").write_text("".join(lines))
        ml, refused = folder / f"{name}.ml", folder / "refused.tsv"
        argv = [str(self.build.front), str(folder / "batch.tsv"), str(ml), str(refused)]
        for d in self.includes:
            argv += ["-I", str(d)]
        for m in opens:
            argv += ["-open", m]
        subproc.run(argv, timeout=COMPILE_TIMEOUT_S)
        refusals = {}
        for line in refused.read_text(encoding="utf-8", errors="replace").splitlines():
            entry, _, reason = line.split("\t", 2)
            refusals[entry] = reason
        for entry, reason in refusals.items():
            out[entries[entry]] = Compiled(None, None, reason, 0, 0.0)
        accepted = [e for e in entries if e not in refusals]
        if not accepted:
            return
        # An interface with nothing in it: the plugin exports no names, so a
        # weakly typed value inside an answer cannot stop the compile.
        (folder / f"{name}.mli").write_text("")
        plugin = folder / f"{name}.cmxs"
        try:
            subproc.run(self.build.ocamlopt() + ["-c", f"{name}.mli"], cwd=folder)
            _ocamlopt_shared(self.build, ml, opens, self.includes, plugin)
        except CommandError as exc:
            if len(accepted) == 1:
                out[entries[accepted[0]]] = Compiled(None, None, "compile: " + _first_error(exc.stderr), 0, 0.0)
                return
            half = len(accepted) // 2
            for part in (accepted[:half], accepted[half:]):
                self._batch([entries[e] for e in part], answers, opens, out)
            return
        for entry in accepted:
            out[entries[entry]] = Compiled(plugin, entry, None, 0, 0.0)

    # -- contexts and libraries ----------------------------------------------

    def compile_context(self, text: str, module: str, parent: Scope) -> Scope:
        """Compile one image's segment of setup.ml as module ``module``."""
        scope = Scope(parent.opens, parent.loaded, parent.visible)
        source = self._translate(text, scope, where="setup.ml")
        # Straight into workdir: later units find its interface there (-I).
        self._compile_unit(source, self.workdir, module, scope.opens)
        return Scope(scope.opens + (module,), scope.loaded, scope.visible,
                     scope.plugins + (self.workdir / f"{module.lower()}.cmxs",))

    def _translate(self, text: str, scope: Scope, where: str) -> str:
        """The segment's source with each literal needs/loads/loadt turned
        into an include of that file's library module; updates ``scope``."""
        out = []
        for phrase in contexts.split_phrases(text):
            kind, arg = classify(phrase)
            if kind == "directive":
                raise NotNative(f"{where} uses the toplevel directive #{arg}")
            if kind in ("needs", "loads", "loadt"):
                search = [self.install.hol_dir] if kind == "loads" else [self.context_root,
                                                                          self.install.hol_dir]
                path = resolve(arg, search)
                if path is None:
                    raise NotNative(f"{where}: {kind} \"{arg}\" finds no file")
                if path in self.core_files:
                    if kind == "needs":
                        continue
                    raise NotNative(f"{where}: {kind} \"{arg}\" reloads part of the core")
                if path in scope.visible and kind == "needs":
                    continue
                if path in scope.loaded and kind != "needs":
                    raise NotNative(f"{where}: {kind} \"{arg}\" loads a file a second time")
                out.append(f"include {self._library(path, scope, load=path not in scope.loaded)};;\n")
                continue
            if kind == "code" and (m := _OPEN.match(strip_phrase(phrase))):
                # In the toplevel an open reaches every later phrase; here each
                # segment is its own module, which later segments and answers
                # open, and an open inside a module is not exported: include is.
                # The core's own modules, reopened before anything is defined
                # on top of them, change nothing and are dropped (including
                # Hol_lib would copy all of HOL Light into the segment).
                if not (m.group(1) in self.build.core_opens and scope.opens == self.base_opens
                        and not any(strip_phrase(o) for o in out)):
                    out.append(f"include {m.group(1)};;\n")
                continue
            if kind == "code" and _RUNTIME_LOAD.search(strip_phrase(phrase)):
                raise NotNative(f"{where} loads files at run time (needs/loadt with a computed "
                                "path, use_file or Toploop)")
            out.append(phrase)
        return "".join(out)

    def _library(self, path: Path, scope: Scope, load: bool = True) -> str:
        """Module name of a library file, compiling it (and what it needs)
        into the cache if needed; marks it visible in ``scope`` and, with
        ``load``, adds its plugins to those the image loads."""
        if not load:      # already loaded in this process (preloaded): just open it
            scope.visible = scope.visible | {path}
            return self._library_names[path]
        text = path.read_text(encoding="utf-8", errors="replace")
        # A library compiled under trust names the switchable prove: it is
        # another module than the same file compiled to replay its proofs.
        trust = b"" if self.context_proofs is ContextProofs.REPLAY else b"\0trust"
        digest = hashlib.sha256(str(path).encode() + b"\0" + text.encode() + trust).hexdigest()[:16]
        module = f"Pb_lib_{digest}"
        lib_scope = Scope(self.base_opens, scope.loaded, frozenset())
        source = self._translate(text, lib_scope, where=str(path))
        plugin = self.libdir / f"{module.lower()}.cmxs"
        if not plugin.exists():
            tmp = self.libdir / f".{module.lower()}.{os.getpid()}"
            tmp.mkdir(exist_ok=True)
            self._compile_unit(source, tmp, module, lib_scope.opens)
            for built in tmp.iterdir():
                os.replace(built, self.libdir / built.name)
            tmp.rmdir()
        self._library_names[path] = module
        scope.loaded = lib_scope.loaded | {path}
        scope.visible = scope.visible | lib_scope.visible | {path}
        scope.plugins = scope.plugins + lib_scope.plugins + (plugin,)
        return module

    def _compile_unit(self, source: str, folder: Path, module: str, opens: Sequence[str]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        raw, ml = folder / f"{module.lower()}.src.ml", folder / f"{module.lower()}.ml"
        # HOL Light's lexer (all-caps identifiers are values), as system.ml
        # leaves it for everything loaded after it.
        raw.write_text("set_jrh_lexer;;\n" + source, encoding="utf-8")
        quot = self.build.dir / "hol_native_quot.cmo"
        try:
            subproc.run(camlp5_argv(self.install, quot) + [str(raw), "-o", str(ml)],
                        timeout=COMPILE_TIMEOUT_S)
        except CommandError as exc:
            raise NotNative(f"does not parse: {_first_error(exc.stderr)}") from None
        try:
            _ocamlopt_shared(self.build, ml, opens, self.includes, folder / f"{module.lower()}.cmxs")
        except CommandError as exc:
            raise NotNative(f"does not compile natively: {_first_error(exc.stderr)}") from None
