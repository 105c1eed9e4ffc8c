"""TIMEOUTs a drifting node gave, confirmed before they are recorded (issue
47, "kept live").

A node whose canary (runner/maps/canary.py) ran more than ``--canary-drift``
slower than its first was slower than the factor its limits were scaled
by: a TIMEOUT it gave may be the node's doing, not the answer's, the same
false verdict as one a loaded host gives on the wall clock. Such a TIMEOUT
whose time on the limit's clock was within the drift of its limit (at most
limit x drift: the check might have finished at the node's first speed) is
checked again at the end of the sweep, on a node of another host where
the executor can choose (Dask, cluster/dask_placement.py), and wherever it
runs only once that node's canary is within bounds (at most
canary.CONFIRM_WAIT_S). The confirming run's row is the one recorded: its
verdict is the check's, and its ``confirmed`` says what the first run gave,
where and at which drift (the first row stays in the shards as history,
as a `run --recheck` leaves it). A confirming row is never confirmed again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..checks import attempts
from ..checks.tasks import CheckTask
from ..results import shards

COLUMNS = ("problem_id", "attempt", "verdict", "host", "node_drift", "confirmed", "timeout_s",
           "prove_cpu_secs", "cpu_secs", "prove_secs", "wall_secs", "limit_clock", "dedup_of",
           "finished_at")


@dataclass(frozen=True)
class Confirmation:
    """Handed with a check run again to confirm a drifting node's TIMEOUT."""

    host: str        # the node that gave it: the check goes to another where it can
    note: str        # the confirming row's ``confirmed``


def _used(row: dict) -> float | None:
    """The TIMEOUT's time on its limit's clock, as far as it was measured."""
    if row.get("limit_clock") == "cpu":
        return row.get("prove_cpu_secs") or row.get("cpu_secs")
    return row.get("prove_secs") or row.get("wall_secs")


def to_confirm(out: Path, tasks: Sequence[CheckTask], drift: float) -> list[CheckTask]:
    """The checks of ``tasks`` whose current row is a TIMEOUT given on a
    node drifting slower than 1 + ``drift``, within the drift of its limit,
    not yet confirmed: each to run again, with its Confirmation."""
    done = shards.scan(out, repair=False, columns=COLUMNS).done
    current = attempts.unsuperseded(tasks, done).matching(*attempts.task_hashes(tasks))
    if not len(current) or "node_drift" not in current.table.column_names:
        return []
    by_key = {(t.problem.problem_id, t.attempt): t for t in tasks}
    found = []
    for row in current.table.to_pylist():
        ratio, task = row.get("node_drift"), by_key.get((row["problem_id"], row["attempt"]))
        if (task is None or row["verdict"] != "TIMEOUT" or row.get("confirmed")
                or row.get("dedup_of") is not None or ratio is None or ratio <= 1.0 + drift):
            continue
        used, limit = _used(row), row["timeout_s"]
        if used is not None and used > limit * ratio:
            continue
        clock = "CPU" if row.get("limit_clock") == "cpu" else "wall"
        spent = f"{used:.1f} s of {clock} time" if used is not None else f"{clock} time unknown"
        note = (f"TIMEOUT on {row['host']} ({spent}, limit {limit:g} s) while its canary ran "
                f"{ratio:.2f}x its first; this row is the check run again at the end of the sweep")
        found.append(dataclasses.replace(task, recheck_after=row["finished_at"],
                                         confirms=Confirmation(row["host"], note)))
    return found


def after_sweep(prepared, run: Callable[[list[CheckTask], Callable], None],
                on_note: Callable[[str], None]) -> None:
    """Once a per-node sweep's checks ran: each node's factor and canary
    into sweep.json, and the TIMEOUTs of drifting nodes confirmed (a
    resumed sweep confirms those its killed run left). ``run(tasks,
    on_row)`` runs checks on the sweep's executor, under a run id of their
    own: the confirming rows replace the first ones in the merge that
    follows."""
    from . import node_factor

    out, spec = prepared.config.out, prepared.node_factor
    node_factor.record(out)
    if spec.canary is None:
        return
    confirm = to_confirm(out, prepared.tasks, spec.canary.drift)
    if not confirm:
        return
    on_note(f"{len(confirm)} TIMEOUTs came from nodes whose canary drifted past --canary-drift "
            f"{spec.canary.drift:g}, within the drift of their limits: checked again now, on "
            "another node where there is one, once its canary is within bounds ("
            + ", ".join(f"{t.problem.problem_id} on {t.confirms.host}" for t in confirm[:5])
            + (", ..." if len(confirm) > 5 else "") + ")")
    rows = []
    run(confirm, rows.append)
    node_factor.record(out)
    # What the shards say now, not what the executor reported: a row it
    # reported may be the first run's, read back.
    rows = [r for r in rows if r.confirmed]
    asked = {(t.problem.problem_id, t.attempt) for t in confirm}
    left = {(t.problem.problem_id, t.attempt) for t in to_confirm(out, prepared.tasks,
                                                                   spec.canary.drift)} & asked
    gave = ", ".join(f"{r.problem_id} {r.verdict} on {r.host}" for r in rows[:5])
    on_note(f"confirmed {len(rows)} of {len(confirm)}"
            + (f": {gave}{', ...' if len(rows) > 5 else ''}" if rows else "")
            + (f"; not confirmed ({len(left)}, the first TIMEOUT stands; a resume tries again): "
               + ", ".join(sorted(pid for pid, _ in left)[:5]) if left else ""))
