"""The docs' measured tables, written from the records under benchmarks/results/.

A table of figures in README.md or docs/*.md sits right under a marker line
naming it and the scripts whose records it comes from::

    <!-- table: headline (from overhead.py, throughput.py, ...) -->
    | what | figure | page | record |
    |---|---|---|---|

The table is the run of ``|`` lines after the marker (blank lines between
them allowed), so no end marker can be forgotten, and the README, held to
260 lines, pays one line per table. ``table_registry.TABLES`` says, per table, which
script's records give each row and how its cells are formatted; a rendered
row's last cell names its record's commit, the host's load during the run
and its host factor.

A figure in prose sits between ``<!-- figure: NAME -->`` and
``<!-- /figure -->`` (``table_registry.FIGURES`` formats it), and is
rendered and checked as a table's cell is.

``python benchmarks/tables.py`` rewrites every marked table from the newest
record (of a clean tree) of each row's script; ``--check`` changes nothing
and exits 1 naming the file, table, row and column of every figure that
differs from its record, and of every table of figures (a decimal number
in a cell) or README figure outside a marked table. A row or table with no
record yet must be listed in ``benchmarks/unrecorded.txt`` with the reason;
a listed one that has a record now fails the check too, so the list only
shrinks. A table registered with no row formats (``scripts=`` only) is kept
as written until its script has a record; from then the check asks for them.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import record
from table_registry import FIGURES, TABLES, Figure, Row, Table

ROOT = record.ROOT
MARKER = re.compile(r"^<!-- table: (?P<name>[\w-]+)(?: \(from (?P<scripts>[^)]*)\))? -->\s*$")
# A figure: a decimal number, thousands allowed. In a table's cell it marks a
# table of figures; in the README's prose only with a unit after it (4.13's
# is OCaml's version, 1.44x a factor).
DECIMAL = re.compile(r"(?<![\w.])\d[\d,]*\.\d+")
# A figure in prose, its text between the two comments (which pages do not show).
INLINE = re.compile(r"<!-- figure: (?P<name>[\w-]+) -->(?P<text>.*?)<!-- /figure -->")
PROSE_FIGURE = re.compile(r"(?<![\w.`-])\d[\d,]*\.\d+ ?(?:x|×|s|ms|%|core-h)(?![\w])")


class TableError(ValueError):
    """A marker, registry entry or unrecorded.txt line that cannot be read."""


# -- reading the docs ----------------------------------------------------------

@dataclass
class Found:
    """A marked table in a file: ``lines[start:end]`` are its ``|`` lines."""

    file: str
    name: str
    marker_at: int
    start: int
    end: int
    named_scripts: tuple[str, ...]


def tables_in(rel: str, lines: list[str]) -> list[Found]:
    found = []
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m:
            if line.startswith("<!-- table"):
                raise TableError(f"{rel}:{i + 1}: a table marker must read "
                                 "'<!-- table: NAME (from SCRIPT.py, ...) -->', not {line.strip()!r}")
            continue
        start = i + 1
        while start < len(lines) and not lines[start].strip():
            start += 1
        end = start
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        if end - start < 2:
            raise TableError(f"{rel}:{i + 1}: marker of table {m['name']!r} is not followed by a table")
        scripts = tuple(s.strip().removesuffix(".py") for s in (m["scripts"] or "").split(",") if s.strip())
        found.append(Found(rel, m["name"], i, start, end, scripts))
    return found


def cells_of(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def row_line(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def marker_line(table: Table) -> str:
    return f"<!-- table: {table.name} (from {', '.join(s + '.py' for s in table.sources())}) -->"


# -- records ---------------------------------------------------------------------

def holds(command: list, args: tuple[str, ...]) -> bool:
    """Whether ``command``'s words hold ``args`` in a row (``--seed 1`` is
    not held by ``--seed 48 --files 1``)."""
    words, n = [str(w) for w in command], len(args)
    return n == 0 or any(tuple(words[i:i + n]) == tuple(args) for i in range(len(words) - n + 1))


def newest(script: str, args: tuple[str, ...], results: Path, *more: tuple[str, ...]) -> dict | None:
    """The newest record of ``script`` from a clean tree whose command holds
    ``args`` (and each group of ``more``)."""
    for data in reversed(record.records(script, results)):
        command = data.get("command", [])
        if not data.get("dirty") and all(holds(command, a) for a in (args, *more)):
            return data
    return None


def record_cell(data: dict) -> str:
    """The record's commit, the load during its run (before and after included)
    and its host factor: what a reader needs to weigh the figures."""
    parts = [f"`{(data.get('commit') or 'no commit')[:7]}`"]
    load = data.get("load") or {}
    seen = [v for v in (load.get("before"), (load.get("during") or {}).get("min"),
                        (load.get("during") or {}).get("max"), load.get("after")) if v is not None]
    if seen:
        parts.append(f"load {min(seen):.1f}-{max(seen):.1f}")
    if data.get("host_factor") is not None:
        parts.append(f"factor {data['host_factor']:.2f}")
    if not data.get("pass", True):
        parts.append("MISS")
    return ", ".join(parts)


def formatted(cells, data: dict | list[dict], what: str) -> list[str]:
    """``cells`` formatted from a record's figures, or from pooled records'
    (a list, each one's figures in order)."""
    pooled = isinstance(data, list)
    figures = [d.get("figures", {}) for d in data] if pooled else data.get("figures", {})
    out = []
    for cell in cells:
        try:
            out.append(cell(figures) if callable(cell) else cell.format_map(figures))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            where = ", ".join(str(d.get("path")) for d in data) if pooled else data.get("path")
            raise TableError(f"{where}: {what}'s format needs a figure the record "
                             f"lacks or cannot format ({type(e).__name__}: {e})") from e
    return out


def render_cells(row: Row, data: dict | list[dict]) -> list[str]:
    """The row's cells from its record, or from its pooled records (in the
    order of ``row.pool``), then the record cell."""
    cells = formatted(row.cells or (), data, f"row {row.key}")
    return cells + ["; ".join(map(record_cell, data)) if isinstance(data, list) else record_cell(data)]


def records_of(row: Row | Figure, results: Path) -> dict | list[dict] | None:
    """The newest record of the row's settings, or of each run a pooled row
    names (None while one of them has none)."""
    if not row.pool:
        return newest(row.script, row.args, results)
    found = [newest(row.script, row.args, results, args) for args in row.pool]
    return None if any(d is None for d in found) else found


def in_history(sha: str) -> bool:
    return subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{sha}^{{commit}}"],
                          capture_output=True).returncode == 0


# -- checking and writing -------------------------------------------------------

@dataclass
class Outcome:
    """What the docs should hold, and what stands in the way."""

    problems: list[str] = field(default_factory=list)
    unrecorded: dict[str, str] = field(default_factory=dict)   # unit -> where
    rewrites: dict[str, list[str]] = field(default_factory=dict)  # file -> its lines, rendered


def expect(table: Table, found: Found, lines: list[str], results: Path, out: Outcome) -> list[str]:
    """The table's lines as its records give them (a row with no record kept as written)."""
    where = f"{found.file}: table {table.name}"
    if table.history:
        return lines[found.start:found.end]
    if not table.rows:
        hits = [(s, newest(s, table.args, results)) for s in table.scripts]
        hits = [(s, d) for s, d in hits if d is not None]
        if hits:
            out.problems.append(f"{where}: {hits[0][0]}.py has a record ({hits[0][1]['path']}), but "
                                "tables.py formats none of this table's rows: write its rows in TABLES")
        else:
            out.unrecorded[table.name] = where
        return lines[found.start:found.end]
    header = [*table.header, "record"]
    got = lines[found.start:found.end]
    want = [row_line(header), row_line(["---"] * len(header))]
    body = got[2:]
    if len(body) != len(table.rows):
        out.problems.append(f"{where}: {len(body)} rows in the file, {len(table.rows)} in TABLES")
    for i, row in enumerate(table.rows):
        data = records_of(row, results)
        if data is None:
            out.unrecorded[f"{table.name}/{row.key}"] = f"{where}, row {row.key}"
            want.append(body[i] if i < len(body) else row_line([*["—"] * len(table.header), "no record yet"]))
            continue
        each = data if isinstance(data, list) else [data]
        if row.cells is None:
            out.problems.append(f"{where}, row {row.key}: {row.script}.py has a record ({each[0]['path']}), "
                                "but TABLES has no format for the row: write its cells")
            want.append(body[i] if i < len(body) else row_line(["—"] * len(header)))
            continue
        for d in each:
            if not in_history(d.get("commit") or ""):
                out.problems.append(f"{where}, row {row.key}: its record {d['path']} names commit "
                                    f"{d.get('commit')!r}, which is not in this repository's history")
        want.append(row_line(render_cells(row, data)))
    return want


def compare(table: Table, found: Found, got: list[str], want: list[str], out: Outcome) -> None:
    keys = ["header", "separator", *(r.key for r in table.rows)] if table.rows else []
    for i, (g, w) in enumerate(zip(got, want)):
        if g == w:
            continue
        row = keys[i] if i < len(keys) else f"line {i + 1}"
        header = [*table.header, "record"]
        gc, wc = cells_of(g), cells_of(w)
        diffs = [(header[j] if j < len(header) else f"column {j + 1}", a, b)
                 for j, (a, b) in enumerate(zip(gc, wc)) if a != b]
        if len(gc) != len(wc):
            diffs.append(("cells", f"{len(gc)} cells", f"{len(wc)} cells"))
        for column, a, b in diffs:
            out.problems.append(f"{found.file}:{found.start + i + 1}: table {table.name}, row {row}, "
                                f"{column}: the file has {a!r}, its record gives {b!r}")


def inline(rel: str, lines: list[str], figures: dict[str, Figure], results: Path, out: Outcome,
           seen: set[str]) -> list[str]:
    """The file's lines with every figure in prose as its record gives it
    (one with no record kept as written); what differs goes to ``out``."""
    new = list(lines)
    for i, line in enumerate(lines):
        def want(m: re.Match) -> str:
            name, text = m["name"], m["text"]
            fig = figures.get(name)
            if fig is None or fig.file != rel:
                out.problems.append(f"{rel}:{i + 1}: figure {name!r} " + (
                    "is not in FIGURES" if fig is None else f"belongs in {fig.file}"))
                return m.group(0)
            seen.add(name)
            data = records_of(fig, results)
            if data is None:
                out.unrecorded[f"figure/{name}"] = f"{rel}:{i + 1}: figure {name}"
                return m.group(0)
            if fig.cell is None:
                out.problems.append(f"{rel}:{i + 1}: figure {name}: {fig.script}.py has a record, but "
                                    "FIGURES has no format for it: write it")
                return m.group(0)
            got = formatted((fig.cell,), data, f"figure {name}")[0]
            if got != text:
                out.problems.append(f"{rel}:{i + 1}: figure {name}: the file has {text!r}, its record "
                                    f"gives {got!r}")
            return f"<!-- figure: {name} -->{got}<!-- /figure -->"
        new[i] = INLINE.sub(want, line)
    return new


def unmarked(rel: str, lines: list[str], marked: list[Found]) -> list[str]:
    """Tables of figures outside any marker, and in the README figures in prose."""
    inside = {i for f in marked for i in range(f.start, f.end)}
    problems, fence, i = [], False, 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and line.startswith("|") and i not in inside:
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            if any(DECIMAL.search(c) for c in lines[i:j]):
                problems.append(f"{rel}:{i + 1}: a table of figures with no '<!-- table: NAME "
                                "(from SCRIPT.py) -->' marker above it (and no entry in TABLES)")
            i = j
            continue
        elif not fence and rel == "README.md" and i not in inside:
            for m in PROSE_FIGURE.finditer(INLINE.sub("", line)):
                problems.append(f"README.md:{i + 1}: figure {m.group(0)!r} outside any marked table")
        i += 1
    return problems


def read_unrecorded(path: Path) -> dict[str, str]:
    listed = {}
    for n, line in enumerate(path.read_text().splitlines() if path.exists() else [], 1):
        if not line.strip() or line.startswith("#"):
            continue
        unit, _, reason = line.strip().partition(" ")
        if not reason.strip():
            raise TableError(f"{path}:{n}: {unit!r} gives no reason; write 'TABLE[/ROW] why it has no record'")
        listed[unit] = reason.strip()
    return listed


def run(root: Path = ROOT, results: Path | None = None, unrecorded: Path | None = None,
        write: bool = False, tables: dict[str, Table] | None = None,
        figures: dict[str, Figure] | None = None) -> list[str]:
    """Check (or with ``write``, rewrite) every marked table and figure in
    prose under ``root`` against ``tables`` and ``figures`` (the registry's
    by default); return what is wrong, one line each."""
    tables = TABLES if tables is None else tables
    figures = FIGURES if figures is None else figures
    figures_seen: set[str] = set()
    results = Path(results or root / "benchmarks" / "results")
    listed = read_unrecorded(Path(unrecorded or root / "benchmarks" / "unrecorded.txt"))
    out, seen = Outcome(), {}
    prose: set[str] = set()
    for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        rel = str(path.relative_to(root))
        lines = path.read_text().splitlines()
        found = tables_in(rel, lines)
        # Figures in prose first: line for line, so the tables' slices below hold.
        new = inline(rel, lines, figures, results, out, figures_seen)
        for f in reversed(found):          # bottom up: a rewrite keeps earlier lines' numbers
            table = tables.get(f.name)
            if table is None:
                out.problems.append(f"{rel}:{f.marker_at + 1}: marker of table {f.name!r}, which TABLES lacks")
                continue
            if table.file != rel or f.name in seen:
                out.problems.append(f"{rel}:{f.marker_at + 1}: table {f.name!r} belongs in {table.file}, "
                                    "once" + (f" (also {seen[f.name]})" if f.name in seen else ""))
            seen[f.name] = rel
            want = expect(table, f, lines, results, out)
            if lines[f.marker_at] != marker_line(table):
                out.problems.append(f"{rel}:{f.marker_at + 1}: table {f.name}'s marker should read "
                                    f"{marker_line(table)!r}")
            compare(table, f, lines[f.start:f.end], want, out)
            new[f.start:f.end] = want
            new[f.marker_at] = marker_line(table)
        out.problems += unmarked(rel, lines, found)
        if rel == "README.md":
            prose = {m.group(0) for line in lines for m in PROSE_FIGURE.finditer(INLINE.sub("", line))}
        if new != lines:
            out.rewrites[rel] = new
    out.problems += [f"{t.file}: table {t.name} is in TABLES but no marker names it"
                     for t in tables.values() if t.name not in seen]
    out.problems += [f"{f.file}: figure {f.name} is in FIGURES but no marker names it"
                     for f in figures.values() if f.name not in figures_seen]
    # README prose figures listed in unrecorded.txt as README.md:FIGURE are allowed.
    out.problems = [p for p in out.problems if not any(
        p.startswith("README.md:") and f"figure {u.split(':', 1)[1]!r} outside" in p
        for u in listed if u.startswith("README.md:"))]
    for unit, where in out.unrecorded.items():
        if unit not in listed:
            out.problems.append(f"{where}: no record yet; run its script, or list {unit!r} in "
                                "benchmarks/unrecorded.txt with the reason")
    units = {t.name for t in tables.values() if not t.rows} | {
        f"{t.name}/{r.key}" for t in tables.values() for r in t.rows} | {f"figure/{n}" for n in figures}
    for unit in listed:
        if unit.startswith("README.md:"):
            if unit.split(":", 1)[1] not in prose:
                out.problems.append(f"benchmarks/unrecorded.txt: {unit} is no longer in README.md: drop the line")
        elif unit not in units:
            out.problems.append(f"benchmarks/unrecorded.txt: {unit} names no table or row of TABLES")
        elif unit not in out.unrecorded:
            out.problems.append(f"benchmarks/unrecorded.txt: {unit} has a record now: render it "
                                "(benchmarks/tables.py) and drop the line")
    if write:
        for rel, new in out.rewrites.items():
            (root / rel).write_text("\n".join(new) + "\n")
    return out.problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 naming every figure that differs from its record "
                             "or has none (and is not in benchmarks/unrecorded.txt)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (README.md, docs/)")
    parser.add_argument("--results", type=Path, default=None,
                        help="the records' folder (default ROOT/benchmarks/results)")
    parser.add_argument("--unrecorded", type=Path, default=None,
                        help="the allowance list (default ROOT/benchmarks/unrecorded.txt)")
    args = parser.parse_args(argv)
    try:
        problems = run(args.root, args.results, args.unrecorded, write=not args.check)
    except (TableError, OSError) as e:
        print(f"tables.py: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(p, file=sys.stderr)
    if not args.check and not problems:
        print("tables: every marked table matches its records", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
