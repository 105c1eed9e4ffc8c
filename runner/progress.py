"""Live progress with counts per verdict, and the closing summary table."""

from __future__ import annotations

import sys
import threading
from collections import Counter

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .results import ResultRow
from .verdicts import Verdict

console = Console(stderr=True)
STYLE = {"OK": "green", "FAIL": "yellow", "CHEATING": "magenta", "TIMEOUT": "red",
         "MEMOUT": "red", "ERROR": "bold red"}


def _counts_text(counts: Counter) -> str:
    return " ".join(f"[{STYLE[v.value]}]{v.value}[/] {counts[v.value]}"
                    for v in Verdict if counts[v.value])


class SweepProgress:
    def __init__(self):
        self._counts: Counter = Counter()
        self._skipped = 0
        self._lock = threading.Lock()
        self._progress = Progress(TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TextColumn("{task.description}"),
                                  console=console, transient=False,
                                  disable=not console.is_terminal)
        self._task = self._progress.add_task("", total=None)

    def __enter__(self):
        self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        self._progress.__exit__(*exc)

    def start(self, total: int, done: int) -> None:
        self._progress.update(self._task, total=total, completed=done)
        if done:
            console.print(f"resuming: {done} of {total} checks already recorded or skipped")

    def row(self, row: ResultRow) -> None:
        with self._lock:
            self._counts[row.verdict] += 1
            self._progress.update(self._task, advance=1, description=self._description())
        if not console.is_terminal:
            # No live bar without a terminal (CI, logs): one line per verdict.
            print(f"{row.verdict:8} {row.problem_id}  {row.reason}", file=sys.stderr, flush=True)

    def skip(self, n: int) -> None:
        """``n`` attempts settled without a check (--stop-on-first-ok)."""
        with self._lock:
            self._skipped += n
            self._progress.update(self._task, advance=n, description=self._description())

    def _description(self) -> str:
        skipped = f" [dim]skipped {self._skipped}[/]" if self._skipped else ""
        return _counts_text(self._counts) + skipped


def print_summary(summary) -> None:
    table = Table(title=f"proofbatch: {summary.total} checks in {summary.out}")
    table.add_column("verdict")
    table.add_column("checks", justify="right")
    for v in Verdict:
        if summary.counts[v.value]:
            table.add_row(f"[{STYLE[v.value]}]{v.value}[/]", str(summary.counts[v.value]))
    table.add_row("[bold]total", str(sum(summary.counts.values())))
    out = Console()
    out.print(table)
    out.print(f"ran {summary.ran_now} checks now, {summary.resumed} were already recorded; "
              f"results in {summary.out}/results.csv and verdicts.csv")
    for path in summary.quarantined:
        out.print(f"[yellow]quarantined an unreadable shard: {path}; its checks were run again")
