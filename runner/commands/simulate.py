"""proofbatch simulate: what a sweep will take and cost, before paying for it."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from .. import prover_registry as provers
from ..checks.context_proofs import ContextProofs
from ..corpus import problem_patterns
from ..errors import InputError
from ..maps import provenance as map_provenance
from ..maps.provenance import DECLARED_MODES
from ..planning.inputs import plans_from_files
from ..planning.learned_costs import measured_sweeps
from ..planning.planner import POLICIES, Plan, PlanConfig, Workers, read_plan
from ..planning.simulate import simulate
from ..planning.sizes import MAX_NODES, check_count, check_machines, node_memory
from ..settings import help_of
from ..planning.sweep_config import SweepConfig
from . import price_flag
from .simulate_factor import MAX_HOST_FACTOR, host_factor_flag, on_map, plan_on_host
from .simulate_output import (account_line, bound_line, memory_figures, memory_line, context_figures,
                              duration_counts, image_class_figures, learned_line, print_contexts,
                              print_modes, print_prediction)

MODES = ("bytecode", "native", "auto")

NAME = "simulate"
HELP = "predict a sweep's makespan, utilization and cost from a timeout map or profile"
# The bench advises running at most RAM_GB / 6 checks at once (about 5 GB per heavy proof).
DEFAULT_MEM_PER_CORE = 6 * 2**30
# What a sweep's sessions keep loaded.
SESSION_MAX_IMAGES = SweepConfig.__dataclass_fields__["max_images"].default


def add_arguments(p) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--timeout-map", type=Path, help="a timeout map (the bench's timeout-map.json "
                     "works): prove_secs are the expected durations")
    src.add_argument("--profile", type=Path, help="a directory written by `proofbatch profile` "
                     "(its proofs' CPU times where every run has one, else their wall times)")
    src.add_argument("--plan", type=Path, help="a sweep's OUT/plan.json, simulated again (by "
                     "default on its own workers)")
    p.add_argument("--corpus", type=Path, help="the corpus the sweep will check (e.g. one cut by "
                   "`proofbatch extract`): its problems are planned on their real context tree, "
                   "and each context's load is measured (a profile's) or estimated; without it "
                   "contexts are unknown")
    p.add_argument("--problems", type=problem_patterns, action="extend", metavar="ID,GLOB,@FILE",
                   help="plan only the problems matching these (ids, globs or @FILE, separated by "
                   "commas): the corpus's, as `run --problems` selects them, or without --corpus "
                   "the map's or profile's (e.g. a map's heavy tail)")
    p.add_argument("--context-proofs", choices=[c.value for c in ContextProofs], default=None,
                   help="how contexts load their own proofs: replay (run them; the map's prove_secs "
                   "of each context's earlier proofs are charged) or trust (returned unproved); "
                   "default replay. Image core-hours are printed for both")
    p.add_argument("--map-mode", choices=tuple(DECLARED_MODES), default=None,
                   help="the mode a timeout map without a sidecar was measured in: native or "
                   "bytecode (s2n-bignum-bench's map is native); its times are converted to "
                   "--mode. Optional here, unlike for `run`: without it such a map's times are "
                   "used unconverted, and the output says \"mode unknown\"")
    p.add_argument("--map-build", default=None, help=help_of(SweepConfig, "map_build"))
    p.add_argument("--host-factor", type=host_factor_flag, default=None, metavar="X",
                   help="how many times slower the sweep's host proves than the map's, a number "
                   f"above 0 and at most {MAX_HOST_FACTOR:g} (`proofbatch calibrate` measures it): "
                   "the map's times are multiplied by X, as `run --host-factor` plans them; with "
                   "--plan, the plan's measured times are, over the factor its sweep ran with")
    p.add_argument("--mode", choices=MODES, default=None,
                   help="the mode the sweep will run in, as `run --mode` takes it (default "
                   f"{SweepConfig.__dataclass_fields__['mode'].default}): its boot, context loads "
                   "(and native compiles) and proof times, the map's converted from the map's mode "
                   "by the central bytecode/native ratio; the other modes are priced beside it")
    p.add_argument("--context-root", type=Path, default=None,
                   help="where needs/loadt of the corpus's setups resolve first, as the sweep's "
                   "--context-root (default: the corpus's extract.json says, else the current "
                   "directory)")
    p.add_argument("--hol-light", type=Path, default=None,
                   help="the HOL Light the sweep will use, where loads resolve after the context "
                   "root (default: Debian's package); read, never started")
    p.add_argument("--costs-from", type=Path, nargs="+", default=(), metavar="OUT",
                   help="sweep directories (`run --out`) or profiles whose measured image builds "
                   "(OUT/images/*.json) price this plan's images: those of the same mode and "
                   "--context-proofs only, laid over the corpus's images by shape (a recorded "
                   "--plan: by image key)")
    p.add_argument("--workers", type=int, help="workers in all (default: nodes x cores per node)")
    p.add_argument("--nodes", type=int, help=help_of(Workers, "nodes"))
    p.add_argument("--cores-per-node", type=int, help=help_of(Workers, "cores_per_node", default=False)
                   + " (default: workers / nodes)")
    p.add_argument("--mem-per-node", type=node_memory,
                   help=help_of(Workers, "mem_per_node", default=False)
                   + ", e.g. 192G (default: 6 GiB per core, the bench's advice)")
    p.add_argument("--node-factors", type=node_factors, metavar="F,F,...",
                   help=help_of(Workers, "node_factors", default=False) + "; sets --nodes when "
                   "that is not given")
    p.add_argument("--max-images", type=int, default=None,
                   help=help_of(Workers, "images_per_node", default=False)
                   + f" (default: the plan's, else {SESSION_MAX_IMAGES} as a sweep's sessions keep)")
    p.add_argument("--policy", choices=POLICIES, default=None,
                   help=help_of(PlanConfig, "policy", default=False) + "; default planned, or the "
                   "plan's; naive is always shown beside it")
    p.add_argument("--seed", type=int, default=None,
                   help=help_of(PlanConfig, "seed", default=False) + " (default 0, or the plan's)")
    p.add_argument("--core-hour-price", type=price_flag, help="price of one core-hour, for the cost")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def node_factors(text: str) -> tuple[float, ...]:
    """--node-factors: each machine's factor, comma-separated."""
    import argparse

    try:
        factors = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not numbers separated by commas, e.g. "
                                         "1.0,1.0,1.8") from None
    if not factors or not all(0 < f <= 1000 for f in factors):
        raise argparse.ArgumentTypeError(f"{text!r}: each factor must be above 0 and at most 1000")
    return factors


def workers_from(args, default: Workers | None = None) -> Workers:
    factors = getattr(args, "node_factors", None)
    if factors is not None:
        if args.nodes is not None and args.nodes != len(factors):
            raise InputError("--node-factors", f"gives {len(factors)} factors for {args.nodes} nodes",
                             "give one factor per node, or drop --nodes")
        args.nodes = len(factors)
        if args.workers is None and args.cores_per_node is None and default is None:
            raise InputError("--workers", "no worker count given", "pass --cores-per-node with "
                             "--node-factors")
    workers = _workers_from(args, default)
    return workers if factors is None else dataclasses.replace(workers, node_factors=factors)


def _workers_from(args, default: Workers | None = None) -> Workers:
    if args.max_images is not None and args.max_images < 1:
        raise InputError("--max-images", f"{args.max_images} is not a positive count",
                         "pass 1 or more (the base image counts)")
    if default is not None and args.workers is None and args.nodes is None \
            and args.cores_per_node is None:
        check_machines(default.nodes, default.cores_per_node, str(args.plan))
        return Workers(default.nodes, default.cores_per_node,
                       args.mem_per_node or default.mem_per_node,
                       args.max_images or default.images_per_node)
    # The counts the user gave are checked first, so a refusal names them.
    for name, value in (("--workers", args.workers), ("--nodes", args.nodes)):
        if value is not None and value < 1:
            raise InputError(name, f"{value} is not a positive count", "pass 1 or more")
    check_count("--workers", args.workers)
    check_count("--nodes", args.nodes, MAX_NODES)
    check_count("--cores-per-node", args.cores_per_node)
    nodes = args.nodes or 1
    if args.cores_per_node is None and args.workers is None:
        raise InputError("--workers", "no worker count given", "pass --workers N, or --nodes and "
                         "--cores-per-node")
    cores = args.cores_per_node
    if cores is None:
        if args.workers % nodes:
            raise InputError("--workers", f"{args.workers} workers do not split evenly over "
                             f"{nodes} nodes", "pass --cores-per-node, or a multiple of --nodes")
        cores = args.workers // nodes
    if args.workers is not None and args.workers != nodes * cores:
        raise InputError("--workers", f"{args.workers} is not {nodes} nodes x {cores} cores",
                         "drop --workers, or make it nodes x cores per node")
    for name, value in (("--nodes", nodes), ("--cores-per-node", cores)):
        if value < 1:
            raise InputError(name, f"{value} is not a positive count", "pass 1 or more")
    check_machines(nodes, cores, "--workers" if args.workers is not None else "--cores-per-node")
    images = args.max_images or (default.images_per_node if default else None) or SESSION_MAX_IMAGES
    return Workers(nodes, cores, args.mem_per_node or cores * DEFAULT_MEM_PER_CORE, images)


@dataclass
class _Planned:
    """What `simulate` planned, from a recorded plan or from a map and corpus."""
    plan: Plan
    workers: Workers
    by_choice: dict[ContextProofs, Plan] = field(default_factory=dict)     # with --corpus
    loaded: map_provenance.LoadedMap | None = None      # the timeout map, scaled by --host-factor
    conversion: dict | None = None  # how the map's mode converts to --mode
    account: dict | None = None     # image builds by choice
    modes: object = None            # the other modes' plans, for a prover that has several
    chosen: ContextProofs | None = None     # None: from a recorded plan
    factor: dict | None = None      # --host-factor as applied (_factor_of)


def _planned(args, mode: str, sets, learned: dict) -> _Planned:
    """The plan to simulate: ``args.plan`` re-read for other workers, or one
    planned from ``args.timeout_map`` (and ``args.corpus``'s contexts)."""
    if args.plan is not None:
        recorded, _ = read_plan(args.plan)
        workers = workers_from(args, recorded.workers)
        plan = recorded.with_workers(workers)
        factor = None
        if args.host_factor is not None:
            plan, factor = plan_on_host(plan, args.plan, args.host_factor)
        if sets:
            plan = _by_key(plan, sets, learned)
        if args.policy is not None or args.seed is not None:
            plan = plan.with_policy(args.policy or plan.config.policy, args.seed)
        if args.corpus is not None:
            raise InputError("--corpus", "a recorded plan already has its contexts",
                             "drop --corpus, or simulate from --timeout-map or --profile")
        return _Planned(plan, workers, factor=factor)
    workers = workers_from(args)
    loaded = map_provenance.load(args.timeout_map, args.map_mode, args.map_build) \
        if args.timeout_map else None
    if args.host_factor is not None:
        if loaded is None:
            raise InputError("--host-factor", "scales a timeout map's times, and no "
                             "--timeout-map is given", "pass --timeout-map MAP, or drop it")
        loaded = loaded.scaled(args.host_factor)
    config = PlanConfig(policy=args.policy or "planned", seed=args.seed or 0)
    chosen = ContextProofs(args.context_proofs or ContextProofs.REPLAY)
    by_choice, offline = _plans(args, mode, loaded, workers, config,
                                (chosen,) if args.corpus is None else tuple(ContextProofs),
                                sets, learned)
    modes = None
    if args.corpus is not None and provers.modes_of(_prover(args.corpus)):
        modes = _other_modes(args, mode, loaded, workers, config, chosen, by_choice[chosen], sets)
    factor = None if args.host_factor is None else on_map(args.host_factor)
    return _Planned(by_choice[chosen], workers, by_choice, loaded, offline.conversion,
                    offline.account, modes, chosen, factor)


def run(args) -> int:
    mode = args.mode or SweepConfig.__dataclass_fields__["mode"].default
    sets = measured_sweeps(args.costs_from) if args.costs_from else ()
    learned: dict = {}
    p = _planned(args, mode, sets, learned)
    plan, workers, account = p.plan, p.workers, p.account
    ours = simulate(plan, keep_schedule=False)
    naive = simulate(plan.with_policy("naive"), keep_schedule=False)
    # Image builds by choice; without a corpus they are unknown, not zero.
    if account is not None:
        for choice, said in learned.items():
            if choice in account:
                account[choice]["learned_images"] = said["measured"]
    contexts = {c.value: {**context_figures(q), "account": account.get(c.value)}
                for c, q in p.by_choice.items()} if args.corpus is not None else None
    price = args.core_hour_price
    sources = {}
    for c in plan.checks:
        sources[c.source] = sources.get(c.source, 0) + 1
    if args.json:
        out = {"workers": workers.count, "nodes": workers.nodes,
               "cores_per_node": workers.cores_per_node, "mem_per_node": workers.mem_per_node,
               "node_factors": workers.node_factors,
               "checks": len(plan.checks), "policy": plan.config.policy, "durations_from": sources,
               "lower_bound_s": ours.lower_bound_s, "lower_bound_terms": plan.bound_terms()[1],
               "longest_check": plan.bound_terms()[2], "makespan_s": ours.makespan_s,
               "ratio": ours.ratio, "utilization": ours.utilization, "core_hours": ours.core_hours,
               "image_build_core_hours": ours.build_s / 3600,
               "image_rebuild_core_hours": ours.rebuild_s / 3600,
               "naive_image_rebuild_core_hours": naive.rebuild_s / 3600,
               "submission_order": plan.config.submission_order,
               "image_costs_learned": _learned_of(learned, p.chosen),
               "cost": None if price is None else ours.core_hours * price,
               "naive_makespan_s": naive.makespan_s, "naive_ratio": naive.ratio,
               "naive_utilization": naive.utilization, "naive_core_hours": naive.core_hours,
               "naive_cost": None if price is None else naive.core_hours * price,
               "context_proofs": None if args.plan else str(p.chosen),
               "contexts": contexts if contexts is not None else
               ("from the plan" if args.plan else "unknown (no --corpus)"),
               "map": None if p.loaded is None else p.loaded.describe(),
               "host_factor": p.factor,
               "mode": None if args.plan else mode, "proof_times": p.conversion,
               "check_durations": duration_counts(sources), "modes": p.modes,
               "image_classes": image_class_figures(plan), "memory": memory_figures(plan),
               "planned_checks": [{"problem_id": c.problem_id, "attempt": c.attempt,
                                   "expected_s": c.expected_s, "source": c.source,
                                   "mem_bytes": c.mem_bytes, "limit_s": c.limit_s} for c in plan.checks]}
        print(json.dumps(out))
        return 0
    _say(Console(), args, p, mode, sources, ours, naive, contexts, learned)
    return 0


def _say(console: Console, args, p: _Planned, mode: str, sources: dict, ours, naive,
         contexts: dict | None, learned: dict) -> None:
    """`simulate`'s report on the screen (``--json`` prints the same figures)."""
    print_prediction(console, p.workers, sources, ours, naive, args.core_hour_price)
    if p.plan.config.submission_order:
        console.print("the planned policy dispatches in submission order here: simulating both "
                      "predicted it faster on this corpus and these workers")
    if args.costs_from:
        console.print(learned_line(_learned_of(learned, p.chosen)))
    if p.workers.node_factors is not None:
        console.print(f"a mixed cluster: nodes {', '.join(f'{f:g}' for f in p.workers.node_factors)} "
                      "times the plan's times; the fastest take the heaviest checks first")
    console.print(bound_line(p.plan))
    console.print(memory_line(p.plan))
    if p.loaded is not None:
        console.print(f"timeout map {p.loaded.path}: {p.loaded.describe()}")
    if p.factor is not None:
        console.print(p.factor["note"])
    if p.conversion is not None:
        console.print(f"mode {mode}: {p.conversion['note']}")
    counts = duration_counts(sources)
    console.print(f"check durations: measured {counts['measured']}, estimated {counts['estimated']}, "
                  f"unknown {counts['unknown']} (the default)")
    if contexts is not None:
        print_contexts(console, contexts)
        for choice, f in contexts.items():
            console.print(f"{choice}: " + account_line(f["account"]))
    if p.modes is not None:
        print_modes(console, p.modes, p.chosen.value)
    elif args.plan is None:
        console.print("contexts: unknown (no --corpus): every check is planned on the base image, "
                      "so image builds above count only the boots; pass --corpus to plan each "
                      "context's load")


def _context_root(args) -> Path | None:
    if args.context_root is not None:
        return args.context_root
    if args.corpus is not None and (args.corpus / "extract.json").is_file():
        try:
            root = json.loads((args.corpus / "extract.json").read_text()).get("context_root")
        except (OSError, ValueError, AttributeError):
            root = None
        if root:
            return Path(root)
    return Path.cwd()


def _by_key(plan, sets, learned: dict):
    """A recorded plan with the builds ``sets`` measured of its very images
    (image keys hold the build, the context root and the driver, so the
    mode too)."""
    from dataclasses import replace as _replace

    secs: dict[str, list[float]] = {}
    for m in sets:
        for k, (_, v) in m.builds.items():
            if k in plan.images:
                secs.setdefault(k, []).append(v)
    import statistics

    images = {k: (_replace(i, build_s=statistics.median(secs[k]), source="measured")
                  if k in secs else i) for k, i in plan.images.items()}
    learned["plan"] = {"images": len(images), "measured": len(secs),
                       "sweeps": [str(m.out) for m in sets], "other_mode": [], "other_choice": []}
    return _replace(plan, images=images)


def _learned_of(learned: dict, chosen) -> dict | None:
    if not learned:
        return None
    return learned.get("plan") or learned.get(str(chosen)) or next(iter(learned.values()))


def _plans(args, mode, loaded, workers, config, choices, sets=(), learned=None):
    """Plans by choice in ``mode``, and what the corpus's prover said of it
    (runner.prover_registry.Offline: the proof-time conversion, the account)."""
    request = provers.OfflineRequest(mode=mode, loaded=loaded, context_root=_context_root(args),
                                     installation=args.hol_light)
    with provers.offline_mode(_prover(args.corpus), request) as offline:
        by_choice = plans_from_files(timeout_map=offline.loaded, profile=args.profile,
                                     workers=workers, config=config, corpus=args.corpus,
                                     choices=choices, costs_from=sets, mode=mode, learned=learned,
                                     problems=args.problems)
    return by_choice, offline


def _prover(corpus: Path | None) -> str | None:
    """The corpus's prover; None without a corpus (a map alone: the default's)."""
    if corpus is None:
        return None
    try:
        return provers.detect(corpus)
    except InputError:
        return None


def _other_modes(args, mode, loaded, workers, config, chosen, plan, sets=()) -> dict:
    """Every mode's figures under the chosen --context-proofs, this one's from ``plan``."""
    out = {}
    for other in MODES:
        if other == mode:
            p = plan
        else:
            by_choice, _ = _plans(args, other, loaded, workers, config, (chosen,), sets)
            p = by_choice[chosen]
        figures = context_figures(p)
        out[other] = {k: figures[k] for k in ("boot_core_hours", "context_image_core_hours",
                                              "proof_core_hours", "makespan_s", "core_hours")}
        out[other]["base_build_s"] = p.images[p.base].build_s
    cheapest = min(out, key=lambda m: out[m]["core_hours"])
    return {"by_mode": out, "cheapest": cheapest}
