"""Helpers shared by the benchmark scripts: generated corpora in temp dirs,
a booted HOL Light session, percentiles, and the report/--json output.

The scripts run from a checkout without installing anything beyond the
project's virtualenv: ``.venv/bin/python benchmarks/checks/overhead.py``. Every
script imports ``on_path`` (benchmarks/ and its groups on the path), then
this module, for the project root's set-up below. Importing it
costs the standard library only (the runner's modules and psutil load where
used), so a script that times its own start-up or memory, as shards_scale.py
does in its children, measures itself, not this module.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import psutil

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:          # `python benchmarks/x.py` puts benchmarks/ first, not the root
    sys.path.insert(0, str(ROOT))

import record  # noqa: E402
from record import Goal  # noqa: E402,F401

record.current()   # this run's record begins now: its start time and the load before

if TYPE_CHECKING:
    from runner.corpus import Problem
    from runner.prover import CheckLimits, CheckResult
    from runner.provers.hol_light.session.backend import HolLightSession

_TEMP_DIRS: list[Path] = []


@atexit.register
def _remove_temp_dirs() -> None:
    for d in _TEMP_DIRS:
        shutil.rmtree(d, ignore_errors=True)


def temp_dir(prefix: str) -> Path:
    """A fresh directory under $TMPDIR, removed when the script exits."""
    d = Path(tempfile.mkdtemp(prefix=f"proofbatch-bench-{prefix}-"))
    _TEMP_DIRS.append(d)
    return d


# -- corpora -----------------------------------------------------------------

@dataclass(frozen=True)
class Spec:
    """One generated problem folder."""

    problem_id: str
    query: str          # a backquoted HOL term
    answer: str         # a tactic
    setup: str = ""     # setup.ml text; empty means the base image
    category: str = "bench"


def write_corpus(specs: Iterable[Spec], corpus: Path) -> list[Problem]:
    """Write CORPUS/<id>/{setup.ml,query.txt,answer.txt,category.txt} and load it back
    through runner.corpus, exactly as a sweep would read it."""
    from runner.corpus import load_corpus

    corpus.mkdir(parents=True, exist_ok=True)
    ids = []
    for s in specs:
        d = corpus / s.problem_id
        d.mkdir()
        (d / "setup.ml").write_text(s.setup, encoding="utf-8")
        (d / "query.txt").write_text(s.query + "\n", encoding="utf-8")
        (d / "answer.txt").write_text(s.answer + "\n", encoding="utf-8")
        (d / "category.txt").write_text(s.category + "\n", encoding="utf-8")
        ids.append(s.problem_id)
    by_id = {p.problem_id: p for p in load_corpus(corpus)}
    return [by_id[i] for i in ids]


# -- sessions ----------------------------------------------------------------

def start_session(context_root: Path, **backend_kw) -> tuple[HolLightSession, float]:
    """Boot HOL Light once (the base image) and return the session with its
    boot time: Popen of the toplevel to its READY line, as the session
    records it in ``image_build_secs[base_key]``."""
    from runner.provers.hol_light.session.backend import HolLightBackend
    from runner.provers.hol_light.install import find_hol_light

    backend = HolLightBackend(find_hol_light(), context_root, **backend_kw)
    session = backend.start(temp_dir("session"))
    atexit.register(session.close)     # registered after temp_dir's cleanup, so it runs first
    return session, session.image_build_secs[session.base_key]


def limits(time_s: float = 60.0, mem_bytes: int = 4 << 30,
           expected_mem_bytes: int = 256 << 20) -> CheckLimits:
    from runner.prover import CheckLimits

    return CheckLimits(time_s=time_s, time_source="default", mem_bytes=mem_bytes,
                       expected_mem_bytes=expected_mem_bytes)


def require_ok(results: Sequence[tuple[str, CheckResult]]) -> None:
    """A benchmark whose checks did not verify measures nothing: stop."""
    from runner.verdicts import Verdict

    bad = [(pid, r.outcome) for pid, r in results if r.outcome.verdict is not Verdict.OK]
    if bad:
        shown = "; ".join(f"{pid}: {o.verdict} {o.reason}" for pid, o in bad[:5])
        raise SystemExit(f"benchmark invalid: {len(bad)} of {len(results)} checks were not OK "
                         f"({shown})")


# -- statistics ----------------------------------------------------------------

def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


# -- output ----------------------------------------------------------------

def arg_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object instead of the text report")
    return parser


def text_to_stderr(args: argparse.Namespace):
    """A context in which a script's text report goes to stderr under
    --json, so that stdout holds the one JSON object it prints after."""
    return contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout)


def log(message: str) -> None:
    """Progress on stderr, so that --json output stays one object on stdout."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def loadavg() -> float:
    """The 1-minute load average: other work on the host skews every figure."""
    return round(os.getloadavg()[0], 2)


def cpu_busy() -> tuple[float, float]:
    """(CPU seconds used on the whole host so far, CPU seconds used by this
    script and its HOL Light processes so far). A process's own times plus
    those of its reaped children cover every image and check: live ones
    through the tree, finished ones through whoever reaped them."""
    import psutil

    host = psutil.cpu_times()
    busy = host.user + host.nice + host.system + getattr(host, "irq", 0) + \
        getattr(host, "softirq", 0) + getattr(host, "steal", 0)
    me = psutil.Process()
    ours = 0.0
    for proc in [me] + me.children(recursive=True):
        try:
            t = proc.cpu_times()
            ours += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return busy, ours


def emit(args: argparse.Namespace, benchmark: str, figures: dict, lines: list[str],
         target: str, passed: bool, goals: Sequence[Goal] = ()) -> int:
    """Print the report (or one JSON object), write this run's record
    (benchmarks/record.py) and return the exit status: 0 when the target is
    met and every goal printed is, 1 otherwise."""
    rec = record.current()
    rec.figures(figures)
    path = rec.finish(list(goals), passed)
    passed = rec.data["pass"]
    verdict = "PASS" if passed else "MISS"
    if args.json:
        print(json.dumps({"benchmark": benchmark, **figures, "target": target,
                          "goals": rec.data["goals"], "result": verdict,
                          "record": str(path)}, sort_keys=False))
    else:
        print(f"== {benchmark}")
        for line in lines:
            print(f"  {line}")
        for goal in goals:
            print(f"  {goal.text()}")
        print(f"{verdict}: {target}")
    return 0 if passed else 1


class TreeCpu:
    """CPU seconds of this process and its descendants from now on, sampled
    every second: images and checks are forked by the prover's server, which
    never reaps them into our children's times, and the session kills them
    unreaped at close. A process shorter than a sample is missed (a check
    takes milliseconds; images and compiles live for seconds to minutes)."""

    def __init__(self, interval: float = 1.0):
        me = psutil.Process()
        self.me, self.interval, self.seen = me, interval, {}
        self.before = self._sample(record=False)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _sample(self, record: bool = True) -> dict:
        now = {}
        for proc in [self.me] + self.me.children(recursive=True):
            try:
                t = proc.cpu_times()
                now[(proc.pid, proc.create_time())] = t.user + t.system
            except psutil.Error:
                pass
        if record:
            self.seen.update(now)
        return now

    def _run(self) -> None:
        while not self.done.wait(self.interval):
            self._sample()

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        self._sample()
        return sum(v - self.before.get(k, 0.0) for k, v in self.seen.items())


def sweep_host_factor(out: Path) -> float | None:
    """The host factor a sweep's limits were scaled by: sweep.json's resolved
    ``host_factor`` (its ``config`` keeps what was asked, such as ``auto``),
    else, on a cluster where each node resolves its own (sweep.json keeps
    null), the one its nodes resolved when they agree (OUT/node-factors/);
    None before the sweep has resolved one, or when it has none."""
    from runner.maps import node_factor

    try:
        value = json.loads((Path(out) / "sweep.json").read_text()).get("host_factor")
    except (OSError, ValueError, TypeError):
        return None
    if value is not None:
        return float(value)
    nodes = {float(n["factor"]) for n in node_factor.recorded(Path(out))}
    return nodes.pop() if len(nodes) == 1 else None
