"""Each check's limits as a sweep gives them: its time from the map, the
category file or the default (timeouts.py), its memory (mem_needs.py),
moved by its backend to the mode the check runs in, then the bench's slack
and the wall-clock backstop added. One place for the sweep's own problems
and for the ground truths of ``--calibration-corpus`` that a node measures
its factor on (calibration_corpus.py): those are checked under the limits
the sweep would give them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, Sequence

import psutil

from ..prover import CheckLimits, backstop_s
from . import mem_needs
from .timeouts import TimeoutPolicy, resolve_limits


@dataclass(frozen=True)
class SweepLimits:
    config: object                  # the sweep's SweepConfig
    policy: TimeoutPolicy
    loaded: object                  # the sweep's map (provenance.LoadedMap), or None
    profiled_mem: Mapping           # the map's sidecar's memory (timeout_map.use_map's ``mem``)
    backend: object                 # the sweep's ProverBackend, after classify
    mem: int                        # the sweep's memory limit: the flag's, or the default share
    nice: int
    factor: float | None            # the host factor; None: each node's (node_factor.py)

    def of(self, problems: Sequence) -> tuple[dict[str, CheckLimits], tuple[str, ...]]:
        """Each of ``problems``' limits, by problem id, and what to say of their memory."""
        config = self.config
        times = resolve_limits(problems, self.policy)
        # Each problem's memory: measured, estimated from its time class, or the
        # default share, within 80% of this node's memory.
        mems, said = mem_needs.sweep_limits(
            [p.problem_id for p in problems], self.loaded.prove_secs() if self.loaded else {},
            self.profiled_mem, cap=config.mem_limit, default=self.mem,
            node=int(0.8 * psutil.virtual_memory().total),
            default_expected=min(config.expected_mem, self.mem))
        found = {}
        for p in problems:
            t, m = times[p.problem_id], mems[p.problem_id]
            limit = self.backend.limits_for(p, CheckLimits(
                time_s=t.seconds, time_source=t.source, mem_bytes=m.guard,
                expected_mem_bytes=m.expected, clock=config.limit_clock, nice=self.nice,
                mem_source=m.source, host_factor=self.factor))
            # After the mode's conversion: the bench's slack is wall seconds, not work.
            time_s = limit.time_s + config.limit_slack
            found[p.problem_id] = dataclasses.replace(limit, time_s=time_s, backstop_s=backstop_s(
                time_s, config.backstop_factor, config.backstop_extra))
        return found, said
