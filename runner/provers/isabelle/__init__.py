"""Isabelle: NTP4VC's corpus layout (corpus.py), one parent heap per corpus
(heap.py) and one `isabelle build` per check (backend.py, check.py).
``PROVER`` is what the registry (runner/prover_registry.py) knows of it.

Kept light: every module of this package, and the registry, imports it;
what the descriptor calls imports the backend when it is called.
"""

from __future__ import annotations

from pathlib import Path

from ...prover_registry import ProverDescriptor


def _recognises(corpus: Path) -> bool:
    from .corpus import is_isabelle_corpus

    return is_isabelle_corpus(corpus)


def _require_layout(corpus: Path) -> None:
    from .corpus import load_description

    load_description(corpus)        # raises, naming isabelle.toml and what to write in it


def _load(corpus: Path, answers: Path | None = None):
    from .corpus import load_isabelle_corpus

    return load_isabelle_corpus(corpus, answers)


def _check_config(config) -> None:
    from ...errors import InputError

    if str(config.context_proofs) != "replay":
        raise InputError("--context-proofs", f"{config.context_proofs} is for HOL Light contexts; "
                         f"{config.corpus} is an Isabelle corpus, whose theories always run "
                         "their proofs", "drop --context-proofs")
    if str(config.mode) != "bytecode":
        raise InputError("--mode", f"{config.mode} is for HOL Light; {config.corpus} is an Isabelle "
                         "corpus, whose checks run in `isabelle build`", "drop --mode")
    if config.context_root is not None:
        raise InputError("--context-root", f"given for the Isabelle corpus {config.corpus}, whose "
                         "theories resolve against its isabelle.toml", "drop --context-root")


def _backend(config):
    from ...checks.sandbox import for_sweep, resolve_kind
    from .backend import IsabelleBackend
    from .corpus import load_description
    from .heap import find_isabelle

    kind = config.sandbox
    hidden: tuple[Path, ...] = ()
    if kind == "bwrap":        # only on request: see README, Isabelle
        resolve_kind(kind)
        hidden = for_sweep(config).hidden
    return IsabelleBackend(find_isabelle(config.isabelle),
                           load_description(config.corpus), grace_s=config.grace,
                           sandbox_kind=kind, hidden=hidden)


def _offline_plans(problems, prove_secs, choices, profiled, builds):
    """One parent heap, however its contexts load their proofs; keyed by
    the heap a profile recorded, when it recorded one."""
    from ...checks.context_proofs import ContextProofs
    from ...prover import ImagePlan
    from .backend import HEAP_BUILD_S

    key = next(iter(set(profiled.values())), "isabelle-heap")
    one = ImagePlan(key, {p.problem_id: key for p in problems}, {key: None},
                    {key: HEAP_BUILD_S}, {key: "default"})
    measured = {key: builds[key][1]} if key in builds else {}
    return {ContextProofs(c): one for c in choices}, measured


PROVER = ProverDescriptor(
    name="isabelle",
    title="Isabelle",
    layout="isabelle.toml and <problem-id>/Goal.thy folders",
    recognises=_recognises,
    require_layout=_require_layout,
    load=_load,
    build=_backend,
    offline_plans=_offline_plans,
    check_config=_check_config,
    options=("isabelle",),
    corpus_defaults=(),     # its theories resolve in the corpus (isabelle.toml), wherever it starts
)
