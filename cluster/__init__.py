"""Executors, by the name ``proofbatch run --cluster NAME`` takes.

Adding an executor touches this file only: a name, the module that holds it,
and how its options become an instance.
"""

from __future__ import annotations

import argparse
import importlib

from runner.errors import InputError

# name -> (module, factory function in it taking (args, workers))
EXECUTORS: dict[str, tuple[str, str]] = {
    "local": ("cluster", "local_from_args"),
    "slurm": ("cluster.slurm", "from_args"),
    "dask": ("cluster.dask", "from_args"),
    "dask-slurm": ("cluster.dask", "slurm_from_args"),
}


def _size(text: str) -> int:
    from runner.sizes import parse_size
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
    g.add_argument("--partition", help="slurm, dask-slurm: partition (default: the cluster's)")
    g.add_argument("--nodes", type=int, default=2,
                   help="slurm: array tasks, one worker each; dask-slurm: worker jobs (default 2)")
    g.add_argument("--cpus-per-task", type=int, default=1,
                   help="slurm, dask-slurm: checks at once per task or worker (default 1)")
    g.add_argument("--mem-per-node", type=_size, help="slurm, dask-slurm: memory per task, e.g. 8G "
                   "(default: 1G for the images + cpus-per-task x --mem-limit)")
    g.add_argument("--array-parallelism", type=int, help="slurm: array tasks at once (default: --nodes)")
    g.add_argument("--slurm-extra", type=_extra, action="append", default=[], metavar="NAME=VALUE",
                   help="slurm, dask-slurm: another sbatch option, e.g. qos=high (repeatable)")
    g.add_argument("--slurm-retries", type=int, default=2,
                   help="slurm: new jobs for the checks of a job that ended for good (default 2)")
    g.add_argument("--add-tasks", type=int, default=0, metavar="N",
                   help="slurm: N more array tasks for this sweep while it runs; they pull "
                   "from its pool (run it with the sweep's own arguments and --out)")
    g.add_argument("--scheduler-address", help="dask: address of a running scheduler, tcp://HOST:PORT")
    g.add_argument("--interface", help="dask-slurm: network interface of the workers (e.g. lo)")


def local_from_args(args, workers: int):
    from .local import LocalExecutor
    return LocalExecutor(workers=workers)


def make_executor(args, workers: int):
    """The executor ``args.cluster`` names, configured from ``args``."""
    name = getattr(args, "cluster", "local") or "local"
    if name not in EXECUTORS:
        raise InputError("--cluster", f"unknown executor {name!r}", f"use one of {sorted(EXECUTORS)}")
    module, factory = EXECUTORS[name]
    return getattr(importlib.import_module(module), factory)(args, workers)
