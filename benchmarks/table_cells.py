"""A docs table's parts: its rows, each from the newest record of one
script, and the cells formatted from that record's figures
(benchmarks/table_registry.py lists the tables)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Union

Cell = Union[str, Callable[[dict], str]]


@dataclass(frozen=True)
class Row:
    """One row: its cells from the newest record of ``script``."""

    key: str = field(metadata={"help": "the row's name in unrecorded.txt (TABLE/KEY)"})
    script: str = field(metadata={"help": "records under benchmarks/results/<script>/"})
    cells: tuple[Cell, ...] | None = field(default=None, metadata={
        "help": "every column but the record's: a format string over the record's figures "
                "or a function of them; None: no format written yet"})
    args: tuple[str, ...] = field(default=(), metadata={
        "help": "arguments the record's command must hold (a run of the row's settings)"})
    pool: tuple[tuple[str, ...], ...] = field(default=(), metadata={
        "help": "a row pooling several runs: the arguments of each run's record, in order "
                "(each held with ``args``); its cells are functions of the list of their figures"})


@dataclass(frozen=True)
class Table:
    """A marked table: rows formatted from records, or only its source scripts."""

    name: str = field(metadata={"help": "the marker's name"})
    file: str = field(metadata={"help": "README.md or docs/NAME.md"})
    header: tuple[str, ...] = field(default=(), metadata={
        "help": "column names before the record's"})
    rows: tuple[Row, ...] = field(default=(), metadata={"help": "the rows, in order"})
    scripts: tuple[str, ...] = field(default=(), metadata={
        "help": "a table with no rows formatted yet: the scripts its figures came from"})
    args: tuple[str, ...] = field(default=(), metadata={
        "help": "with scripts: arguments in a row of the command of the run it describes; a "
                "record of another run is not its"})
    history: str = field(default="", metadata={
        "help": "why no run of today's code can make this table again (code since changed, "
                "commands run by hand): kept as written, never matched with records"})

    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.script for r in self.rows)) or self.scripts


def fig(path: str, fmt: str = "") -> Callable[[dict], str]:
    """A cell of one figure at a dotted path (keys such as ``--version`` allowed)."""
    def cell(figures: dict) -> str:
        value = figures
        for part in path.split("/"):
            value = value[int(part)] if isinstance(value, list) else value[part]
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "—"              # the run recorded it as not measured
        return format(value, fmt)
    return cell


@dataclass(frozen=True)
class Figure:
    """A figure in prose: ``<!-- figure: NAME -->1.44x<!-- /figure -->``,
    its text formatted from the newest record of ``script``."""

    name: str = field(metadata={"help": "the marker's name"})
    file: str = field(metadata={"help": "README.md or docs/NAME.md"})
    script: str = field(metadata={"help": "records under benchmarks/results/<script>/"})
    cell: Cell | None = field(default=None, metadata={
        "help": "a format string over the record's figures or a function of them; None: not written yet"})
    args: tuple[str, ...] = field(default=(), metadata={
        "help": "arguments the record's command must hold"})
    pool: tuple[tuple[str, ...], ...] = field(default=(), metadata={
        "help": "as Row.pool: one record of each run named"})
