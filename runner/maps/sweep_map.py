"""The timeout map a sweep runs under: read once, checked against the
corpus, and scaled by the host's factor, or left for each node to scale
by its own (runner/maps/node_factor.py, issue 47).

A map measured on another machine (one without a sidecar, such as
s2n-bignum-bench's own, or one whose sidecar names other hosts) gets
``--host-factor auto`` by default: one machine's times are not another's
(the bench's own map moved by a median 0.67x between two of its refreshes,
../shared/notes/workload-and-anchors.md). ``--host-factor 1`` uses it as
it is.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from .. import prover_registry
from . import host_factor, provenance


@dataclass(frozen=True)
class SweepMap:
    loaded: provenance.LoadedMap | None     # scaled by the host's factor; None: no map
    said: tuple[str, ...]                   # what to say before the sweep starts
    per_node: bool = False                  # each node scales the map's limits by its own factor


def load(config, prover: str, problem_ids: list[str], recorded: float | None,
         per_node: bool) -> SweepMap:
    """The map of ``config`` (a SweepConfig) for a sweep of ``problem_ids``;
    ``recorded``: the factor the sweep being resumed ran with; ``per_node``:
    the sweep runs on a cluster's nodes (Slurm, Dask), where auto is each
    node's to resolve. Raises InputError."""
    if not config.timeout_map:
        return SweepMap(None, ())
    loaded = provenance.load(config.timeout_map, config.map_mode, config.map_build)
    provenance.require_mode(loaded, prover)
    covered = provenance.coverage(loaded, problem_ids)
    elsewhere = provenance.measured_elsewhere(loaded, socket.gethostname())
    host_factor.parse(config.host_factor)
    asked = config.host_factor if config.host_factor is not None else ("auto" if elsewhere else None)
    if per_node and asked == "auto" and recorded is None:
        how = (f"the timeout map {config.timeout_map} was measured on another machine "
               f"({elsewhere}), so --host-factor is auto by default (--host-factor 1 uses the map "
               "as it is); " if config.host_factor is None else "")
        return SweepMap(loaded, (f"{how}each node scales the map's limits by its own host factor",)
                        + tuple(covered), per_node=True)
    # A map measured on a faster host: its limits scaled by this host's factor.
    # A calibration is kept per runtime setting (the prover's key for the config).
    runtime_of = prover_registry.descriptor(prover).runtime_of
    factor, said = host_factor.resolve(
        config.host_factor, loaded.digest, Path(config.timeout_map), str(config.mode),
        str(config.limit_clock), config.corpus, recorded=recorded,
        map_mode=loaded.provenance.mode, elsewhere=elsewhere,
        runtime=runtime_of(config) if runtime_of else "", runtime_flag=getattr(config, "runtime", None))
    return SweepMap(loaded.scaled(factor), tuple(said) + tuple(covered))
