"""A check starts from a collected heap (issue 32).

Every check forks from its context's image and inherits its heap. OCaml's
major GC is incremental and advances only as a program allocates, so an
image that has just loaded its context still holds the load's garbage, in
a cycle it has not finished. Each check forked from it used to finish that
cycle and sweep that garbage on its own CPU time, again for every check:
s2n-bignum proofs took 1.1x the CPU the bench's own program spends on them
(docs/s2n.md). An image that promoted more than 4 million words since the
last collection now collects once, after it loads and before it serves.
The story, in both modes: a context that leaves 30 million words of
garbage behind; a check that counts the heap's words still taken before a
collection of its own and after it.
"""

from __future__ import annotations

import pytest

from runner.prover import CheckLimits
from runner.provers.hol_light.install import find_hol_light
from runner.provers.hol_light.session.native import NativeHolLightBackend
from runner.provers.hol_light.session.native_session import NativeSession

from ..helpers import DEMO, TEST_MEM_LIMIT, problem

pytestmark = pytest.mark.hol

LIMITS = CheckLimits(time_s=60.0, time_source="test", mem_bytes=TEST_MEM_LIMIT, expected_mem_bytes=0)
JUNK_WORDS = 5_000_000 * 6      # a cons cell and a pair, three words each
# The context: garbage made while it loads, and a tactic (trusted setup
# code, not an answer) that fails if the check finds that garbage still in
# its heap. Gc.stat counts a block not yet swept as taken.
SETUP = """let pb_junk = ref (List.init 5000000 (fun i -> (i, i)));;
pb_junk := [];;
let PB_HEAP_TAC : tactic = fun g ->
  let before = (Gc.stat ()).Gc.live_words in
  Gc.full_major ();
  let after = (Gc.stat ()).Gc.live_words in
  if before - after > %d then
    failwith (Printf.sprintf "inherited garbage: %%d words taken before a collection, %%d after"
                before after)
  else ALL_TAC g;;
""" % (JUNK_WORDS // 3)


@pytest.fixture(params=["bytecode", "native"])
def session(request, tmp_path):
    if request.param == "bytecode":
        yield request.getfixturevalue("hol_session")
        return
    backend = NativeHolLightBackend(find_hol_light(), request.getfixturevalue("native_build"), DEMO)
    native = NativeSession(backend, tmp_path / "w", bytecode=lambda: None)
    yield native
    native.close()


def test_a_check_does_not_inherit_the_garbage_its_image_made_while_loading(session, tmp_path):
    p = problem(tmp_path / "corpus", "heap.collected", "T", "PB_HEAP_TAC THEN ACCEPT_TAC TRUTH",
                setup=SETUP)
    session.prepare([p])
    r = session.check(p, LIMITS)
    assert r.outcome.verdict.value == "OK", r.outcome
