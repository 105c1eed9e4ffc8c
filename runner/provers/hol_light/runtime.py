"""The OCaml runtime settings a HOL Light check runs under: ``--runtime``.

A proof is a long run of short-lived terms, many of which live just long
enough to be promoted. OCaml 4.13's defaults (a 256k-word minor heap, a
``space_overhead`` of 80) were tuned for general programs, and the bench's
harness runs every proof with them. A runner that owns its prover processes
can set them: the image processes start with ``OCAMLRUNPARAM`` (the native
server and the bytecode toplevel both read it), and every check forked from
an image inherits its heap and its settings. Whether an image collects
(``Gc.full_major``) or compacts (``Gc.compact``) its load's garbage before it
serves is the driver's (hol_check.ml, ``settle_heap``), told by
``PROOFBATCH_SETTLE``.

A setting changes proof times, so it is part of what a check ran under: the
rows, ``sweep.json`` and a map's provenance record its key, and a resume
with another setting is refused. ``default`` is OCaml's defaults (with the
collection before serving that issue 32 measured), as the bench's program
runs: pass it to compare with the bench.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import InputError

# OCAMLRUNPARAM's letters this setting takes, with what they mean; values in
# words, with OCaml's k/M/G suffixes.
PARAMS = {"s": "minor heap size", "o": "space_overhead", "i": "major heap increment"}
SETTLES = ("collect", "compact", "none")
ENV_SETTLE = "PROOFBATCH_SETTLE"
_VALUE = re.compile(r"^[1-9][0-9]*[kMG]?$")


@dataclass(frozen=True)
class Runtime:
    params: tuple[tuple[str, str], ...] = ()    # (letter, value) in PARAMS order
    settle: str = "collect"

    @property
    def key(self) -> str:
        """The canonical text recorded with every check: ``default``, or
        e.g. ``s=4M,o=120,settle=compact``."""
        parts = [f"{k}={v}" for k, v in self.params]
        if self.settle != "collect":
            parts.append(f"settle={self.settle}")
        return ",".join(parts) or "default"

    @property
    def gc(self) -> str:
        """The parameters alone, as a CHECK's limit carries them to the
        forked check (hol_check.ml, apply_runtime): e.g. ``s=4M,o=120``."""
        return ",".join(f"{k}={v}" for k, v in self.params)

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        """``base`` with this setting's variables: OCAMLRUNPARAM set to its
        parameters (or removed, so a runner's own environment never sets a
        check's heap unsaid), and the settle mode."""
        env = {k: v for k, v in base.items() if k not in ("OCAMLRUNPARAM", "CAMLRUNPARAM")}
        if self.params:
            env["OCAMLRUNPARAM"] = self.gc
        env[ENV_SETTLE] = self.settle
        return env


DEFAULT = Runtime()


def parse(spec: str, where: str = "--runtime") -> Runtime:
    """``default``, or comma-separated ``s=``, ``o=``, ``i=`` (OCAMLRUNPARAM's
    letters and values) and ``settle=collect|compact|none``."""
    fix = ("pass default, or e.g. s=4M,o=120,settle=compact (s: minor heap words, o: "
           "space_overhead, i: major heap increment, settle: collect, compact or none)")
    spec = (spec or "").strip()
    if spec == "default":
        return DEFAULT
    if not spec:
        raise InputError(where, "is empty", fix)
    params: dict[str, str] = {}
    settle = "collect"
    for part in spec.split(","):
        name, eq, value = part.strip().partition("=")
        if not eq or not value:
            raise InputError(where, f"{part.strip()!r} is not NAME=VALUE", fix)
        if name == "settle":
            if value not in SETTLES:
                raise InputError(where, f"settle={value} is not one of {', '.join(SETTLES)}", fix)
            settle = value
        elif name in PARAMS:
            if not _VALUE.match(value):
                raise InputError(where, f"{name}={value}: the {PARAMS[name]} must be a whole number "
                                 "above 0, with k, M or G at most", fix)
            if name in params:
                raise InputError(where, f"{name} is given twice", fix)
            params[name] = value
        else:
            raise InputError(where, f"{name!r} is not a setting this takes", fix)
    return Runtime(tuple((k, params[k]) for k in PARAMS if k in params), settle)


def of_config(config) -> Runtime:
    """The setting a sweep's config names (SweepConfig.runtime; None: default)."""
    return DEFAULT if config.runtime is None else parse(config.runtime)
