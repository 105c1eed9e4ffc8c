"""One runner per sweep directory.

Two ``proofbatch run`` on one ``--out`` at once would both run every check
and interleave their rows. A runner (the driver, whatever the executor:
local threads, a Slurm or Dask driver) holds ``OUT/.sweep.lock`` with
``fcntl.flock`` for as long as it runs, and publishes who it is in
``OUT/lock.json`` (temp file and ``os.replace``, runner/results/publish.py): host,
pid, since when, the executor, and a heartbeat it refreshes every
``heartbeat.INTERVAL`` seconds.

A second runner is refused (exit 2) naming the holder and how to stop it.
A holder is taken over only when it is dead: on this host, when its pid is
gone (or is another process now); on another host, whose pid means nothing
here and whose flock a shared file system may not carry, when its heartbeat
is older than ``heartbeat.STALE`` intervals. The kernel drops a flock when
its holder dies, even by ``kill -9``, so on one host the record only names.
The lock file stays after the run (removing a flocked file races); the
holder record goes.

Array tasks of a Slurm sweep and Dask workers publish into OUT too: they
are the holder's workers and take no lock. Tasks that outlive a killed
Slurm driver still pull from its pool, so only a Slurm driver, which
reattaches to them, takes over from one while its jobs may be running.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import psutil

from . import heartbeat
from ..errors import InputError
from .publish import publish_json

LOCK_FILE = ".sweep.lock"
HOLDER_FILE = "lock.json"
FORMAT = "proofbatch-lock/1"
# How long a refused runner waits for a holder that has the flock but has not
# yet published its record (the two were started together), to name it.
NAME_WAIT_S = 2.0


def process_started(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds), to tell it from a later
    process given the same pid; None when it is gone."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def read_holder(out: Path) -> dict | None:
    """The holder record of ``out``, or None (none, or unreadable)."""
    try:
        data = json.loads((Path(out) / HOLDER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def alive(record: dict, *, now: float | None = None) -> bool:
    """Whether the runner of ``record`` may still be running."""
    if record.get("host") == socket.gethostname():
        created = process_started(int(record.get("pid") or 0)) if record.get("pid") else None
        if created is None:
            return False
        # The same pid may name another process since: compare start times.
        started = record.get("started")
        return started is None or abs(created - float(started)) < 2.0
    now = time.time() if now is None else now
    interval = float(record.get("interval") or heartbeat.INTERVAL)
    return now - float(record.get("beat") or 0) <= heartbeat.STALE * interval


def describe(record: dict | None) -> str:
    """The holder as people say it: host, pid, since when, executor."""
    if not record:
        return "another proofbatch run on this host (it has not said who it is yet)"
    since = record.get("since") or "?"
    return (f"another proofbatch run (host {record.get('host')}, pid {record.get('pid')}, since "
            f"{since}, {record.get('executor') or 'local'} executor)")


def _how_to_stop(record: dict | None, out: Path) -> str:
    if not record:
        return f"wait for it to finish, or stop the other proofbatch run on {out}, then rerun"
    host, pid = record.get("host"), record.get("pid")
    where = "" if host == socket.gethostname() else f" on {host}"
    jobs = (f" and `scancel` its jobs ({Path(out) / 'slurm' / 'jobs.json'})"
            if record.get("executor") == "slurm" else "")
    return (f"wait for it to finish, or stop it with `kill {pid}`{where}{jobs} (it stops within "
            "seconds, keeping every recorded verdict), then rerun to resume")


def _slurm_jobs_open(out: Path) -> list[str]:
    """Ids of Slurm jobs the sweep's ledger has not seen end (cluster/slurm_jobs.py)."""
    try:
        data = json.loads((Path(out) / "slurm" / "jobs.json").read_text())
        return [str(r.get("job_id")) for r in data.get("jobs", []) if r.get("settled") is None]
    except (OSError, ValueError, AttributeError, TypeError):
        return []


class SweepLock:
    """``with SweepLock(out, executor="local"):`` runs a sweep as OUT's one
    runner; raises InputError naming the holder when another live one has it."""

    def __init__(self, out: Path, *, executor: str = "local", interval: float | None = None):
        self.out = Path(out)
        self.executor = executor or "local"
        self.interval = heartbeat.INTERVAL if interval is None else interval
        self.taken_over: dict | None = None     # the dead holder's record, if any
        self._fd: int | None = None
        self._record: dict | None = None
        self._stop = threading.Event()
        self._publishing = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- taking it -------------------------------------------------------------

    def _refuse(self, record: dict | None) -> InputError:
        return InputError(self.out, f"is in use by {describe(record)}; two runs would both run "
                          "every check", _how_to_stop(record, self.out))

    def acquire(self) -> "SweepLock":
        self.out.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.out / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            deadline = time.monotonic() + NAME_WAIT_S
            record = read_holder(self.out)
            while (record is None or not alive(record)) and time.monotonic() < deadline:
                time.sleep(0.1)
                record = read_holder(self.out)
            raise self._refuse(record if record is not None and alive(record) else None) from None
        try:
            record = read_holder(self.out)
            ours = record is not None and record.get("host") == socket.gethostname() \
                and record.get("pid") == os.getpid()
            if record is not None and not ours:
                if alive(record):      # another host's runner, on a file system without flock
                    raise self._refuse(record)
                if record.get("executor") == "slurm" and self.executor != "slurm" \
                        and (open_jobs := _slurm_jobs_open(self.out)):
                    raise InputError(self.out, f"was run by a Slurm driver (host {record.get('host')}, "
                                     f"pid {record.get('pid')}, gone) whose jobs "
                                     f"{', '.join(open_jobs[:3])} may still be running and checking",
                                     "resume it with --cluster slurm (it reattaches to them), or "
                                     "`scancel` them first")
                self.taken_over = record
            self._record = {
                "format": FORMAT, "host": socket.gethostname(), "pid": os.getpid(),
                "started": process_started(os.getpid()),
                "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "beat": time.time(), "interval": self.interval, "executor": self.executor,
                "command": " ".join(sys.argv),
            }
            self._publish()
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._thread = threading.Thread(target=self._beat, daemon=True, name="sweep-lock")
        self._thread.start()
        return self

    def _publish(self) -> None:
        with self._publishing:
            record = dict(self._record, beat=time.time())
            publish_json(self.out / HOLDER_FILE, record, indent=1)

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._publish()
            except OSError:
                pass        # a full disk: the next beat tries again

    # -- letting go --------------------------------------------------------------

    def release(self) -> None:
        if self._fd is None:
            return
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        try:
            mine = read_holder(self.out)
            if mine is not None and mine.get("pid") == os.getpid() \
                    and mine.get("host") == socket.gethostname():
                (self.out / HOLDER_FILE).unlink(missing_ok=True)
        finally:
            os.close(self._fd)      # releases the flock
            self._fd = None

    def __enter__(self) -> "SweepLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
