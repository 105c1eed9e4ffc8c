"""docs/limits.md's tables of loaded_host.py's and cpu_drift.py's runs,
each from the newest record of the run's flags (table_registry.TABLES
holds them)."""

from __future__ import annotations

import statistics
from typing import Callable

from table_cells import Row, Table, fig

# loaded_host.py's run on a quiet host at the issue's size: 12 problems, 3 busy
# loops a core, checks at niceness -10. limits-issue-size's run has --check-nice 0;
# the README's limits paragraph quotes this one.
QUIET_HOST = ("--busy", "3", "--check-nice", "-10")
HEADER = ("run", "clock, limits", "load", "verdicts", "sweep wall")
# The same size at niceness 0: run's default, --nice auto, gives -10 as root,
# so that run must say --check-nice 0.
ISSUE_SIZE = ("--busy", "3", "--check-nice", "0")
# loaded_host.py's seed-1 run on a host others loaded, as docs/limits.md gives
# its command: the seed, count and files fix the draw, and so which problem
# each row of the table of problems is (LOADED_DRAWN of them, by id).
LOADED = ("--seed", "1", "--problems", "6", "--min-files", "2", "--busy", "1")
LOADED_DRAWN = 6
# cpu_drift.py's two runs, told apart by --rounds; 3 is its default, so that
# run must give --rounds 3 in its command.
DRIFT_QUIET, DRIFT_NICENESS = ("--rounds", "4"), ("--rounds", "3")
DRIFT_HEADER = ("condition", "median CPU", "against quiet")


def _span(values: list[float] | None, unit: str = " s") -> str:
    if not values:
        return "–"
    lo, hi = values
    return f"{lo:,.0f}{unit}" if round(lo) == round(hi) else f"{lo:,.0f}-{hi:,.0f}{unit}"


def _verdicts(run: dict) -> str:
    return ", ".join(f"{n} {v}" for v, n in sorted(run["verdicts"].items(), key=lambda x: -x[1]))


def _run_row(name: str, what: Callable[[dict], str], clock: str, verdicts: Callable[[dict], str],
             args: tuple[str, ...]) -> Row:
    """One sweep of a loaded_host.py run: its clock and limits, load, verdicts, wall."""
    def limits(f: dict) -> str:
        limit = _span(f["runs"][name]["limit_s"])
        return f"{clock}, {limit}" + (" (`--host-factor auto`)" if name == "cpu" else "")

    return Row(name, "loaded_host", (
        what, limits, lambda f: f[f"{name}_load"].removeprefix("load "),
        lambda f: verdicts(f["runs"][name]), lambda f: f"{f[f'{name}_wall_s']:,.0f} s"), args=args)


def _quiet(run: dict) -> str:
    return f"{_verdicts(run)}, {_span(run['cpu_s'])} CPU each"


def _cut(run: dict) -> str:
    cut = " when cut" if set(run["verdicts"]) == {"TIMEOUT"} else ""
    return f"**{_verdicts(run)}** ({_span(run['cpu_s'])} of CPU each{cut})"


def _loaded(run: dict) -> str:
    return f"**{_verdicts(run)}**, {_span(run['cpu_s'])} CPU, {_span(run['clock_s'])} wall"


def runs_table(name: str, args: tuple[str, ...]) -> Table:
    """The four sweeps of one loaded_host.py run, in the order it runs them."""
    return Table(name, "docs/limits.md", HEADER, (
        _run_row("quiet", lambda f: "quiet (the server's images load inside it)", "cpu", _quiet, args),
        _run_row("wall", lambda f: "wall (the bench's alarm rule: `--limit-clock wall --limit-slack 30`, "
                 f"niceness 0; not its harness), {f['spinners']} spinners", "wall", _cut, args),
        _run_row("cpu", lambda f: f"cpu, {f['spinners']} spinners", "cpu", _loaded, args),
        _run_row("quiet-again", lambda f: "quiet again", "cpu", _quiet, args)))


def _problem_row(i: int) -> Row:
    """The ``i``-th problem of the draw (by id) in the run's first sweep
    (``quiet``): map time, the limit it ran under, its proof's wall and CPU
    seconds, verdict and the host's load when it ended."""
    def quiet(key: str, fmt: str = "") -> Callable[[dict], str]:
        return fig(f"per_problem/{i}/runs/quiet/{key}", fmt)

    return Row(f"p{i}", "loaded_host", (
        lambda f: f"`{f['per_problem'][i]['problem_id']}`", fig(f"per_problem/{i}/map_s", ".1f"),
        quiet("limit_s", ",.0f"), quiet("clock_s", ",.0f"), quiet("cpu_s", ".1f"), quiet("verdict"),
        quiet("load", ".1f")), args=LOADED)


def _conditions(key: str, what: Callable[[dict], str] | str, names: tuple[str, ...],
                args: tuple[str, ...], strong: tuple[str, ...] = (), strong_ratio: bool = False) -> Row:
    """cpu_drift.py's conditions ``names`` in one row: each one's median CPU
    seconds over its copies and its ratio to the quiet conditions' median
    (the script's ``ratios``), joined by " / "; the medians of ``strong``
    (or with ``strong_ratio`` the ratios) in bold, as the prose compares them."""
    def bold(text: str, yes: bool) -> str:
        return f"**{text}**" if yes else text

    def cpu(f: dict) -> str:
        medians = [bold(f"{statistics.median(f['cpu_secs'][n]):.2f}", n in strong and len(names) > 1)
                   for n in names]
        return bold(" / ".join(medians) + " s", len(names) == 1 and names[0] in strong)

    return Row(key, "cpu_drift", (
        what, cpu, lambda f: bold(" / ".join(f"{f['ratios'][n]:.2f}" for n in names), strong_ratio)),
        args=args)


def drift_tables() -> tuple[Table, ...]:
    """cpu_drift.py's quiet-host run (--rounds 4: the conditions any user may
    set) and its run with priority (--rounds 3, as root: busy-fifo,
    quiet-nice-10 and busy-nice-N exist only then; N its --nice-levels
    default, 5,10,20)."""
    q, n = DRIFT_QUIET, DRIFT_NICENESS
    return (
        Table("limits-cpu-drift", "docs/limits.md", DRIFT_HEADER, (
            _conditions("quiet", "quiet", ("quiet",), q),
            _conditions("busy", lambda f: f"beside {f['spinners']} spinning processes (`busy`)", ("busy",), q,
                        strong_ratio=True),
            _conditions("busy-pinned", "busy, each copy pinned to one core", ("busy-pinned",), q),
            _conditions("busy-batch", "busy, `SCHED_BATCH`", ("busy-batch",), q),
            _conditions("busy-long-slice", "busy, 100 ms slices asked of EEVDF (`sched_setattr`)",
                        ("busy-long-slice",), q),
            _conditions("quiet-again", "quiet again, last in each round", ("quiet-again",), q))),
        Table("limits-cpu-drift-niceness", "docs/limits.md", DRIFT_HEADER, (
            _conditions("quiet", "quiet", ("quiet",), n),
            _conditions("busy", "`busy`", ("busy",), n),
            _conditions("busy-settings", "busy, pinned / `SCHED_BATCH` / 100 ms slices",
                        ("busy-pinned", "busy-batch", "busy-long-slice"), n),
            _conditions("busy-fifo", "busy, `SCHED_FIFO`", ("busy-fifo",), n),
            _conditions("quiet-nice-10", "quiet, niceness -10 (group and process)", ("quiet-nice-10",), n,
                        strong=("quiet-nice-10",)),
            _conditions("busy-nice", "busy, niceness -5 / -10 / -20",
                        ("busy-nice-5", "busy-nice-10", "busy-nice-20"), n, strong=("busy-nice-10",)),
            _conditions("quiet-again", "quiet again", ("quiet-again",), n))),
    )


def limits_tables() -> tuple[Table, ...]:
    """docs/limits.md's six tables, in the page's order."""
    return (
        runs_table("limits-quiet-host", QUIET_HOST),
        runs_table("limits-issue-size", ISSUE_SIZE),
        *drift_tables(),
        Table("limits-loaded-problems", "docs/limits.md",
              ("problem", "map s", "limit", "wall s", "CPU s", "verdict", "load"),
              tuple(_problem_row(i) for i in range(LOADED_DRAWN))),
        runs_table("limits-loaded-runs", LOADED),
    )
