"""What the planner is told before a sweep: expected durations, memory and
image build costs, from a profile, a timeout map, earlier runs and defaults.

Durations, per problem, in this order: the profile's median ``prove_secs``
(on the clock of the map derived from it: CPU unless it says wall);
the timeout map's ``prove_secs`` (the bench's map carries the ground truth's
measured time); the median of the known durations of the problem's
category; the default. Image builds: the median of measured builds of the
same image key (``images/*.json`` of a sweep, or of a profile's runs), else
an estimate from the context's phrases and the proofs among them, by the
choice of ``--context-proofs`` (runner/provers/hol_light/costs/context_costs.py), else the defaults
below (the base image, and contexts when no corpus gives their text).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from .. import prover_registry as provers
from ..checks.context_proofs import ContextProofs
from ..errors import InputError
from .learned_costs import Measured, cached_builds, learned_for, measured_builds, require_sweeps
from .planner import Image, PlanCheck, make_plan
from ..maps import mem_needs
from ..maps import nodes
from ..maps.profile_data import load_profile, on_clock
from .simulate import guard

# ../shared/notes/hol-light.md: HOL Light starts cold in 75-90 s of CPU
# (benchmarks/checks/overhead.py measured 65.8 s here); `needs "Library/words.ml"`
# takes about 25 s more.
DEFAULT_BASE_BUILD_S = 70.0
DEFAULT_CONTEXT_BUILD_S = 25.0
# The bench's median proof takes 0.065 s and 63% take under a second
# (../shared/notes/workload-and-anchors.md).
DEFAULT_EXPECTED_S = 1.0
BASE = "base"      # the base image's key when no measured build names it


@dataclass(frozen=True)
class Known:
    """Measurements the planner may use; each mapping is by problem id."""

    durations: Sequence[tuple[str, Mapping[str, float]]] = ()   # (source, expected s), first wins
    mem_bytes: Mapping[str, int] = field(default_factory=dict)
    builds: Mapping[str, tuple[str | None, float]] = field(default_factory=dict)  # key -> (parent, s)
    categories: Mapping[str, str] = field(default_factory=dict)  # of problems outside the corpus
    images: Mapping[str, str] = field(default_factory=dict)      # problem id -> image key profiled
    # How the profile's contexts loaded their proofs (runner.checks.context_proofs):
    # its measured builds hold for that choice only. None: a sweep's own.
    builds_choice: str | None = None


@dataclass(frozen=True)
class Item:
    """A check to plan, as the caller knows it."""

    problem_id: str
    attempt: int
    category: str
    image_key: str
    limit_s: float
    mem_bytes: int


def from_profile(path: Path, clock: str = "cpu", reference: str | None = None) -> Known:
    """Durations (median prove_secs), memory (largest peak RSS) and image
    builds measured by ``proofbatch profile``. ``clock``: the times to take,
    CPU (as ``timeout-map`` derives by default) or wall; CPU only where every
    run has one (profile_data.on_clock), as a map derived from it would;
    ``reference``: a node to read every run's time as on (runner/maps/nodes.py)."""
    profile = load_profile(path)
    timed, _ = on_clock(profile.runs, clock)
    if reference is not None:
        timed = nodes.node_factors(timed, reference).normalise(timed)
    durations = {r.problem_id: statistics.median(r.prove_secs) for r in timed}
    mem = {r.problem_id: int(max(r.peak_rss_mb) * 2**20) for r in profile.runs if r.peak_rss_mb}
    runs = [d for d in (Path(path) / "runs").glob("*") if d.is_dir()]
    return Known([("profile", durations)], mem, measured_builds(runs),
                 {r.problem_id: r.category for r in profile.runs},
                 {r.problem_id: r.image_key for r in profile.runs if r.image_key},
                 str(profile.provenance.get("context_proofs") or "replay"))


def from_map(loaded) -> Known:
    """Durations from a timeout map's ``prove_secs``; memory from its sidecar;
    and, when the sidecar names a profile that is still there, that
    profile's measurements first. ``loaded``: runner.maps.provenance.LoadedMap."""
    durations = loaded.prove_secs()
    problems = loaded.problems
    # A heavy problem nothing measured (the bench's map has no memory) is
    # packed by its time class's estimate, as `run` gives it (maps/mem_needs.py).
    mem = {pid: c.peak_bytes for pid, secs in durations.items()
           if (c := mem_needs.heavy_class(secs)) is not None}
    mem.update({pid: p.expected_mem_bytes for pid, p in problems.items() if p.expected_mem_bytes})
    categories = {pid: p.category for pid, p in problems.items() if p.category}
    known = Known([("map", durations)], mem, {}, categories)
    profile = loaded.profile
    if profile is not None and (profile / "summary.json").is_file():
        # The map's times were derived on its sidecar's clock, normalised as it
        # says: its profile's times are read the same way, or a plan would mix
        # the wall times of a loaded profiling host with a map's CPU times.
        speeds = (loaded.sidecar.provenance.get("nodes") or {}) if loaded.sidecar else {}
        reference = (speeds.get("reference") or None) if speeds.get("normalised") else None
        try:
            measured = from_profile(profile, loaded.provenance.clock, reference)
        except InputError:
            return known              # a profile moved on since; the map alone stands
        # The map's profile was measured on the map's host: on a slower one
        # its times grow by the same factor as the map's own (loaded.scaled).
        factor = getattr(loaded, "host_factor", 1.0)
        if factor != 1.0:
            measured = replace(measured, durations=[
                (source, {pid: secs * factor for pid, secs in d.items()})
                for source, d in measured.durations])
        return combine(measured, known)
    return known


def combine(*parts: Known) -> Known:
    """Earlier parts win."""
    durations = [d for p in parts for d in p.durations]
    mem, builds, categories, images = {}, {}, {}, {}
    for p in reversed(parts):
        mem.update(p.mem_bytes)
        builds.update(p.builds)
        categories.update(p.categories)
        images.update(p.images)
    choice = next((p.builds_choice for p in parts if p.builds_choice is not None), None)
    return Known(durations, mem, builds, categories, images, choice)


def expected_checks(items: Sequence[Item], known: Known,
                    default_s: float = DEFAULT_EXPECTED_S) -> list[PlanCheck]:
    """Each item with its expected duration and where it came from, in the
    items' order (their submission order)."""
    by_category: dict[str, list[float]] = defaultdict(list)
    for _, durations in known.durations:
        for pid, secs in durations.items():
            category = known.categories.get(pid)
            if category is not None:
                by_category[category].append(secs)
    category_s = {c: statistics.median(v) for c, v in by_category.items()}
    out = []
    for index, it in enumerate(items):
        secs, source = None, "default"
        for name, durations in known.durations:
            if it.problem_id in durations:
                secs, source = durations[it.problem_id], name
                break
        if secs is None and it.category in category_s:
            secs, source = category_s[it.category], "category"
        if secs is None:
            secs = default_s
        mem = known.mem_bytes.get(it.problem_id, it.mem_bytes)
        out.append(PlanCheck(it.problem_id, it.attempt, it.category, float(secs), source, int(mem),
                             it.image_key, float(it.limit_s), index))
    return out


def images_for(keys: Iterable[str], parents: Mapping[str, str | None], base: str,
               measured: Mapping[str, tuple[str | None, float]],
               base_s: float = DEFAULT_BASE_BUILD_S,
               context_s: float = DEFAULT_CONTEXT_BUILD_S,
               estimated: Mapping[str, float] | None = None) -> dict[str, Image]:
    """The images ``keys`` need with their ancestors, each with a measured
    build time when one is known, else its ``estimated`` one, else the
    default. ``parents`` gives the tree (a key missing there hangs below
    ``base``)."""
    estimated = estimated or {}
    images: dict[str, Image] = {}
    todo = list(keys) + [base]
    while todo:
        key = todo.pop()
        if key in images:
            continue
        parent = None if key == base else parents.get(key, base)
        if key in measured:
            secs, source = measured[key][1], "measured"
        elif key in estimated:
            secs, source = estimated[key], "estimated"
        else:
            secs, source = (base_s if key == base else context_s), "default"
        images[key] = Image(key, parent, secs, source)
        if parent is not None:
            todo.append(parent)
    return images


def prices(known: Known) -> dict[str, float]:
    """Expected proof seconds by problem id, the first source winning."""
    out: dict[str, float] = {}
    for _, durations in reversed(known.durations):
        out.update(durations)
    return out


def plan_sweep(tasks: Sequence, backend, *, workers, config, timeout_map=None, out: Path,
               costs_from: Sequence = ()):
    """The plan of a sweep's tasks (runner.checks.tasks.CheckTask, in corpus order)
    on ``backend`` (a runner.prover.ProverBackend), whose image plan says
    which image each problem needs and what building it is expected to cost.

    ``timeout_map`` is the sweep's map as read once (runner.maps.provenance).
    Memory needs are the tasks' own (the sweep resolved them from the map's
    sidecar and --mem-limit); image builds measured by earlier runs of the
    same sweep come first, then those of the sweeps ``costs_from`` names and
    the cost cache (by image key: the very image, build and mode), then those
    of the map's profile, then the backend's estimates. The map's durations
    (and its profile's) are moved to the mode each check runs in
    (``backend.expected_in_mode``)."""
    require_sweeps(costs_from)
    problems = list({t.problem.problem_id: t.problem for t in tasks}.values())
    others = measured_builds([Path(d) for d in costs_from]) if costs_from else {}
    mapped = from_map(timeout_map) if timeout_map else Known()
    # The map's times are in the mode it was measured in; the checks run in
    # the backend's (a bytecode sweep of a native map: 4.3x longer).
    mapped = replace(mapped, durations=[(source, backend.expected_in_mode(problems, d))
                                        for source, d in mapped.durations])
    known = combine(Known(builds=measured_builds([out])), Known(builds=others),
                    Known(builds=cached_builds(out)), mapped)
    known = Known(known.durations, {}, known.builds, known.categories, known.images)
    images = backend.image_plan(problems, prices(known))
    items = [Item(t.problem.problem_id, t.attempt, t.problem.category,
                  images.image_of[t.problem.problem_id], t.limits.time_s, t.limits.expected_mem_bytes)
             for t in tasks]
    return guard(make_plan(expected_checks(items, known), images_of_plan(images, known.builds),
                           images.base, workers, config))


def images_of_plan(plan, measured: Mapping[str, tuple[str | None, float]]) -> dict[str, Image]:
    """The planner's images of an image plan: measured builds win over the plan's estimates."""
    keys = set(plan.image_of.values())
    images = images_for(keys, plan.parent, plan.base, measured, base_s=plan.build_s[plan.base],
                        estimated=plan.build_s)
    return {k: (Image(k, i.parent, i.build_s, plan.source.get(k, i.source))
                if i.source == "estimated" else i) for k, i in images.items()}


def plan_from_files(*, timeout_map=None, profile: Path | None, workers, config,
                    default_mem: int = 512 * 2**20, corpus: Path | None = None,
                    context_proofs=None):
    """One plan; see plans_from_files."""
    choice = ContextProofs(context_proofs or ContextProofs.REPLAY)
    return plans_from_files(timeout_map=timeout_map, profile=profile, workers=workers,
                            config=config, default_mem=default_mem, corpus=corpus,
                            choices=(choice,))[choice]


def plans_from_files(*, timeout_map=None, profile: Path | None, workers, config,
                     default_mem: int = 512 * 2**20, corpus: Path | None = None,
                     choices=(), costs_from: Sequence[Measured] = (), mode: str | None = None,
                     learned: dict | None = None, problems: Sequence[str] | None = None) -> dict:
    """A plan of the problems of a profile and/or a timeout map (a
    runner.maps.provenance.LoadedMap). With a ``corpus``, its problems are
    planned on their real context tree, each image measured or estimated
    under each of ``choices`` (runner.checks.context_proofs.ContextProofs; one plan
    each, read from one pass over the corpus; runner/provers/hol_light/costs/context_costs.py);
    without one, a profile (given, or named by the map's sidecar) gives image
    keys and measured builds, and a map alone puts every check on the base
    image (its contexts are unknown, and every choice gets the same plan).

    ``costs_from`` (measured_sweeps): image builds earlier sweeps measured
    in ``mode`` under each choice, laid over the plan's images (lay_over);
    ``learned``, given, gets per choice how many images they priced.
    ``problems``: the corpus's problems to plan (``run --problems`` patterns,
    runner.corpus.select_problems); all when None."""
    learned = {} if learned is None else learned
    if timeout_map is None and profile is None:
        raise InputError("simulate", "nothing to plan", "pass --timeout-map FILE or --profile DIR")
    parts, limits = [], {}
    if profile is not None:
        parts.append(from_profile(profile))
    if timeout_map is not None:
        parts.append(from_map(timeout_map))
        limits = timeout_map.limits()
    known = combine(*parts)
    if corpus is not None:
        return _plan_corpus(corpus, known, limits, workers, config, default_mem, choices,
                            costs_from, mode, learned, problems)
    image_of = known.images
    ids = sorted(set().union(*(d.keys() for _, d in known.durations)) | set(limits))
    if not ids:
        raise InputError(getattr(timeout_map, "path", None) or profile, "no problems in it",
                         "pass a map or profile with entries")
    if problems:        # without a corpus, the patterns pick the map's (or profile's) problems
        from ..corpus import select_ids

        ids = select_ids(ids, problems, "the map" if timeout_map is not None else "the profile")
    roots = [k for k, (parent, _) in known.builds.items() if parent is None]
    base = roots[0] if len(roots) == 1 else BASE
    items = [Item(pid, 0, known.categories.get(pid, "generic"), image_of.get(pid, base),
                  limits.get(pid, 0.0), default_mem) for pid in ids]
    checks = expected_checks(items, known)
    parents = {k: (p if p is not None or k == base else base) for k, (p, _) in known.builds.items()}
    images = images_for({c.image_key for c in checks}, parents, base, known.builds)
    plans = {}
    for choice in choices:
        ours = _measured_over(images, base, costs_from, mode, choice, learned,
                              {c.problem_id: c.image_key for c in checks})
        plans[choice] = guard(make_plan(checks, ours, base, workers, config))
    return plans


def _measured_over(images: Mapping[str, Image], base: str, sets, mode, choice,
                   learned: dict, image_of: Mapping[str, str] | None = None) -> dict[str, Image]:
    """``images`` with the builds of ``sets`` measured in ``mode`` under
    ``choice``; ``image_of``: problem id -> image key, to lay them over."""
    if not sets:
        return dict(images)
    from ..prover import ImagePlan

    shape = ImagePlan(base, dict(image_of or {}), {k: i.parent for k, i in images.items()},
                      {k: i.build_s for k, i in images.items()})
    measured, said = learned_for(shape, sets, mode, str(choice) if choice is not None else None)
    learned[str(choice)] = said
    return {k: (replace(i, build_s=measured[k], source="measured") if k in measured else i)
            for k, i in images.items()}


def _plan_corpus(corpus: Path, known: Known, limits: Mapping[str, float], workers, config,
                 default_mem: int, choices, costs_from=(), mode=None, learned=None,
                 patterns=None) -> dict:
    from ..corpus import select_problems

    prover = provers.detect(corpus)
    problems = provers.load_problems(corpus, prover=prover)
    if patterns:
        # As a sweep selects them: its image tree holds these problems' contexts only.
        problems = select_problems(problems, patterns)
    by_choice, measured = provers.offline_image_plans(prover, problems, prices(known), choices,
                                                      known.images, known.builds)
    plans = {}
    for choice, images in by_choice.items():
        # A profile's builds were measured under its own choice only.
        ours = measured if str(choice) == (known.builds_choice or "replay") else {}
        items = [Item(p.problem_id, 0, p.category, images.image_of[p.problem_id],
                      limits.get(p.problem_id, 0.0), default_mem) for p in problems]
        planned = images_of_plan(images, {k: (images.parent.get(k), s) for k, s in ours.items()})
        planned = _measured_over(planned, images.base, costs_from, mode, choice,
                                 {} if learned is None else learned, images.image_of)
        plans[choice] = guard(make_plan(expected_checks(items, known), planned, images.base,
                                        workers, config))
    return plans
