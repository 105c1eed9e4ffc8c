"""simulate's --host-factor: read as a number in range, applied to a timeout
map's times or to a recorded plan's, and said so in the output."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ..planning.planner import Plan
from ..planning.simulate import with_host_factor

# The largest --host-factor `run` takes (runner.maps.host_factor.parse): a
# host a thousand times slower than the map's has the wrong map, not a factor.
MAX_HOST_FACTOR = 1000.0


def host_factor_flag(text: str) -> float:
    """argparse type of simulate's --host-factor: a number above 0, at most
    MAX_HOST_FACTOR. Not ``auto``: that is this host's calibration, which
    `run` reads for the sweep it starts here; simulate predicts for any host."""
    if text == "auto":
        raise argparse.ArgumentTypeError(
            "auto is run's (this host's calibration), and simulate predicts for any host; pass "
            "the factor as a number, e.g. 2.5 (`proofbatch calibrate` prints it)")
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_HOST_FACTOR):
        raise argparse.ArgumentTypeError(
            f"{text} is not a host factor (how many times slower the host proves than the "
            f"map's: above 0, at most {MAX_HOST_FACTOR:g}); pass a number such as 2.5, "
            "as `proofbatch calibrate` measures it")
    return value


def on_map(factor: float) -> dict:
    """What simulate says of a factor applied to a timeout map
    (runner.maps.provenance.LoadedMap.scaled did it)."""
    return {"given": factor, "times_x": factor, "limits_x": max(1.0, factor),
            "note": f"host factor {factor:g} (given): the map's proof times x{factor:g} (those of "
                    f"the profile its sidecar names too), its limits x{max(1.0, factor):.2f}"}


def plan_on_host(plan: Plan, path: Path, factor: float) -> tuple[Plan, dict]:
    """A recorded plan on a host ``factor`` times slower than the map's. Its
    measured times already hold the factor its sweep ran with (sweep.json
    beside plan.json records it; `run --host-factor` scaled the map before
    planning), so they are moved by ``factor`` over that one."""
    from ..sweep_dir import recorded_host_factor

    recorded = recorded_host_factor(Path(path).parent)
    if recorded is not None and not 0 < recorded <= MAX_HOST_FACTOR:
        recorded = None         # a hand-edited sweep.json: no factor `run` could have applied
    ratio = factor / (recorded or 1.0)
    scaled, count = with_host_factor(plan, ratio)
    ran = (f"its sweep ran with factor {recorded:g}, so x{ratio:g}" if recorded is not None else
           f"no sweep.json beside it records a factor, so they are read as the map's: x{ratio:g}")
    note = (f"host factor {factor:g} (given): {count} of {len(plan.checks)} checks' expected times "
            f"(a map's or profile's, or their category's) scaled ({ran}); "
            f"{len(plan.checks) - count} default durations and the image builds kept")
    return scaled, {"given": factor, "recorded": recorded, "times_x": ratio, "scaled_checks": count,
                    "note": note}

