"""Compiling checks for the native HOL Light server: answer batches, contexts
and libraries, each into a plugin (.cmxs) that the server Dynlink-loads.

- **Answers** go through ``hol-native-front`` in batches: it applies the
  bytecode driver's rules to each answer on its own (no ";;", exactly one
  expression, the forbidden identifiers) and types it on its own, so a bad
  answer gets ERROR and the rest compile in one ``ocamlopt -shared``. If
  that compile still fails, the batch is bisected.
- **Contexts** (setup.ml segments) become modules ``Pb_ctx_<image key>``
  that later segments and answers open, so problems sharing a prefix share
  its compiled and loaded modules. A literal ``needs "F";;`` compiles F as
  the toplevel would load it there: each unit is cut into chunks at its
  loads and opens, each chunk a module compiled with -open of everything
  visible before it (so F sees what was loaded before it), and the plugins
  load in the toplevel's order (so side effects do too). A library chunk
  that opens only the core and other cached libraries is compiled once into
  the build's cache; one that opens a session's own context goes into the
  session's workdir.
- A value the toplevel leaves weakly typed (``ref []``, a partial
  application with optional arguments) until a later phrase fixes it cannot
  be exported by a unit as it is: its unit is settled and the next unit, in
  toplevel order, re-weakens it first thing (native_weak.py), so the first
  use fixes its type as in the toplevel, across loaded files and images.
- What cannot be compiled (a toplevel directive, a computed load path, a
  compile error) raises NotNative with the reason, which ends with the
  compiler's own words; the full output is kept in the sweep's logs
  (``<log_dir>/native-compile/<module>.log``). The session then runs that
  context in bytecode.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from .native_cache import mark_compiled
from .... import subproc
from ....checks.context_proofs import ContextProofs
from ....errors import CommandError
from ..load_graph import DROPPED_LOADS, resolve
from .native_build import UNLIMITED_STACK, NativeBuild, inline_core
from ..ocaml_lexer import classify, code_only, split_phrases, strip_phrase
from ..install import HolLightInstall
from .native_units import COMPILE_TIMEOUT_S, Escapes, NotNative, UnitCompiler, phrase_at
from .native_weak import WeakValue, compiler_words, reweaken

# Under --context-proofs trust every context segment and library is compiled
# with this opened after the core, so its phrases and functions name the
# switchable prove (hol_trust.ml) rather than the core's.
TRUST_OPEN = "Hol_trust.Switch"

# Code that loads files at run time has no native equivalent: compiled
# code has no toplevel to load into.
_RUNTIME_LOAD = re.compile(r"\b(needs|loadt|loads|load_on_path|use_file|Toploop|Topdirs)\b")
# A top-level `open M;;`, after any `#N "file"` line directives (HOL Light's
# inline_load.ml starts every inlined file with `open Hol_lib;; open Hol_loader;;`).
# It adds M to what every later chunk and answer opens.
_OPEN = re.compile(r"^(?:#\s*\d+\s*\"[^\"\n]*\"\s*)*open!?\s+([A-Z][A-Za-z0-9_'.]*)\s*(;;)?\s*$")


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
    added: tuple[str, ...] = ()                 # opens added on top of the first ones, in order
    weak: tuple[WeakValue, ...] = ()            # values left weakly typed (native_weak.py)

    def open(self, *modules: str) -> None:
        """Open ``modules`` after all others. An earlier open of the same
        module goes: the later one shadows it wholly, so names resolve alike."""
        for m in modules:
            self.opens = tuple(o for o in self.opens if o != m) + (m,)
        self.added += modules


# Names a chunk of code compiled from a unit, and where it goes, given its
# source and the modules it opens: (module, folder).
Placer = Callable[[str, tuple[str, ...]], tuple[str, Path]]


@dataclass
class _Carry:
    """What flows from one unit to the next in toplevel order, across the
    files a segment loads: the values left weakly typed."""

    weak: tuple[WeakValue, ...] = ()


def _ocamlopt_shared(build: NativeBuild, source: Path, opens: Sequence[str], includes: Sequence[Path],
                     out: Path) -> None:
    argv = build.ocamlopt()
    for d in includes:
        argv += ["-I", str(d)]
    for m in opens:
        argv += ["-open", m]
    subproc.run(UNLIMITED_STACK + argv + ["-shared", "-o", str(out), str(source)],
                cwd=source.parent, timeout=COMPILE_TIMEOUT_S)


class NativeCompiler(UnitCompiler):
    """Compiles plugins for one session: answers and contexts into
    ``workdir``, libraries into the build's cache (shared across sessions)."""

    def __init__(self, build: NativeBuild, install: HolLightInstall, context_root: Path,
                 workdir: Path, context_proofs: ContextProofs = ContextProofs.REPLAY,
                 log_dir: Path | None = None):
        """``log_dir``: where a failed compile keeps its log and source
        (``native-compile/<module>.log`` and ``.src.ml``; OUT/logs in a sweep)."""
        self.build, self.install = build, install
        self.log_dir = Path(log_dir) if log_dir is not None else None
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
        # Units compiled here that left values weak (module, their names), and
        # units cut before a phrase that fixed one at a later type: figures.
        self.settled: list[tuple[str, tuple[str, ...]]] = []
        self.cuts = 0
        # Library file -> (what it opened, the files it loaded, the values it
        # left weak), for a `needs` of a file the server preloaded: it only
        # becomes visible.
        self._libraries: dict[Path, tuple[tuple[str, ...], frozenset[Path], tuple[WeakValue, ...]]] = {}
        # Modules that a chunk in the shared cache may open.
        self._shareable: set[str] = set(build.core_opens) | {TRUST_OPEN}

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
        # Its thunks go into one table per image (hol_native_slot.ml), which
        # holds every batch loaded into it: an entry named within the batch
        # alone (a0, a1, ...) was replaced by the next batch's a0, and a check
        # ran another answer (a false verdict, seen on Dask, where a worker
        # compiles the answers of one image in several batches as they come).
        entries = {f"{name}_a{i}": k for i, k in enumerate(keys)}
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
                out[entries[accepted[0]]] = Compiled(None, None, "compile: " + compiler_words(exc.stderr), 0, 0.0)
                return
            half = len(accepted) // 2
            for part in (accepted[:half], accepted[half:]):
                self._batch([entries[e] for e in part], answers, opens, out)
            return
        for entry in accepted:
            out[entries[entry]] = Compiled(plugin, entry, None, 0, 0.0)

    # -- contexts and libraries ----------------------------------------------

    def compile_context(self, text: str, module: str, parent: Scope) -> Scope:
        """Compile one image's segment of setup.ml: its code between loads
        and opens into modules ``module``, ``module_1``, ... (straight into
        workdir, where later units find their interfaces with -I)."""
        scope = Scope(parent.opens, parent.loaded, parent.visible)
        names = (module if i == 0 else f"{module}_{i}" for i in itertools.count())

        def place(source: str, opens: tuple[str, ...]) -> tuple[str, Path]:
            return next(names), self.workdir

        # What the parent left weak, its first unit binds again (native_weak.py).
        carry = _Carry(parent.weak)
        self._translate(text, scope, "setup.ml", place, carry)
        scope.weak = carry.weak
        return scope

    def _translate(self, text: str, scope: Scope, where: str, place: Placer, carry: _Carry) -> None:
        """Compile ``text`` (a segment or a library file) on top of ``scope``,
        as the toplevel runs it: the code between two loads (or opens) is
        one chunk, its own module compiled with -open of everything visible
        before it; each load compiles the loaded file the same way in turn.
        ``scope`` gets the modules to open and the plugins in load order."""
        chunk: list[str] = []
        for kind, arg in self._steps(text, where):
            if kind == "code":
                chunk.append(arg)
                continue
            self._flush(chunk, scope, place, carry)
            chunk = []
            if kind == "open":
                self._open(arg, scope)
            else:
                self._load(kind, arg, scope, where, carry)
        self._flush(chunk, scope, place, carry)

    def _steps(self, text: str, where: str) -> list[tuple[str, object]]:
        """The phrases of ``text`` as ("code", phrase), ("open", module) and
        (load kind, path) steps; raises NotNative before anything compiles."""
        steps: list[tuple[str, object]] = []
        for phrase in split_phrases(text):
            kind, arg = classify(phrase)
            if kind == "blank" or (kind == "loads" and arg in DROPPED_LOADS):
                continue
            if kind == "directive":
                raise NotNative(f"{where} uses the toplevel directive #{arg}")
            if kind in ("needs", "loads", "loadt"):
                path = self._resolve(kind, arg, where)
                if path is not None:
                    steps.append((kind, path))
            elif m := _OPEN.match(strip_phrase(phrase)):
                steps.append(("open", m.group(1)))
            elif _RUNTIME_LOAD.search(code_only(phrase)):
                raise NotNative(f"{where} loads files at run time (needs/loadt with a computed "
                                "path, use_file or Toploop)")
            else:
                steps.append(("code", phrase))
        return steps

    def _resolve(self, kind: str, arg: str, where: str) -> Path | None:
        """The file a literal load names; None for a `needs` of the core,
        which the core has loaded already."""
        search = [self.install.hol_dir] if kind == "loads" else [self.context_root, self.install.hol_dir]
        path = resolve(arg, search)
        if path is None:
            raise NotNative(f"{where}: {kind} \"{arg}\" finds no file")
        if path in self.core_files:
            if kind == "needs":
                return None
            raise NotNative(f"{where}: {kind} \"{arg}\" reloads part of the core")
        return path

    def _flush(self, chunk: list[str], scope: Scope, place: Placer, carry: _Carry) -> None:
        """Compile a chunk as its own module, opened by what follows it. It
        first binds again what earlier units left weak, and leaves ``carry``
        what it leaves weak itself."""
        if not chunk:
            return
        prefix = reweaken(carry.weak)
        source = prefix + "".join(chunk)
        # The modules it names as well as those it opens: a library chunk
        # that binds a session's weak value again is the session's own.
        module, folder = place(source, scope.opens + tuple(dict.fromkeys(v.module for v in carry.weak)))
        try:
            carry.weak = tuple(self._compile_unit(source, folder, module, scope.opens))
        except Escapes as escaped:
            # Cut before the phrase that fixes it: the first part leaves the
            # value weak, the second binds it weak again after the type.
            cut = phrase_at(chunk, escaped.line - 1 - prefix.count("\n"))
            if cut <= 0:
                raise escaped.failed from None
            self.cuts += 1
            self._flush(chunk[:cut], scope, place, carry)
            self._flush(chunk[cut:], scope, place, carry)
            return
        scope.open(module)
        scope.plugins = scope.plugins + (folder / f"{module.lower()}.cmxs",)

    def _open(self, module: str, scope: Scope) -> None:
        """A top-level `open M;;` reaches every later phrase in the toplevel:
        here, every later chunk, file and answer opens M. The core's modules
        bind the core's own prove: under trust the switchable one is opened
        again after them, so a trusted context never runs a tactic."""
        scope.open(module)
        if module in self.build.core_opens and TRUST_OPEN in self.base_opens:
            scope.open(TRUST_OPEN)

    def _load(self, kind: str, path: Path, scope: Scope, where: str, carry: _Carry) -> None:
        if path in scope.visible and kind == "needs":
            return
        if path in scope.loaded and kind != "needs":
            raise NotNative(f"{where}: {kind} \"{path}\" loads a file a second time")
        if path in scope.loaded:        # preloaded by the server: only make it visible
            if path not in self._libraries:
                raise NotNative(f"{where}: {kind} \"{path}\" was loaded by another compiler")
            opens, files, weak = self._libraries[path]
            scope.open(*opens)
            scope.visible = scope.visible | files
            carry.weak = tuple(v for v in carry.weak if v.name not in {w.name for w in weak}) + weak
            return
        self._library(path, scope, carry)

    def _library(self, path: Path, scope: Scope, carry: _Carry) -> None:
        """Compile a library file on top of ``scope``, as the toplevel would
        load it there, and add its modules and plugins to ``scope``."""
        text = path.read_text(encoding="utf-8", errors="replace")
        lib = Scope(scope.opens, scope.loaded | {path}, scope.visible | {path})
        entered = bool(carry.weak)
        self._translate(text, lib, str(path), self._library_place(path), carry)
        if not entered and all(p.parent == self.libdir for p in lib.plugins):
            # Every later session of this build finds it compiled: plans price it so.
            mark_compiled(self.libdir, path)
        self._libraries[path] = (lib.added, lib.loaded - scope.loaded, carry.weak)
        scope.open(*lib.added)
        scope.loaded, scope.visible = lib.loaded, scope.visible | lib.visible
        scope.plugins = scope.plugins + lib.plugins

    def _library_place(self, path: Path) -> Placer:
        """Names a library chunk by what it is compiled from: the file, its
        text and the modules it opens (so a library loaded after other code
        is another module than the same file loaded first). A chunk that
        opens only the core and shared library chunks goes into the build's
        cache, shared by sessions; one that opens a session's own module
        (a context chunk) goes into the session's workdir."""
        def place(source: str, opens: tuple[str, ...]) -> tuple[str, Path]:
            digest = hashlib.sha256("\0".join((str(path), source, *opens)).encode()).hexdigest()[:16]
            module = f"Pb_lib_{digest}"
            if all(m in self._shareable for m in opens):
                self._shareable.add(module)
                return module, self.libdir
            return module, self.workdir
        return place
