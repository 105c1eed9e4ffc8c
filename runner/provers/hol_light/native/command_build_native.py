"""proofbatch build-native: compile the installed HOL Light into native code, once per machine."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Iterable

from ....errors import InputError
from ..install import HolLightInstall, find_hol_light
from ..load_graph import resolve
from .native_build import NativeBuild, build_native
from .native_compile import NativeCompiler, NotNative, Scope

NAME = "build-native"
HELP = "compile HOL Light natively (core, server, answer front end) into the cache"


def add_arguments(p) -> None:
    p.add_argument("--hol-light", type=Path, help="HOL Light checkout (has hol.sh; used as is when it "
                   "has hol_lib.cmxa from HOLLIGHT_USE_MODULE=1); default: Debian's package")
    p.add_argument("--cache", type=Path, help="cache directory (default: $PROOFBATCH_CACHE/native or "
                   "~/.cache/proofbatch/native)")
    p.add_argument("--preload", type=Path, action="append", default=[], metavar="FILE",
                   help="also precompile this library (e.g. Library/words.ml), as a context's "
                   "needs would; repeatable")
    p.add_argument("--context-root", type=Path, help="where --preload paths resolve besides the "
                   "HOL Light directory (default: cwd)")
    p.add_argument("--force", action="store_true", help="rebuild even when the cache is intact")


def run(args) -> int:
    install = find_hol_light(args.hol_light)
    build = build_native(install, args.cache, force=args.force, log=lambda line: say(f"  {line}"))
    if args.preload:
        for name, plugin in precompile_libraries(build, install, args.preload,
                                                 args.context_root or Path.cwd()):
            say(f"  library {name}: {plugin}")
    state = "cached" if build.cached else f"built in {build.build_secs:.0f} s"
    say(f"native HOL Light ({install.build}, OCaml {build.ocaml}) {state}: {build.dir}")
    return 0


def say(line: str) -> None:
    # As written: a compiler's output has [brackets] that markup would eat.
    print(line, file=sys.stderr, flush=True)


def precompile_libraries(build: NativeBuild, install: HolLightInstall, names: Iterable[Path],
                         context_root: Path) -> list[tuple[str, Path]]:
    """Compile library files into the build's cache, as a context's
    ``needs`` would; returns (name, plugin) pairs."""
    out = []
    with tempfile.TemporaryDirectory(prefix="proofbatch-libs-") as tmp:
        compiler = NativeCompiler(build, install, Path(context_root).resolve(), Path(tmp))
        for name in names:
            if resolve(str(name), [Path(context_root), install.hol_dir]) is None:
                raise InputError(name, "no such library file here or under "
                                 f"{install.hol_dir}", "give a path such as Library/words.ml")
            try:
                scope = compiler.compile_context(f'needs "{name}";;\n', f"Pb_pre_{len(out)}",
                                                 Scope(build.core_opens))
            except NotNative as exc:
                raise InputError(name, f"cannot be compiled natively: {exc}",
                                 "load it in bytecode mode instead (--mode bytecode)") from None
            out += [(str(name), plugin) for plugin in scope.plugins if plugin.parent == build.dir / "libs"]
    return out
