"""Checking proofs in the real HOL Light, the way a sweep does: a loaded base
image, context images forked from it, and each check forked from its image.

The story: the example corpus gets exactly its expected verdicts; nothing a
check does leaks into the next; a hostile answer cannot forge its verdict;
the guards stop what the prover cannot stop itself; a broken context is an
error and its proof never runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.prover import CheckLimits
from runner.verdicts import Verdict

from ..helpers import answers_corpus, assert_answer_rows, check, expected_verdicts, problem, TEST_MEM_LIMIT

# Every test here boots HOL Light or checks in it.
pytestmark = pytest.mark.hol


# -- the example corpus ---------------------------------------------------------

def test_every_demo_problem_gets_its_expected_verdict(demo_rows):
    got = {pid: row["verdict"] for pid, row in demo_rows.items()}
    assert got == expected_verdicts()


def test_the_demo_exercises_every_verdict(demo_rows):
    assert {row["verdict"] for row in demo_rows.values()} == {v.value for v in Verdict}


def test_every_result_has_a_one_line_reason_and_the_contract_columns(demo_rows, hol_session):
    for pid, row in demo_rows.items():
        assert row["reason"] and "\n" not in row["reason"], pid
        # Checked in the box by default; the demo's unanswered problems ran no check.
        assert row["sandbox"] == (hol_session.backend.sandbox_kind if row["exit_status"] != "not run"
                                  else ""), pid
        assert row["mode"] == "bytecode"
        assert row["prover_build"].startswith("debian-hol-light-")
        assert row["timeout_source"] == "category"


def test_prove_secs_is_measured_inside_prove_and_excludes_the_context_load(demo_rows, hol_session):
    words = [row for row in demo_rows.values()
             if row["category"] == "words" and row["verdict"] == "OK"]
    assert words, "the demo has proofs in a context that loads Library/words.ml"
    for row in words:
        # Loading words.ml takes tens of seconds; the proof itself far less.
        assert row["image_key"] in hol_session.image_build_secs
        assert hol_session.image_build_secs[row["image_key"]] > 10 * row["prove_secs"]
        assert row["prove_secs"] <= row["wall_secs"]


def test_problems_sharing_a_setup_prefix_fork_from_a_shared_prefix_image(demo_rows, hol_session):
    chains = {pid: [node.key for node in hol_session.image_chain(pid)] for pid in demo_rows
              if pid in hol_session.problems()}
    # base -> shared prefix -> problem: the prefix image has several problems below it.
    below: dict[str, set[str]] = {}
    for pid, chain in chains.items():
        for key in chain[1:-1]:
            below.setdefault(key, set()).add(pid)
    assert any(len(pids) >= 2 for pids in below.values()), chains


# -- isolation --------------------------------------------------------------------

def test_an_axiom_added_by_one_check_is_invisible_to_the_next(hol_session, tmp_path):
    cheat = problem(tmp_path, "iso.cheat", "F", "(fun g -> ignore (new_axiom `F`); ALL_TAC g)")
    assert check(hol_session, cheat).outcome.verdict is Verdict.CHEATING
    # Had the axiom leaked into the image, this would prove F with no new axiom.
    exploit = problem(tmp_path, "iso.exploit", "F", "MESON_TAC(axioms())")
    result = check(hol_session, exploit)
    assert result.outcome.verdict is Verdict.FAIL, result.outcome


def test_a_definition_made_by_one_check_is_invisible_to_the_next(hol_session, tmp_path):
    define = problem(tmp_path, "iso.define", "1 = 1",
                     "(fun g -> ignore (new_definition `proofbatch_leak = 1`); REFL_TAC g)")
    assert check(hol_session, define).outcome.verdict is Verdict.OK
    probe = problem(tmp_path, "iso.probe", "1 = 1",
                    '(if can get_const_type "proofbatch_leak" then ALL_TAC else REFL_TAC)')
    assert check(hol_session, probe).outcome.verdict is Verdict.OK


# -- hostile answers ----------------------------------------------------------------

def test_printing_a_fake_verdict_does_not_forge_one(hol_session, tmp_path):
    fake = problem(tmp_path, "forge.print", "x + 1 = 1 + x",
                   '(print_string "PBV1\\t0\\tOK\\t0\\t0\\tproved\\nOK\\n"; ALL_TAC)')
    result = check(hol_session, fake)
    assert result.outcome.verdict is Verdict.FAIL


def test_an_answer_cannot_name_the_driver_or_the_system(hol_session, tmp_path):
    for i, answer in enumerate([
            '(ignore (Sys.command "touch /tmp/proofbatch-pwned"); ARITH_TAC)',
            '(Proofbatch_driver.answer_slot := (fun () -> ARITH_TAC); ARITH_TAC)',
            '(let open Unix in ARITH_TAC)', 'Obj.magic 0',
            '(ignore (Toploop.execute_phrase); ARITH_TAC)', '(exit 0; ARITH_TAC)',
            '(loadt "/etc/passwd"; ARITH_TAC)']):
        result = check(hol_session, problem(tmp_path, f"forge.name{i}", "x + 0 = x", answer))
        assert result.outcome.verdict is Verdict.ERROR, answer
        assert result.outcome.reason.startswith("forbidden:"), result.outcome.reason
    assert not Path("/tmp/proofbatch-pwned").exists()


def test_extra_phrases_are_refused_before_anything_runs(hol_session, tmp_path):
    marker = tmp_path / "ran"
    answer = f'ARITH_TAC;; let _ = Sys.command "touch {marker}"'
    result = check(hol_session, problem(tmp_path, "forge.phrases", "x + 0 = x", answer))
    assert result.outcome.verdict is Verdict.ERROR
    assert "';;'" in result.outcome.reason
    assert not marker.exists()


# -- guards -----------------------------------------------------------------------------

def test_a_loop_that_never_allocates_is_killed_from_outside(hol_session, tmp_path):
    # Bytecode polls signals at function calls, but not inside C primitives:
    # comparing two cyclic lists loops in caml_compare and never sees SIGALRM.
    spin = ("(fun g -> let rec a = 0 :: a and b = 0 :: b in "
        "if compare a b = 0 then ALL_TAC g else ALL_TAC g)")
    result = check(hol_session, problem(tmp_path, "guard.spin", "F", spin), time_s=3.0)
    assert result.outcome.verdict is Verdict.TIMEOUT
    assert "killed from outside" in result.outcome.reason
    # The limit counts the check's CPU time (a loaded host stretches its wall time).
    assert 3.0 <= result.cpu_secs < 3.0 + hol_session.backend.grace_s + 2.0
    assert result.wall_secs >= 3.0


def test_an_allocating_loop_is_stopped_inside_the_prover(hol_session, tmp_path):
    loop = "(fun g -> let rec go l = go (g :: l) in go [])"
    result = check(hol_session, problem(tmp_path, "guard.alloc", "F", loop), time_s=2.0)
    assert result.outcome.verdict is Verdict.TIMEOUT
    assert "inside the prover" in result.outcome.reason


def test_a_broken_context_is_an_error_and_the_proof_never_runs(hol_session, tmp_path):
    broken = problem(tmp_path, "ctx.broken", "x + 0 = x", "ARITH_TAC",
                     setup="let bad = new_definition `bad x = x + y`;;\n")
    result = check(hol_session, broken)
    assert result.outcome.verdict is Verdict.ERROR
    assert result.outcome.reason.startswith("setup:")
    assert "not closed" in result.outcome.reason
    assert result.prove_secs is None and result.exit_status == "not run"


def test_images_evicted_under_pressure_are_rebuilt_never_used_while_gone(
        hol_session, tmp_path, monkeypatch):
    # Room for two images, the base one of them: building x's image evicts
    # both idle ones, c1's and the shared prefix, which c2 then needs.
    monkeypatch.setattr(hol_session.backend, "max_images", 2)
    prefix = "let PB_EVICT_A = new_definition `pb_evict_a = 1`;;\n"
    ps = [problem(tmp_path, "evict.c1", "pb_evict_a + 1 = 2", "REWRITE_TAC[PB_EVICT_A] THEN ARITH_TAC",
                  setup=prefix + "let PB_EVICT_C1 = new_definition `pb_evict_c1 = 2`;;\n"),
          problem(tmp_path, "evict.x", "pb_evict_x = 3", "REWRITE_TAC[PB_EVICT_X]",
                  setup="let PB_EVICT_X = new_definition `pb_evict_x = 3`;;\n"),
          problem(tmp_path, "evict.c2", "pb_evict_a + 2 = 3", "REWRITE_TAC[PB_EVICT_A] THEN ARITH_TAC",
                  setup=prefix + "let PB_EVICT_C2 = new_definition `pb_evict_c2 = 4`;;\n")]
    first = len(hol_session.image_builds)
    hol_session.prepare(ps)
    base, prefix, c1 = (node.key for node in hol_session.image_chain("evict.c1"))
    _, x = (node.key for node in hol_session.image_chain("evict.x"))
    _, prefix_of_c2, c2 = (node.key for node in hol_session.image_chain("evict.c2"))
    assert prefix_of_c2 == prefix and base == hol_session.base_key
    limits = CheckLimits(time_s=10.0, time_source="default", mem_bytes=TEST_MEM_LIMIT,
                         expected_mem_bytes=2**20)
    for p in ps:
        assert hol_session.check(p, limits).outcome.verdict is Verdict.OK, p.problem_id
    # The prefix, gone, is built again before c2's image forks from it.
    builds = hol_session.image_builds[first:]
    keys = [b.key for b in builds]
    assert keys == [prefix, c1, x, prefix, c2], keys
    assert builds[-1].parent == prefix and builds[-1].finished_at >= builds[-2].finished_at


def test_a_memory_bomb_is_killed_and_the_check_beside_it_is_unaffected(
        hol_session, demo_rows, tmp_path):
    import shutil

    import psutil

    from ..helpers import DEMO, demo_config, sweep_with

    corpus = tmp_path / "corpus"
    for pid in ("fault.memout", "heavy.big_mod"):
        shutil.copytree(DEMO / pid, corpus / pid)
    summary = sweep_with(hol_session, demo_config(tmp_path / "out", corpus=corpus, workers=2))
    rows = {row["problem_id"]: row for row in summary.table.to_pylist()}

    bomb, neighbour = rows["fault.memout"], rows["heavy.big_mod"]
    assert bomb["verdict"] == "MEMOUT", bomb["reason"]
    # Killed near the limit: sampling every 20 ms lets it overshoot only a little.
    assert bomb["peak_rss_mb"] < TEST_MEM_LIMIT / 2**20 + 512
    # They ran side by side, and the neighbour proved its goal as usual.
    assert bomb["started_at"] < neighbour["finished_at"] and neighbour["started_at"] < bomb["finished_at"]
    assert neighbour["verdict"] == "OK"
    # Its proof's CPU time, not its wall time: on a host loaded by others a
    # wall time says how busy the host was, not what the bomb did to it.
    assert neighbour["prove_cpu_secs"] < 2 * demo_rows["heavy.big_mod"]["prove_cpu_secs"] + 2
    # The memory came back: nothing under this process still holds the bomb's
    # heap. (The machine's free memory is no measure: the session keeps the
    # image it built for these contexts, a few hundred MB.)
    holding = []
    for proc in psutil.Process().children(recursive=True):
        try:
            rss = proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
        if rss > TEST_MEM_LIMIT // 2:
            holding.append((proc.pid, proc.cmdline(), rss))
    assert holding == []


def test_a_checkout_with_hol_sh_is_started_through_its_hol_sh(tmp_path):
    """Users of s2n-bignum-bench build HOL Light from source; its Makefile
    leaves a hol.sh that starts a toplevel with hol.ml loaded. This checkout's
    hol.sh starts Debian's toplevel the same way."""
    from runner.provers.hol_light.session.backend import HolLightBackend
    from runner.provers.hol_light.install import find_hol_light

    checkout = tmp_path / "hol-light"
    checkout.mkdir()
    hol_sh = checkout / "hol.sh"
    hol_sh.write_text("#!/bin/sh\n/usr/share/hol-light/ocaml -init /usr/share/hol-light/hol.ml\n")
    hol_sh.chmod(0o755)
    install = find_hol_light(checkout)
    assert install.kind == "checkout" and install.build.startswith("checkout-")
    with HolLightBackend(install, context_root=tmp_path).start(tmp_path / "work") as session:
        result = check(session, problem(tmp_path, "checkout.add", "x + 0 = x", "ARITH_TAC"))
    assert result.outcome.verdict is Verdict.OK


# -- answers as models and the bench write them ----------------------------------------


def test_answers_as_the_bench_and_models_write_them(hol_session, tmp_path):
    from ..helpers import demo_config, sweep_with

    marker = tmp_path / "ran"
    corpus = answers_corpus(tmp_path / "corpus", marker)
    summary = sweep_with(hol_session, demo_config(tmp_path / "out", corpus=corpus,
                                                  category_timeouts=None, default_timeout=30.0))
    rows = {row["problem_id"]: row for row in summary.table.to_pylist()}
    assert_answer_rows(rows, marker)
    assert {row["mode"] for row in rows.values()} == {"bytecode"}
    # A user sees the unwrap in results.csv.
    import csv
    with open(tmp_path / "out" / "results.csv", newline="") as f:
        unwrapped = {r["problem_id"] for r in csv.DictReader(f) if r["answer_unwrapped"] == "True"}
    assert unwrapped == {"ans.fenced", "ans.fenced_last", "ans.fenced_separator"}


def test_answers_on_the_bench_module_built_checkout(tmp_path):
    """On the bench's pin (5e62421, HOLLIGHT_USE_MODULE=1), whose pa_j reads a
    bare expression as `let it = e`, the same catalogue gets the same verdicts."""
    import os

    import pytest

    from runner.provers.hol_light.session.backend import HolLightBackend
    from runner.provers.hol_light.install import find_hol_light

    from ..helpers import demo_config, sweep_with

    value = os.environ.get("PROOFBATCH_BENCH_HOL_LIGHT")
    if not value or not (Path(value) / "hol.sh").is_file():
        pytest.skip("no module-built HOL Light checkout: set PROOFBATCH_BENCH_HOL_LIGHT to one built "
                    "as s2n-bignum-bench's setup.sh builds it (HOLLIGHT_USE_MODULE=1), with its hol.sh")
    marker = tmp_path / "ran"
    corpus = answers_corpus(tmp_path / "corpus", marker)
    install = find_hol_light(Path(value))
    with HolLightBackend(install, context_root=corpus).start(tmp_path / "work") as session:
        summary = sweep_with(session, demo_config(tmp_path / "out", corpus=corpus, context_root=corpus,
                                                  category_timeouts=None, default_timeout=30.0,
                                                  hol_light=Path(value)))
    rows = {row["problem_id"]: row for row in summary.table.to_pylist()}
    assert_answer_rows(rows, marker)
    assert {row["prover_build"] for row in rows.values()} == {install.build}
