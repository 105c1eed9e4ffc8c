"""`profile --problems`: a profile of some of a corpus's problems.

A corpus cut from a real development (`proofbatch extract` of whole proof
files) holds every lemma of those files; a map is often wanted for a drawn
sample of them (benchmarks/limits/regenerate_bench_map.py profiles 40 of the
bench's problems). The selection takes the patterns `run --problems` takes;
only the selected problems are timed, and a later, wider selection is new
problems, profiled with --incremental as a changed corpus is.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cluster.local import LocalExecutor
from runner.errors import InputError
from runner.profile import ProfileConfig, profile

from .helpers import DEMO, TEST_MEM_LIMIT

pytestmark = pytest.mark.hol

FIRST = ("arith.add_comm", "lists.*")


def test_only_the_selected_problems_are_timed_and_a_wider_selection_is_new(hol_session, tmp_path):
    def executor_for(prepared):
        return LocalExecutor(workers=prepared.config.workers, session=hol_session)

    cfg = ProfileConfig(corpus=DEMO, out=tmp_path / "profile", runs=2, ceiling_s=120, workers=1,
                        mem_limit=TEST_MEM_LIMIT, context_root=DEMO, problems=FIRST)
    first = profile(cfg, executor_for)
    assert {r.problem_id: len(r.prove_secs) for r in first.runs} == {
        "arith.add_comm": 2, "lists.append_nil": 2, "lists.length_append": 2}
    assert not first.defects          # the rest of the corpus is not profiled, so no defect

    # The same selection again: nothing to do. A narrower one too.
    assert len(profile(replace(cfg, problems=("lists.append_nil",)), executor_for).runs) == 3

    wider = replace(cfg, problems=FIRST + ("logic.drinker",))
    with pytest.raises(InputError, match="1 problems are new or changed"):
        profile(wider, executor_for)
    grown = profile(replace(wider, incremental=True), executor_for)
    assert {r.problem_id: len(r.prove_secs) for r in grown.runs} == {
        "arith.add_comm": 2, "lists.append_nil": 2, "lists.length_append": 2, "logic.drinker": 2}

    with pytest.raises(InputError, match="no_such"):
        profile(replace(cfg, problems=("no_such.problem",)), executor_for)
