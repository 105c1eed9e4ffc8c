"""One JSON record per benchmark run, written under ``benchmarks/results/<script>/``.

A figure in the docs must be traceable to the run that measured it, at the
commit that ran it, on the host and under the load it ran under. Every
script's ``common.emit`` ends its run through :func:`finish`; a script that
does not use ``emit`` calls :func:`finish` itself. The record is begun when
this module is imported (the script's start), and samples the host's load
every 10 s until it is written.

Keys: ``script``, ``command`` (the exact argv), ``commit`` and ``dirty``,
``host`` (CPU model, CPUs, memory), ``load`` (before, during, after),
``niceness`` (each side's), ``host_factor``, ``inputs`` (ids, and digests of
answers and maps), ``started``/``ended`` (UTC), ``figures`` (every figure
printed), ``goals`` (each with its threshold and whether it was met),
``pass`` (every goal met, and the script's own checks), ``reused`` (what came
from an earlier run, and that run's record).

Records are written atomically (a temp file, then ``os.replace``) and are
committed: ``benchmarks/tables.py`` reads them.
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(os.environ.get("PROOFBATCH_RECORDS", ROOT / "benchmarks" / "results"))
LOAD_EVERY_S = 10.0

_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt,
        "==": operator.eq}


@dataclass(frozen=True)
class Goal:
    """A printed goal: ``value OP threshold``, met or not."""

    name: str
    value: float | int | bool | None
    op: str
    threshold: float | int | bool

    def __post_init__(self):
        if self.op not in _OPS:
            raise ValueError(f"goal {self.name}: unknown comparison {self.op!r}")

    @property
    def met(self) -> bool:
        return self.value is not None and bool(_OPS[self.op](self.value, self.threshold))

    def text(self) -> str:
        shown = "none" if self.value is None else (
            f"{self.value:.3g}" if isinstance(self.value, float) else str(self.value))
        return f"{self.name} {shown} (goal {self.op} {self.threshold}: {'met' if self.met else 'MISSED'})"


def _git(*args: str) -> str:
    r = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def commit() -> tuple[str, bool]:
    """(HEAD's full sha, whether the tracked tree differs from it). Records
    themselves are left out of ``dirty``: writing one must not dirty the next."""
    sha = _git("rev-parse", "HEAD")
    changed = [line for line in _git("status", "--porcelain", "--untracked-files=no").splitlines()
               if "benchmarks/results/" not in line]
    return sha, bool(changed)


def host() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"name": os.uname().nodename, "cpu_model": model, "cpus": os.cpu_count(),
            "mem_bytes": mem}


def digest(path: Path) -> str:
    """sha256 of a file, or of a folder's files in name order (relative names included)."""
    h = hashlib.sha256()
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


class Record:
    """The record of this run, begun at import."""

    def __init__(self, script: str, argv: list[str]):
        self.data: dict[str, Any] = {
            "script": script, "command": list(argv), "started": _now(),
            "niceness": {"script": os.nice(0)}, "host_factor": None, "inputs": {},
            "figures": {}, "goals": [], "reused": [],
        }
        self.data["commit"], self.data["dirty"] = commit()
        self.data["host"] = host()
        self._load_before = os.getloadavg()[0]
        self._loads: list[float] = []
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        self.path: Path | None = None

    def _sample(self) -> None:
        while not self._stop.wait(LOAD_EVERY_S):
            self._loads.append(os.getloadavg()[0])

    def set(self, key: str, value: Any) -> None:
        """A top-level key: ``host_factor``, or one of the script's own."""
        self.data[key] = value

    def niceness(self, side: str, value: int | None) -> None:
        self.data["niceness"][side] = value

    def input(self, name: str, value: Any = None, path: Path | None = None) -> None:
        """An input: a value (ids, a seed) or a file or folder, kept as its digest."""
        self.data["inputs"][name] = ({"path": str(path), "sha256": digest(path)}
                                     if path is not None else value)

    def figures(self, figures: dict) -> None:
        self.data["figures"].update(figures)

    def reused(self, what: str, record: str | None, **details: Any) -> None:
        """Something this run took from an earlier one, and that run's record."""
        self.data["reused"].append({"what": what, "record": record, **details})

    def finish(self, goals: list[Goal], passed: bool = True, directory: Path | None = None) -> Path:
        """Write the record; ``pass`` holds only when every goal is met and ``passed``."""
        self._stop.set()
        during = self._loads or [os.getloadavg()[0]]
        self.data.update(
            ended=_now(),
            load={"before": round(self._load_before, 2), "after": round(os.getloadavg()[0], 2),
                  "during": {"min": round(min(during), 2), "max": round(max(during), 2),
                             "mean": round(sum(during) / len(during), 2), "samples": len(during)}},
            goals=[{**asdict(g), "met": g.met} for g in goals],
        )
        self.data["pass"] = bool(passed) and all(g.met for g in goals)
        folder = Path(directory or RESULTS) / self.data["script"]
        folder.mkdir(parents=True, exist_ok=True)
        stamp = self.data["started"].replace(":", "").replace("-", "")
        name = f"{stamp}-{(self.data['commit'] or 'nocommit')[:10]}"
        self.path = folder / f"{name}.json"
        n = 1
        while self.path.exists():          # two runs in one second keep both records
            n += 1
            self.path = folder / f"{name}-{n}.json"
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=False, default=str) + "\n")
        os.replace(tmp, self.path)
        print(f"record: {self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}",
              file=sys.stderr, flush=True)
        return self.path


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_CURRENT: Record | None = None


def current() -> Record:
    """This run's record, begun on first use (at import of common, for the scripts)."""
    global _CURRENT
    if _CURRENT is None:
        _CURRENT = Record(Path(sys.argv[0]).stem or "interactive", sys.argv)
    return _CURRENT


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def records(script: str, directory: Path | None = None) -> list[dict]:
    """Every record of a script, oldest first, each with its ``path``."""
    folder = Path(directory or RESULTS) / script
    out = []
    for p in sorted(folder.glob("*.json")):
        data = load(p)
        data["path"] = str(p)
        out.append(data)
    return out


def matching(script: str, keys: dict, directory: Path | None = None) -> dict | None:
    """The newest record of ``script`` whose commit, inputs and settings equal
    ``keys`` (a dict of top-level keys and of ``inputs`` entries), if any: what
    a script may reuse. Anything that differs means rerun, never reuse."""
    for data in reversed(records(script, directory)):
        if data.get("dirty"):
            continue
        if all((data.get(k) if k != "inputs" else data.get("inputs", {})) == v
               for k, v in keys.items()):
            return data
    return None
