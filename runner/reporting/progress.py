"""The screen of a sweep: live progress with what it does now, and the closing summary table."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleDimensions, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from .. import events

from ..verdicts import Verdict
from ..planning.work_left import WorkLeft

if TYPE_CHECKING:      # pyarrow: `proofbatch status` starts without it
    from ..results.rows import ResultRow

# Written to a file or a pipe (a log), lines are as wide as they need to be.
LOG_WIDTH = 10_000


class LogConsole(Console):
    """rich's Console, except when it writes to a file or a pipe: there rich
    lays out for 80 columns (COLUMNS unset), wrapping lines and cutting table
    cells to "arm.bignum_k…", and a log must hold whole ids and paths. So
    off a terminal nothing is wrapped (soft wrap) and tables get LOG_WIDTH
    columns; on a terminal it is rich's Console as it is."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        return size if self.is_terminal else ConsoleDimensions(LOG_WIDTH, size.height)

    @size.setter
    def size(self, new_size) -> None:
        Console.size.fset(self, new_size)

    def print(self, *objects, soft_wrap: bool | None = None, **kwargs) -> None:
        if soft_wrap is None and not self.is_terminal:
            soft_wrap = True
        super().print(*objects, soft_wrap=soft_wrap, **kwargs)


console = LogConsole(stderr=True)
STYLE = {"OK": "green", "FAIL": "yellow", "CHEATING": "magenta", "TIMEOUT": "red",
         "MEMOUT": "red", "ERROR": "bold red"}


def _counts_text(counts: Counter) -> str:
    return " ".join(f"[{STYLE[v.value]}]{v.value}[/] {counts[v.value]}"
                    for v in Verdict if counts[v.value])


class SweepProgress:
    """The live screen of a sweep: the bar with counts per verdict and an
    ETA, what the sweep is doing now (booting the prover, building image k
    of n, checking) and every running check with its time against its
    limit. Without a terminal, the same as plain log lines."""

    def __init__(self, plan=None, workers: int = 1):
        self._counts: Counter = Counter()
        self._skipped = 0
        self._lock = threading.Lock()
        self._live = console.is_terminal
        self._progress = Progress(TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TextColumn("{task.description}"),
                                  console=console)
        self._task = self._progress.add_task("", total=None)
        self._now = NowDoing(plan, workers)
        self._display = Live(Group(self._progress, self._now), console=console,
                             refresh_per_second=2, transient=False) if self._live else None
        self._stop_listening = lambda: None
        # "image failed to load" lines, said with the first row after them:
        # a stopped sweep (Ctrl-C, SIGTERM) kills the images still loading,
        # which is no failure, and records no row after it (_event).
        self._held: list[str] = []

    def __enter__(self):
        self._stop_listening = events.listen(self._event)
        if self._display is not None:
            self._display.__enter__()
        return self

    def __exit__(self, *exc):
        self._stop_listening()
        if exc[0] is None or not issubclass(exc[0], KeyboardInterrupt):
            self._say_held()        # else Ctrl-C or SIGTERM stopped it and killed those images
        if self._display is not None:
            self._display.__exit__(*exc)

    def _event(self, event: events.Event) -> None:
        line = self._now.event(event)
        if line and not self._live:
            if event.kind == "imaged":
                with self._lock:
                    self._held.append(line)
            else:
                print(line, file=sys.stderr, flush=True)

    def _say_held(self) -> None:
        with self._lock:
            held, self._held = self._held, []
        for line in held:
            print(line, file=sys.stderr, flush=True)

    def start(self, total: int, done: int) -> None:
        self._progress.update(self._task, total=total, completed=done)
        self._now.total = total - done
        if done:
            console.print(f"resuming: {done} of {total} checks already recorded or skipped")

    def row(self, row: ResultRow) -> None:
        with self._lock:
            self._counts[row.verdict] += 1
            self._progress.update(self._task, advance=1, description=self._description())
        self._now.finished(row.problem_id, row.attempt)
        if not self._live:
            self._say_held()        # a failed image's checks are recorded: it did fail
            # No live screen without a terminal (CI, logs): one line per verdict.
            print(f"{row.verdict:8} {row.problem_id}  {row.reason}", file=sys.stderr, flush=True)

    def skip(self, n: int) -> None:
        """``n`` attempts settled without a check (--stop-on-first-ok)."""
        with self._lock:
            self._skipped += n
            self._progress.update(self._task, advance=n, description=self._description())

    def _description(self) -> str:
        skipped = f" [dim]skipped {self._skipped}[/]" if self._skipped else ""
        return _counts_text(self._counts) + skipped


class NowDoing:
    """What the sweep does now, drawn under the bar; thread-safe."""

    def __init__(self, plan, workers: int):
        self._lock = threading.Lock()
        self.workers, self.total = max(1, workers), 0
        self.stage, self.stage_at = "starting", time.monotonic()
        self.builds = 0
        self._built: set[str] = set()      # image keys built once: another build is a rebuild
        # The base is booted, not built, and prebuilt images are there already.
        self._images_needed = len(set(plan.images) - {plan.base} - set(plan.prebuilt)) \
            if plan is not None else None
        # Expected seconds per problem, from the plan; an ETA only when some
        # come from measurements (a profile or a map), not all from defaults.
        self._expected = {(c.problem_id, c.attempt): c.expected_s for c in plan.checks} \
            if plan is not None else {}
        self._measured = plan is not None and any(c.source not in ("default", "category")
                                                  for c in plan.checks)
        self._done: set[tuple[str, int]] = set()
        self._left = WorkLeft(plan) if plan is not None else None
        self._waiting: dict[str, tuple[str, float]] = {}     # check key -> (worker, since)
        self._running: dict[str, tuple[str, float, float]] = {}  # problem -> (worker, since, limit)

    def event(self, e: events.Event) -> str | None:
        """Take an event; the log line it makes, if any."""
        with self._lock:
            if self._left is not None:
                self._track(e)
            if e.kind == "prepare":
                self._set_stage(e.name)
                return e.name
            if e.kind == "boot":
                self._set_stage(f"booting {e.name}")
                return f"booting {e.name}"
            if e.kind == "booted":
                self._set_stage("checking")
                return f"{e.name} is up"
            if e.kind == "image" and e.key in self._built:
                # Built before, and gone since (evicted, or its process died).
                self._set_stage(f"rebuilding image: {e.name}")
                return f"rebuilding image (it was evicted or its process died): {e.name}"
            if e.kind == "image":
                self._built.add(e.key)
                self.builds += 1
                of = f" of {self._images_needed}" if self._images_needed else ""
                self._set_stage(f"building image {self.builds}{of}: {e.name}")
                return f"building image {self.builds}{of}: {e.name}"
            if e.kind == "imaged":
                self._set_stage("checking")
                return None if e.ok else f"image failed to load: {e.name}"
            if e.kind == "compile":
                # Native HOL Light: a context or a batch of answers compiled
                # (runner/provers/hol_light/session/native_session.py), minutes for a big context.
                self._set_stage(f"compiling natively: {e.name}")
                return f"compiling natively: {e.name}"
            if e.kind == "compiled":
                self._set_stage("checking")
                return None if e.ok else f"cannot compile natively: {e.name}"
            if e.kind == "check":
                self._waiting[e.name] = (e.worker, e.at)
            elif e.kind == "forked":
                worker, _ = self._waiting.pop(e.name, ("", e.at))
                self._running[e.name] = (worker, e.at, e.limit_s)
            elif e.kind == "checked":
                self._waiting.pop(e.name, None)
                self._running.pop(e.name, None)
        return None

    def _track(self, e: events.Event) -> None:
        """What the ETA counts: the boot, and the images built."""
        if e.kind == "boot":
            self._left.booting()
        elif e.kind == "booted":
            self._left.booted()
        elif e.kind == "image":
            self._left.building(e.key, e.at)
        elif e.kind == "imaged" and e.ok:
            self._left.built(e.key, e.at)

    def _set_stage(self, stage: str) -> None:
        self.stage, self.stage_at = stage, time.monotonic()

    def finished(self, problem_id: str, attempt: int) -> None:
        with self._lock:
            self._done.add((problem_id, attempt))
        if self._left is not None:
            self._left.finished(problem_id, attempt)

    def eta_s(self) -> float | None:
        """The boot still to come, then the work left (checks and the images
        they still need, runner/planning/work_left.py) over the workers."""
        if not self._measured or self._left is None:
            return None
        now = time.monotonic()
        ran = sum(min(now - since, self._expected.get((p, 0), 0.0))
                  for p, (_, since, _) in self._running.items())
        return self._left.boot_left_s() + max(0.0, self._left.work_s() - ran) / self.workers

    def _eta_basis(self) -> str:
        if self._left.booting_now:
            return f"{self._left.basis()}; the boot is running"
        images = self._left.images_left()
        return f"{self._left.basis()}; {images} images to build" if images else self._left.basis()

    def __rich__(self):
        now = time.monotonic()
        with self._lock:
            eta = self.eta_s()
            head = Text.assemble(("now: ", "bold"), self.stage,
                                 (f"  {now - self.stage_at:.0f} s", "dim"))
            if eta is not None:
                head.append(f"   ETA {_clock(eta)} ({self._eta_basis()})", "cyan")
            elif self._expected:
                head.append("   no ETA: no profile or timeout map gives expected times", "dim")
            table = Table(box=None, show_header=bool(self._running or self._waiting),
                          padding=(0, 2))
            for column in ("worker", "check", "time", "limit"):
                table.add_column(column, justify="right" if column in ("time", "limit") else "left")
            for problem, (worker, since, limit) in sorted(self._running.items(), key=lambda x: x[1][1]):
                secs = now - since
                style = "red" if secs > limit else "yellow" if secs > 0.8 * limit else ""
                table.add_row(_short(worker), problem, Text(f"{secs:.0f} s", style), f"{limit:g} s")
            for problem, (worker, since) in sorted(self._waiting.items(), key=lambda x: x[1][1]):
                table.add_row(_short(worker), problem, Text("waiting to start", "dim"), "")
        return Group(head, table)


def _short(worker: str) -> str:
    return worker.rsplit("/", 1)[-1]


def _clock(secs: float) -> str:
    secs = int(secs)
    return f"{secs // 3600}:{secs // 60 % 60:02d}:{secs % 60:02d}"


class PrepareLog:
    """The stages a sweep goes through before its screen starts (compiling
    native contexts, in prepare), said as the screen would log them."""

    def __enter__(self):
        now = NowDoing(None, 1)
        # "cannot compile natively" lines, said with the next event or as the
        # block ends: Ctrl-C or SIGTERM kills the compiler of the context
        # being compiled, which is no failure of that context.
        self._held: list[str] = []

        def say(event: events.Event) -> None:
            line = now.event(event)
            self._say_held()
            if line and event.kind == "compiled":
                self._held.append(line)
            elif line:
                console.print(line, markup=False, highlight=False)
        self._stop = events.listen(say)
        return self

    def _say_held(self) -> None:
        held, self._held = self._held, []
        for line in held:
            console.print(line, markup=False, highlight=False)

    def __exit__(self, *exc):
        self._stop()
        if exc[0] is None or not issubclass(exc[0], KeyboardInterrupt):
            self._say_held()


def print_summary(summary) -> None:
    table = Table(title=f"proofbatch: {summary.total} checks in {summary.out}")
    table.add_column("verdict")
    table.add_column("checks", justify="right")
    for v in Verdict:
        if summary.counts[v.value]:
            table.add_row(f"[{STYLE[v.value]}]{v.value}[/]", str(summary.counts[v.value]))
    table.add_row("[bold]total", str(sum(summary.counts.values())))
    out = LogConsole()
    out.print(table)
    out.print(f"ran {summary.ran_now} checks now, {summary.resumed} were already recorded; "
              f"results in {summary.out}/results.csv and verdicts.csv")
    for path in summary.quarantined:
        out.print(f"[yellow]quarantined an unreadable shard: {path}; its checks were run again")
    # Last: how many checks did not run in the mode asked for, and why.
    fallbacks = getattr(summary, "fallbacks", None)
    if fallbacks is not None and (line := fallbacks()):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
