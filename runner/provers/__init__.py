"""Backend selection, in one place: which prover a corpus is for, how its
problems are read, and how its backend is built.

The kind comes from ``--prover`` when given, else from the corpus layout: a
corpus with ``isabelle.toml`` is an Isabelle corpus (isabelle_corpus), any
other one is s2n-bignum-bench's HOL Light layout (corpus).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..corpus import Problem, load_corpus
from ..errors import InputError
from .isabelle.corpus import is_isabelle_corpus, load_description, load_isabelle_corpus
from ..prover import ProverBackend

PROVERS = ("hol-light", "isabelle")

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
    kind = detect(config.corpus, getattr(config, "prover", None))
    if kind == "isabelle":
        if str(getattr(config, "context_proofs", "replay")) != "replay":
            raise InputError("--context-proofs", f"{config.context_proofs} is for HOL Light contexts; "
                             f"{config.corpus} is an Isabelle corpus, whose theories always run "
                             "their proofs", "drop --context-proofs")
        if config.hol_light is not None:
            raise InputError("--hol-light", "given for an Isabelle corpus", "drop it, or pass --isabelle DIR")
        return Selected(kind, load_isabelle_corpus, _isabelle_backend)
    if getattr(config, "isabelle", None) is not None:
        raise InputError("--isabelle", "given for a HOL Light corpus",
                         "drop it, or add isabelle.toml to the corpus")
    return Selected(kind, load_corpus, _hol_light_backend)


def _hol_light_backend(config) -> ProverBackend:
    from .hol_light.backend import HolLightBackend
    from .hol_light.install import find_hol_light

    install = find_hol_light(config.hol_light)
    root = Path(config.context_root or Path.cwd())
    if not root.is_dir():
        raise InputError(root, "context root is not a directory", "pass --context-root an existing directory")
    if getattr(config, "mode", "bytecode") != "bytecode":
        from .hol_light.native_auto import native_backend

        return native_backend(config, install, root)      # --mode native|auto
    from ..sandbox import for_sweep

    # Checks are boxed (runner/sandbox.py); their own output is kept in OUT/logs.
    return HolLightBackend(install, root, grace_s=config.grace, max_images=config.max_images,
                           sandbox_config=for_sweep(config), log_dir=Path(config.out) / "logs",
                           context_proofs=getattr(config, "context_proofs", "replay"))


def _isabelle_backend(config) -> ProverBackend:
    from .isabelle.backend import IsabelleBackend
    from .isabelle.heap import find_isabelle

    kind = getattr(config, "sandbox", "auto")
    hidden: tuple[Path, ...] = ()
    if kind == "bwrap":        # only on request: see README, Isabelle
        from ..sandbox import for_sweep, resolve_kind

        resolve_kind(kind)
        hidden = for_sweep(config).hidden
    return IsabelleBackend(find_isabelle(getattr(config, "isabelle", None)),
                           load_description(config.corpus), grace_s=config.grace,
                           sandbox_kind=kind, hidden=hidden)
