"""HOL Light's image plans: the context tree a session builds for some
problems (runner/provers/hol_light/contexts.py) and what building each
image is expected to cost (context_costs.py), for the planner.
"""

from __future__ import annotations

import statistics
from typing import Iterable, Mapping

from ...context_proofs import ContextProofs
from ...corpus import Problem
from ...prover import ImagePlan, JobAllowances
from . import context_costs, contexts

# ../shared/notes/hol-light.md: HOL Light starts cold in 75-90 s of CPU
# (benchmarks/overhead.py measured 65.8 s here).
BOOT_S = 70.0
# The native server, HOL Light compiled in, reaches READY in 12-14 s here
# (benchmarks/native.py: 13.7 s; benchmarks/slurm_elastic.py --mode native: 12.2 s).
NATIVE_BOOT_S = 14.0
ALLOWANCES = JobAllowances(
    # A task holds the base image and its contexts besides the checks; forked
    # checks share the image's pages, but Slurm's jobacct_gather adds up the
    # RSS of every process, so the request counts them again.
    image_bytes=2**30,
    # Loading HOL Light cold: 70-90 s of CPU, several times that on a busy node.
    boot_s=600.0)
# Image keys of a corpus planned with no installation at hand (`simulate
# --corpus`): internal to the plan; measured builds are matched by shape
# (context_costs.translate_measured).
SIMULATE_SALT = "proofbatch-simulate"


def _tree(problems: Iterable[Problem], salt: str) -> contexts.ContextTree:
    setups = {p.problem_id: p.setup_path.read_text(encoding="utf-8", errors="replace")
              for p in problems}
    return contexts.build_context_tree(setups, salt)


def plans_of_tree(tree: contexts.ContextTree, prove_secs: Mapping[str, float], choices,
           boot_s: float) -> dict[ContextProofs, ImagePlan]:
    costs = context_costs.estimate(tree, prove_secs)
    parent = {k: n.parent for k, n in tree.nodes.items()}
    plans = {}
    for choice in choices:
        build_s = {tree.base: boot_s, **{k: c.build_s(choice) for k, c in costs.items()}}
        source = {k: ("default" if k == tree.base else "estimated") for k in build_s}
        plans[ContextProofs(choice)] = ImagePlan(tree.base, dict(tree.image_of), parent, build_s, source)
    return plans


def image_plan(problems: Iterable[Problem], prove_secs: Mapping[str, float], salt: str,
               choice: ContextProofs, boot_s: float = BOOT_S) -> ImagePlan:
    """The images a session keyed by ``salt`` builds for ``problems``, on a
    base that boots in ``boot_s``."""
    return plans_of_tree(_tree(problems, salt), prove_secs, (choice,), boot_s)[ContextProofs(choice)]


def offline_plans(problems: Iterable[Problem], prove_secs: Mapping[str, float], choices,
                  profiled: Mapping[str, str], builds: Mapping[str, tuple[str | None, float]]
                  ) -> tuple[dict[ContextProofs, ImagePlan], dict[str, float]]:
    """Plans of ``problems`` under each of ``choices`` with no installation
    at hand, and the builds a profile measured laid over their images
    (``profiled``: problem id -> image key profiled; ``builds``: key ->
    (parent, seconds)). A measured boot counts for the base."""
    tree = _tree(problems, SIMULATE_SALT)
    measured = context_costs.translate_measured(tree, profiled, builds)
    roots = [s for _parent, s in (b for b in builds.values()) if _parent is None]
    boot_s = statistics.median(roots) if roots else BOOT_S
    return plans_of_tree(tree, prove_secs, choices, boot_s), measured
