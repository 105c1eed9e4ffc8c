"""How much slower this host proves than the host a timeout map was measured on.

A map is measured on one machine and used on others. s2n-bignum-bench's
map came from its authors' dedicated machine: 112 of its 2,622 limits are
under twice the measured time, so on a host 2-4x slower a correct proof
can be cut short (../shared/notes/workload-and-anchors.md). `proofbatch
calibrate` checks a small sample of ground truths and measures this host's
*factor*: the median of measured / map ``prove_secs``. A sweep given
``--host-factor auto|X`` multiplies the map's limits by max(1, factor) and
its expected times by the factor (plans, ETAs), and records the factor.

A calibration is kept per host, map (its sha256), the mode the map was
measured in, the mode the checks ran in, and clock, in
``$PROOFBATCH_CACHE/calibrations/<host>/`` (default ``~/.cache/proofbatch``);
the host is part of the path because a cache may be shared across a
cluster's nodes. The map's mode is part of the key because calibrate moves
the map's times to the mode the checks run in (a native map's times are
4.3x shorter than the bytecode checks': map_modes.RATIO_CENTRAL), so a
factor against a map declared native is not one against the same file
declared bytecode. `run --host-factor auto` looks up the one of its own map
mode: its factor is this host's speed alone, which multiplies limits that
`run` converts between modes without counting the conversion twice.
"""

from __future__ import annotations

import json
import math
import os
import random
import socket
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import InputError
from ..results.publish import publish_json

# A map used on a host measured this much slower than its own says so.
SLOW_HOST = 1.3
# Calibration samples proofs whose map time is in this band: shorter ones
# measure the clock and the fork more than the host; longer ones cost much.
BAND_S = (1.0, 60.0)


@dataclass(frozen=True)
class Calibration:
    """One calibration of this host against one map."""

    host: str
    map_sha256: str
    mode: str
    clock: str
    factor: float                   # median of measured / map prove_secs
    low: float                      # the ratios' first quartile
    high: float                     # and third quartile
    problems: int                   # how many ratios the median is of
    measured_at: str
    load: float | None              # the host's mean sampled 1-minute load while it ran
    sweep: str                      # the calibration sweep's directory
    ratios: Mapping[str, float]     # problem id -> measured / map prove_secs (in the checks' mode)
    map_mode: str | None = None     # the mode the map was measured in; None: it says none (one-mode provers)
    # The host's CPU model (/proc/cpuinfo's "model name") when measured; None:
    # not recorded (before issue 47). A host name reused for another CPU (a
    # cloud instance resized) is another node: its calibration does not apply.
    cpu_model: str | None = None
    # The runtime setting its checks ran under (BackendInfo.runtime, e.g.
    # HOL Light's OCaml GC setting): proof times differ between settings.
    # "" (before the record, and provers without one) or "default": the
    # prover's own defaults.
    runtime: str = ""

    def describe(self) -> str:
        load = f", load {self.load:.1f}" if self.load is not None else ""
        against = f" against a {self.map_mode} map" if self.map_mode else ""
        under = f", runtime {self.runtime}" if _named(self.runtime) else ""
        return (f"{self.factor:.2f}x (quartiles {self.low:.2f}-{self.high:.2f} over {self.problems} "
                f"proofs, {self.clock} clock, {self.mode}{against}{under}, measured "
                f"{self.measured_at}{load})")


def cache_root() -> Path:
    env = os.environ.get("PROOFBATCH_CACHE")
    return (Path(env) if env else Path.home() / ".cache" / "proofbatch") / "calibrations"


def _named(runtime: str) -> bool:
    """Whether a runtime key names a setting other than the prover's
    defaults ("" before the record, and for provers without one)."""
    return runtime not in ("", "default")


def record_path(map_sha256: str, map_mode: str | None, mode: str, clock: str,
                host: str | None = None, runtime: str = "") -> Path:
    """Where the calibration against the map of ``map_sha256`` measured in
    ``map_mode`` (None: unknown), of checks run in ``mode`` on ``clock``
    under the runtime setting ``runtime``, is kept. The prover's defaults
    keep the name calibrations had before the setting was recorded."""
    setting = f"-{runtime}" if _named(runtime) else ""
    return cache_root() / (host or socket.gethostname()) / \
        f"{map_sha256[:16]}-{map_mode or 'any'}-map-{mode}-{clock}{setting}.json"


def sample(map_times: Mapping[str, float], candidates: Sequence[str], *, n: int = 10, seed: int = 0,
           band: tuple[float, float] = BAND_S, budget_s: float = 600.0) -> list[str]:
    """Up to ``n`` of ``candidates`` (problems the corpus answers), drawn from
    the map's problems whose times lie in ``band``, stratified: the band is
    cut in ``n`` equal slices of log-time and one problem drawn from each
    slice that has one, cheapest slices first, while the map's times add up
    to at most ``budget_s``. Seeded, so a calibration resumes with its sample."""
    lo, hi = band
    inside = sorted((map_times[p], p) for p in candidates
                    if p in map_times and lo <= map_times[p] <= hi)
    if not inside or n < 1:
        return []
    rng = random.Random(seed)
    edges = [math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * k / n) for k in range(n + 1)]
    chosen, spent = [], 0.0
    for a, b in zip(edges, edges[1:]):
        pool = [p for t, p in inside if a <= t <= b and p not in chosen]
        if pool:
            pick = rng.choice(pool)
            if spent + map_times[pick] > budget_s:
                break
            chosen.append(pick)
            spent += map_times[pick]
    return chosen


def measure(measured: Mapping[str, float], expected: Mapping[str, float]) -> tuple[float, float, float,
                                                                                   dict[str, float]]:
    """(median, first quartile, third quartile, ratios) of measured /
    expected over the problems in both with a positive expected time."""
    ratios = {p: measured[p] / expected[p] for p in sorted(measured)
              if expected.get(p, 0) > 0 and measured[p] is not None and measured[p] >= 0}
    if not ratios:
        raise InputError("calibrate", "no ground truth of the sample was proved, so no factor can be "
                         "measured", "check the sweep's results.csv for why, and the --answers given")
    return (*median_quartiles(ratios.values()), ratios)


def median_quartiles(values) -> tuple[float, float, float]:
    """(median, first quartile, third quartile) of ``values`` (at least one);
    one value is all three."""
    values = sorted(values)
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return statistics.median(values), q1, q3


def save(cal: Calibration) -> Path:
    path = record_path(cal.map_sha256, cal.map_mode, cal.mode, cal.clock, cal.host, cal.runtime)
    path.parent.mkdir(parents=True, exist_ok=True)
    publish_json(path, asdict(cal), indent=1)
    return path


def load(map_sha256: str, map_mode: str | None, mode: str, clock: str, *,
         host: str | None = None, cpu_model: str | None = None, runtime: str = "") -> Calibration | None:
    """This host's (or ``host``'s) calibration against the map measured in
    ``map_mode``, of checks in ``mode`` on ``clock`` under ``runtime``, or
    None when it has none, or when ``cpu_model`` is given and the
    calibration recorded another."""
    path = record_path(map_sha256, map_mode, mode, clock, host, runtime)
    try:
        data = json.loads(path.read_text())
        cal = Calibration(**data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(path, f"unreadable calibration ({exc})",
                         "delete it and run `proofbatch calibrate` again") from None
    if cpu_model is not None and cal.cpu_model not in (None, cpu_model):
        return None
    return cal


def parse(text: str | None) -> float | str | None:
    """``--host-factor``: None, "auto", or a finite number above 0."""
    if text is None or str(text) == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value <= 0 or value > 1000:
        raise InputError("--host-factor", f"{text!r} is not a host factor",
                         "pass auto (this host's calibration) or a number such as 2.5")
    return value


def resolve(text: str | None, map_sha256: str, map_path: Path, mode: str, clock: str,
            corpus: Path, recorded: float | None = None, *,
            map_mode: str | None, elsewhere: str | None = None, runtime: str = "",
            runtime_flag: str | None = None) -> tuple[float, tuple[str, ...]]:
    """The factor a sweep applies to its map, and what to say before it
    starts. ``recorded``: the factor the sweep being resumed ran with,
    which ``auto`` keeps (a new calibration must not change its limits).
    ``map_mode``: the mode the map was measured in (its sidecar's or
    --map-mode), part of which calibration applies. ``elsewhere``: why the
    map was measured on another machine (provenance.measured_elsewhere);
    then no --host-factor means auto (issue 47). ``runtime``: the key of the
    runtime setting the checks run under (a calibration is kept per
    setting), given to the sweep as ``runtime_flag`` (its --runtime, or None)."""
    chosen = parse(text)
    declared = f" --map-mode {map_mode}" if map_mode else ""
    under = f" --runtime {runtime_flag}" if runtime_flag else ""
    calibrate = (f"proofbatch calibrate {corpus} --timeout-map {map_path}{declared} --mode {mode} "
                 f"--limit-clock {clock}{under}")
    if chosen is None and elsewhere:
        return _by_default(map_sha256, map_path, mode, clock, recorded, map_mode, elsewhere, calibrate,
                           runtime)
    if chosen is None:
        cal = load(map_sha256, map_mode, mode, clock, runtime=runtime)
        if cal is not None and cal.factor > SLOW_HOST:
            return 1.0, (f"this host proves {cal.describe()} slower than the host the timeout map "
                         f"{map_path} was measured on, and its limits are used as they are: pass "
                         "--host-factor auto to scale them (recorded), or calibrate again: "
                         f"{calibrate}",)
        return 1.0, ()
    if chosen == "auto":
        if recorded is not None:
            return recorded, ()
        cal = load(map_sha256, map_mode, mode, clock, runtime=runtime)
        if cal is None:
            measured = f" (a {map_mode} map)" if map_mode else ""
            setting = f" under the runtime {runtime}" if _named(runtime) else ""
            raise InputError("--host-factor auto", f"this host ({socket.gethostname()}) has no "
                             f"calibration against {map_path}{measured} in {mode} mode on the "
                             f"{clock} clock{setting}",
                             f"run `{calibrate}` first, or pass a number")
        return cal.factor, (f"host factor {cal.describe()}: the map's limits x"
                            f"{shown(max(1.0, cal.factor))}",)
    return float(chosen), (f"host factor {given(float(chosen))} (given): the map's limits "
                           f"x{shown(max(1.0, float(chosen)))}",)


def _by_default(map_sha256: str, map_path: Path, mode: str, clock: str, recorded: float | None,
                map_mode: str | None, elsewhere: str, calibrate: str,
                runtime: str = "") -> tuple[float, tuple[str, ...]]:
    """``auto`` taken by default for a map measured on another machine: this
    host's calibration when it has one, else the map's limits as they are,
    said with the command that measures it."""
    if recorded is not None:
        return recorded, ()
    why = (f"the timeout map {map_path} was measured on another machine ({elsewhere}), so "
           "--host-factor is auto by default (--host-factor 1 uses the map as it is)")
    cal = load(map_sha256, map_mode, mode, clock, runtime=runtime)
    if cal is None:
        return 1.0, (f"{why}; this host ({socket.gethostname()}) has no calibration against it, so "
                     f"its limits are used as they are: run `{calibrate}` to measure it",)
    return cal.factor, (f"{why}: host factor {cal.describe()}: the map's limits "
                        f"x{shown(max(1.0, cal.factor))}",)


def shown(factor: float) -> str:
    """A factor as people read it: two decimals, or as many as it takes to
    tell it from 1 (1.0000001 read "1" while it scaled limits)."""
    text = f"{factor:.2f}"
    return given(factor) if factor != 1 and float(text) == 1 else text


def given(factor: float) -> str:
    """A factor exactly, as --host-factor takes it back: 2.5, 1.0000001."""
    short = f"{factor:g}"
    return short if float(short) == factor else repr(float(factor))
