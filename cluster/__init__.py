"""Executors, by the name ``proofbatch run --cluster NAME`` takes.

Adding an executor touches this file only: a name, the module that holds it,
and how its options become an instance.
"""

from __future__ import annotations

import argparse
import importlib

from runner.errors import InputError
from runner.planning.sizes import node_memory
from runner.settings import help_of, option, scheduler_address

from .local import LocalExecutor

# name -> (module, factory function in it taking (args, workers))
EXECUTORS: dict[str, tuple[str, str]] = {
    "local": ("cluster", "local_from_args"),
    "slurm": ("cluster.slurm", "from_args"),
    "dask": ("cluster.dask", "from_args"),
    "dask-slurm": ("cluster.dask", "slurm_from_args"),
}


# Executors whose checks run on a cluster's nodes: each resolves --host-factor
# auto for itself (runner/maps/node_factor.py). The local executor, and a run
# on an image server, keep the one factor the sweep resolved.
PER_NODE = frozenset({"slurm", "dask", "dask-slurm"})


def per_node(args) -> bool:
    """Whether the run ``args`` asks for checks on a cluster's nodes."""
    return (getattr(args, "cluster", "local") or "local") in PER_NODE \
        and getattr(args, "server", None) is None


def _extra(text: str) -> tuple[str, str]:
    name, sep, value = text.lstrip("-").partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (e.g. qos=high)")
    return name, value


def add_arguments(parser) -> None:
    """The --cluster option and the options of every executor."""
    g = parser.add_argument_group("cluster")
    g.add_argument("--cluster", choices=sorted(EXECUTORS), default="local",
                   help="where checks run (default local: threads on this machine)")
    # Help and defaults are SlurmOptions' (runner/settings.py); dask-slurm's
    # options (cluster.dask.DaskSlurmOptions) take the same flags.
    # Imported here, not above: cluster.slurm imports submitit, which a
    # sweep on another executor never needs.
    from .slurm import SlurmOptions

    def opt(name: str, users: str = "slurm, dask-slurm", then: str = "", **kw):
        return option(SlurmOptions, name, help=f"{users}: {help_of(SlurmOptions, name)}{then}", **kw)

    g.add_argument("--partition", **opt("partition"))
    g.add_argument("--nodes", type=int, **opt("nodes", then="; dask-slurm: its worker jobs"))
    g.add_argument("--cpus-per-task", type=int, **opt("cpus_per_task"))
    g.add_argument("--mem-per-node", type=node_memory, **opt("mem_per_node"))
    g.add_argument("--array-parallelism", type=int, **opt("array_parallelism", "slurm"))
    g.add_argument("--slurm-extra", type=_extra, action="append", metavar="NAME=VALUE",
                   **opt("extra", default=[]))
    g.add_argument("--slurm-retries", type=int, **opt("retries", "slurm"))
    g.add_argument("--add-tasks", type=int, metavar="N", **opt("add_tasks", "slurm"))
    g.add_argument("--scheduler-address", type=scheduler_address, help="dask: address of a running scheduler, tcp://HOST:PORT")
    g.add_argument("--interface", help="dask-slurm: network interface of the workers (e.g. lo)")


def local_from_args(args, workers: int):
    return LocalExecutor(workers=workers)


def make_executor(args, workers: int):
    """The executor ``args.cluster`` names, configured from ``args``."""
    name = getattr(args, "cluster", "local") or "local"
    if name not in EXECUTORS:
        raise InputError("--cluster", f"unknown executor {name!r}", f"use one of {sorted(EXECUTORS)}")
    module, factory = EXECUTORS[name]
    return getattr(importlib.import_module(module), factory)(args, workers)
