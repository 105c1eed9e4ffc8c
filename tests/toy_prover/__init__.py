"""A toy prover, registered by tests alone: proof that a prover is one
package plus one registration (runner/prover_registry.py).

Register it with ``PROOFBATCH_PROVERS=tests.toy_prover:PROVER`` (the
repository root on PYTHONPATH, as under pytest); nothing in runner/ names it.

Its corpus::

    CORPUS/toy.toml               marks the corpus as the toy prover's
    CORPUS/<problem-id>/goal.txt  an arithmetic expression, e.g. ``6 * 7``
    CORPUS/<problem-id>/answer.txt  the value claimed for it, e.g. ``42``
    CORPUS/<problem-id>/category.txt  optional

Each check is a real process: ``python3 -c CHECKER goal.txt answer.txt``
evaluates the goal (no names but a few arithmetic builtins) and compares it
with the claim. Exit 0 is OK, 1 FAIL (a wrong claim), 3 MEMOUT (its
RLIMIT_AS), anything else ERROR; a check past its time limit is killed
from outside, with its process group, and is TIMEOUT (``sum(range(10**12))``
takes hours).
"""

from __future__ import annotations

import dataclasses
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Sequence

from runner import answers as answer_files
from runner.corpus import PROBLEM_ID, Problem, _read_category
from runner.errors import InputError, ProverError
from runner.prover import (BackendInfo, CheckLimits, CheckResult, ImageBuild, ImagePlan,
                           JobAllowances, ProverBackend, ProverSession)
from runner.prover_registry import ProverDescriptor
from runner.verdicts import Outcome, Verdict

MARKER = "toy.toml"
IMAGE = "toy-python"        # the one "image": a Python interpreter, nothing loaded

CHECKER = r"""
import os, sys, time
goal = open(sys.argv[1], encoding="utf-8").read()
claim = open(sys.argv[2], encoding="utf-8").read().strip()
try:
    claimed = int(claim)
except ValueError:
    print(f"the answer {claim!r} is not an integer"); sys.exit(2)
start, cpu = time.perf_counter(), time.process_time()
try:
    # A slower host, faked: the proof's work done TOY_SLOWDOWN times over.
    for _ in range(int(os.environ.get("TOY_SLOWDOWN", "1"))):
        value = eval(goal, {"__builtins__": {}, "sum": sum, "range": range, "pow": pow, "abs": abs})
except MemoryError:
    print("out of memory"); sys.exit(3)
except Exception as exc:
    print(f"the goal does not evaluate: {exc}"); sys.exit(2)
print(f"PROVE_SECS {time.perf_counter() - start:.6f}")
print(f"PROVE_CPU {time.process_time() - cpu:.6f}")
if value != claimed:
    print(f"the goal is {value}, not {claimed}"); sys.exit(1)
"""


# -- the corpus ----------------------------------------------------------------


def recognises(corpus: Path) -> bool:
    return (Path(corpus) / MARKER).is_file()


def load(corpus: Path, answers: Path | None = None) -> list[Problem]:
    corpus = Path(corpus)
    if answers is not None:
        raise InputError(answers, "the toy prover reads answers from its corpus only",
                         "drop --answers")
    folders = sorted((d for d in corpus.iterdir() if d.is_dir() and not d.name.startswith(".")),
                     key=lambda d: d.name)
    if not folders:
        raise InputError(corpus, "no problem folders", "add <problem-id>/goal.txt")
    problems = []
    for d in folders:
        goal = d / "goal.txt"
        if not PROBLEM_ID.fullmatch(d.name) or not goal.is_file():
            raise InputError(d, "not a toy problem", "give it a goal.txt, and an id of [A-Za-z0-9_.+-]")
        given = answer_files.from_folder(d)
        answer, source = (given[0].text, given[0].source) if given else (None, "no answer.txt")
        problems.append(Problem(problem_id=d.name, directory=d, setup_path=goal, query_path=goal,
                                category=_read_category(d / "category.txt"), answer=answer,
                                answer_source=source, attempts=tuple(given),
                                answer_given=given[0].given if given else None))
    return problems


# -- the backend -----------------------------------------------------------------


class ToyBackend(ProverBackend):
    allowances = JobAllowances(image_bytes=0, boot_s=0.0)

    def __init__(self, corpus: Path, grace_s: float = 0.5):
        self.grace_s = grace_s
        self.context_root = Path(corpus).resolve()
        self.salt = f"toy-{sys.version_info[0]}.{sys.version_info[1]}"
        self.info = BackendInfo(prover=PROVER.name, build=f"python-{sys.version.split()[0]}",
                                mode="process")

    def image_plan(self, problems, prove_secs) -> ImagePlan:
        return one_image([p.problem_id for p in problems])

    def start(self, workdir: Path) -> "ToySession":
        return ToySession(self, Path(workdir))


def one_image(ids, key: str = IMAGE) -> ImagePlan:
    return ImagePlan(key, {pid: key for pid in ids}, {key: None}, {key: 0.0}, {key: "default"})


class ToySession(ProverSession):
    def __init__(self, backend: ToyBackend, workdir: Path):
        self.backend, self.info = backend, backend.info
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._running: dict[int, subprocess.Popen] = {}
        self._closed = False
        self.image_builds = [ImageBuild(IMAGE, None, 0.0, time.time())]

    def prepare(self, problems: Sequence[Problem]) -> None:
        pass

    def image_key(self, problem: Problem) -> str:
        return IMAGE

    def check(self, problem: Problem, limits: CheckLimits) -> CheckResult:
        started = time.monotonic()
        if problem.answer is None:
            return CheckResult(Outcome(Verdict.ERROR, "no answer given"), None,
                               time.monotonic() - started, None, IMAGE, "not run")
        answer = self.workdir / f"{problem.problem_id}.{os.getpid()}.{threading.get_ident()}.answer"
        answer.write_bytes(problem.answer)
        mem = limits.mem_bytes

        def limit_memory():
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))

        with self._lock:
            if self._closed:
                raise ProverError("the toy session is closed")
            proc = subprocess.Popen([sys.executable, "-c", CHECKER, str(problem.setup_path), str(answer)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=limit_memory)
            self._running[proc.pid] = proc
        forked_at = time.time()
        try:
            out, _ = proc.communicate(timeout=limits.time_s + self.backend.grace_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            timed_out = True
        finally:
            with self._lock:
                self._running.pop(proc.pid, None)
            answer.unlink(missing_ok=True)
        wall = time.monotonic() - started
        lines = out.decode("utf-8", "replace").splitlines()
        text = " ".join(line for line in lines if not line.startswith(("PROVE_SECS ", "PROVE_CPU ")))
        code = proc.returncode
        status = f"exit {code}" if code >= 0 else f"signal {-code}"
        if timed_out:
            outcome = Outcome(Verdict.TIMEOUT, f"time limit {limits.time_s:g} s passed; killed from outside")
        else:
            outcome = {0: Outcome(Verdict.OK, ""), 1: Outcome(Verdict.FAIL, text),
                       3: Outcome(Verdict.MEMOUT, text)}.get(code, Outcome(Verdict.ERROR, text or status))
        secs, cpu = (next((float(line.split()[1]) for line in lines if line.startswith(tag)), None)
                     if code == 0 else None for tag in ("PROVE_SECS ", "PROVE_CPU "))
        return CheckResult(outcome, secs, wall, None, IMAGE, status, forked_at=forked_at,
                           prove_cpu_secs=cpu)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            running = list(self._running.values())
        for proc in running:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# -- the descriptor ----------------------------------------------------------------


def check_config(config) -> None:
    if str(config.mode) != "bytecode" or str(config.context_proofs) != "replay":
        raise InputError("--mode" if str(config.mode) != "bytecode" else "--context-proofs",
                         "the toy prover has one way to check", "drop it")


def build(config) -> ToyBackend:
    return ToyBackend(config.corpus, grace_s=config.grace)


def offline_plans(problems, prove_secs, choices, profiled, builds):
    from runner.checks.context_proofs import ContextProofs

    key = next(iter(set(profiled.values())), IMAGE)
    one = one_image([p.problem_id for p in problems], key)
    return {ContextProofs(c): one for c in choices}, ({key: builds[key][1]} if key in builds else {})


PROVER = ProverDescriptor(
    name="toy",
    title="toy",
    layout="toy.toml and <problem-id>/goal.txt folders",
    recognises=recognises,
    load=load,
    build=build,
    offline_plans=offline_plans,
    check_config=check_config,
    commands=(("toy-eval", "tests.toy_prover.command_eval", "evaluate a toy goal and print its value"),),
)
# The toy as a prover whose sweeps resolve a directory where they start, as
# HOL Light's context root (register it alone: it recognises the same corpora).
ROOTED = dataclasses.replace(PROVER, name="toy-rooted", corpus_defaults=("context_root",))
