"""What a context costs to load, before anyone loads it: a small proof file
cut into three problems, worked out by hand. Under replay a context is
charged the map's prove_secs of the earlier proofs it holds; under trust,
only its phrases; a measured build wins over either."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner import cli
from runner.provers.hol_light.context_costs import (PHRASE_S, estimate, origin_of, theorem_of, translate_measured)
from runner.context_proofs import ContextProofs
from runner.provers.hol_light.contexts import build_context_tree
from runner.planner_inputs import Known, images_of_plan
from runner.provers.hol_light.plans import BOOT_S, plans_of_tree

# A proof file "f" of prefix "ex": a definition, then T1 and T2 proved, a
# helper lemma that is no problem, then T3. Problem ex.f.Tk is cut at Tk.
DEFINE = "let double = new_definition `double n = n + n`;;\n"
T1 = "(* the first *)\nlet T1 = prove\n (`double 0 = 0`,\n  REWRITE_TAC[double] THEN ARITH_TAC);;\n"
T2 = "let T2 = time prove(`double 1 = 2`, REWRITE_TAC[double] THEN ARITH_TAC);;\n"
HELPER = "let helper = prove(`1 + 1 = 2`, ARITH_TAC);;\n"
SETUPS = {"ex.f.T1": DEFINE, "ex.f.T2": DEFINE + T1, "ex.f.T3": DEFINE + T1 + T2 + HELPER}
PROVE_SECS = {"ex.f.T1": 2.0, "ex.f.T2": 3.0, "ex.f.T3": 5.0}


def test_proof_phrases_and_origins_are_read_as_the_bench_names_them():
    assert theorem_of(T1) == "T1" and theorem_of(T2) == "T2"
    assert theorem_of("let T4 = prove_by_refinement(`x`, [ALL_TAC]);;") == "T4"
    assert theorem_of(DEFINE) is None and theorem_of("let rec f x = prove(x, ALL_TAC);;") is None
    assert theorem_of("(* let T5 = prove *) let x = 1;;") is None
    assert origin_of("arm.bignum_add.BIGNUM_ADD_CORRECT") == "arm.bignum_add"
    assert origin_of("arm.bignum_montsqr_p256.lemma1.0") == "arm.bignum_montsqr_p256"


def test_replay_charges_the_earlier_proofs_and_trust_only_the_phrases():
    tree = build_context_tree(SETUPS, "salt")
    costs = estimate(tree, PROVE_SECS, phrase_s=1.0)
    # A chain: base -> [DEFINE] (T1) -> [T1] (T2) -> [T2, HELPER] (T3).
    t1, t2, t3 = (costs[tree.image_of[p]] for p in ("ex.f.T1", "ex.f.T2", "ex.f.T3"))
    assert (t1.phrases, t1.proofs, t1.priced) == (1, 0, ())
    assert (t2.phrases, t2.priced, t2.proof_s) == (1, ("ex.f.T1",), 2.0)
    assert (t3.phrases, t3.priced, t3.proof_s, t3.unpriced) == (2, ("ex.f.T2",), 3.0, 1)
    replay = [c.build_s(ContextProofs.REPLAY) for c in (t1, t2, t3)]
    trust = [c.build_s(ContextProofs.TRUST) for c in (t1, t2, t3)]
    assert replay == [1.0, 1.0 + 2.0, 2.0 + 3.0]
    assert trust == [1.0, 1.0, 2.0]
    # A problem's own proof is never in its context: T3's 5 s is charged nowhere.
    assert sum(c.proof_s for c in costs.values()) == 5.0


def test_a_name_proved_twice_is_priced_by_its_occurrence():
    again = "let L = prove(`T`, ALL_TAC);;\n"
    setups = {"ex.g.L.0": "", "ex.g.L.1": again, "ex.g.M": again + again}
    tree = build_context_tree(setups, "salt")
    costs = estimate(tree, {"ex.g.L.0": 4.0, "ex.g.L.1": 6.0, "ex.g.M": 1.0}, phrase_s=0.0)
    assert costs[tree.image_of["ex.g.L.1"]].priced == ("ex.g.L.0",)
    assert costs[tree.image_of["ex.g.M"]].priced == ("ex.g.L.1",)


def test_a_theorem_of_an_inlined_file_is_priced_only_when_its_name_is_unique():
    # common.lib's theorems in an arm file's context (a `needs` inlined).
    lib = "let LIB_A = prove(`T`, ALL_TAC);;\nlet LIB_B = prove(`T`, ALL_TAC);;\n"
    tree = build_context_tree({"arm.x.X": lib}, "salt")
    secs = {"common.lib.LIB_A": 7.0, "common.lib.LIB_B": 1.0, "common.other.LIB_B": 1.0}
    [cost] = estimate(tree, secs, phrase_s=0.0).values()
    assert cost.priced == ("common.lib.LIB_A",) and cost.unpriced == 1   # LIB_B: two files


def test_measured_builds_win_over_estimates():
    tree = build_context_tree(SETUPS, "salt")
    t2 = tree.image_of["ex.f.T2"]
    [plan] = plans_of_tree(tree, PROVE_SECS, (ContextProofs.REPLAY,), BOOT_S).values()
    images = images_of_plan(plan, {t2: (tree.nodes[t2].parent, 42.0)})
    assert (images[t2].build_s, images[t2].source) == (42.0, "measured")
    t3 = images[tree.image_of["ex.f.T3"]]
    assert (t3.build_s, t3.source) == (pytest.approx(2 * PHRASE_S + 3.0), "estimated")
    # A profile recorded the same tree under its own salt: matched by shape.
    theirs = build_context_tree(SETUPS, "another prover build")
    recorded = {n.key: (n.parent, 10.0 * n.depth) for n in theirs.nodes.values()}
    measured = translate_measured(tree, dict(theirs.image_of), recorded)
    assert measured == {tree.image_of[f"ex.f.T{k}"]: 10.0 * k for k in (1, 2, 3)}
    # A profile of another shape (T1's context split in two) is not laid over this one.
    split = build_context_tree({**SETUPS, "ex.f.T0": "let zero = 0;;\n",
                                "ex.f.T1": "let zero = 0;;\n" + DEFINE}, "x")
    recorded = {n.key: (n.parent, 1.0) for n in split.nodes.values()}
    assert translate_measured(tree, {"ex.f.T1": split.image_of["ex.f.T1"]}, recorded) == {}


def write_corpus(root: Path, setups: dict[str, str]) -> Path:
    for pid, setup in setups.items():
        d = root / pid
        d.mkdir(parents=True)
        (d / "setup.ml").write_text(setup)
        (d / "query.txt").write_text("`T`\n")
        (d / "answer.txt").write_text("ALL_TAC\n")
    return root


def test_simulate_plans_a_corpus_on_its_contexts_under_both_choices(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus", SETUPS)
    tmap = tmp_path / "map.json"
    tmap.write_text(json.dumps([{"problem_id": p, "prove_secs": s, "timeout_sec": 120}
                                for p, s in PROVE_SECS.items()]))
    assert cli.main(["simulate", "--timeout-map", str(tmap), "--corpus", str(corpus),
                     "--workers", "1", "--map-mode", "native", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    replay, trust = out["contexts"]["replay"], out["contexts"]["trust"]
    # Three images in a chain, each built once by the one worker: 4 phrases in
    # all; replay adds T1's 2 s and T2's 3 s.
    assert replay["images"] == trust["images"] == 3
    assert replay["image_sources"] == {"estimated": 3}
    assert replay["image_build_s_once"] == pytest.approx(4 * PHRASE_S + 5.0)
    assert trust["image_build_s_once"] == pytest.approx(4 * PHRASE_S)
    assert replay["context_image_core_hours"] == pytest.approx((4 * PHRASE_S + 5.0) / 3600)
    # Proofs: 2 + 3 + 5 s and 0.02 s dispatch each, whatever the choice.
    assert replay["proof_core_hours"] == pytest.approx(10.06 / 3600)
    assert trust["proof_core_hours"] == pytest.approx(10.06 / 3600)
    assert out["context_proofs"] == "replay" and "native (declared)" in out["map"]
    assert cli.main(["simulate", "--timeout-map", str(tmap), "--corpus", str(corpus),
                     "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    assert "context image core-hours" in printed and "trust" in printed


def test_simulate_without_a_corpus_says_contexts_are_unknown(tmp_path, capsys):
    tmap = tmp_path / "map.json"
    tmap.write_text(json.dumps([{"problem_id": "ex.f.T1", "prove_secs": 1, "timeout_sec": 120}]))
    assert cli.main(["simulate", "--timeout-map", str(tmap), "--workers", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["contexts"] == "unknown (no --corpus)"
    assert cli.main(["simulate", "--timeout-map", str(tmap), "--workers", "2"]) == 0
    assert "contexts: unknown (no --corpus)" in " ".join(capsys.readouterr().out.split())


def test_a_profiles_builds_hold_only_for_the_choice_it_ran_under(tmp_path):
    from runner.planner import PlanConfig, Workers
    from runner.planner_inputs import _plan_corpus

    corpus = write_corpus(tmp_path / "corpus", SETUPS)
    theirs = build_context_tree(SETUPS, "the profile's prover build")
    recorded = {n.key: (n.parent, 10.0 * n.depth) for n in theirs.nodes.values()}
    known = Known(durations=[("map", PROVE_SECS)], builds=recorded, images=dict(theirs.image_of),
                  builds_choice="replay")
    plans = _plan_corpus(corpus, known, {}, Workers(1, 1), PlanConfig(), 2**30, tuple(ContextProofs))
    contexts = {c: {i.build_s: i.source for k, i in p.images.items() if k != p.base}
                for c, p in plans.items()}
    assert contexts[ContextProofs.REPLAY] == {10.0: "measured", 20.0: "measured", 30.0: "measured"}
    # Under trust the same contexts are estimated: 1, 1 and 2 phrases.
    assert sorted(contexts[ContextProofs.TRUST].values()) == ["estimated"] * 2
    trust = sorted(i.build_s for k, i in plans[ContextProofs.TRUST].images.items()
                   if k != plans[ContextProofs.TRUST].base)
    assert trust == pytest.approx([PHRASE_S, PHRASE_S, 2 * PHRASE_S])
    # The base boots as the profile measured it (its root build: 0 s here).
    assert plans[ContextProofs.TRUST].images[plans[ContextProofs.TRUST].base].build_s == 0.0


def test_a_file_loaded_by_needs_is_charged_once_along_a_chain():
    from runner.provers.hol_light.context_costs import LOAD_S

    needs = 'needs "Library/words.ml";;\n'
    setups = {"ex.h.A": needs, "ex.h.B": needs + "let x = 1;;\n" + needs,
              "ex.h.C": needs + 'loadt "Library/words.ml";;\n'}
    tree = build_context_tree(setups, "salt")
    costs = estimate(tree, {}, phrase_s=1.0)
    a, b, c = (costs[tree.image_of[p]] for p in ("ex.h.A", "ex.h.B", "ex.h.C"))
    assert (a.loads, b.loads, c.loads) == (1, 0, 1)     # needs loads once; loadt loads again
    assert a.build_s(ContextProofs.REPLAY) == 1.0 + LOAD_S["replay"]
    assert a.build_s(ContextProofs.TRUST) == 1.0 + LOAD_S["trust"]
    assert b.build_s(ContextProofs.TRUST) == 2.0
