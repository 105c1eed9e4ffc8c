"""The prover registry, and the one way into a prover's package: which
prover a corpus is for, how its problems are read, which sweep flags apply
to it, how its backend is built, how a corpus is planned with no
installation at hand, and the subcommands a prover adds. Nothing else
outside runner/provers/<prover>/ imports from it.

The registry is the list ``BUILTIN`` of the provers' descriptors
(runner/provers/registry.py, ProverDescriptor), then those named by
``PROOFBATCH_PROVERS``; it asks them, and names none. A new prover is one
package exporting a descriptor and one entry in that list.

The prover of a corpus is ``--prover`` when given, else the one whose
descriptor recognises the corpus's layout, else the one whose layout is the
default (``recognises=None``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import answers as answer_files
from ..corpus import Problem
from ..errors import InputError
from ..prover import ProverBackend
from .registry import ENV, Offline, OfflineRequest, ProverDescriptor, registered

# The built-in provers' descriptors, in `--help` order: "module:attr".
BUILTIN = ("runner.provers.hol_light:PROVER", "runner.provers.isabelle:PROVER")


def descriptors() -> tuple[ProverDescriptor, ...]:
    """Every registered prover: the built-in ones, then PROOFBATCH_PROVERS's."""
    return registered(BUILTIN)


def names() -> tuple[str, ...]:
    """The provers' names, as --prover offers them."""
    return tuple(d.name for d in descriptors())


def descriptor(prover: str) -> ProverDescriptor:
    """The descriptor of the prover named ``prover``."""
    found = {d.name: d for d in descriptors()}
    if prover not in found:
        raise InputError("--prover", f"{prover!r} is not a prover",
                         f"pass one of {', '.join(found)} (others register with {ENV}=module:attr)")
    return found[prover]


def commands() -> list[tuple[str, str, str]]:
    """The provers' own subcommands, (name, module, help), in `--help` order."""
    return [c for d in descriptors() for c in d.commands]


def command_modules() -> list[str]:
    """Module names of the provers' own subcommands, in `--help` order."""
    return [module for _, module, _ in commands()]


def modal_maps(prover: str) -> bool:
    """Whether ``prover``'s timeout maps must say the mode they were measured in."""
    return descriptor(str(prover)).modal_maps


@dataclass(frozen=True)
class Selected:
    prover: str
    load: Callable[[Path, Path | None], list[Problem]]
    build: Callable[[object], ProverBackend]     # from the sweep's config


def detect(corpus: Path, prover: str | None = None) -> str:
    """The prover of ``corpus``: ``prover`` if given, else its layout's."""
    if prover is not None:
        chosen = descriptor(str(prover))
        if chosen.recognises is not None and not chosen.recognises(Path(corpus)):
            if chosen.require_layout is not None:
                chosen.require_layout(Path(corpus))
            raise InputError(corpus, f"not {chosen.corpus_phrase()}: it has no {chosen.layout}",
                             "lay it out so, or pass another --prover")
        return chosen.name
    every = descriptors()
    claimed = [d for d in every if d.recognises is not None and d.recognises(Path(corpus))]
    if len(claimed) > 1:
        raise InputError(corpus, f"laid out for several provers ({', '.join(d.name for d in claimed)})",
                         f"pass --prover {claimed[0].name} (or another of them)")
    if not claimed:
        claimed = [d for d in every if d.recognises is None]
    if not claimed:
        raise InputError(corpus, "no registered prover recognises this corpus",
                         "lay it out as one of: " + "; ".join(f"{d.title}: {d.layout}" for d in every))
    return claimed[0].name


def load_problems(corpus: Path, answers: Path | None = None, prover: str | None = None) -> list[Problem]:
    """The problems of ``corpus`` with their answers, read by its prover's reader."""
    return descriptor(detect(corpus, prover)).load(corpus, answers)


def select(config) -> Selected:
    """Reader and backend builder for the sweep ``config`` (a SweepConfig),
    after refusing the settings that do not apply to its prover."""
    chosen = descriptor(detect(config.corpus, config.prover))
    chosen.check_config(config)
    for other in descriptors():
        for option in other.options:
            if option not in chosen.options and getattr(config, option, None) is not None:
                raise InputError(f"--{option.replace('_', '-')}", f"given for {chosen.corpus_phrase()}",
                                 f"drop it (it is for {other.title}), or pass "
                                 f"{other.corpus_phrase()} ({other.layout})")
    return Selected(chosen.name, chosen.load, chosen.build)


def offline_image_plans(prover: str, problems: list[Problem], prove_secs, choices,
                        profiled: dict[str, str], builds) -> tuple[dict, dict[str, float]]:
    """Image plans of ``problems`` under each choice of context proofs, for
    ``simulate --corpus`` (no installation at hand), and the builds a
    profile measured laid over those images (``profiled``: problem id ->
    image key profiled; ``builds``: key -> (parent, seconds))."""
    return descriptor(prover).offline_plans(problems, prove_secs, choices, profiled, builds)


def modes_of(prover: str | None) -> bool:
    """Whether ``prover`` (None: the default layout's) has modes simulate prices apart."""
    return _default_or(prover).offline_mode is not None


def offline_mode(prover: str | None, request: OfflineRequest):
    """A context manager within which ``prover``'s offline planner prices in
    ``request.mode`` (None: the prover of the default layout, as for a map
    with no corpus); yields an Offline with the map in that mode. A prover
    with one mode plans the map as it is."""
    chosen = _default_or(prover)
    if chosen.offline_mode is None:
        return contextlib.nullcontext(Offline(loaded=request.loaded, conversion=None, account={}))
    return chosen.offline_mode(request)


def _default_or(prover: str | None) -> ProverDescriptor:
    if prover is not None:
        return descriptor(prover)
    every = descriptors()
    return next((d for d in every if d.recognises is None), every[0])


def answer_refusal(prover: str, text: bytes) -> str | None:
    """Why ``text`` cannot be an answer at all: the runner's rules for every
    prover (runner/answers.py), then ``prover``'s own (its descriptor's
    ``refuses``). None when a check should run."""
    return answer_files.refusal(text, descriptor(prover).refuses)
