"""HOL Light's modes, as `proofbatch simulate` prices them with no HOL Light
started: a map's proof times moved to the mode the sweep will run in, and
the offline planner's settings (plans.OfflineSettings) for that mode.

A check's time depends on the mode: native code runs proofs 2.5-7.4x
faster than OCaml bytecode (map_modes.py measured the range), and boots
and context loads differ as much. A map says which mode it was measured in
(runner/maps/provenance.py); this moves its times to the run's mode, each
check's under ``auto`` as native_auto routes it.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

from ....errors import InputError
from ....prover_registry import Offline, OfflineRequest
from .map_modes import RATIO_CENTRAL, RATIO_MAX, THRESHOLD_S, expected_in
from .plans import OfflineSettings, offline_settings


@contextlib.contextmanager
def offline_mode(request: OfflineRequest):
    """Within it, the offline planner prices in ``request.mode``; yields the
    map in that mode, what was converted (said), and the planner's account."""
    loaded, routed, conversion = request.loaded, {}, None
    if loaded is not None:
        loaded, routed, conversion = map_in_mode(loaded, request.mode)
    settings = OfflineSettings(mode=request.mode, context_root=request.context_root,
                               hol_dir=_hol_dir(request.installation), price_modes=routed)
    with offline_settings(settings):
        yield Offline(loaded=loaded, conversion=conversion, account=settings.account)


def map_in_mode(loaded, mode: str) -> tuple[object, dict, dict]:
    """The map with its prove_secs in ``mode`` (each check's mode under
    auto), the mode each price is now in, and what was done, said."""
    theirs = None if loaded.provenance.mode is None else str(loaded.provenance.mode)
    if theirs not in ("native", "bytecode"):
        routed = {pid: ("native" if mode == "auto" else mode) for pid in loaded.entries}
        return loaded, routed, {
            "map_mode": None, "ratio": None, "converted": 0,
            "note": "the map's mode is unknown (no sidecar; --map-mode declares it): its proof times "
                    "are taken as this mode's, unconverted"}
    entries, routed, converted = {}, {}, 0
    for pid, e in loaded.entries.items():
        secs = e.prove_secs
        if mode == "auto":
            # As native_auto routes: bytecode time by map_modes' conservative ratio.
            bytecode_s = None if secs is None else (secs * RATIO_MAX if theirs == "native" else secs)
            run = "native" if bytecode_s is None or bytecode_s > THRESHOLD_S else "bytecode"
        else:
            run = mode
        routed[pid] = run
        if secs is not None and run != theirs:
            secs = expected_in(secs, theirs, run)
            converted += 1
        entries[pid] = replace(e, prove_secs=secs)
    routing = ""
    if mode == "auto":
        n_native = sum(1 for m in routed.values() if m == "native")
        routing = (f"; auto routes {n_native} checks to native, {len(routed) - n_native} to bytecode "
                   f"(expected bytecode time above {THRESHOLD_S} s, map_modes' x{RATIO_MAX} as the "
                   "sweep routes)")
    if converted:
        note = (f"the map was measured in {theirs}; {converted} of its proof times converted to the "
                f"run's mode by the central bytecode/native ratio x{RATIO_CENTRAL} (the geometric "
                f"mean of map_modes' measured range, not the conservative end limits use){routing}")
    else:
        note = f"the map was measured in {theirs}: its proof times stand as measured{routing}"
    return replace(loaded, entries=entries), routed, {"map_mode": theirs, "ratio": RATIO_CENTRAL,
                                                      "converted": converted, "note": note}


def _hol_dir(hol_light: Path | None) -> Path | None:
    """HOL Light's directory, where loads resolve after the context root:
    read, never started, so its hol.ml is enough."""
    from ..install import find_hol_light

    if hol_light is not None:
        if (hol_light / "hol.ml").is_file():
            return hol_light.resolve()
        raise InputError("--hol-light", f"{hol_light} has no hol.ml",
                         "pass HOL Light's directory (a checkout, or /usr/share/hol-light)")
    try:
        return find_hol_light(None).hol_dir
    except InputError:
        return None                 # no HOL Light here: its own files count as unknown loads
