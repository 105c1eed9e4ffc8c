"""Compiling one unit of a native context or library: camlp5 with HOL
Light's syntax, then ``ocamlopt -shared``, in a temporary folder renamed
into place. A unit that fails only because it would export weakly typed
values is settled and compiled again (native_weak.py); one whose weak
variable is fixed at a type it defines later raises Escapes, and the
caller (native_compile.py) cuts it before that phrase. A unit that does not
compile raises NotNative, whose reason ends with the compiler's own words;
the compiler's output and the source are kept in the log folder.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Sequence

from .... import subproc
from ....errors import CommandError
from .native_build import UNLIMITED_STACK, camlp5_argv
from .native_weak import WeakValue, compiler_words, error_line, is_weak_error, settle

COMPILE_TIMEOUT_S = 900.0
# OCaml's words for a type fixed after its variable was made (typecore.ml).
_ESCAPE = "would escape its scope"


class NotNative(Exception):
    """This context cannot run natively; the message says why."""


class Escapes(Exception):
    """A weak type variable of a unit would be fixed at a type the unit
    defines after it, at ``line`` of its source: the toplevel accepts that
    (each phrase on its own), a unit does not ("would escape its scope")."""

    def __init__(self, line: int, failed: NotNative):
        super().__init__(str(failed))
        self.line, self.failed = line, failed


class UnitCompiler:
    """Compiles units for NativeCompiler, which gives it ``build``,
    ``install``, ``includes``, ``log_dir``, ``_counter`` and ``settled``."""

    def _compile_unit(self, source: str, folder: Path, module: str,
                      opens: Sequence[str]) -> list[WeakValue]:
        """Compile ``module`` into ``folder`` unless it is there: in a
        temporary folder renamed into place, so that sessions sharing the
        cache never see half of it, and removed whatever happens. Returns
        the values it leaves weak (kept beside it, for a cached module)."""
        plugin = folder / f"{module.lower()}.cmxs"
        weak_file = folder / f"{module.lower()}.weak.json"
        if plugin.exists():
            return _read_weak(weak_file)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{module.lower()}.{os.getpid()}.{next(self._counter)}"
        tmp.mkdir()
        try:
            weak = self._compile_in(source, tmp, module, opens)
            (tmp / weak_file.name).write_text(json.dumps([w.__dict__ for w in weak]))
            # The plugin last: once it is there, so is the rest.
            for built in sorted(tmp.iterdir(), key=lambda p: p.suffix == ".cmxs"):
                os.replace(built, folder / built.name)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return weak

    def _compile_in(self, source: str, folder: Path, module: str, opens: Sequence[str]) -> list[WeakValue]:
        """Compile ``source`` as ``module`` in ``folder``. A unit that fails
        only because it would export weakly typed values is settled
        (native_weak.py) and compiled again; those values are returned."""
        ml = self._preprocess(source, folder, module)
        try:
            self._ocamlopt(ml, opens, folder / f"{module.lower()}.cmxs")
            return []
        except CommandError as exc:
            if _ESCAPE in exc.stderr and (line := error_line(exc.stderr)):
                raise Escapes(line, self._failed("does not compile natively", exc, source, module)) from None
            if not is_weak_error(exc.stderr):
                raise self._failed("does not compile natively", exc, source, module) from None
            first = exc
        try:
            interface = subproc.run(UNLIMITED_STACK + self._argv(opens) + ["-i", str(ml)],
                                    cwd=folder, timeout=COMPILE_TIMEOUT_S)
        except CommandError as exc:
            raise self._failed("does not compile natively", exc, source, module) from None
        settled = settle(source, interface, module)
        if settled is None:             # weak inside a module: nothing to settle at the top
            raise self._failed("does not compile natively", first, source, module)
        source, weak = settled
        ml = self._preprocess(source, folder, module)
        try:
            self._ocamlopt(ml, opens, folder / f"{module.lower()}.cmxs")
        except CommandError as exc:
            raise self._failed("does not compile natively (its weakly typed values settled)", exc,
                               source, module) from None
        self.settled.append((module, tuple(w.name for w in weak)))
        return weak

    def _preprocess(self, source: str, folder: Path, module: str) -> Path:
        raw, ml = folder / f"{module.lower()}.src.ml", folder / f"{module.lower()}.ml"
        # HOL Light's lexer (all-caps identifiers are values), as system.ml
        # leaves it for everything loaded after it.
        raw.write_text("set_jrh_lexer;;\n" + source, encoding="utf-8")
        quot = self.build.dir / "hol_native_quot.cmo"
        try:
            subproc.run(camlp5_argv(self.install, quot) + [str(raw), "-o", str(ml)],
                        timeout=COMPILE_TIMEOUT_S)
        except CommandError as exc:
            raise self._failed("does not parse", exc, source, module) from None
        return ml

    def _argv(self, opens: Sequence[str]) -> list[str]:
        argv = self.build.ocamlopt()
        for d in self.includes:
            argv += ["-I", str(d)]
        for m in opens:
            argv += ["-open", m]
        return argv

    def _ocamlopt(self, ml: Path, opens: Sequence[str], out: Path) -> None:
        subproc.run(UNLIMITED_STACK + self._argv(opens) + ["-shared", "-o", str(out), str(ml)],
                    cwd=ml.parent, timeout=COMPILE_TIMEOUT_S)

    def _failed(self, what: str, exc: CommandError, source: str, module: str) -> NotNative:
        """NotNative saying ``what``, then the compiler's own words (its
        first error, its start and end when long); the whole output and
        the source are kept in ``log_dir`` when there is one, and named."""
        kept = ""
        if self.log_dir is not None:
            logs = self.log_dir / "native-compile"
            logs.mkdir(parents=True, exist_ok=True)
            log = logs / f"{module.lower()}.log"
            log.write_text(f"$ {' '.join(exc.argv)}\nexit {exc.returncode}\n{exc.stderr}", encoding="utf-8")
            (logs / f"{module.lower()}.src.ml").write_text("set_jrh_lexer;;\n" + source, encoding="utf-8")
            kept = f" (log: {log})"
        return NotNative(f"{what}{kept}: {compiler_words(exc.stderr)}")


def phrase_at(chunk: Sequence[str], line: int) -> int:
    """The index of the phrase of ``chunk`` that holds ``line`` (1-based) of
    its text; len(chunk) past its end."""
    start = 1
    for i, phrase in enumerate(chunk):
        end = start + phrase.count("\n")
        if line < end or (line == end and not phrase.endswith("\n")):
            return i
        start = end
    return len(chunk)


def _read_weak(path: Path) -> list[WeakValue]:
    try:
        return [WeakValue(**v) for v in json.loads(path.read_text())]
    except FileNotFoundError:
        return []
