"""proofbatch timeout-map: derive per-problem time limits from a profile, and validate them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import statistics
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cluster.local import LocalExecutor

from ..reporting import progress
from ..errors import InputError
from ..prover import Mode
from ..profile import Profile, load_profile, recorded_path
from ..maps.profile_data import on_clock
from ..settings import help_of
from ..maps.timeout_map import DerivedMap, MapPolicy, derive, write_map
from ..profile import validate
from . import map_compare

NAME = "timeout-map"
HELP = ("derive a per-problem timeout map from a profile (s2n-bignum-bench's format), validate "
        "one, or compare two")


def add_arguments(p) -> None:
    p.add_argument("profile", type=Path, help="a directory written by `proofbatch profile` "
                   "(or the word compare, then two maps)")
    map_compare.add_arguments(p)
    p.add_argument("--out", type=Path, help="write the map here, e.g. timeout_maps/NAME.json "
                   "(its sidecar goes next to it as NAME.meta.json)")
    p.add_argument("--validate", action="store_true",
                   help="report headroom, then rerun the ground truths once under the map (--out or "
                   "--map); passes with zero TIMEOUT")
    p.add_argument("--map", type=Path, help="an existing map to validate instead of deriving one")
    p.add_argument("--workers", type=int, default=1, help="checks at once while validating (default 1)")
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                   help="derive limits from the profiled proofs' CPU times (cpu: what a sweep's "
                   "default --limit-clock cpu limits) or wall times (wall: as s2n-bignum-bench's "
                   "harness measures); a profile taken before CPU time was measured gives wall "
                   "(default cpu)")
    policy = p.add_argument_group("policy", "how limits are derived")
    # One option per MapPolicy field, so that the help text lives in one place.
    for f in dataclasses.fields(MapPolicy):
        policy.add_argument("--" + f.name.replace("_", "-"), dest=f"policy_{f.name}", type=float,
                            default=None, metavar="X", help=help_of(MapPolicy, f.name))


def _policy(args) -> MapPolicy:
    chosen = {f.name: getattr(args, f"policy_{f.name}") for f in dataclasses.fields(MapPolicy)}
    return MapPolicy(**{k: v for k, v in chosen.items() if v is not None})


def run(args) -> int:
    if map_compare.chosen(args):
        return map_compare.run(args)
    if not args.out and not args.validate:
        raise InputError("timeout-map", "nothing to do", "pass --out MAP to derive a map, "
                         "or --validate to validate one")
    # A profile is a record of measurements: deriving or validating a map
    # never writes into it, so the map to validate is named.
    if args.validate and not (args.out or args.map):
        raise InputError("timeout-map", "--validate needs the map to validate",
                         "pass --map MAP, or --out MAP to derive one and validate it")
    if args.out and args.map:
        raise InputError("timeout-map", "--out derives a new map and --map names an existing one",
                         "pass one of them")
    if args.out and args.out.is_dir():
        raise InputError(args.out, "is a directory", "pass the path of the map file to write, "
                         "e.g. timeout_maps/NAME.json")
    if args.out and args.out.resolve().is_relative_to(args.profile.resolve()):
        # Written over summary.json, the map was the next run's unreadable input.
        raise InputError(args.out, f"is inside the profile {args.profile}, which timeout-map "
                         "reads and never writes", "pass a map path outside it, e.g. "
                         "timeout_maps/NAME.json")
    policy = _policy(args)
    result = load_profile(args.profile)
    out = Console()
    map_path = args.map
    if args.out:
        derive_and_write(result, args.out, out, policy, clock=args.clock)
        map_path = args.out
    if args.validate:
        return _validate(result, map_path, args.workers, out)
    return 0


def derive_and_write(result: Profile, map_path: Path, out: Console, policy: MapPolicy = MapPolicy(),
                     clock: str = "cpu") -> None:
    runs, used = on_clock(result.runs, clock)
    if used != clock:
        out.print(f"[yellow]{result.path} holds no CPU times for every run (profiled before they "
                  "were measured): limits derived from wall times")
    derived = derive(runs, policy)
    prov = result.provenance
    write_map(map_path, derived, {
        # What the map's prove_secs and limits count (runner.prover.LimitClock).
        "clock": used, "hosts": _hosts(result),
        "profile": str(result.path), "corpus": str(recorded_path(prov, "corpus", result.path)),
        # Profiles written before today's names say hol_build and bytecode-fork.
        "prover": prov.get("prover"), "prover_build": prov.get("prover_build") or prov.get("hol_build"),
        "mode": str(Mode.of(prov.get("mode"))) if prov.get("mode") else None,
        "generations": [g["id"] for g in prov.get("generations", [])],
        "problems": {pid: p["content_sha256"] for pid, p in prov.get("problems", {}).items()},
        "defects": [d.problem_id for d in result.defects],
        "derived": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")})
    classes = {c: sum(e.cls == c for e in derived.entries) for c in ("light", "heavy")}
    at_floor = sum(e.rule == "floor" for e in derived.entries)
    out.print(f"wrote {map_path}: {len(derived.entries)} problems, {classes['light']} light and "
              f"{classes['heavy']} heavy, {at_floor} at the {policy.floor_s:g} s floor; times and "
              f"limits in {used.upper() if used == 'cpu' else used} seconds")
    if derived.model is not None:
        print_spread(derived, out)
        out.print(f"expected false timeouts over the corpus: {derived.expected_false_timeouts:.2g} "
                  f"(target {policy.target_false_timeout:g} per problem; "
                  f"{sum(e.rule == 'spread-target' for e in derived.entries)} margins raised to meet it)")
    for e in derived.clipped:
        # Never hidden: a correct proof of this problem may time out.
        out.print(f"[bold red]CLIPPED at the {policy.cap_s:g} s cap: {e.problem_id} "
                  f"(statistic {e.statistic:.1f} s x margin {e.margin:g}); a correct proof may time out")
    if result.defects:
        out.print(f"[yellow]{len(result.defects)} profile defects have no entry; they fall back to "
                  "category or default limits")


def _hosts(result: Profile) -> list[dict]:
    """The machines the profile's runs measured on, and their sampled load:
    per host, its CPU model and core count (as each generation recorded
    them) and the median 1-minute load over its rows."""
    machines = {g.get("machine", {}).get("host"): g.get("machine", {})
                for g in result.provenance.get("generations", [])}
    loads: dict[str, list[float]] = {}
    for stat in result.stats:
        for host in stat.get("hosts") or []:
            loads.setdefault(host, []).extend(x for x in stat.get("host_load") or [] if x is not None)
    return [{"host": host, "cpu": machines.get(host, {}).get("cpu"),
             "cores": machines.get(host, {}).get("cores"),
             "median_load": round(statistics.median(loads[host]), 2) if loads.get(host) else None}
            for host in sorted(set(loads) | {h for h in machines if h})]


def print_spread(derived: DerivedMap, out: Console) -> None:
    table = Table(title="run-to-run spread, pooled by runtime band (median prove time)")
    for name in ("band", "problems", "df", "sigma of log time", "max/min p50", "p90", "max"):
        table.add_column(name, justify="left" if name == "band" else "right")
    for b in derived.model.bands.values():
        if not b.problems:
            continue
        q = b.ratio_quantiles
        sigma = "" if b.sigma is None else f"{b.sigma:.3f}" + ("" if b.sigma_from == b.name else " (all)")
        table.add_row(b.name, str(b.problems), str(b.df), sigma,
                      *(f"{q[k]:.2f}" if k in q else "" for k in ("p50", "p90", "max")))
    out.print(table)


def _validate(result: Profile, map_path: Path, workers: int, out: Console) -> int:
    with progress.SweepProgress() as bar:
        v = validate(result, map_path, lambda c: LocalExecutor(workers=c.workers), workers=workers,
                     on_row=bar.row, on_start=bar.start)
    table = Table(title=f"headroom under {map_path}: max profiled prove_secs / timeout, tightest first")
    for name in ("problem", "max prove s", "timeout s", "ratio"):
        table.add_column(name, justify="left" if name == "problem" else "right")
    for h in v.headroom[:20]:
        table.add_row(h.problem_id, f"{h.max_prove_secs:.3f}",
                      "no entry" if h.timeout_sec is None else f"{h.timeout_sec:g}",
                      "" if h.ratio is None else f"{h.ratio:.4f}")
    out.print(table)
    missing = [h.problem_id for h in v.headroom if h.timeout_sec is None]
    if missing:
        out.print(f"[red]{len(missing)} profiled problems have no entry in the map, e.g. {missing[0]}")
    if v.false_timeouts:
        out.print(f"[bold red]validation FAILED: {len(v.false_timeouts)} ground truths timed out "
                  f"under the map: {', '.join(v.false_timeouts)} (sweep in {v.out})")
        return 1
    out.print(f"[green]validation passed: {len(v.summary.table)} ground truths rerun, "
              f"zero TIMEOUT (sweep in {v.out})")
    return 0 if not missing else 1
