"""``--calibration-corpus DIR`` (issue 47): the ground truths a node measures
its own host factor on, and its canary, drawn from a corpus the sweep names
instead of from its own.

A node measures its factor on ground truths (runner/maps/node_factor.py),
and a sweep may have none at hand: it checks answers given with --answers
in a corpus whose problem folders hold no answer.txt, or its ground truths
are all lighter than the calibration band and the canary's floor (the
fork and the clock would be measured, not the node), or all heavier than
the band. DIR is a corpus in the sweep's layout whose problems have times
in the sweep's timeout map (other problems of the bench the map is of, or
the shipped example corpus for the demo map); its setups are read under
the sweep's context root. Its answer.txt ground truths are checked under
the limits the sweep would give them (the sweep's own code gives them:
``limits_in``), each moved to the mode its check runs in.

A problem of DIR with the id of one of the sweep's problems is the same
problem only when its setup and query are the same bytes; another is left
out (a session knows a problem by its id, and the map times one of them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..checks.tasks import CheckTask
from ..errors import InputError
from . import canary, host_factor
from .node_factor import ground_truths

FLAG = "--calibration-corpus"


@dataclass(frozen=True)
class CalibrationCorpus:
    """The ground truths of DIR that the sweep's map times."""

    path: Path
    problems: tuple          # runner.corpus.Problem, answered by their answer.txt
    map_secs: Mapping[str, float]   # their map times, in the map's mode

    @property
    def source(self) -> str:
        return f"{FLAG} {self.path}"


def _same(a, b) -> bool:
    try:
        return (a.setup_path.read_bytes() == b.setup_path.read_bytes()
                and a.query_path.read_bytes() == b.query_path.read_bytes())
    except OSError:
        return False


def load(config, read: Callable, sweep_problems: Sequence, loaded) -> CalibrationCorpus | None:
    """DIR of ``config`` (a SweepConfig; None when not given), read by the
    sweep's reader ``read`` (corpus, answers) and kept to its answer.txt
    ground truths that ``loaded`` (the sweep's map, never None) times. Raises
    InputError: DIR missing or not a corpus, none of its problems timed by
    the map, or none of those with an answer.txt."""
    if config.calibration_corpus is None:
        return None
    path = Path(config.calibration_corpus)
    fix = (f"pass a corpus folder of <problem-id>/{{setup.ml,query.txt,answer.txt}} whose problems "
           f"the timeout map times, or drop {FLAG}")
    if not path.is_dir():
        raise InputError(FLAG, f"{path} {'is not a directory' if path.exists() else 'does not exist'}",
                         fix)
    try:
        problems = read(path, None)
    except InputError as exc:
        raise InputError(f"{FLAG} {exc.where}", exc.problem, exc.fix) from None
    secs = loaded.prove_secs()
    mine = {p.problem_id: p for p in sweep_problems}
    clash = [p.problem_id for p in problems if p.problem_id in mine and not _same(p, mine[p.problem_id])]
    timed = [p for p in problems if p.problem_id in secs and p.problem_id not in clash]
    if not timed:
        also = (f" other than {len(clash)} with the ids of other problems of the sweep (e.g. "
                f"{clash[0]})" if clash else "")
        raise InputError(FLAG, f"no problem of {path}{also} has a time in the timeout map "
                         f"{config.timeout_map} (e.g. {problems[0].problem_id} has none)", fix)
    truths = ground_truths(timed, answers_given=True)
    if not truths:
        raise InputError(FLAG, f"none of the {len(timed)} problems of {path} the timeout map times "
                         f"has an answer.txt (e.g. {timed[0].problem_id})", fix)
    return CalibrationCorpus(path, tuple(truths.values()), {pid: secs[pid] for pid in truths})


def candidates(corpus: CalibrationCorpus | None, backend, config) -> list:
    """The problems of ``corpus`` a node's sample and canary can be drawn
    from: the sample host_factor.sample draws with no budget (a budget
    keeps a prefix of it) and the canary. Chosen before the backend
    classifies the sweep's problems, so that it classifies these few with
    them (a native context that does not compile runs, and is timed, in
    bytecode); drawn again after, among these, by node_factor.for_sweep."""
    if corpus is None:
        return []
    expected = backend.expected_in_mode(list(corpus.problems), corpus.map_secs)
    ids = sorted(expected)
    chosen = set(host_factor.sample(expected, ids, budget_s=float("inf")))
    if canary.wanted(config) and (watch := canary.nearest(expected, ids)) is not None:
        chosen.add(watch)
    return [p for p in corpus.problems if p.problem_id in chosen]


def truths(corpus: CalibrationCorpus | None, chosen: Sequence, limits_in: Callable
           ) -> tuple[list[CheckTask], list, str] | None:
    """(tasks, problems, source) of the ``chosen`` ground truths of
    ``corpus``, each under the limits the sweep gives it (``limits_in``:
    problems -> (problem id -> CheckLimits, notes)), for node_factor.for_sweep."""
    if corpus is None:
        return None
    limits, _ = limits_in(list(chosen))
    return [CheckTask(p, limits[p.problem_id]) for p in chosen], list(chosen), corpus.source
