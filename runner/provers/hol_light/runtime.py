"""The OCaml runtime settings a HOL Light check runs under: ``--runtime``.

A proof is a long run of short-lived terms, many of which live just long
enough to be promoted. OCaml 4.13.1's defaults (a 256k-word minor heap, a
``space_overhead`` of 120) were tuned for general programs, and the bench's
harness runs every proof with them. A runner that owns its prover processes
can set them: the image processes start with ``OCAMLRUNPARAM`` (the native
server and the bytecode toplevel both read it), and every check forked from
an image inherits its heap and its settings, then sets its own s, o and i
as it starts (a served check's may differ from its image's). Whether an image collects
(``Gc.full_major``) or compacts (``Gc.compact``) its load's garbage before it
serves is the driver's (hol_check.ml, ``settle_heap``), told by
``PROOFBATCH_SETTLE``.

A setting changes proof times, so it is part of what a check ran under: the
rows, ``sweep.json`` and a map's provenance record its key, and a resume
with another setting is refused. ``default`` is OCaml's defaults (with the
collection before serving that issue 32 measured), as the bench's program
runs: pass it to compare with the bench. Without ``--runtime``, checks
run under the setting issue 48's grid measured best in their mode:
``TUNED`` natively (``--mode native`` and ``auto``, their bytecode fallback
with them), ``BYTECODE_TUNED`` in bytecode.
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
# OCaml 4.13.1's own values (Debian 12's, read from Gc.get () with no
# OCAMLRUNPARAM): what a check under a setting that names no value of a
# parameter sets it to, as its image may have started under another.
OCAML_DEFAULTS = {"s": "256k", "o": "120", "i": "15"}


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

    @property
    def check_gc(self) -> str:
        """What a forked check sets as it starts (hol_check.ml,
        apply_runtime): every parameter, OCaml's own value where this setting
        names none, so that a check served by images started under another
        setting (`serve --runtime`) runs wholly under its own."""
        given = dict(self.params)
        return ",".join(f"{k}={given.get(k, OCAML_DEFAULTS[k])}" for k in PARAMS)

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
# What issue 48's grid measured best (docs/native.md, table native-runtime;
# benchmarks/results/runtime_tuning/20261129T112748Z-72e8d56a33.json): proof
# CPU 0.949 of OCaml's defaults' over 24 light proofs and 0.971 with 3 heavy
# ones (median; worst problem 1.030), peak memory +124-208 MB per check, no
# verdict changed. A 16M-word minor heap holds most of a proof's short-lived
# terms until they die: minor collections per proof fell from 3,109 to 48.
TUNED = Runtime((("s", "16M"), ("o", "200")))
# What the grid measured best in bytecode (its --mode bytecode run, docs/native.md,
# table native-runtime-bytecode; benchmarks/results/runtime_tuning/
# 20261129T183220Z-41b0c83886.json): proof CPU 0.959 of OCaml's defaults'
# over 12 light proofs (worst problem 0.977), peak memory +30 MB per check,
# no verdict changed; TUNED took 0.962 there for +126 MB. A quarter of the
# minor heap for the same CPU: the bytecode toplevel's images are the larger
# (a 647 MB major heap against native's 220 MB), and its checks the many
# millisecond ones.
BYTECODE_TUNED = Runtime((("s", "4M"), ("o", "200")))


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


def default_for(mode: str) -> Runtime:
    """The setting checks of ``--mode MODE`` run under without ``--runtime``:
    the grid's best in that mode, TUNED natively (``native``, ``auto``) and
    BYTECODE_TUNED in bytecode."""
    return BYTECODE_TUNED if mode == "bytecode" else TUNED


def of_config(config) -> Runtime:
    """The setting a sweep's config names (SweepConfig.runtime), or its
    mode's default (``default_for``)."""
    return default_for(config.mode) if config.runtime is None else parse(config.runtime)


def holds_under(measured: str, swept: str) -> bool:
    """Whether times measured under the setting keyed ``measured`` (a map's
    provenance) hold for checks under ``swept``: the same setting, or a map
    of OCaml's defaults (the bench's own) under a mode's default, whose
    proofs the grid measured at 0.95-0.97 of their CPU, and at worst 1.03:
    far inside the default margins on a map's times (2x light, 3x heavy;
    MapPolicy)."""
    return measured == swept or (measured == DEFAULT.key and swept in (TUNED.key, BYTECODE_TUNED.key))
