"""HOL Light's image plans: the context tree a session builds for some
problems (runner/provers/hol_light/contexts.py) and what building each
image is expected to cost (context_costs.py), for the planner, in the mode
the sweep runs in.

Modes. ``bytecode``: the toplevel boots (``BOOT_S`` from HOL Light's
sources, ``MODULE_BOOT_S`` from a checkout's compiled module) and every
image loads its segment in bytecode (load_model.MODELS["bytecode"]).
``native``: the native server boots (``NATIVE_BOOT_S``) and every image
compiles its segment, the files it loads first and its problems' answers,
then loads them natively (MODELS["native"]). ``auto``: the native server, plus, on a node that runs
any check routed to bytecode (expected bytecode time at most
map_modes.THRESHOLD_S), the bytecode toplevel and every image such a
check needs built there too.

``simulate --corpus`` has no installation at hand and the registry's
offline planner takes no settings, so the command says the mode, the
context root and HOL Light's directory through ``offline_settings`` (a
context variable read by ``offline_plans``), which also keeps the account
of what was measured, estimated and unknown for the command to print.
"""

from __future__ import annotations

import contextlib
import contextvars
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from ....checks.context_proofs import ContextProofs
from ....corpus import Problem
from ....prover import ImagePlan, JobAllowances
from .. import contexts
from . import context_costs
from .file_loads import FileLoads
from .map_modes import expected_in

# ../shared/notes/hol-light.md: HOL Light starts cold in 75-90 s of CPU
# (benchmarks/checks/overhead.py measured Debian's in 65.8 s here, and 74.9 s on a
# quiet host on 2026-11-26).
BOOT_S = 70.0
# A checkout built with its compiled module (HOLLIGHT_USE_MODULE=1, as the
# bench's setup.sh builds it; install.uses_module) boots from hol_lib.cmo,
# not from its sources: the bench's 5e62421 reached READY in 57.2, 57.5 and
# 56.6 s (benchmarks/planning/predictions.py, seeds 6-8, quiet host) where Debian's
# took 74.9 s the same day, and was planned at BOOT_S, 23-30% high.
MODULE_BOOT_S = 57.2
# The native server, HOL Light compiled in, reaches READY in 12-14 s here
# (benchmarks/native/native.py: 13.7 s; benchmarks/slurm/slurm_elastic.py --mode native: 12.2 s).
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
MODES = ("bytecode", "native", "auto")
BOOTS = {"bytecode": BOOT_S, "native": NATIVE_BOOT_S}


def boot_s_of(mode: str, hol_dir: Path | None) -> float:
    """What booting the base costs in ``mode`` for the HOL Light in ``hol_dir``."""
    from ..install import uses_module

    if mode == "bytecode" and hol_dir is not None and uses_module(hol_dir):
        return MODULE_BOOT_S
    return BOOTS[mode]


@dataclass
class OfflineSettings:
    """What ``simulate --corpus`` plans with, and what it learns back."""

    mode: str = "bytecode"                        # bytecode, native or auto
    context_root: Path | None = None              # where needs/loadt resolve first
    hol_dir: Path | None = None                   # HOL Light's directory
    # problem id -> the mode its prove_secs are in (the map's, converted by the
    # command: in auto mode, the mode each check is routed to); missing: the
    # image's own mode
    price_modes: Mapping[str, str] = field(default_factory=dict)
    account: dict = field(default_factory=dict)   # choice -> context_costs.totals(...) and more


_OFFLINE: contextvars.ContextVar[OfflineSettings | None] = contextvars.ContextVar(
    "hol_light_offline_settings", default=None)


@contextlib.contextmanager
def offline_settings(settings: OfflineSettings):
    token = _OFFLINE.set(settings)
    try:
        yield settings
    finally:
        _OFFLINE.reset(token)


def answer_sizes(problems: Iterable[Problem]) -> dict[str, tuple[int, ...]]:
    """Problem id -> the byte sizes of its distinct answers (every
    attempt's), what a native session compiles for it."""
    out = {}
    for p in problems:
        texts = {a.text for a in p.attempts} or ({p.answer} if p.answer is not None else set())
        out[p.problem_id] = tuple(len(t) for t in texts)
    return out


def _tree(problems: Iterable[Problem], salt: str) -> contexts.ContextTree:
    setups = {p.problem_id: p.setup_path.read_text(encoding="utf-8", errors="replace")
              for p in problems}
    return contexts.build_context_tree(setups, salt)


def in_mode(prove_secs: Mapping[str, float], price_modes: Mapping[str, str], mode: str
            ) -> dict[str, float]:
    """``prove_secs`` in ``mode``: each converted from the mode its price is
    in by map_modes' central ratio (``expected_in``)."""
    return {pid: expected_in(secs, price_modes.get(pid, mode), mode)
            for pid, secs in prove_secs.items()}


def _bytecode_needed(tree: contexts.ContextTree, price_modes: Mapping[str, str]) -> set[str]:
    """Images a check routed to bytecode (auto mode) needs: its own and its ancestors'."""
    need: set[str] = set()
    for pid, key in tree.image_of.items():
        if price_modes.get(pid) == "bytecode":
            k: str | None = key
            while k is not None and k not in need:
                need.add(k)
                k = tree.nodes[k].parent
    return need


def plans_of_tree(tree: contexts.ContextTree, prove_secs: Mapping[str, float], choices,
                  boot_s: float | None = None, *, mode: str = "bytecode",
                  files: FileLoads | None = None,
                  price_modes: Mapping[str, str] | None = None,
                  account: dict | None = None,
                  answers: Mapping[str, tuple[int, ...]] | None = None
                  ) -> dict[ContextProofs, ImagePlan]:
    """One ImagePlan per choice; ``boot_s`` None: the mode's boot;
    ``answers``: answer_sizes of the problems, which native images compile."""
    price_modes = price_modes or {}
    hol_dir = files.hol_dir if files is not None else None
    if mode == "auto":
        native = context_costs.estimate(tree, in_mode(prove_secs, price_modes, "native"),
                                        mode="native", files=files, answers=answers)
        bytecode_images = _bytecode_needed(tree, price_modes)
        bytecode = context_costs.estimate(tree, in_mode(prove_secs, price_modes, "bytecode"),
                                          mode="bytecode", files=files) if bytecode_images else {}
        if boot_s is None:
            boot_s = NATIVE_BOOT_S + (boot_s_of("bytecode", hol_dir) if bytecode_images else 0.0)
        parts = [(native, set(native))] + ([(bytecode, bytecode_images)] if bytecode else [])
    else:
        costs = context_costs.estimate(tree, in_mode(prove_secs, price_modes, mode), mode=mode,
                                       files=files, answers=answers)
        boot_s = boot_s_of(mode, hol_dir) if boot_s is None else boot_s
        parts = [(costs, set(costs))]
    parent = {k: n.parent for k, n in tree.nodes.items()}
    plans = {}
    for choice in choices:
        choice = ContextProofs(choice)
        build_s = {tree.base: boot_s}
        for costs, keys in parts:
            for k in keys:
                if k in costs:
                    build_s[k] = build_s.get(k, 0.0) + costs[k].build_s(choice)
        source = {k: ("default" if k == tree.base else "estimated") for k in build_s}
        plans[choice] = ImagePlan(tree.base, dict(tree.image_of), parent, build_s, source)
        if account is not None:
            account[choice.value] = {
                "mode": mode, "boot_s": boot_s,
                "by_mode": {c_mode: context_costs.totals({k: costs[k] for k in keys if k in costs},
                                                         {}, choice)
                            for c_mode, (costs, keys) in zip(
                                ("native", "bytecode") if mode == "auto" else (mode,), parts)}}
    return plans


def image_plan(problems: Iterable[Problem], prove_secs: Mapping[str, float], salt: str,
               choice: ContextProofs, boot_s: float | None = None, *, mode: str = "bytecode",
               context_root: Path | None = None, hol_dir: Path | None = None) -> ImagePlan:
    """The images a session keyed by ``salt`` builds for ``problems`` in
    ``mode``, on a base that boots in ``boot_s`` (default: the mode's boot
    for that HOL Light, boot_s_of); loads resolve in ``context_root``
    (default: the current directory, as a sweep's default --context-root)
    and ``hol_dir`` (default: Debian's HOL Light when installed, else none:
    its files' loads are unknown). A session passes all of them."""
    if hol_dir is None:
        from ..install import DEBIAN_DIR

        hol_dir = DEBIAN_DIR if (DEBIAN_DIR / "hol.ml").is_file() else None
    files = FileLoads(context_root or Path.cwd(), hol_dir)
    problems = list(problems)
    return plans_of_tree(_tree(problems, salt), prove_secs, (choice,), boot_s, mode=mode,
                         files=files, answers=answer_sizes(problems))[ContextProofs(choice)]


def offline_plans(problems: Iterable[Problem], prove_secs: Mapping[str, float], choices,
                  profiled: Mapping[str, str], builds: Mapping[str, tuple[str | None, float]]
                  ) -> tuple[dict[ContextProofs, ImagePlan], dict[str, float]]:
    """Plans of ``problems`` under each of ``choices`` with no installation
    at hand, and the builds a profile measured laid over their images
    (``profiled``: problem id -> image key profiled; ``builds``: key ->
    (parent, seconds)). A measured boot counts for the base. The mode, the
    context root and HOL Light's directory come from ``offline_settings``
    (bytecode, the current directory, none, when not set)."""
    settings = _OFFLINE.get() or OfflineSettings()
    problems = list(problems)
    tree = _tree(problems, SIMULATE_SALT)
    measured = context_costs.translate_measured(tree, profiled, builds)
    roots = [s for _parent, s in (b for b in builds.values()) if _parent is None]
    boot_s = statistics.median(roots) if roots else None
    files = FileLoads(settings.context_root or Path.cwd(), settings.hol_dir)
    plans = plans_of_tree(tree, prove_secs, choices, boot_s, mode=settings.mode, files=files,
                          price_modes=settings.price_modes, account=settings.account,
                          answers=answer_sizes(problems))
    for choice in plans:
        settings.account[ContextProofs(choice).value]["measured_images"] = len(measured)
    return plans, measured
