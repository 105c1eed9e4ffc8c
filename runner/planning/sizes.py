"""Bounds on the machines a user describes: worker and node counts that
``simulate`` can model in a few seconds, and a node's memory.

Outside them the input is a typo, not a cluster: ``simulate --workers
1000000000`` ran 258 s and was killed at 21 GB (its memory grows with the
worker count), and 4,000 nodes took 84 s where 1,000 take 4 s (its time
grows with the square of the node count); ``--mem-per-node 1K`` planned
every check alone on a node that holds no prover session.
"""

from __future__ import annotations

import argparse

from ..errors import InputError
from ..settings import format_size, memory_size

# A million workers on one node or a thousand nodes: about 2 s and 130 MB.
MAX_WORKERS = 1_000_000
MAX_NODES = 1_000
# A node below 1 GiB holds no prover session and a check; above 64 TiB is
# more than any one machine has.
MIN_NODE_MEM = 2**30
MAX_NODE_MEM = 64 * 2**40


def check_count(flag: str, value: int | None, most: int = MAX_WORKERS) -> None:
    """Refuse a count flag above ``most`` before anything is built from it."""
    if value is not None and value > most:
        what = "nodes" if most == MAX_NODES else "workers"
        raise InputError(flag, f"{value:,} is more than simulate models ({most:,} {what} at most)",
                         f"pass {most} or fewer")


def check_machines(nodes: int, cores_per_node: int, where: str) -> None:
    """Refuse nodes, or workers (nodes x cores), that simulating would not
    finish with; ``where`` names what gave them (a flag, a plan file)."""
    if nodes > MAX_NODES:
        raise InputError(where, f"{nodes:,} nodes are more than simulate models ({MAX_NODES:,} at "
                         "most: its time grows with the square of the node count)",
                         f"pass {MAX_NODES} nodes or fewer, with more cores per node")
    if nodes * cores_per_node > MAX_WORKERS:
        raise InputError(where, f"{nodes * cores_per_node:,} workers ({nodes:,} nodes x "
                         f"{cores_per_node:,} cores) are more than simulate models "
                         f"({MAX_WORKERS:,} at most: its memory grows with the worker count)",
                         f"pass {MAX_WORKERS} workers or fewer")


def node_memory(text: str) -> int:
    """argparse type for --mem-per-node: a size a real node can have."""
    size = memory_size(text)
    if size < MIN_NODE_MEM:
        raise argparse.ArgumentTypeError(
            f"{format_size(size)} per node cannot hold a prover session and a check; "
            "give 1G or more (one node's memory, e.g. 192G)")
    if size > MAX_NODE_MEM:
        raise argparse.ArgumentTypeError(
            f"{format_size(size)} per node is more than any one machine has; "
            "give one node's memory, e.g. 192G")
    return size
