"""Settings: frozen dataclasses whose fields carry their help text, which the
command line reads instead of writing it again.

    @dataclass(frozen=True)
    class SweepConfig:
        workers: int = setting("checks run at once on this machine", default=1)

    run.add_argument("--workers", type=int, **option(SweepConfig, "workers"))

``option`` gives argparse the field's default and its help with that
default said, so the flag, the dataclass and ``--help`` cannot disagree.

A setting may carry its flag too, and then a command's flags, the config
it builds and the command that repeats a run are all read off the
dataclass (as Snakemake's executor plugins and dask-jobqueue read theirs):

    workers: int = setting("checks run at once on this machine", default=1,
                           flag="--workers", type=int)

    add_flags(run, SweepConfig)            # every flag, in field order
    config = config_from(SweepConfig, args)

A field without ``flag`` is set by library callers only.

Memory sizes as users write them on the command line.

Sizes are read the way Slurm reads ``--mem``: a plain number is MiB, and
every suffix is a power of 1024, whether written ``G``, ``GB`` or ``GiB``
(``800MB`` is 800 MiB, not 800 000 000 bytes). Suffixes are
case-insensitive; ``B`` alone means bytes.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any, Callable, Mapping

_FIELD_KEYS = ("default", "default_factory", "init", "repr", "compare", "hash", "kw_only")


@dataclasses.dataclass(frozen=True)
class Flag:
    """How a setting is spelled on a command line: ``name`` ("--workers",
    or the field's own name for a positional argument) and argparse's
    keywords other than help, default and dest, which the field gives.
    ``choices`` may be a function, asked when the flag is added (the
    registered provers are known only then)."""
    name: str
    kw: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def positional(self) -> bool:
        return not self.name.startswith("-")

    @property
    def store_true(self) -> bool:
        return self.kw.get("action") == "store_true"


def setting(help: str, *, flag: str | Flag | None = None, **kw) -> Any:
    """A dataclass field with its help text and, given ``flag``, its flag:
    ``kw`` holds dataclasses.field's keywords (default, ...) and argparse's
    (type, choices, metavar, action, nargs, required) for the flag. A
    ``Flag`` (``flag_of`` another config's setting) is spelled as that one,
    ``kw`` winning."""
    field_kw = {k: kw.pop(k) for k in _FIELD_KEYS if k in kw}
    metadata: dict[str, Any] = {"help": help}
    if isinstance(flag, Flag):
        flag = Flag(flag.name, {**flag.kw, **kw})
    elif flag is not None:
        flag = Flag(flag, kw)
    elif kw:
        raise TypeError(f"argparse keywords {sorted(kw)} given for a setting without a flag")
    if flag is not None:
        metadata["flag"] = flag
    return dataclasses.field(metadata=metadata, **field_kw)


def flags(cls) -> list[tuple[dataclasses.Field, Flag]]:
    """(field, its flag) of every setting of ``cls`` that has a flag, in
    field order: the order of ``--help`` and of a resume command."""
    return [(f, f.metadata["flag"]) for f in dataclasses.fields(cls) if "flag" in f.metadata]


def flag_of(cls, name: str) -> Flag:
    """The flag of setting ``name`` of ``cls``, for another config's setting
    of the same meaning (profile's --problems is run's)."""
    return _field(cls, name).metadata["flag"]


def add_flags(parser, cls) -> None:
    """One argparse argument per setting of ``cls`` that has a flag: its
    name, type and choices from the flag, its help and default from the
    field (``option``), its dest the field's name."""
    for f, flag in flags(cls):
        kw = {**option(cls, f.name), **flag.kw}
        if callable(kw.get("choices")):
            kw["choices"] = kw["choices"]()
        if flag.positional:
            parser.add_argument(f.name, **kw)
        else:
            parser.add_argument(flag.name, dest=f.name, **kw)


def config_from(cls, args: argparse.Namespace, **given):
    """An instance of ``cls`` from the parsed flags ``args`` of its settings
    (``add_flags``): a flag given as a list (nargs, action="extend") is a
    tuple, or None when empty. ``given`` sets fields without a flag, or
    overrides what was parsed."""
    values = {}
    for f, _ in flags(cls):
        value = getattr(args, f.name)
        values[f.name] = (tuple(value) or None) if isinstance(value, list) else value
    return cls(**{**values, **given})


def memory_size(text: str) -> int:
    """argparse type for a memory size such as 4G or 512M (``parse_size``)."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def scheduler_address(text: str) -> str:
    """argparse type for a Dask scheduler's address (tcp://HOST:PORT), read
    as distributed reads it: a bad one failed only when the run connected,
    after the sweep's folder was made, with distributed's ValueError."""
    from distributed.comm import get_address_host_port    # only when the flag is given

    fix = "; pass the address a running scheduler prints, tcp://HOST:PORT"
    try:
        host, port = get_address_host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}{fix}") from None
    if not host or not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} names no host, or a port outside 1-65535{fix}")
    return text


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


_POWERS = {"": 2, "b": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:([kmgtp])(?:i?b)?|(b))?\s*", re.IGNORECASE)
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def parse_size(text: str) -> int:
    """Bytes in ``text``, e.g. "512M", "4GiB", "1.5g", "800MB", "2048" (MiB).

    Fractions are rounded down to whole bytes. Raises ValueError for
    anything else, or for a size of zero.
    """
    if not isinstance(text, str):
        raise ValueError(f"memory size must be text, not {type(text).__name__}")
    match = _SIZE.fullmatch(text)
    if not match:
        raise ValueError(f"cannot read {text!r} as a memory size; write e.g. 512M, 4G, 4GiB "
                         "or a plain number of MiB")
    number, prefix, bare_b = match.groups()
    power = _POWERS[(prefix or bare_b or "").lower()]
    size = int((Decimal(number) * 1024**power).to_integral_value(rounding=ROUND_FLOOR))
    if size <= 0:
        raise ValueError(f"memory size {text!r} is zero; give a positive size such as 512M")
    return size


def format_size(n: int) -> str:
    """``n`` bytes in the largest binary unit that keeps it at least 1, e.g. "1.5 GiB".

    One decimal at most, and none when it would be ".0".
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"size must be a non-negative whole number of bytes, not {n!r}")
    power = 0
    while power + 1 < len(_UNITS) and n >= 1024 ** (power + 1):
        power += 1
    value = round(n / 1024**power, 1)
    # Rounding can reach the next unit: 1023.96 MiB shows as 1 GiB.
    if value >= 1024 and power + 1 < len(_UNITS):
        power += 1
        value = round(n / 1024**power, 1)
    text = f"{value:.1f}".removesuffix(".0")
    return f"{text} {_UNITS[power]}"


def size_flag(n: int) -> str:
    """``n`` bytes as a flag value that reads back to exactly ``n``
    (``parse_size``): "8GiB", "1.5GiB", or "1234567B" when no unit is exact."""
    text = format_size(n).replace(" ", "")
    return text if parse_size(text) == n else f"{n}B"


# More memory than any one node has: the largest single machines (HPE
# Superdome Flex) hold 48 TiB. A limit above this is a unit mistake:
# `--mem-limit 8589934592` meant 8 GiB in bytes and read as 8 PiB (MiB).
MAX_MEM_LIMIT = 64 * 2**40


def beyond_ram(size: int, flag: str = "--mem-limit") -> str | None:
    """The warning for a per-check memory limit above this machine's RAM,
    or None. A warning, not a refusal: a sweep's checks may run on cluster
    nodes with more memory than the machine that starts it. Above any
    node's (``MAX_MEM_LIMIT``) it is refused: InputError."""
    import psutil

    if size > MAX_MEM_LIMIT:
        from .errors import InputError

        raise InputError(flag, f"{format_size(size)} per check is more than any node has (at most "
                         f"{format_size(MAX_MEM_LIMIT)}); a plain number is MiB, as Slurm's --mem",
                         f"pass e.g. 8G, or {size // 2**20}B if the number was bytes")
    total = psutil.virtual_memory().total
    if size <= total:
        return None
    return (f"{flag} {format_size(size)} is more than this machine's {format_size(total)} of RAM: "
            "a check run here would swap or meet the OOM killer long before its limit. Kept (a "
            "warning, not a refusal: cluster nodes may have more memory than this one); for checks "
            f"on this machine pass at most --mem-limit {max(1, int(0.8 * total / 2**30))}G")


def format_seconds(seconds: float) -> str:
    """A time limit as people write it: "120 s", "0.5 s"."""
    return f"{float(seconds):g} s"
