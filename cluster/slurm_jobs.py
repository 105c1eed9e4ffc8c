"""What the Slurm driver knows about its jobs: the ledger in
``OUT/slurm/jobs.json`` with the key of each check it lists, the questions it
asks Slurm (squeue for what is queued, sacct for how a job ended, scontrol
for the site's limits), what a restarted driver finds of an earlier one's
jobs, and why a job ended, read from its log."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from submitit.slurm.slurm import SlurmJob

from runner.results.publish import publish_json
from runner import subproc
from runner.checks.tasks import CheckTask
from runner.errors import CommandError, InputError

LEDGER = "jobs.json"
UNFINISHED = {"PENDING", "RUNNING", "REQUEUED", "COMPLETING", "CONFIGURING", "RESIZING",
              "SUSPENDED", "PREEMPTED", "UNKNOWN"}
MEMORY_KILL = re.compile(r"exceeded memory limit|oom-kill|out of memory|OUT_OF_MEMORY", re.I)


def task_key(task: CheckTask) -> tuple[str, int]:
    return task.problem.problem_id, task.attempt


@dataclass
class JobRecord:
    job_id: str
    name: str
    folder: str
    keys: list[tuple[str, int]]
    round: int
    mem: str
    submitted: float = 0.0          # time.time() when sbatch accepted it
    settled: str | None = None      # the final Slurm state once handled
    # The pool its array pulls from (OUT/slurm/pools/<pool>.json), shared by
    # every task of one array instead of a copy of its keys per task; "" for
    # a job of a fixed share (``keys``), as ledgers before pulling had.
    pool: str = ""

    def as_json(self) -> dict:
        return {**self.__dict__, "keys": [list(k) for k in self.keys]}

    @classmethod
    def from_json(cls, data: dict) -> "JobRecord":
        return cls(**{**data, "keys": [(k[0], int(k[1])) for k in data["keys"]]})


class Ledger:
    """OUT/slurm/jobs.json: every job this sweep submitted, and what became of it."""

    def __init__(self, path: Path):
        self.path = path
        self.records: list[JobRecord] = []
        # Jobs that ran each check and ended for good without finishing it.
        self.tries: dict[tuple[str, int], int] = {}
        self._pools: dict[str, list[tuple[str, int]]] = {}
        if path.is_file():
            try:
                data = json.loads(path.read_text())
                self.records = [JobRecord.from_json(r) for r in data["jobs"]]
                self.tries = {(k[0], int(k[1])): int(n) for k, n in data.get("tries", [])}
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise InputError(path, f"unreadable Slurm job ledger ({exc})",
                                 "cancel the sweep's jobs (squeue) and delete the file to resubmit"
                                 ) from None

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"format": "proofbatch-slurm-jobs/1", "jobs": [r.as_json() for r in self.records],
                "tries": [[list(k), n] for k, n in sorted(self.tries.items())]}
        publish_json(self.path, data, indent=1)

    def _pool_path(self, name: str) -> Path:
        return self.path.parent / "pools" / f"{name}.json"

    def write_pool(self, name: str, keys: list[tuple[str, int]]) -> None:
        path = self._pool_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        publish_json(path, [list(k) for k in keys], newline=False)
        self._pools[name] = list(keys)

    def keys_of(self, record: JobRecord) -> list[tuple[str, int]]:
        """The checks ``record``'s job may run: its pool's, or its own share's."""
        if not record.pool:
            return record.keys
        if record.pool not in self._pools:
            try:
                keys = json.loads(self._pool_path(record.pool).read_text())
            except (OSError, ValueError) as exc:
                raise InputError(self._pool_path(record.pool), f"unreadable pool of a Slurm job ({exc})",
                                 "cancel the sweep's jobs (squeue) and delete OUT/slurm to resubmit"
                                 ) from None
            self._pools[record.pool] = [(k[0], int(k[1])) for k in keys]
        return self._pools[record.pool]


def max_array_size() -> int:
    """The site's MaxArraySize: an array holds indices 0 .. MaxArraySize-1."""
    config = subproc.run(["scontrol", "show", "config"])
    m = re.search(r"^MaxArraySize\s*=\s*(\d+)", config, re.M)
    return int(m.group(1)) if m else 1001


# squeue's answer when it knows none of the ids it was given (Slurm 22.05:
# exit 1, "slurm_load_jobs error: Invalid job id specified"). Any other
# failure is a failure to ask, not an answer.
_UNKNOWN_IDS = "Invalid job id specified"
# The controller or slurmdbd can be out of reach for a while (a restart, a
# failover, an overloaded controller: squeue retries for about 18 s before it
# gives up with "Unable to contact slurm controller"). A failure to ask is
# never read as "the job is gone": that would submit again the checks of a
# job still running. It is asked again for this long, then raised.
ASK_PATIENCE_S = 300.0


def ask_slurm(argv: list[str], *, patience_s: float | None = None,
              answer_on: str | None = None) -> str:
    """stdout of a Slurm query, asked again while Slurm cannot be reached.

    ``answer_on``: a stderr text that is Slurm's answer, not a failure to
    answer (then "" is returned). Raises CommandError once ``patience_s``
    (default ASK_PATIENCE_S) has passed without an answer.
    """
    deadline = time.monotonic() + (ASK_PATIENCE_S if patience_s is None else patience_s)
    pause = 1.0
    while True:
        try:
            return subproc.run(argv)
        except CommandError as exc:
            if answer_on is not None and answer_on in exc.stderr:
                return ""
            if time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 30.0)


def queued_names(job_ids: list[str], *, patience_s: float | None = None) -> dict[str, str]:
    """Job id -> job name of the given jobs still pending or running (squeue
    asks the controller, which, unlike sacct, never lags). Raises
    CommandError when the controller stays out of reach."""
    if not job_ids:
        return {}
    masters = sorted({j.split("_")[0] for j in job_ids})
    text = ask_slurm(["squeue", "-h", "-r", "-j", ",".join(masters), "-o", "%i|%j"],
                     patience_s=patience_s, answer_on=_UNKNOWN_IDS)
    return dict(line.split("|", 1) for line in text.splitlines() if "|" in line)


def final_state(record: "JobRecord", *, patience_s: float | None = None,
                just_left: bool = False) -> str:
    """The state accounting recorded for a job that left the queue, if the job
    under that id is ours; GONE if accounting does not know it (Slurm's state
    was wiped). ``just_left``: the driver submitted it and it just left the queue, so
    accounting that does not know it yet is lagging. Raises CommandError when
    accounting stays out of reach."""
    # sacct lags the controller by seconds (more on a loaded host): a job just
    # gone from the queue may still show as running there, or not at all if
    # it lasted seconds (tests/cluster/test_slurm.py saw GONE so).
    for _ in range(30 if just_left else 15):
        text = ask_slurm(["sacct", "-n", "-X", "-P", "-j", record.job_id,
                          "-o", "JobID,JobName,State"], patience_s=patience_s)
        states = [p[2].split()[0] for p in (line.split("|") for line in text.splitlines())
                  if len(p) == 3 and p[0] == record.job_id and p[1] == record.name]
        if not states and not just_left:
            return "GONE"
        if states and states[-1] not in UNFINISHED:
            return states[-1]
        time.sleep(1)
    return "GONE"


def reattach(ledger: Ledger) -> set[str]:
    """Ids of jobs of an earlier driver that Slurm still has, under the
    name we gave them (ids restart at 1 when Slurm's state is wiped)."""
    open_records = [r for r in ledger.records if r.settled is None]
    queued = queued_names([r.job_id for r in open_records])
    live: set[str] = set()
    for r in open_records:
        if queued.get(r.job_id) == r.name:
            live.add(r.job_id)
        else:
            # It ended while no driver watched: its claims go back to the
            # pool as the driver resumes (cluster/slurm.py, _resume).
            r.settled = final_state(r)
    return live


def end_reason(record: JobRecord, state: str) -> str:
    """Why ``record``'s job ended before checking a check: killed for its
    memory (its log or its state says so), else its final ``state``."""
    log = ""
    try:
        log = SlurmJob(record.folder, record.job_id).paths.stdout.read_text(errors="replace")
    except OSError:
        pass
    if MEMORY_KILL.search(log) or "OUT_OF_MEMORY" in state:
        return f"Slurm job {record.job_id} exceeded its memory request (--mem={record.mem}) and was killed"
    return f"Slurm job {record.job_id} ended {state} before checking it"
