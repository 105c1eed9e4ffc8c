"""proofbatch status: what a sweep has done, what it is running, and how long the rest should take."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rich.table import Table

from ..reporting.progress import STYLE, LogConsole
from ..reporting.status import read_status
from ..verdicts import Verdict

NAME = "status"
HELP = "show a sweep's progress while it runs, on any executor"


def add_arguments(p) -> None:
    p.add_argument("out", type=Path, help="the sweep directory (--out of `proofbatch run`)")


def run(args) -> int:
    s = read_status(args.out, resume_of=_resume_command)
    out = LogConsole()
    if s.state == "preparing":
        done = f"; {s.done} of {s.total} checks done before" if s.total is not None else ""
        out.print(f"[bold]{s.out}[/]: sweep [cyan]preparing[/] (its runner, {s.holder}, for "
                  f"{s.beat_age_s:.0f} s): {s.stage}{done}", soft_wrap=True)
        out.print(settings_line(s), soft_wrap=True, markup=False, highlight=False)
        out.print(f"ETA unknown ({s.eta_basis})")
        return 0
    total = "?" if s.total is None else str(s.total)
    counts = "  ".join(f"[{STYLE[v.value]}]{v.value}[/] {s.counts[v.value]}" for v in Verdict
                       if s.counts[v.value])
    skipped = f", {s.skipped} skipped after an OK attempt" if s.skipped else ""
    out.print(f"[bold]{s.out}[/]: {s.done} of {total} checks done{skipped}  {counts}", soft_wrap=True)
    age = f"{s.beat_age_s:.0f} s" if s.beat_age_s is not None else "long"
    state = {"running": "[green]running[/]", "finished": "finished",
             "stopped": "[yellow]stopped[/] (the runner was interrupted)",
             "dead": f"[bold red]dead[/] (its runner stopped beating {age} ago)",
             "stalled": f"[bold yellow]not beating (stopped?)[/]: its runner, {s.holder}, is "
                        f"still there but has not beaten for {age}, and holds the sweep",
             "unknown": "state unknown (no heartbeat: a sweep from an older proofbatch)"}[s.state]
    if s.unselected:
        state += (f"; {s.unselected} of the corpus's {s.corpus_problems} problems were not "
                  f"selected (--problems {s.selection}): run without --problems to check them too")
    out.print(f"sweep {state}", soft_wrap=True)
    if s.state == "stalled":
        # A resume is refused while it holds the sweep: continue it, or end it.
        out.print(f"if it was stopped (kill -STOP, a suspended job): `kill -CONT {s.holder_pid}` "
                  f"lets it go on; `kill {s.holder_pid}` then `kill -CONT {s.holder_pid}` ends it "
                  "cleanly, and rerunning its command resumes", soft_wrap=True)
    if s.resume:
        out.print(f"resume with: {s.resume}", soft_wrap=True)
    out.print(settings_line(s), soft_wrap=True, markup=False, highlight=False)
    if s.running:
        table = Table(title=f"{len(s.running)} running")
        for name in ("problem", "attempt", "worker", "elapsed s", "used of its limit", "peak MB", ""):
            table.add_column(name, justify="left" if name in ("problem", "worker", "") else "right")
        for r in sorted(s.running, key=lambda r: -r.elapsed_s):
            note = {False: "[red]worker gone", None: "", True: ""}[r.alive]
            if r.elapsed_s == 0 and r.waiting_s > 0:
                note = note or f"[dim]waiting {r.waiting_s:.0f} s for its image"
            elif r.used_s > r.timeout_s:
                note = note or "[yellow]past its limit, being stopped"
            table.add_row(r.problem_id, str(r.attempt), r.worker, f"{r.elapsed_s:.1f}",
                          r.against_limit(), "" if r.peak_rss_mb is None else f"{r.peak_rss_mb:,.0f}",
                          note)
        out.print(table)
        from ..maps.host_factor import shown

        nodes = Counter((r.host, r.host_factor) for r in s.running if r.host_factor is not None)
        if nodes:
            out.print("host factors by node: " + "; ".join(
                f"{host} x{shown(f)} ({n} running)" for (host, f), n in sorted(nodes.items())),
                soft_wrap=True, markup=False, highlight=False)
    elif s.state in ("running", "unknown"):
        out.print("nothing running")
    if s.state in ("dead", "stopped", "finished", "stalled"):
        pass                          # no ETA for a sweep nothing is running
    elif s.eta_s is not None:
        out.print(f"ETA {s.eta_s:.0f} s ({s.eta_basis})")
    else:
        out.print(f"ETA unknown ({s.eta_basis})")
    return 0


def settings_line(s) -> str:
    """What a sweep's limits count and how its checks run, as sweep.json
    records them (a run preparing: as it was given them)."""
    from ..maps.host_factor import given, shown

    parts = [f"limits on the {s.clock} clock" if s.clock else "limit clock unknown",
             f"checks at niceness {s.nice}" if s.nice is not None else "niceness not recorded"]
    if isinstance(s.host_factor, (int, float)):
        parts.append(f"host factor {given(s.host_factor)} (the map's limits "
                     f"x{shown(max(1.0, s.host_factor))})")
    elif s.host_factor is not None:
        parts.append(f"host factor {s.host_factor} (as given; resolved once the map is read)")
    else:
        parts.append("no host factor (no timeout map)" if s.state != "preparing"
                     else "no host factor given")
    return "; ".join(parts)


def _resume_command(manifest: dict, out: Path) -> str:
    # Imported only for a heartbeat that records no resume command: the sweep
    # directory's module reads shards (pyarrow), which `status` must not pay
    # for (tests/test_startup.py).
    from ..sweep_dir import resume_command

    return resume_command(manifest, out)
