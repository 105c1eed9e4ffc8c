"""Settings: frozen dataclasses whose fields carry their help text, which the
command line reads instead of writing it again.

    @dataclass(frozen=True)
    class SweepConfig:
        workers: int = setting("checks run at once on this machine", default=1)

    run.add_argument("--workers", type=int, **option(SweepConfig, "workers"))

``option`` gives argparse the field's default and its help with that
default said, so the flag, the dataclass and ``--help`` cannot disagree.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable


def setting(help: str, **kw) -> Any:
    """A dataclass field with its help text; ``kw`` as for dataclasses.field."""
    return dataclasses.field(metadata={"help": help}, **kw)


def _field(cls, name: str) -> dataclasses.Field:
    try:
        return next(f for f in dataclasses.fields(cls) if f.name == name)
    except StopIteration:
        raise AttributeError(f"{cls.__name__} has no setting {name!r}") from None


def default_of(cls, name: str) -> Any:
    """The default of field ``name`` of the dataclass ``cls``."""
    f = _field(cls, name)
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise AttributeError(f"{cls.__name__}.{name} has no default")


def _shown(value: Any) -> str | None:
    """A default as help text says it; None for defaults not worth saying
    (None, False, empty): their help says what happens."""
    if value is None or value is False or value == () or value == []:
        return None
    if isinstance(value, float):
        return f"{value:g}"
    return str(value.value if hasattr(value, "value") and not isinstance(value, Path) else value)


def help_of(cls, name: str, *, default: bool = True) -> str:
    """The help text of field ``name`` of the dataclass ``cls``, ready for
    argparse (which %-formats it): with ``(default X)`` appended when the
    field has a default worth saying and ``default`` is true."""
    text = _field(cls, name).metadata["help"]
    shown = None
    if default:
        try:
            shown = _shown(default_of(cls, name))
        except AttributeError:
            shown = None
    if shown is not None:
        text = f"{text} (default {shown})"
    return text.replace("%", "%%")


def option(cls, name: str, **overrides) -> dict[str, Any]:
    """argparse keywords for the flag of field ``name``: its help and its
    default (a field without one gives none); ``overrides`` win."""
    kw: dict[str, Any] = {"help": help_of(cls, name)}
    try:
        kw["default"] = default_of(cls, name)
    except AttributeError:
        pass
    kw.update(overrides)
    return kw


def options_of(cls) -> Callable[..., dict[str, Any]]:
    """``option`` bound to ``cls``: ``opt = options_of(SweepConfig)``, then
    ``parser.add_argument("--workers", type=int, **opt("workers"))``."""
    return lambda name, **overrides: option(cls, name, **overrides)
