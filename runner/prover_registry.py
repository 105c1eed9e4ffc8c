"""The prover registry, and the one way into a prover's package: which
prover a corpus is for, how its problems are read, which sweep flags apply
to it, how its backend is built, how a corpus is planned with no
installation at hand, and the subcommands a prover adds. Nothing outside
runner/provers/<prover>/ imports a prover's modules: it asks here.

A core module beside runner/prover.py (the backend interface), below every
stage that asks it (checks, maps, planning) and the drivers: it imports the
core only, and reaches a prover's package by name, when asked
(tests/test_layout.py).

A prover is a package exporting one descriptor (``PROVER``, a
ProverDescriptor) and one ``"module:attr"`` line in ``BUILTIN``, as a
Snakemake executor plugin or a BenchExec tool-info module is. Everything
proofbatch asks of a prover outside its sessions goes through the
descriptor; the registry asks them, and names none.

A prover that is not built in (a site's own, or a test's) is registered with
the environment: ``PROOFBATCH_PROVERS="pkg.module:ATTR[,other.module:ATTR]"``
names descriptors the registry appends to its list, in every process that
inherits the variable (a Slurm task, a Dask worker, a ``proofbatch``
subprocess). tests/toy_prover/ is such a prover.

Descriptor callables should import their backend where they are called, not
at the top of the package: the package's ``__init__`` is imported by every
module of it and by the registry, which ``proofbatch --help`` must not pay
for (tests/test_startup.py).

The prover of a corpus is ``--prover`` when given, else the one whose
descriptor recognises the corpus's layout, else the one whose layout is the
default (``recognises=None``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ContextManager, Mapping

from . import answers as answer_files
from .corpus import Problem
from .errors import InputError
from .prover import ProverBackend
from .settings import setting

# The built-in provers' descriptors, in `--help` order: "module:attr".
BUILTIN = ("runner.provers.hol_light:PROVER", "runner.provers.isabelle:PROVER")
ENV = "PROOFBATCH_PROVERS"      # more descriptors, "module:attr" separated by commas


@dataclass(frozen=True)
class OfflineRequest:
    """What `proofbatch simulate` asks a prover with modes to price in."""

    mode: str = setting("the mode the sweep will run in, as `run --mode` takes it")
    loaded: object = setting("the timeout map (runner.maps.provenance.LoadedMap), or None")
    context_root: Path | None = setting("where the corpus's loads resolve first")
    installation: Path | None = setting("the prover's installation the sweep will use "
                                        "(read, never started), or None: the default one")


@dataclass(frozen=True)
class Offline:
    """What a prover's mode model answers, within which it plans offline."""

    loaded: object = setting("the map with its proof times in the request's mode, or None")
    conversion: dict | None = setting("what was converted, said (a `note` and counts), or None")
    account: dict = setting("choice of context proofs -> what the offline planner's image costs "
                            "stand on (filled while planning)")


def no_config_checks(config) -> None:
    """A prover with no flag of its own to refuse (the default check)."""


@dataclass(frozen=True)
class ProverDescriptor:
    """One prover, as its package describes it (``PROVER`` in its
    ``__init__``). Built-in provers are listed in ``BUILTIN``; others are
    added with ``PROOFBATCH_PROVERS=module:attr`` (see this module's
    docstring)."""

    name: str = setting("the prover's name: the value of --prover, recorded in result rows and "
                        "sweep.json (BackendInfo.prover); unique among registered provers")
    title: str = setting("the prover's name in messages, e.g. `given for an <title> corpus`")
    layout: str = setting("the corpus layout it reads, as a phrase for messages: what a corpus "
                          "of this prover has, e.g. `<id>/setup.ml and query.txt folders`")
    recognises: Callable[[Path], bool] | None = setting(
        "whether a corpus is laid out for this prover (e.g. it has the prover's description "
        "file), for detection without --prover; None: the default layout, taken by a corpus no "
        "other prover recognises (at most one registered prover may have it)")
    load: Callable[[Path, Path | None], list[Problem]] = setting(
        "the corpus reader: (corpus, answers or None) -> the problems sorted by id, each with "
        "its answer; raises InputError on anything malformed")
    build: Callable[[object], ProverBackend] = setting(
        "the backend factory: the sweep's SweepConfig -> a runner.prover.ProverBackend, its "
        "installation resolved; raises InputError when there is none")
    offline_plans: Callable[..., tuple[Mapping, Mapping[str, float]]] = setting(
        "the offline planner, for `simulate --corpus` with no installation at hand: (problems, "
        "prove_secs by problem id, choices of ContextProofs, profiled: problem id -> image key a "
        "profile ran it in, builds: image key -> (parent, seconds)) -> ({choice: ImagePlan}, "
        "{image key: measured build seconds laid over those plans})")
    check_config: Callable[[object], None] = setting(
        "refuses (InputError) the settings of a SweepConfig that do not apply to this prover's "
        "corpora; flags of other provers listed in their `options` are refused by the registry",
        default=no_config_checks)
    options: tuple[str, ...] = setting(
        "SweepConfig fields only this prover reads, unset when None (e.g. its installation "
        "directory): the registry refuses them, given, for another prover's corpus", default=())
    corpus_defaults: tuple[str, ...] = setting(
        "SweepConfig fields whose default (None) is a directory the sweep resolves where it "
        "starts, recorded in sweep.json under the field's name (e.g. the directory its contexts "
        "resolve against, by default the current one): the command that resumes the sweep gives them as recorded, so it "
        "works from anywhere", default=())
    require_layout: Callable[[Path], None] | None = setting(
        "raises InputError naming what is missing when --prover names this prover for a corpus "
        "it does not recognise; None: a refusal built from `title` and `layout`", default=None)
    commands: tuple[tuple[str, str, str], ...] = setting(
        "subcommands the prover adds to `proofbatch`: (name, module, one-line help), the module "
        "defining NAME, HELP, add_arguments(parser) and run(args) as runner/commands/ does",
        default=())
    refuses: Callable[[str], str | None] | None = setting(
        "why an answer's text (UTF-8, no NUL, not blank: the runner refused those) is empty in "
        "the prover's language, e.g. comments only, as the ERROR reason of its row, decided "
        "before any image is loaded; None: nothing more to refuse", default=None)
    offline_mode: Callable[[OfflineRequest], ContextManager[Offline]] | None = setting(
        "simulate's model of the prover's modes: a context manager within which offline_plans "
        "prices in the request's mode, yielding the map moved to that mode; None: a prover with "
        "one mode, planned as the map gives it", default=None)
    modal_maps: bool = setting(
        "its checks run in several modes whose times differ (e.g. bytecode and native): a "
        "timeout map must say which it was measured in (runner/maps/provenance.py)", default=False)
    served_runtime: Callable[[str, str | None], str | None] | None = setting(
        "why an image server's images cannot run a runner's checks under its runtime setting: "
        "(the server's BackendInfo.runtime, the run's --runtime or None) -> the problem in a "
        "phrase, or None when the server can (its checks set their own); None: no setting",
        default=None)
    runtime_of: Callable[[object], str] | None = setting(
        "the runtime key (BackendInfo.runtime) checks of a config will run under, known before "
        "any backend is built: (an object with the config's mode and runtime) -> the key; None: "
        "no setting", default=None)
    map_runtime_holds: Callable[[str, str], bool] | None = setting(
        "whether a map's times, measured under one runtime setting, hold for checks under "
        "another: (the map's provenance runtime, the backend's BackendInfo.runtime) -> bool; "
        "None: only under the same setting", default=None)

    def corpus_phrase(self) -> str:
        """'an <title> corpus' or 'a <title> corpus'."""
        article = "an" if self.title[:1].upper() in "AEIOU" else "a"
        return f"{article} {self.title} corpus"


def resolve(reference: str, where: str = ENV) -> ProverDescriptor:
    """The descriptor a ``"module:attr"`` reference names."""
    module_name, sep, attr = reference.strip().partition(":")
    fix = "write module:attr, e.g. my_prover:PROVER, with the module importable (on PYTHONPATH)"
    if not sep or not module_name or not attr:
        raise InputError(where, f"{reference!r} is not a module:attr reference", fix)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(where, f"{reference!r}: module {module_name} does not import ({exc})",
                         fix) from None
    found = getattr(module, attr, None)
    if not isinstance(found, ProverDescriptor):
        raise InputError(where, f"{reference!r} is not a runner.prover_registry.ProverDescriptor",
                         f"export one as {attr} in {module_name}")
    return found


def from_environment() -> tuple[str, ...]:
    """The references ``PROOFBATCH_PROVERS`` adds, in its order."""
    return tuple(r.strip() for r in os.environ.get(ENV, "").split(",") if r.strip())


def registered(builtin: tuple[str, ...]) -> tuple[ProverDescriptor, ...]:
    """The descriptors of ``builtin`` and then of ``PROOFBATCH_PROVERS``;
    refuses two of one name, or two default layouts."""
    found: list[ProverDescriptor] = []
    for where, refs in (("runner.prover_registry.BUILTIN", builtin), (ENV, from_environment())):
        for ref in refs:
            d = resolve(ref, where)
            if any(o is d for o in found):      # named twice: once is enough
                continue
            if any(o.name == d.name for o in found):
                raise InputError(where, f"{ref!r} registers a second prover named {d.name!r}",
                                 "give the prover another name, or drop the reference")
            found.append(d)
    defaults = [d.name for d in found if d.recognises is None]
    if len(defaults) > 1:
        raise InputError(ENV, f"provers {', '.join(defaults)} all claim the default corpus "
                         "layout (recognises=None)", "give all but one a recognises function")
    return tuple(found)


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


def corpus_defaults(prover: str | None) -> tuple[str, ...]:
    """The settings a sweep of ``prover`` resolved where it started (its
    descriptor's ``corpus_defaults``), for the command that resumes it; None
    (a sweep.json from before the prover was recorded, when there was one):
    the default layout's prover's. A prover no longer registered: none, so
    that its sweep's resume command is still said."""
    try:
        return _default_or(prover).corpus_defaults
    except InputError:
        return ()


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
