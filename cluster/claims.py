"""Work pulled from a shared pool: how Slurm array tasks share a sweep.

Every array task gets the whole plan and claims its problems as it goes,
instead of owning a share fixed at submission: when a prediction is off, or
a task is preempted, the others take what is left. The pool lives on the
filesystem every task shares, under ``OUT/slurm/``:

- ``claims/<problem id>.claim``: made with ``O_CREAT | O_EXCL``, so exactly
  one task wins a problem (NFSv3 and later make exclusive create atomic on
  the server). It names its holder and stays after the rows are published:
  a claim with rows is done.
- ``leases/<holder>``: each task renews its lease's mtime every few
  seconds. A claim whose holder's lease is older than ``lease_s`` is stale:
  the holder died without a word (node failure, SIGKILL). Another task takes
  it over by making the claim's next generation, again exclusively, so two
  takers never both run it. A slow task that is alive keeps its lease and
  its claims: its checks are never run twice.
- The driver, when Slurm says a job ended for good, releases its claims at
  once (``release_holder``) instead of waiting for the lease to run out.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable

CLAIMS_DIR, LEASES_DIR = "claims", "leases"
# Long against a shared filesystem's attribute caching (NFS caches mtimes for
# up to 60 s by default, acdirmax) and short against a sweep.
DEFAULT_LEASE_S = 120.0
# The holder of a claim the driver gave back: never alive, so anyone may take it.
RELEASED = "-"


def holder_name() -> str:
    """This array task's name as the driver's ledger has it: submitit's job id
    (``ARRAYID_INDEX`` for an array task). A requeued task keeps its name, and
    with it its lease and its claims."""
    array, index = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and index:
        return f"{array}_{index}"
    return os.environ.get("SLURM_JOB_ID") or f"local-{os.getpid()}"


class Pool:
    """Claims on the problems of one sweep, under ``root`` (``OUT/slurm``)."""

    def __init__(self, root: Path, holder: str, lease_s: float = DEFAULT_LEASE_S):
        self.root, self.holder, self.lease_s = Path(root), holder, lease_s
        self.claims, self.leases = self.root / CLAIMS_DIR, self.root / LEASES_DIR
        self.claims.mkdir(parents=True, exist_ok=True)
        self.leases.mkdir(parents=True, exist_ok=True)
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    # -- the lease -------------------------------------------------------------

    def renew(self) -> None:
        (self.leases / self.holder).touch()

    def start_lease(self) -> None:
        """Hold the lease from now on, renewed by a daemon thread until ``stop_lease``."""
        self.renew()

        def loop() -> None:
            while not self._stop.wait(self.lease_s / 6):
                try:
                    self.renew()
                except OSError:
                    pass            # the shared filesystem hiccupped: try again next time

        self._renewer = threading.Thread(target=loop, name="lease", daemon=True)
        self._renewer.start()

    def stop_lease(self) -> None:
        self._stop.set()

    def alive(self, holder: str) -> bool:
        try:
            age = time.time() - (self.leases / holder).stat().st_mtime
        except FileNotFoundError:
            return False
        return age < self.lease_s

    # -- claims ----------------------------------------------------------------
    #
    # A problem's claim has generations: ``<id>.claim``, then ``<id>.claim.1``,
    # ... The highest one that exists is the claim. Taking over a stale claim
    # means making the next generation with O_EXCL, so of two tasks that both
    # saw the same claim go stale, one wins; nothing is ever renamed or
    # deleted under a task that is reading it.

    def _path(self, problem_id: str, generation: int) -> Path:
        name = f"{problem_id}.claim" + (f".{generation}" if generation else "")
        return self.claims / name

    def _current(self, problem_id: str) -> tuple[int, str | None]:
        """(generation, holder) of the claim on ``problem_id``; (-1, None) if unclaimed."""
        generation, holder = -1, None
        while True:
            try:
                text = self._path(problem_id, generation + 1).read_text()
            except FileNotFoundError:
                return generation, holder
            generation, holder = generation + 1, text.strip() or None

    def holder_of(self, problem_id: str) -> str | None:
        generation, holder = self._current(problem_id)
        return holder if holder != RELEASED else None

    def _takeable(self, problem_id: str, generation: int, holder: str | None) -> bool:
        if holder == RELEASED:
            return True
        if holder is None:
            # Made this instant and not written yet; or its maker died in
            # between: an empty claim older than a lease is abandoned.
            try:
                age = time.time() - self._path(problem_id, generation).stat().st_mtime
            except FileNotFoundError:
                return False
            return age >= self.lease_s
        return not self.alive(holder)

    def _make(self, problem_id: str, generation: int, holder: str) -> bool:
        try:
            fd = os.open(self._path(problem_id, generation), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, f"{holder}\n".encode())
        finally:
            os.close(fd)
        return True

    def claimable(self, problem_id: str) -> bool:
        """Whether ``claim`` could take ``problem_id`` now (it does not take it)."""
        generation, holder = self._current(problem_id)
        return generation < 0 or holder == self.holder or self._takeable(problem_id, generation, holder)

    def held_alive(self, problem_id: str) -> bool:
        """Whether a live task other than this one holds ``problem_id``."""
        generation, holder = self._current(problem_id)
        return (generation >= 0 and holder != self.holder
                and not self._takeable(problem_id, generation, holder))

    def claim(self, problem_id: str) -> str:
        """Take ``problem_id`` for this task. Says how: "new" (no one held
        it), "mine" (ours from before a requeue), "taken" (from a task whose
        lease ran out, or that the driver released: it may have recorded
        some or all of the problem's checks first), or "" while another live
        task holds it."""
        while True:
            generation, holder = self._current(problem_id)
            if holder == self.holder:
                return "mine"
            if generation >= 0 and not self._takeable(problem_id, generation, holder):
                return ""
            if self._make(problem_id, generation + 1, self.holder):
                return "new" if generation < 0 else "taken"
            # Another task made that generation first: look again.

    def release_holder(self, holder: str, keep: Callable[[str], bool]) -> list[str]:
        """Return to the pool every claim of ``holder`` whose problem is not
        done (``keep(problem_id)`` is True for problems with all their rows).
        The driver calls this when Slurm says ``holder`` ended for good."""
        released = []
        for problem_id in sorted(self.held_by(holder)):
            generation, _ = self._current(problem_id)
            if not keep(problem_id) and self._make(problem_id, generation + 1, RELEASED):
                released.append(problem_id)
        (self.leases / holder).unlink(missing_ok=True)
        return released

    def _claimed(self) -> set[str]:
        return {path.name.split(".claim")[0] for path in self.claims.iterdir() if ".claim" in path.name}

    def held_by(self, holder: str) -> set[str]:
        """Problems ``holder`` holds now."""
        return {pid for pid in self._claimed() if self._current(pid)[1] == holder}

    def ever_held_by(self, holder: str) -> set[str]:
        """Problems ``holder`` held at some time: every generation stays on disk."""
        out = set()
        for path in self.claims.iterdir():
            if ".claim" in path.name and path.read_text().strip() == holder:
                out.add(path.name.split(".claim")[0])
        return out

    def mine(self) -> set[str]:
        """Problems this task holds (after a requeue: what it held before)."""
        return self.held_by(self.holder)


class Claimer:
    """An array task's answer to its local executor's "may I run this
    problem?" (``LocalExecutor(claim=...)``): whether ``pool.claim`` gives
    it the problem, and, for one taken over from a task that ended, whether
    any of its checks is still unrecorded (``recorded(problem_id)``: all
    are); that task may have recorded them before it ended.

    A problem taken over with all its checks recorded stays refused. The
    executor asks once more at the end for every problem it was refused
    (its holder may have died meanwhile), and by then the claim is this
    task's own: "mine" would run it a second time (tests/cluster/test_slurm.py saw
    a check recorded twice so)."""

    def __init__(self, pool: Pool, recorded: Callable[[str], bool]):
        self.pool, self.recorded = pool, recorded
        self._done: set[str] = set()

    def __call__(self, problem_id: str) -> bool:
        if problem_id in self._done:
            return False
        how = self.pool.claim(problem_id)
        if how != "taken":
            return bool(how)
        if self.recorded(problem_id):
            self._done.add(problem_id)
            return False
        return True
