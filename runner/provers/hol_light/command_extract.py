"""proofbatch extract: cut HOL Light proof files into a corpus, one problem per theorem."""

from __future__ import annotations

from pathlib import Path

from ... import progress
from .extract import MANIFEST, extract
from .install import DEBIAN_DIR, find_hol_light
from ...settings import help_of, option
from .extract import ExtractConfig

NAME = "extract"
HELP = "cut HOL Light proof files into a corpus: one problem per top-level theorem"


def add_arguments(p) -> None:
    # Help and defaults are ExtractConfig's (runner/settings.py).
    p.add_argument("files", type=Path, nargs="+", metavar="FILE", help=help_of(ExtractConfig, "files"))
    p.add_argument("--out", type=Path, required=True, help=help_of(ExtractConfig, "out"))
    p.add_argument("--prefix", **option(ExtractConfig, "prefix"))
    p.add_argument("--category", **option(ExtractConfig, "category"))
    p.add_argument("--hol-light", type=Path, help="HOL Light checkout that the corpus will be run "
                   "with, to resolve needs/loadt (default: Debian's package)")


def run(args) -> int:
    if args.hol_light is not None:
        hol_dir = find_hol_light(args.hol_light).hol_dir
    else:
        hol_dir = DEBIAN_DIR if DEBIAN_DIR.is_dir() else None
    cfg = ExtractConfig(files=tuple(args.files), out=args.out, prefix=args.prefix,
                        category=args.category, hol_dir=hol_dir)
    result = extract(cfg)

    def say(text: str) -> None:
        progress.console.print(text, highlight=False, markup=False, soft_wrap=True)

    for s in result.sources:
        say(f"{s.path}: {s.theorems} theorems, {s.problems} problems, {s.skipped} skipped "
            f"(sha256 {s.sha256[:12]})")
    if result.skipped:
        say(f"skipped {len(result.skipped)}:")
        for s in result.skipped:
            say(f"  {s.source}:{s.line} {s.theorem or '-'}: {s.reason}")
    say(f"wrote {len(result.problems)} problems to {result.out} (list and provenance in "
        f"{result.out / MANIFEST})")
    say(f"context root: {result.context_note}")
    for name in result.unresolved:
        say(f"warning: {name} resolves nowhere; contexts after it will not load until it does")
    return 0
