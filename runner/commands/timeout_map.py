"""proofbatch timeout-map: derive per-problem time limits from a profile, and validate them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import statistics
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.table import Table

from cluster.local import LocalExecutor

from ..reporting import progress
from ..errors import InputError
from ..prover import Mode
from ..profile import Profile, load_profile, recorded_path
from ..maps import compare as mc, nodes as node_speed
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
    p.add_argument("--no-normalise", action="store_true",
                   help="keep each run's time as its node measured it; by default, when the "
                   "profile's runs came from nodes of different speed, times are divided by their "
                   "node's factor to read as on the reference node, which "
                   "the sidecar names (docs/profiles-and-timeout-maps.md)")
    p.add_argument("--reference-node", metavar="HOST",
                   help="the node times are normalised to (default: the one that timed the most runs)")
    p.add_argument("--compare-with", type=Path, action="append", metavar="MAP", default=[],
                   help="a map to compare the derived one with (e.g. the bench's timeout-map.json), "
                   "as `timeout-map compare`: the factor between them goes into the sidecar "
                   "(repeatable)")
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
    if args.compare_with and not args.out:
        raise InputError("--compare-with", "records a comparison in the sidecar of a map being "
                         "derived", "pass --out MAP too, or compare with `timeout-map compare A B`")
    for other in args.compare_with:
        if args.out and map_compare.same_file(args.out, other):
            # Written over, the map compared with was gone before it was compared.
            raise InputError("--out", f"{args.out} is the map --compare-with names, which "
                             "timeout-map reads", "pass a new --out path, e.g. timeout_maps/NAME.json")
    policy = _policy(args)
    result = load_profile(args.profile)
    out = Console()
    map_path = args.map
    if args.out:
        derive_and_write(result, args.out, out, policy, clock=args.clock,
                         normalise=not args.no_normalise, reference=args.reference_node,
                         compare_with=args.compare_with)
        map_path = args.out
    if args.validate:
        return _validate(result, map_path, args.workers, out)
    return 0


def derive_and_write(result: Profile, map_path: Path, out: Console, policy: MapPolicy = MapPolicy(),
                     clock: str = "cpu", normalise: bool = True, reference: str | None = None,
                     compare_with: Sequence[Path] = ()) -> None:
    # Every map compared with is read first: a bad one is refused before anything is written.
    others = [mc.read_side(p) for p in compare_with]
    runs, used = on_clock(result.runs, clock)
    if used != clock:
        out.print(f"[yellow]{result.path} holds no CPU times for every run (profiled before they "
                  "were measured): limits derived from wall times")
    nodes = node_speed.node_factors(runs, reference)
    normalised = normalise and nodes.differ
    if normalised:
        runs = nodes.normalise(runs)
        out.print(f"times normalised to node {nodes.reference} "
                  f"({(nodes.node(nodes.reference).cpu_model or 'CPU model not recorded')}): "
                  + ", ".join(f"{n.host} x{n.factor:.3f}" for n in nodes.nodes
                              if n.factor is not None and n.host != nodes.reference)
                  + f"; {len(nodes.mixed)} problems had runs on nodes of different speed")
        if nodes.unknown:
            out.print(f"[bold yellow]no factor for {', '.join(nodes.unknown)} (no problem of "
                      f">= {nodes.min_s:g} s shared with a measured node): their times stay as measured")
    elif nodes.differ:
        out.print(f"[yellow]--no-normalise: {len(nodes.mixed)} problems keep times from nodes of "
                  "different speed")
    derived = derive(runs, policy)
    prov = result.provenance
    provenance = {
        # What the map's prove_secs and limits count (runner.prover.LimitClock).
        "clock": used, "hosts": _hosts(result),
        # Which node the times read as (runner/maps/nodes.py).
        "nodes": {**nodes.as_dict(), "normalised": normalised,
                  "reference_cpu_model": (nodes.node(nodes.reference).cpu_model
                                          if nodes.reference else None)},
        "profile": str(result.path), "corpus": str(recorded_path(prov, "corpus", result.path)),
        # Profiles written before today's names say hol_build and bytecode-fork.
        "prover": prov.get("prover"), "prover_build": prov.get("prover_build") or prov.get("hol_build"),
        "mode": str(Mode.of(prov.get("mode"))) if prov.get("mode") else None,
        # The OCaml runtime its times were measured under (none recorded: OCaml's defaults).
        "runtime": prov.get("runtime") or None,
        "generations": [g["id"] for g in prov.get("generations", [])],
        "problems": {pid: p["content_sha256"] for pid, p in prov.get("problems", {}).items()},
        "defects": [d.problem_id for d in result.defects],
        "derived": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    write_map(map_path, derived, provenance)
    if others:
        provenance["compared_with"] = [_compared(map_path, other, out) for other in others]
        write_map(map_path, derived, provenance)
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
    """The machines the profile's runs were timed on: per host, its CPU
    model and logical CPUs as its rows recorded them (else as the
    generation's machine record says), how many runs it timed, and its
    1-minute load average sampled as each check ended: median, max and how
    many samples."""
    machines = {g.get("machine", {}).get("host"): g.get("machine", {})
                for g in result.provenance.get("generations", [])}
    seen: dict[str, dict] = {}
    for stat in result.stats:
        hosts = stat.get("run_hosts")
        loads = stat.get("host_load") or []
        if not hosts:                 # profiles before per-run hosts: one host per problem
            hosts = [(stat.get("hosts") or [None])[0]] * len(loads)
        for k, host in enumerate(hosts):
            h = seen.setdefault(host, {"runs": 0, "loads": [], "cpu_model": "", "cpus": None})
            h["runs"] += 1
            if k < len(loads) and loads[k] is not None:
                h["loads"].append(loads[k])
            h["cpu_model"] = h["cpu_model"] or (stat.get("cpu_models") or [""] * len(hosts))[k]
            h["cpus"] = h["cpus"] or (stat.get("host_cpus") or [None] * len(hosts))[k]
    found = []
    for host in sorted(h for h in set(seen) | set(machines) if h):
        h, m = seen.get(host, {"runs": 0, "loads": [], "cpu_model": "", "cpus": None}), machines.get(host, {})
        loads = h["loads"]
        found.append({"host": host, "cpu_model": h["cpu_model"] or m.get("cpu_model") or m.get("cpu"),
                      "cpu": m.get("cpu"), "cores": h["cpus"] or m.get("cores"), "runs": h["runs"],
                      "median_load": round(statistics.median(loads), 2) if loads else None,
                      "max_load": max(loads) if loads else None, "load_samples": len(loads)})
    return found


def _compared(map_path: Path, other, out: Console) -> dict:
    """The comparison of the map just written with ``other`` (a
    runner.maps.compare.MapSide), as its sidecar records it: the factor is
    the other map's prove_secs over this one's (runner/maps/compare.py)."""
    c = mc.compare(mc.read_side(map_path), other)
    f = c.factor
    record = {"map": str(other.path), "sha256": hashlib.sha256(Path(other.path).read_bytes()).hexdigest(),
              "mode": other.mode, "clock": other.clock,
              "factor": None if f.median is None else round(f.median, 4),
              "factor_p25": None if f.p25 is None else round(f.p25, 4),
              "factor_p75": None if f.p75 is None else round(f.p75, 4),
              "factor_problems": f.used, "factor_min_s": f.min_s,
              "in_both": len(c.where("both")), "here_only": len(c.where("A")),
              "there_only": len(c.where("B")), "class_changes": len(c.class_changes),
              "limits_here_below_their_time": len(c.a_too_tight),
              "limits_there_below_our_time": len(c.b_too_tight),
              "compared": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    factor = "no factor (no problem long enough in both)" if f.median is None else \
        f"their prove_secs / ours = {f.median:.3f} over {f.used} problems"
    out.print(f"compared with {other.path}: {factor}; recorded in the sidecar "
              "(`timeout-map compare` shows each problem)")
    return record


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
        v = validate(result, map_path, lambda prepared: LocalExecutor(workers=prepared.config.workers),
                     workers=workers, on_row=bar.row, on_start=bar.start)
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
