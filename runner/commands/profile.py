"""proofbatch profile: time the ground-truth proofs, several runs, for timeout maps."""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

import cluster
from cluster.local import LocalExecutor

from ..reporting import progress
from ..errors import InputError
from ..maps import nodes as node_speed
from ..maps.profile_data import on_clock
from ..profile import Profile, ProfileConfig, profile
from ..settings import add_flags, config_from
from .timeout_map import derive_and_write

NAME = "profile"
HELP = "check the ground-truth proofs several times and record what each costs"


def add_arguments(p) -> None:
    # Every setting of the profile with its flag, help and default: declared
    # once, in the dataclass (runner/profile.py), the flags it shares with
    # `run` spelled as run's.
    add_flags(p, ProfileConfig)
    p.add_argument("--map", type=Path, help="then derive this timeout map from the profile "
                   "(default policy; see `proofbatch timeout-map`)")
    # Each run is a sweep: the same executors and options as `run` (--cluster
    # slurm: --nodes array tasks of --cpus-per-task checks at once each).
    cluster.add_arguments(p)


def run(args) -> int:
    cfg = config_from(ProfileConfig, args, command=tuple(sys.argv), executor=args.cluster)
    if args.add_tasks:
        # Each run is its own sweep, started and finished by this driver.
        raise InputError("--add-tasks", "adds array tasks to a running sweep, not to a profile",
                         "drop it; pass --nodes for more array tasks per run")
    if args.cluster != "local":
        # Each run makes its executor after the profile's provenance is
        # written: bad executor options are refused before, here.
        cluster.make_executor(args, cfg.workers)
    bar = progress.SweepProgress()

    def on_run(r: int, n: int, out: str) -> None:
        progress.console.print(f"[bold]run {r} of {n}[/] -> {out}")

    with bar, contextlib.ExitStack() as stack:
        sessions = {}

        def executor_for(prepared):
            config = prepared.config
            if args.cluster != "local":
                # A fresh executor per run: a run's Slurm ledger and rows are its own.
                return cluster.make_executor(args, config.workers)
            # One session for every run: its images are loaded once (HOL
            # Light alone takes 70-90 s), and prove_secs never includes a load.
            # --verify-trust loads contexts the other way: a session of its own.
            # It starts from the run's own backend, which compiled the
            # contexts as it prepared (a native tree's compile takes minutes).
            choice = str(config.context_proofs)
            if choice not in sessions:
                workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="proofbatch-"))
                sessions[choice] = stack.enter_context(prepared.backend.start(Path(workdir)))
            return LocalExecutor(workers=config.workers, session=sessions[choice])

        result = profile(cfg, executor_for, on_run=on_run, on_row=bar.row, on_start=bar.start)
    print_profile(result, Console())
    if args.map:
        derive_and_write(result, args.map, Console())
    return 0


def print_profile(result: Profile, out: Console) -> None:
    out.print(profile_table(result))
    print_nodes(result, out)
    if result.defects:
        # A ground truth that does not verify is a defect of the corpus: loud, every one.
        out.print(f"[bold red]{len(result.defects)} ground truths did not verify; they are corpus "
                  f"defects, listed here and in summary.json, and were not timed:")
        for d in result.defects:
            out.print(f"[red]  DEFECT {d.problem_id}: {d.verdict}: {d.reason} ({d.run})")


def profile_table(result: Profile) -> Table:
    """The 15 slowest ground truths' times."""
    table = Table(title=f"profile {result.path}: {len(result.runs)} ground truths timed")
    for name in ("problem", "runs", "min s", "median s", "max s", "spread", "peak MiB"):
        # Bench ids share long prefixes (arm.bignum_montsqr_p256...): a cut id
        # reads like every other, so ids fold onto more lines, never cut.
        table.add_column(name, justify="left" if name == "problem" else "right",
                         overflow="fold" if name == "problem" else "ellipsis",
                         no_wrap=name != "problem", min_width=24 if name == "problem" else None)
    slowest = sorted(result.stats, key=lambda s: -s["max"])
    for s in slowest[:15]:
        table.add_row(s["problem_id"], str(s["runs"]), f"{s['min']:.3f}", f"{s['median']:.3f}",
                      f"{s['max']:.3f}", "" if s["spread"] is None else f"{s['spread']:.2f}",
                      f"{max(s['peak_rss_mb']):.0f}" if s["peak_rss_mb"] else "")
    if len(slowest) > 15:
        table.caption = f"the 15 slowest of {len(slowest)}; all in {result.path}/summary.csv"
    return table


def print_nodes(result: Profile, out: Console) -> None:
    """The nodes that timed the runs and their factors (runner/maps/nodes.py),
    when there was more than one; and any node that ran more checks at once
    than it has CPUs."""
    runs, clock = on_clock(result.runs, result.provenance.get("limit_clock", "wall"))
    nodes = node_speed.node_factors(runs)
    if len(nodes.nodes) > 1:
        for n in nodes.nodes:
            if n.host == nodes.reference:
                factor = "the reference"
            elif n.factor is None:
                factor = f"no factor (no problem of >= {nodes.min_s:g} s shared with a measured node)"
            else:
                factor = f"x{n.factor:.3f} the reference's times ({n.problems} problems)"
            out.print(f"node {n.host} ({n.cpu_model or 'CPU model not recorded'}): {n.runs} runs, {factor}")
        if nodes.differ:
            out.print(f"[yellow]{len(nodes.mixed)} problems were timed on nodes of different speed "
                      f"({clock} clock); `timeout-map` normalises their times to {nodes.reference} "
                      "unless --no-normalise")
    summary = json.loads((result.path / "summary.json").read_text())
    for run, hosts in (summary.get("at_once") or {}).items():
        for host, seen in hosts.items():
            if seen["cpus"] and seen["most_at_once"] > seen["cpus"]:
                out.print(f"[bold yellow]{run}: {host} ran {seen['most_at_once']} checks at once on "
                          f"{seen['cpus']} CPUs: their times include the sharing")
