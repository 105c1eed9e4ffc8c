"""docs/limits.md's tables of loaded_host.py's runs, each from the newest
record of the run's flags (table_registry.TABLES holds them)."""

from __future__ import annotations

from typing import Callable

from table_cells import Row, Table

# loaded_host.py's run on a quiet host at the size: 12 problems, 3 busy
# loops a core, checks at niceness -10. limits-issue-size's run has --check-nice 0;
# the README's limits paragraph quotes this one.
QUIET_HOST = ("--busy", "3", "--check-nice", "-10")
HEADER = ("run", "clock, limits", "load", "verdicts", "sweep wall")


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


def limits_tables() -> tuple[Table, ...]:
    return (runs_table("limits-quiet-host", QUIET_HOST),)
