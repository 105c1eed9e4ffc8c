"""proofbatch extract: cut HOL Light proof files into a corpus, one problem per theorem."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

from rich.console import Console

from ....settings import help_of, option
from .extract import extract
from .extract_model import MANIFEST, ExtractConfig
from .extract_objects import summary as reads_summary
from ..install import DEBIAN_DIR, find_hol_light
from ..load_graph import DROPPED_NOTE

NAME = "extract"
HELP = "cut HOL Light proof files into a corpus: one problem per top-level theorem"
# Where this command speaks: stderr, as `run` does. Its own console: the
# sweep's screen (runner/reporting/progress.py) sits above the stages a
# prover may import, and extract() reports through the ``tell`` it is given.
console = Console(stderr=True)


def add_arguments(p) -> None:
    # Help and defaults are ExtractConfig's (runner/settings.py).
    p.add_argument("files", type=Path, nargs="+", metavar="FILE", help=help_of(ExtractConfig, "files"))
    p.add_argument("--out", type=Path, required=True, help=help_of(ExtractConfig, "out"))
    p.add_argument("--prefix", **option(ExtractConfig, "prefix"))
    p.add_argument("--category", **option(ExtractConfig, "category"))
    p.add_argument("--hol-light", type=Path, help="HOL Light checkout that the corpus will be run "
                   "with, to resolve needs/loadt/loads (default: Debian's package)")
    p.add_argument("--context-root", type=Path, **option(ExtractConfig, "context_root"))
    p.add_argument("--ids-from", type=Path, metavar="MAP", **option(ExtractConfig, "ids_from"))
    p.add_argument("--strict", action="store_true", help=help_of(ExtractConfig, "strict"))


def run(args) -> int:
    if args.hol_light is not None:
        hol_dir = find_hol_light(args.hol_light).hol_dir
    else:
        hol_dir = DEBIAN_DIR if DEBIAN_DIR.is_dir() else None
    cfg = ExtractConfig(files=tuple(args.files), out=args.out, prefix=args.prefix,
                        category=args.category, hol_dir=hol_dir, context_root=args.context_root,
                        ids_from=args.ids_from, strict=args.strict)
    with ExtractProgress() as tell:
        result = extract(cfg, tell)

    def say(text: str) -> None:
        console.print(text, highlight=False, markup=False, soft_wrap=True)

    for s in result.sources:
        if not s.refused:
            say(f"{s.path}: {s.theorems} theorems, {s.problems} problems, {s.skipped} skipped "
                f"(sha256 {s.sha256[:12]})")
            if reads := reads_summary(s.path, s.object_files):
                say(reads)
    mapped = [s for s in result.skipped if "the id the bench's map keeps it under" in s.reason]
    others = [s for s in result.skipped if s not in mapped]
    if others:
        say(f"skipped {len(others)}:")
        for s in others:
            say(f"  {s.source}:{s.line} {s.theorem or '-'}: {s.reason}")
    if mapped:
        say(f"skipped {len(mapped)} duplicate statements the bench's map keeps under another id "
            f"(each listed in {MANIFEST})")
    if result.refused:
        say(f"refused {len(result.refused)} of {len(result.sources)} files (they give no problem):")
        for r in result.refused:
            say(f"  {r.source}: {r.reason}")
    for path, why in result.library_files:
        say(f"library file: {path}: {why}")
    if result.skipped_links:
        say(f"skipped {len(result.skipped_links)} symlinks that lead to no file (listed in "
            f"{MANIFEST} as skipped_links):")
        for r in result.skipped_links:
            say(f"  {r.source}: {r.reason}")
    # Without --hol-light, loads are looked for in Debian's HOL Light, which
    # lacks files of newer checkouts (Library/records.ml, which s2n-bignum's
    # base.ml loads): found nowhere here may well be found where the corpus runs.
    unchecked = (f"; looked for in Debian's HOL Light, not the checkout you will sweep with: "
                 f"harmless if that checkout has it (pass --hol-light CHECKOUT to check)"
                 if args.hol_light is None else "")
    for m, text in zip(result.missing_loads, result.unresolved):
        say(f"missing load: {m['kind']} \"{m['name']}\" found nowhere (searched "
            f"{', '.join(m['searched']) or 'nothing'}), loaded by {m['loaded_by']}, which "
            f"{m['given_files_reaching_it']} of the given files load: {' -> '.join(m['chain'])}"
            f"{unchecked}")
    if result.dropped_loads:
        say(f"dropped loads (not followed): {', '.join(result.dropped_loads)}: {DROPPED_NOTE}")
    if result.ids is not None:
        _say_ids(say, result.ids)
    say(f"context root: {result.context_note}")
    if not result.published:
        say(f"--strict: {len(result.refused)} refused files, {len(result.unresolved)} loads found "
            f"nowhere; nothing written to {result.out}")
        return 2
    say(f"wrote {len(result.problems)} problems from {len(result.sources) - len(result.refused)} "
        f"files to {result.out} (list and provenance in {result.out / MANIFEST})")
    return 0


# 2,000 files once took 300 s without a word: a terminal gets a bar at once;
# a log gets a line once extract has run this long, and again as often.
SAY_AFTER_S = 5.0
SAY_EVERY_S = 15.0


class ExtractProgress:
    """How far extract is, as `run` shows a sweep:
    a bar per stage on a terminal, gone when extract ends; without one,
    ``extract: STAGE: K of N files (T s so far)`` lines, a quick extract
    saying nothing but its result."""

    def __init__(self):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = (Progress(TextColumn("[bold]extract"), TextColumn("{task.description}"),
                              BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                              console=console, transient=True)
                     if console.is_terminal else None)
        self._task = None
        self._now: tuple[str, int, int | None] | None = None
        self._done = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._log, daemon=True, name="extract-progress")

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        if self._bar is not None:
            if self._now is None or self._now[0] != stage:
                # A task per stage: rich's update cannot set a total back to None (not counted).
                if self._task is not None:
                    self._bar.remove_task(self._task)
                self._task = self._bar.add_task(stage, total=total)
            self._bar.update(self._task, completed=done)
        self._now = (stage, done, total)

    def _log(self) -> None:
        wait = SAY_AFTER_S
        while not self._done.wait(wait):
            wait = SAY_EVERY_S
            if self._now is not None:
                stage, done, total = self._now
                count = f": {done} of {total}" if total is not None else ""
                console.print(f"extract: {stage}{count} ({time.monotonic() - self._started:.0f} "
                              "s so far)", markup=False, highlight=False, soft_wrap=True)

    def __enter__(self) -> "ExtractProgress":
        if self._bar is not None:
            self._bar.start()
        else:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        if self._bar is not None:
            self._bar.stop()
        elif self._thread.is_alive():
            self._thread.join()


def _say_ids(say, ids) -> None:
    pre = "/".join(ids.prefixes)
    renamed = (f" ({len(ids.renamed)} under a folder-safe name: "
               + ", ".join(f"{a} for {b}" for a, b in sorted(ids.renamed.items())) + ")"
               if ids.renamed else "")
    say(f"ids: {ids.matched} of the map's {ids.wanted} {pre} ids matched{renamed}; "
        f"{ids.dropped_duplicates} duplicates skipped for the map's id")
    for m, why in sorted(ids.misses.items()):
        say(f"  not extracted: {m}: {why}")
    for folder, files in sorted(ids.missed_folders.items()):
        say(f"the map's ids need {len(files)} files of {folder}/ that were not given "
            f"(e.g. {Path(files[0]).name}): pass {folder}/*.ml too")
    if ids.not_in_map:
        counts = Counter(ids.not_in_map.values())
        say(f"{len(ids.not_in_map)} problems have no id in the map: "
            + "; ".join(f"{n}: {why}" for why, n in counts.most_common()))
