"""What a prover package tells proofbatch of itself: one ProverDescriptor.

A prover is a package exporting one descriptor (``PROVER``) and one
``"module:attr"`` line in the registry's list (runner/provers/__init__.py,
``BUILTIN``), as a Snakemake executor plugin or a BenchExec tool-info module
is. Everything proofbatch asks of a prover outside its sessions goes through
the descriptor: which corpora are its, how they are read, which sweep flags
apply, how its backend is built, how a corpus is planned with no
installation at hand, and the subcommands it adds.

A prover that is not built in (a site's own, or a test's) is registered with
the environment: ``PROOFBATCH_PROVERS="pkg.module:ATTR[,other.module:ATTR]"``
names descriptors the registry appends to its list, in every process that
inherits the variable (a Slurm task, a Dask worker, a ``proofbatch``
subprocess). tests/toy_prover/ is such a prover.

Descriptor callables should import their backend where they are called, not
at the top of the package: the package's ``__init__`` is imported by every
module of it and by the registry, which ``proofbatch --help`` must not pay
for (tests/test_startup.py).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ContextManager, Mapping

from ..errors import InputError
from ..settings import setting

if TYPE_CHECKING:       # for the annotations only
    from ..corpus import Problem
    from ..prover import ProverBackend

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
    ``__init__``). Built-in provers are listed in runner/provers/__init__.py;
    others are added with ``PROOFBATCH_PROVERS=module:attr`` (see this
    module's docstring)."""

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
    descriptor = getattr(module, attr, None)
    if not isinstance(descriptor, ProverDescriptor):
        raise InputError(where, f"{reference!r} is not a runner.provers.registry.ProverDescriptor",
                         f"export one as {attr} in {module_name}")
    return descriptor


def from_environment() -> tuple[str, ...]:
    """The references ``PROOFBATCH_PROVERS`` adds, in its order."""
    return tuple(r.strip() for r in os.environ.get(ENV, "").split(",") if r.strip())


def registered(builtin: tuple[str, ...]) -> tuple[ProverDescriptor, ...]:
    """The descriptors of ``builtin`` and then of ``PROOFBATCH_PROVERS``;
    refuses two of one name, or two default layouts."""
    found: list[ProverDescriptor] = []
    for where, refs in (("runner.provers.BUILTIN", builtin), (ENV, from_environment())):
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
