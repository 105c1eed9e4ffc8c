"""A timeout map's limits and expected times in the mode a HOL Light check
runs in.

A timeout map is valid for the mode it was measured in (its sidecar's
provenance says which, or --map-mode declares it: runner/maps/provenance.py).
A check that runs in the other mode gets the map's limit converted with
the bytecode/native ratios measured on this project's machine
(benchmarks/native/native.py), conservatively: a bytecode limit becomes a
native one divided by the *smallest* ratio, a native limit a bytecode one
multiplied by the *largest*, so a correct proof is not cut short. Every
conversion is announced before the sweep starts (``converted_warning``).
The planner's expected times move by the central ratio instead
(``MapModes.expected_in``), as `simulate` moves them.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ....maps.provenance import LoadedMap
from ....prover import CheckLimits, Mode

# The modes HOL Light checks run in, as rows and maps record them.
BYTECODE_MODE, NATIVE_MODE = Mode.BYTECODE, Mode.NATIVE
# Bytecode time / native time: 4.0-7.4x for the example corpus's heavy proofs
# in three runs of benchmarks/native/native.py here (README), 2.5-6x for real
# s2n-bignum proofs (../shared/notes/hol-light.md). Conversions take the end
# of the range that lengthens the limit.
RATIO_MIN, RATIO_MAX = 2.5, 7.4
# Expected times move between modes by a central bytecode/native ratio, not
# by the conservative end limits take (a limit must not cut a proof short;
# an expected time should be right on average): the geometric mean of the
# measured range, sqrt(2.5 x 7.4) = 4.30.
RATIO_CENTRAL = round(math.sqrt(RATIO_MIN * RATIO_MAX), 2)
# Under --mode auto a check runs natively when its expected bytecode time is
# above this, and in the bytecode fork server otherwise, where it is cheaper
# than compiled on its own (../shared/notes/hol-light.md: "native wins once a
# proof takes more than about 0.35 s in bytecode").
THRESHOLD_S = 0.35


def expected_in(secs: float, measured_in: str | None, run_mode: str) -> float:
    """An expected proof time measured in ``measured_in`` for a check that
    runs in ``run_mode``, moved by ``RATIO_CENTRAL``; as it is when the two
    are the same or the mode it was measured in is unknown."""
    if measured_in not in (NATIVE_MODE, BYTECODE_MODE) or measured_in == run_mode:
        return secs
    return secs / RATIO_CENTRAL if run_mode == NATIVE_MODE else secs * RATIO_CENTRAL


class MapModes:
    """The timeout map's expected times and mode, for routing and limits.

    ``loaded`` is the sweep's map as runner.maps.provenance.load read it once
    (a LoadedMap), or None for a sweep without a map."""

    def __init__(self, loaded: LoadedMap | None = None):
        self.path, self.mode, self.expected = None, None, {}
        if loaded is not None:
            self.path, self.mode = loaded.path, loaded.provenance.mode
            self.expected = loaded.prove_secs()

    def bytecode_secs(self, problem_id: str) -> float | None:
        secs = self.expected.get(problem_id)
        if secs is None:
            return None
        return secs * RATIO_MAX if self.mode == NATIVE_MODE else secs

    def expected_in(self, secs: float, run_mode: str) -> float:
        """An expected proof time of the map (``secs``) for a check that runs
        in ``run_mode`` (``expected_in``)."""
        return expected_in(secs, self.mode, run_mode)

    def convert(self, limits: CheckLimits, run_mode: str) -> CheckLimits:
        if limits.time_source != "map" or self.mode not in (NATIVE_MODE, BYTECODE_MODE) \
                or self.mode == run_mode:
            return limits
        factor = 1 / RATIO_MIN if run_mode == NATIVE_MODE else RATIO_MAX
        return replace(limits, time_s=max(1.0, round(limits.time_s * factor, 1)),
                       time_source=f"map ({self.mode} x{factor:.2f})")


def converted_warning(maps: MapModes, count: int) -> tuple[str, ...]:
    """The warning of a sweep whose ``count`` checks got converted limits."""
    if not count:
        return ()
    other = BYTECODE_MODE if maps.mode == NATIVE_MODE else NATIVE_MODE
    return (f"{maps.path}: measured in {maps.mode} mode, but {count} checks run in {other} "
            f"mode; their limits were CONVERTED with the measured bytecode/native ratio "
            f"({RATIO_MIN}-{RATIO_MAX}x), not measured. Profile in this mode for limits you can "
            f"trust.",)
