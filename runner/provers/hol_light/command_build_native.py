"""proofbatch build-native: compile the installed HOL Light into native code, once per machine."""

from __future__ import annotations

import sys
from pathlib import Path

from .install import find_hol_light
from .native_auto import precompile_libraries
from .native_build import build_native

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
