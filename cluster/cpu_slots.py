"""One check per CPU of a host, whatever runs the checks there.

A profile times each check: two checks sharing a core each take about twice
as long, and the profile would time the sharing, not the proofs. A Dask
worker runs as many tasks at once as it has threads, and a host may run
several workers: nothing in Dask ties threads to cores. So a profiled check
holds a *slot*, an exclusive ``flock`` on one file per CPU this process may
run on (its affinity: ``taskset``, a Slurm cpuset), in a directory shared by
every process of the host. The kernel drops a lock when its holder dies, so a
killed worker never keeps a slot.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

POLL_S = 0.2


def slot_dir() -> Path:
    # Per user: another user's lock files could not be opened for writing.
    return Path(tempfile.gettempdir()) / f"proofbatch-cpu-slots-{os.getuid()}"


def cpus() -> list[int]:
    """The CPUs this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:          # not Linux: every CPU
        return list(range(os.cpu_count() or 1))


class Stopped(Exception):
    """Given up waiting for a CPU: the caller said stop."""


@contextlib.contextmanager
def one_per_cpu(stop: Callable[[], bool] = lambda: False,
                directory: Path | None = None) -> Iterator[int]:
    """Wait for a free CPU of this host and hold it; yields its number.
    Raises Stopped when ``stop()`` turns true while waiting."""
    directory = directory or slot_dir()
    directory.mkdir(parents=True, exist_ok=True)
    mine = cpus()
    while True:
        for cpu in mine:
            fd = os.open(directory / f"cpu-{cpu}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield cpu
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            return
        if stop():
            raise Stopped("stopped while waiting for a free CPU")
        time.sleep(POLL_S)
