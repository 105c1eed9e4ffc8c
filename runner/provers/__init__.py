"""The prover registry, and the one way into a prover's package: which
prover a corpus is for, how its problems are read, how its backend is built,
how a corpus is planned with no installation at hand, and the subcommands a
prover adds. Nothing else outside runner/provers/<prover>/ imports from it.

The kind comes from ``--prover`` when given, else from the corpus layout: a
corpus with ``isabelle.toml`` is an Isabelle corpus (isabelle_corpus), any
other one is s2n-bignum-bench's HOL Light layout (corpus).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..context_proofs import ContextProofs
from ..corpus import Problem, load_corpus
from ..errors import InputError
from ..prover import ImagePlan, Prover, ProverBackend
from ..sandbox import for_sweep, resolve_kind
from .hol_light import plans as hol_light_plans
from .hol_light.backend import HolLightBackend
from .hol_light.install import find_hol_light
from .hol_light.native_auto import native_backend
from .isabelle.backend import IsabelleBackend
from .isabelle.corpus import is_isabelle_corpus, load_description, load_isabelle_corpus
from .isabelle.heap import find_isabelle

PROVERS = tuple(p.value for p in Prover)    # as --prover offers them

# Subcommands a prover adds to `proofbatch`: modules of its package, each with
# NAME, HELP, add_arguments and run as in runner/commands.
_COMMANDS = {"hol-light": ("command_serve", "command_build_native", "command_extract")}
_PACKAGES = {"hol-light": "hol_light", "isabelle": "isabelle"}


def command_modules() -> list[str]:
    """Module names of the provers' own subcommands, in `--help` order."""
    return [f"{__name__}.{_PACKAGES[prover]}.{module}"
            for prover in PROVERS for module in _COMMANDS.get(prover, ())]


@dataclass(frozen=True)
class Selected:
    prover: str
    load: Callable[[Path, Path | None], list[Problem]]
    build: Callable[[object], ProverBackend]     # from the sweep's config


def detect(corpus: Path, prover: str | None = None) -> str:
    """The prover of ``corpus``: ``prover`` if given, else its layout's."""
    if prover is not None:
        if prover not in PROVERS:
            raise InputError("--prover", f"{prover!r} is not a prover", f"pass one of {', '.join(PROVERS)}")
        if prover == "isabelle" and not is_isabelle_corpus(corpus):
            raise InputError(Path(corpus) / "isabelle.toml", "an Isabelle corpus needs this description",
                             'write [isabelle] parent_session = "HOL" into it')
        return prover
    return "isabelle" if is_isabelle_corpus(corpus) else "hol-light"


def load_problems(corpus: Path, answers: Path | None = None, prover: str | None = None) -> list[Problem]:
    """The problems of ``corpus`` with their answers, read by its prover's reader."""
    kind = detect(corpus, prover)
    return (load_isabelle_corpus if kind == "isabelle" else load_corpus)(corpus, answers)


def select(config) -> Selected:
    """Reader and backend builder for the sweep ``config`` (a SweepConfig)."""
    kind = detect(config.corpus, config.prover)
    if kind == "isabelle":
        if str(config.context_proofs) != "replay":
            raise InputError("--context-proofs", f"{config.context_proofs} is for HOL Light contexts; "
                             f"{config.corpus} is an Isabelle corpus, whose theories always run "
                             "their proofs", "drop --context-proofs")
        if config.hol_light is not None:
            raise InputError("--hol-light", "given for an Isabelle corpus", "drop it, or pass --isabelle DIR")
        if str(config.mode) != "bytecode":
            raise InputError("--mode", f"{config.mode} is for HOL Light; {config.corpus} is an Isabelle "
                             "corpus, whose checks run in `isabelle build`", "drop --mode")
        if config.context_root is not None:
            raise InputError("--context-root", f"given for the Isabelle corpus {config.corpus}, whose "
                             "theories resolve against its isabelle.toml", "drop --context-root")
        return Selected(kind, load_isabelle_corpus, _isabelle_backend)
    if config.isabelle is not None:
        raise InputError("--isabelle", "given for a HOL Light corpus",
                         "drop it, or add isabelle.toml to the corpus")
    return Selected(kind, load_corpus, _hol_light_backend)


def _hol_light_backend(config) -> ProverBackend:
    install = find_hol_light(config.hol_light)
    root = Path(config.context_root or Path.cwd())
    if not root.is_dir():
        raise InputError(root, "context root is not a directory", "pass --context-root an existing directory")
    if config.mode != "bytecode":
        return native_backend(config, install, root)      # --mode native|auto
    # Checks are boxed (runner/sandbox.py); their own output is kept in OUT/logs.
    return HolLightBackend(install, root, grace_s=config.grace, max_images=config.max_images,
                           sandbox_config=for_sweep(config), log_dir=Path(config.out) / "logs",
                           context_proofs=config.context_proofs)


def _isabelle_backend(config) -> ProverBackend:
    kind = config.sandbox
    hidden: tuple[Path, ...] = ()
    if kind == "bwrap":        # only on request: see README, Isabelle
        resolve_kind(kind)
        hidden = for_sweep(config).hidden
    return IsabelleBackend(find_isabelle(config.isabelle),
                           load_description(config.corpus), grace_s=config.grace,
                           sandbox_kind=kind, hidden=hidden)


def offline_image_plans(prover: str, problems: list[Problem], prove_secs, choices,
                        profiled: dict[str, str], builds) -> tuple[dict, dict[str, float]]:
    """Image plans of ``problems`` under each choice of context proofs, for
    ``simulate --corpus`` (no installation at hand), and the builds a
    profile measured laid over those images (``profiled``: problem id ->
    image key profiled; ``builds``: key -> (parent, seconds))."""
    if prover == "hol-light":
        return hol_light_plans.offline_plans(problems, prove_secs, choices, profiled, builds)
    # Isabelle: one parent heap, however its contexts load their proofs;
    # keyed by the heap a profile recorded, when it recorded one.
    key = next(iter(set(profiled.values())), "isabelle-heap")
    one = ImagePlan(key, {p.problem_id: key for p in problems}, {key: None},
                    {key: IsabelleBackend.HEAP_BUILD_S}, {key: "default"})
    measured = {key: builds[key][1]} if key in builds else {}
    return {ContextProofs(c): one for c in choices}, measured
