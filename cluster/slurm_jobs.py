"""What the Slurm driver knows about its jobs: the ledger in
``OUT/slurm/jobs.json`` and the questions it asks Slurm (squeue for what is
queued, sacct for how a job ended, scontrol for the site's limits)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from runner import shards, subproc
from runner.errors import InputError

LEDGER = "jobs.json"
UNFINISHED = {"PENDING", "RUNNING", "REQUEUED", "COMPLETING", "CONFIGURING", "RESIZING",
              "SUSPENDED", "PREEMPTED", "UNKNOWN"}


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
        if path.is_file():
            try:
                data = json.loads(path.read_text())
                self.records = [JobRecord.from_json(r) for r in data["jobs"]]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise InputError(path, f"unreadable Slurm job ledger ({exc})",
                                 "cancel the sweep's jobs (squeue) and delete the file to resubmit"
                                 ) from None

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"format": "proofbatch-slurm-jobs/1", "jobs": [r.as_json() for r in self.records]}
        shards.publish(self.path, lambda tmp: tmp.write_text(json.dumps(data, indent=1) + "\n"))


def max_array_size() -> int:
    """The site's MaxArraySize: an array holds indices 0 .. MaxArraySize-1."""
    config = subproc.run(["scontrol", "show", "config"])
    m = re.search(r"^MaxArraySize\s*=\s*(\d+)", config, re.M)
    return int(m.group(1)) if m else 1001


def queued_names(job_ids: list[str]) -> dict[str, str]:
    """Job id -> job name of the given jobs still pending or running (squeue
    asks the controller, which, unlike sacct, never lags)."""
    if not job_ids:
        return {}
    masters = sorted({j.split("_")[0] for j in job_ids})
    try:
        text = subproc.run(["squeue", "-h", "-r", "-j", ",".join(masters), "-o", "%i|%j"])
    except Exception:          # every id unknown: squeue exits 1 ("Invalid job id")
        return {}
    return dict(line.split("|", 1) for line in text.splitlines() if "|" in line)


def final_state(record: "JobRecord") -> str:
    """The state accounting recorded for a job that left the queue, if the job
    under that id is ours; GONE if Slurm no longer knows it (state wiped)."""
    # sacct lags the controller by a few seconds: a job just gone from the
    # queue may still show as running there.
    for _ in range(15):
        try:
            text = subproc.run(["sacct", "-n", "-X", "-P", "-j", record.job_id,
                                "-o", "JobID,JobName,State"])
        except Exception:
            return "GONE"
        states = [p[2].split()[0] for p in (line.split("|") for line in text.splitlines())
                  if len(p) == 3 and p[0] == record.job_id and p[1] == record.name]
        if not states:
            return "GONE"
        if states[-1] not in UNFINISHED:
            return states[-1]
        time.sleep(1)
    return "GONE"
