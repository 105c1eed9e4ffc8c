"""proofbatch timeout-map compare A.json B.json: two timeout maps compared
problem by problem (runner.maps.compare), on screen and as CSV or JSON.

Not a command of its own: ``timeout-map`` takes a profile as its first
word, so ``compare`` is that word, and the two maps follow it
(runner.commands.timeout_map calls ``add_arguments`` and ``chosen``).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import errno
import json
import os
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..errors import InputError
from ..maps import compare as mc
from ..maps.timeout_map import sidecar_path

WORD = "compare"
USAGE = ("%(prog)s PROFILE [--out MAP] [--validate] [--map MAP] [policy options]\n"
         "       %(prog)s compare A.json B.json [--csv PATH] [--json PATH] [--factor-min-s S] "
         "[--heavy-s S] [--top N]")
# Options of deriving or validating a map, which compare does not read
# (--heavy-s it does: the class line of a map without a sidecar).
_NOT_FOR_COMPARE = ("out", "validate", "map")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Compare's arguments, on the parser of ``timeout-map``, after its profile."""
    p.usage = USAGE
    p.add_argument("maps", nargs="*", type=Path, metavar="A.json B.json",
                   help="after `compare`: the two maps to compare, each the bench's "
                   "timeout-map.json or one `proofbatch timeout-map` wrote")
    g = p.add_argument_group(
        "compare", "`timeout-map compare A.json B.json`: problems in both and in one only, the "
        "factor between the hosts, each problem's ratio after it, classes, and limits below the "
        "other map's time; exit 0 whatever it finds")
    g.add_argument("--csv", type=Path, metavar="PATH", help="write one row per problem here")
    g.add_argument("--json", type=Path, metavar="PATH",
                   help="write the summary and one record per problem here")
    g.add_argument("--factor-min-s", type=float, default=mc.FACTOR_MIN_S, metavar="S",
                   help="the host factor (median of B/A prove_secs) reads only problems of this "
                   "many seconds or more in both maps: shorter times are the clock's and the "
                   f"start-up's noise, not the proof's (default {mc.FACTOR_MIN_S:g})")
    g.add_argument("--top", type=int, default=20, metavar="N",
                   help="rows per table on screen (default 20; the files hold every problem)")


def chosen(args) -> bool:
    """Whether the command line is ``timeout-map compare A B``; maps given
    without ``compare`` are refused. ``compare`` alone is the command too
    (then refused for want of maps), unless a profile of that name is here."""
    if str(args.profile) == WORD and (args.maps or not Path(WORD).is_dir()):
        return True
    if args.maps:
        raise InputError("timeout-map", f"unexpected arguments after the profile: "
                         f"{' '.join(map(str, args.maps))}",
                         "give one profile, or compare two maps with `timeout-map compare A.json B.json`")
    return False


def run(args) -> int:
    _refuse_derive_options(args)
    if len(args.maps) != 2:
        raise InputError("timeout-map compare", f"needs two maps, got {len(args.maps)}",
                         "pass `timeout-map compare A.json B.json`")
    if args.top < 0:
        raise InputError("--top", f"{args.top} is negative", "pass 0 or more rows")
    heavy_s = args.policy_heavy_s if args.policy_heavy_s is not None else mc.HEAVY_S
    _refuse_outputs_over_inputs(args)
    a, b = (mc.read_side(p) for p in args.maps)
    result = mc.compare(a, b, min_s=args.factor_min_s, heavy_s=heavy_s)
    if args.csv:
        write_csv(args.csv, result)
    if args.json:
        write_json(args.json, result)
    show(result, Console(), args.top)
    for path in filter(None, (args.csv, args.json)):
        print(f"wrote {path}")
    return 0


def _refuse_derive_options(args) -> None:
    given = [name for name in _NOT_FOR_COMPARE if getattr(args, name, None)]
    given += [k for k, v in vars(args).items()
              if k.startswith("policy_") and k != "policy_heavy_s" and v is not None]
    if given:
        flag = "--" + given[0].removeprefix("policy_").replace("_", "-")
        raise InputError(flag, "is an option of deriving or validating a map, not of compare",
                         "drop it (compare reads --csv, --json, --factor-min-s, --heavy-s, --top)")


def _refuse_outputs_over_inputs(args) -> None:
    """--csv or --json naming a file compare reads (either map, by any name:
    a symlink or a hard link is the same file; or its sidecar's path, there
    or not yet) would write over it, and the map would hold CSV; two outputs
    naming one file would keep only the last."""
    outputs = [(flag, Path(path)) for flag, path in (("--csv", args.csv), ("--json", args.json))
               if path]
    for flag, out in outputs:
        for m in map(Path, args.maps):
            if same_file(out, m):
                what = f"the map {m}"
            elif same_file(out, sidecar_path(m)):
                what = f"the sidecar of the map {m}"
            else:
                continue
            raise InputError(flag, f"{out} is {what}, which compare reads (writing there would "
                             "replace it)", f"pass a new path for {flag}, e.g. compare.{flag[2:]}")
    if len(outputs) == 2 and same_file(outputs[0][1], outputs[1][1]):
        raise InputError("--json", f"{args.json} is the file --csv names too, and the last "
                         "written would replace the other", "pass two paths, e.g. compare.csv "
                         "and compare.json")


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same inode (a symlink or
    a hard link too), or the same resolved path when either is not there yet."""
    try:
        if os.path.realpath(a) == os.path.realpath(b):
            return True
        return os.path.samefile(a, b)
    except (OSError, ValueError):   # either is not there (yet), or a symlink loop
        return False


def write_csv(path: Path, result: mc.Comparison) -> None:
    with _written(path, "--csv", newline="") as f:
        w = csv.DictWriter(f, fieldnames=mc.COLUMNS)
        w.writeheader()
        w.writerows(mc.record(r) for r in result.rows)


def write_json(path: Path, result: mc.Comparison) -> None:
    # One problem a line: json's indent= runs its pure-Python encoder, which
    # took 0.23 s of a 2,622-problem comparison's 0.75.
    head = json.dumps(mc.summary(result), indent=1)[:-2]
    problems = ",\n".join("  " + json.dumps(mc.record(r)) for r in result.rows)
    with _written(path, "--json") as f:
        f.write(f'{head},\n "problems": [\n{problems}\n ]\n}}\n')


@contextlib.contextmanager
def _written(path: Path, flag: str, **kwargs):
    """``path`` opened for writing. An OSError while opening, writing or
    closing it (a full disk, /dev/full, no permission) is one InputError
    naming the flag, the file and the system's reason: compare writes
    nothing else, so there is nothing to resume, only a path to change."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", **kwargs) as f:
            yield f
    except OSError as exc:
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
        raise InputError(flag, f"writing {path} failed ({exc.strerror or exc})",
                         f"free space there, or pass another {flag} path" if full else
                         f"pass a {flag} path you may create and write") from None


# -- on screen -------------------------------------------------------------------

def show(c: mc.Comparison, out: Console, top: int) -> None:
    for name, side in (("A", c.a), ("B", c.b)):
        classes = (f"classes from its sidecar {side.sidecar.name}" if side.sidecar else
                   f"no sidecar: heavy when prove_secs >= {c.heavy_s:g} s (the bench's rule)")
        mode = f", measured {side.mode}" if side.mode else ""
        out.print(f"{name}: {side.path} ({len(side.entries)} problems{mode}, {side.clock} seconds; "
                  f"{classes})")
    for what, x, y in (("measured", c.a.mode, c.b.mode), ("timed in", c.a.clock, c.b.clock)):
        if x and y and x != y:
            out.print(f"[yellow]A was {what} {x} and B {y}: the factor holds that difference as "
                      "well as the hosts'")
    both, only_a, only_b = (c.where(w) for w in ("both", "A", "B"))
    out.print(f"in both: {len(both)}; in A only: {len(only_a)}{_examples(only_a)}; "
              f"in B only: {len(only_b)}{_examples(only_b)}")
    _show_factor(c.factor, out)
    _deviations(c, out, top)
    _class_changes(c, out, top)
    _too_tight(c, out, top, "A", c.a_too_tight)
    _too_tight(c, out, top, "B", c.b_too_tight)


def _show_factor(f: mc.Factor, out: Console) -> None:
    if f.median is None:
        out.print(f"[yellow]host factor: none (no problem has prove_secs >= {f.min_s:g} s in both "
                  "maps); ratios and limits are compared unscaled")
        return
    out.print(f"host factor B/A: [bold]{f.median:.3f}[/] (median of {f.used} problems of "
              f">= {f.min_s:g} s in both; interquartile {f.p25:.3f}-{f.p75:.3f}, "
              f"p75/p25 {f.spread:.2f})")


def _deviations(c: mc.Comparison, out: Console, top: int) -> None:
    rows = c.deviations
    if not rows:
        out.print("furthest from the factor: none (no problem is in the factor)")
        return
    t = _table(f"furthest from the factor: B/A over {c.factor.scale:.3f}", len(rows), top,
               "problem", "A s", "B s", "B/A", "after factor", "A class", "B class")
    for r in rows[:top]:
        t.add_row(r.problem_id, _s(r.a.prove_secs), _s(r.b.prove_secs), f"{r.ratio:.3f}",
                  f"{r.adjusted:.3f}", r.a_class or "?", r.b_class or "?")
    out.print(t)


def _class_changes(c: mc.Comparison, out: Console, top: int) -> None:
    rows = c.class_changes
    if not rows:
        out.print("class changes: none")
        return
    t = _table("class changes", len(rows), top, "problem", "A s", "A class", "B s", "B class")
    for r in rows[:top]:
        t.add_row(r.problem_id, _s(r.a.prove_secs), f"{r.a_class} ({r.a_class_from})",
                  _s(r.b.prove_secs), f"{r.b_class} ({r.b_class_from})")
    out.print(t)
    if any("rule" in (r.a_class_from, r.b_class_from) for r in rows):
        out.print(f"(rule: prove_secs >= {c.heavy_s:g} s in that map's own times, so the host "
                  "factor alone moves problems across it)")


def _too_tight(c: mc.Comparison, out: Console, top: int, which: str, rows: list[mc.Row]) -> None:
    other = "B" if which == "A" else "A"
    what = f"{which}'s limit below {other}'s time on {which}'s host"
    if not rows:
        out.print(f"[green]{what}: none")
        return
    moved = "/" if which == "A" else "x"
    t = _table(f"[red]{what}: a correct proof would time out under {which}", len(rows), top,
               "problem", f"{which} limit s", f"{other} s", f"{other} s {moved} factor", "headroom")
    for r in rows[:top]:
        mine, theirs = (r.a, r.b) if which == "A" else (r.b, r.a)
        scaled = theirs.prove_secs / c.factor.scale if which == "A" else theirs.prove_secs * c.factor.scale
        headroom = r.a_headroom if which == "A" else r.b_headroom
        t.add_row(r.problem_id, f"{mine.timeout_sec:g}", _s(theirs.prove_secs), _s(scaled),
                  f"{headroom:.2f}")
    out.print(t)


def _table(title: str, total: int, top: int, *columns: str) -> Table:
    shown = f" ({min(top, total)} of {total}; --csv or --json for all)" if total > top else ""
    t = Table(title=title + shown)
    for name in columns:
        # A problem id cut short names no problem: it folds instead.
        t.add_column(name, justify="left" if name in ("problem", "A class", "B class") else "right",
                     overflow="fold" if name == "problem" else "ellipsis")
    return t


def _examples(rows: list[mc.Row]) -> str:
    return f" (e.g. {rows[0].problem_id})" if rows else ""


def _s(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds:.3f}" if seconds < 10 else f"{seconds:.1f}"
