"""What a context costs to load, before anyone loads it: a small proof file
cut into three problems, worked out by hand. Under replay a context is
charged the map's prove_secs of the earlier proofs it holds; under trust,
only its phrases; a measured build wins over either."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner import cli
from runner.provers.hol_light.costs.context_costs import estimate, translate_measured
from runner.provers.hol_light.costs.file_loads import FileLoads, origin_of, read_phrases, theorem_of
from runner.provers.hol_light.costs.load_model import MODELS
from runner.checks.context_proofs import ContextProofs
from runner.provers.hol_light.contexts import build_context_tree
from runner.planning.inputs import Known, images_of_plan
from runner.provers.hol_light.costs.map_modes import RATIO_CENTRAL
from runner.provers.hol_light.costs.plans import BOOT_S, MODULE_BOOT_S, NATIVE_BOOT_S, plans_of_tree
from ..helpers import make_corpus


def trust_s(text: str, mode: str = "bytecode") -> float:
    """What one image loading ``text`` costs under trust in ``mode``'s model:
    its phrases, and what an image costs beyond them."""
    model = MODELS[mode]
    return sum(model.phrase_cost(p.kb, p.theorem is not None) for p in read_phrases(text)) + model.image_s

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
    # T2 (3 s, the map's) and the helper (no problem: estimated by its size).
    helper = MODELS["bytecode"].proof_cost(read_phrases(HELPER)[0].kb)
    assert (t3.build_s, t3.source) == (pytest.approx(trust_s(T2 + HELPER) + 3.0 + helper), "estimated")
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
    """Problems of these setups, each proving `T` by ALL_TAC."""
    return make_corpus(root, {pid: (setup, "`T`\n", "ALL_TAC\n") for pid, setup in setups.items()})


def test_simulate_plans_a_corpus_on_its_contexts_under_both_choices(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus", SETUPS)
    tmap = tmp_path / "map.json"
    tmap.write_text(json.dumps([{"problem_id": p, "prove_secs": s, "timeout_sec": 120}
                                for p, s in PROVE_SECS.items()]))
    assert cli.main(["simulate", "--timeout-map", str(tmap), "--corpus", str(corpus),
                     "--workers", "1", "--map-mode", "bytecode", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    replay, trust = out["contexts"]["replay"], out["contexts"]["trust"]
    # Three images in a chain, each built once by the one worker: 4 phrases in
    # all; replay adds T1's 2 s and T2's 3 s and the helper's estimate.
    phrases = trust_s(DEFINE) + trust_s(T1) + trust_s(T2 + HELPER)      # three images
    helper = MODELS["bytecode"].proof_cost(read_phrases(HELPER)[0].kb)
    assert replay["images"] == trust["images"] == 3
    assert replay["image_sources"] == {"estimated": 3}
    assert replay["image_build_s_once"] == pytest.approx(phrases + 5.0 + helper)
    assert trust["image_build_s_once"] == pytest.approx(phrases)
    assert replay["context_image_core_hours"] == pytest.approx((phrases + 5.0 + helper) / 3600)
    # Proofs: 2 + 3 + 5 s and 0.02 s dispatch each, whatever the choice.
    assert replay["proof_core_hours"] == pytest.approx(10.06 / 3600)
    assert trust["proof_core_hours"] == pytest.approx(10.06 / 3600)
    assert out["context_proofs"] == "replay" and "bytecode (declared)" in out["map"]
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
    from runner.planning.planner import PlanConfig, Workers
    from runner.planning.inputs import _plan_corpus

    corpus = write_corpus(tmp_path / "corpus", SETUPS)
    theirs = build_context_tree(SETUPS, "the profile's prover build")
    recorded = {n.key: (n.parent, 10.0 * n.depth) for n in theirs.nodes.values()}
    known = Known(durations=[("map", PROVE_SECS)], builds=recorded, images=dict(theirs.image_of),
                  builds_choice="replay")
    plans = _plan_corpus(corpus, known, {}, Workers(1, 1), PlanConfig(), 2**30, tuple(ContextProofs))
    contexts = {c: {i.build_s: i.source for k, i in p.images.items() if k != p.base}
                for c, p in plans.items()}
    assert contexts[ContextProofs.REPLAY] == {10.0: "measured", 20.0: "measured", 30.0: "measured"}
    # Under trust the same contexts are estimated: 1, 1 and 2 phrases, each by its size.
    assert sorted(contexts[ContextProofs.TRUST].values()) == ["estimated"] * 3
    trust = sorted(i.build_s for k, i in plans[ContextProofs.TRUST].images.items()
                   if k != plans[ContextProofs.TRUST].base)
    assert trust == pytest.approx(sorted([trust_s(DEFINE), trust_s(T1), trust_s(T2 + HELPER)]))
    # The base boots as the profile measured it (its root build: 0 s here).
    assert plans[ContextProofs.TRUST].images[plans[ContextProofs.TRUST].base].build_s == 0.0


def test_a_file_loaded_by_needs_is_charged_once_along_a_chain():
    from runner.provers.hol_light.costs.load_model import LOAD_S

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


# -- loads priced by the files they really load (issue 25) -------------------

def dev_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A context root whose lib/top.ml needs lib/a.ml, loadt's lib/b.ml and
    needs lib/c.ml, b.ml needing a.ml again; a HOL Light directory whose
    hol.ml loads core.ml, with update_database.ml beside it."""
    root, hol = tmp_path / "dev", tmp_path / "hol"
    (root / "lib").mkdir(parents=True)
    hol.mkdir()
    (hol / "hol.ml").write_text('loads "core.ml";;\n')
    (hol / "core.ml").write_text("let core_x = 1;;\n")
    (hol / "update_database.ml").write_text("".join(f"let u{i} = {i};;\n" for i in range(50)))
    (root / "lib" / "a.ml").write_text("let a1 = 1;;\nlet A_THM = prove(`T`, ALL_TAC);;\n")
    (root / "lib" / "b.ml").write_text('needs "lib/a.ml";;\nlet b1 = 2;;\n(* a comment *)\n'
                                       "let b2 = b1 + 1;;\n")
    (root / "lib" / "c.ml").write_text('needs "core.ml";;\nlet c1 = [1; 2; 3];;\n')
    (root / "lib" / "top.ml").write_text('needs "lib/a.ml";;\nloadt "lib/b.ml";;\nneeds "lib/c.ml";;\n'
                                         "let top = 0;;\n")
    return root, hol


def test_a_needs_is_priced_by_every_file_it_loads(tmp_path):
    root, hol = dev_tree(tmp_path)
    files = FileLoads(root, hol)
    tree = build_context_tree({"ex.t.X": 'needs "lib/top.ml";;\n'}, "salt")
    [cost] = estimate(tree, {}, files=files).values()
    assert cost.files == ("lib/top.ml", "lib/a.ml", "lib/b.ml", "lib/c.ml")
    assert cost.unknown == () and cost.dropped == 0
    # top.ml, a.ml, b.ml and c.ml's phrases (their loads included; a.ml once,
    # though b.ml needs it again; core.ml is hol.ml's, loaded at boot) and the
    # setup's own needs.
    texts = [(root / "lib" / f).read_text() for f in ("top.ml", "a.ml", "b.ml", "c.ml")]
    setup = 'needs "lib/top.ml";;\n'
    assert cost.phrases == 1 + sum(len(read_phrases(t)) for t in texts) == 12
    assert cost.build_s(ContextProofs.TRUST) == pytest.approx(trust_s(setup + "".join(texts)))
    # Under replay, A_THM is no problem of the map: estimated by its size.
    a_thm = read_phrases((root / "lib" / "a.ml").read_text())[1]
    assert (cost.proofs, cost.unpriced, cost.priced) == (1, 1, ())
    assert cost.build_s(ContextProofs.REPLAY) == pytest.approx(
        trust_s(setup + "".join(texts)) + MODELS["bytecode"].proof_cost(a_thm.kb))
    # A proof of a loaded file the map knows by a unique name: its prove_secs.
    [priced] = estimate(tree, {"other.a.A_THM": 9.0}, files=files).values()
    assert priced.priced == ("other.a.A_THM",)
    assert priced.build_s(ContextProofs.REPLAY) == pytest.approx(trust_s(setup + "".join(texts)) + 9.0)


def test_a_file_needed_twice_along_a_chain_is_charged_once(tmp_path):
    root, hol = dev_tree(tmp_path)
    files = FileLoads(root, hol)
    first = 'needs "lib/top.ml";;\n'
    setups = {"ex.t.A": first,
              "ex.t.B": first + "let x = 1;;\n" + 'needs "lib/a.ml";;\n' + 'needs "lib/top.ml";;\n',
              "ex.t.C": first + 'loadt "lib/a.ml";;\n'}
    tree = build_context_tree(setups, "salt")
    costs = estimate(tree, {}, files=files)
    a, b, c = (costs[tree.image_of[p]] for p in ("ex.t.A", "ex.t.B", "ex.t.C"))
    assert len(a.files) == 4
    # B's needs of a.ml (loaded by top.ml in the ancestor image) and of
    # top.ml again cost their phrases only; C's loadt loads a.ml again.
    assert b.files == () and b.phrases == 3
    assert b.build_s(ContextProofs.TRUST) == pytest.approx(
        trust_s("let x = 1;;\n" + 'needs "lib/a.ml";;\n' + 'needs "lib/top.ml";;\n'))
    assert c.files == ("lib/a.ml",) and c.phrases == 1 + 2


def test_loads_update_database_is_dropped_not_charged(tmp_path):
    root, hol = dev_tree(tmp_path)
    tree = build_context_tree({"ex.t.U": 'loads "update_database.ml";;\nlet y = 1;;\n'}, "salt")
    [cost] = estimate(tree, {}, files=FileLoads(root, hol)).values()
    assert (cost.dropped, cost.files, cost.unknown, cost.loads) == (1, (), (), 0)
    assert cost.build_s(ContextProofs.REPLAY) == pytest.approx(
        trust_s('loads "update_database.ml";;\nlet y = 1;;\n'))
    # A load found nowhere is unknown: the stand-in, counted as such.
    tree = build_context_tree({"ex.t.V": 'needs "nowhere.ml";;\n'}, "salt")
    [cost] = estimate(tree, {}, files=FileLoads(root, hol)).values()
    assert cost.unknown == ('needs "nowhere.ml"',)
    assert cost.build_s(ContextProofs.TRUST) == pytest.approx(
        trust_s('needs "nowhere.ml";;\n') + MODELS["bytecode"].load_s["trust"])


def test_native_images_pay_compiles_and_load_faster(tmp_path):
    root, hol = dev_tree(tmp_path)
    files = FileLoads(root, hol)
    tree = build_context_tree({"ex.t.X": 'needs "lib/top.ml";;\n'}, "salt")
    [b] = estimate(tree, {}, mode="bytecode", files=files).values()
    [n] = estimate(tree, {}, mode="native", files=files).values()
    assert b.compile_s() == 0 and n.compile_s() > 0
    assert n.load_s(ContextProofs.TRUST) < b.load_s(ContextProofs.TRUST)
    plans = {m: plans_of_tree(tree, {}, (ContextProofs.TRUST,), mode=m, files=files)[ContextProofs.TRUST]
             for m in ("bytecode", "native")}
    assert plans["bytecode"].build_s[tree.base] == BOOT_S
    assert plans["native"].build_s[tree.base] == NATIVE_BOOT_S
    # A checkout built with its compiled module boots from it, faster than
    # a toplevel that loads HOL Light's sources (Debian's).
    (hol / "hol.sh").write_text("export HOLLIGHT_USE_MODULE=1\nocaml hol.ml\n")
    module = plans_of_tree(tree, {}, (ContextProofs.TRUST,), files=FileLoads(root, hol))
    assert module[ContextProofs.TRUST].build_s[tree.base] == MODULE_BOOT_S < BOOT_S


def test_native_images_pay_their_answers_compile_by_its_size():
    """native_session.py compiles an image's answers in batches before its checks:
    a batch costs more the more text it compiles (19 batches of real sweeps:
    0.17 s for 0.1 KB, 1.0 s for 22 KB), and no answer compiles nothing."""
    tree = build_context_tree(SETUPS, "salt")
    small = {pid: (100,) for pid in SETUPS}
    large = {**small, "ex.f.T3": (22_000,)}
    native = {name: estimate(tree, {}, mode="native", answers=answers)
              for name, answers in (("none", {}), ("small", small), ("large", large))}
    t3 = tree.image_of["ex.f.T3"]
    model = MODELS["native"]
    assert native["none"][t3].answer_batches == 0
    assert native["small"][t3].compile_s() - native["none"][t3].compile_s() == pytest.approx(
        model.answer_batch_s + model.answer_per_kb_s * 100 / 1024)
    assert native["large"][t3].compile_s() - native["small"][t3].compile_s() == pytest.approx(
        model.answer_per_kb_s * 21_900 / 1024)
    # Past ANSWER_BATCH answers, a second batch (pass@k).
    many = {"ex.f.T3": tuple(range(1, 66))}
    assert estimate(tree, {}, mode="native", answers=many)[t3].answer_batches == 2
    # Bytecode compiles nothing.
    assert estimate(tree, {}, mode="bytecode", answers=large)[t3].compile_s() == 0


S2N = Path("/work/bench/s2n-bignum")
BENCH_HOL = Path("/work/bench/hol-light")


@pytest.mark.skipif(not (S2N / "arm/proofs/base.ml").is_file() or not (BENCH_HOL / "hol.ml").is_file(),
                    reason="the bench's s2n-bignum and HOL Light checkouts are not here")
def test_s2n_bignums_base_is_priced_by_its_files():
    files = FileLoads(S2N, BENCH_HOL)
    tree = build_context_tree({"arm.x.X": 'needs "arm/proofs/base.ml";;\n'}, "salt")
    [cost] = estimate(tree, {}, files=files).values()
    assert len(cost.files) >= 30 and cost.unknown == () and cost.dropped == 1
    assert len(cost.measured_files) >= 25           # benchmarks/images/load_cost.py measured them whole
    assert cost.phrases > 3500 and cost.proofs > 2000
    # Far above the one-phrase stand-in it was charged before (12.0 s under trust).
    assert cost.build_s(ContextProofs.TRUST) > 30


def test_simulate_prices_the_mode_the_sweep_runs_in(tmp_path, capsys):
    root, hol = dev_tree(tmp_path)
    setups = {"ex.t.X": 'needs "lib/top.ml";;\n', "ex.t.Y": 'needs "lib/top.ml";;\n' + T1}
    corpus = write_corpus(tmp_path / "corpus", setups)
    tmap = tmp_path / "map.json"
    tmap.write_text(json.dumps([{"problem_id": "ex.t.X", "prove_secs": 2.0, "timeout_sec": 60},
                                {"problem_id": "ex.t.Y", "prove_secs": 8.0, "timeout_sec": 60}]))
    out = {}
    for mode in ("bytecode", "native"):
        assert cli.main(["simulate", "--timeout-map", str(tmap), "--map-mode", "native", "--corpus",
                         str(corpus), "--context-root", str(root), "--hol-light", str(hol),
                         "--workers", "1", "--mode", mode, "--json"]) == 0
        out[mode] = json.loads(capsys.readouterr().out)
    b, n = out["bytecode"]["contexts"]["replay"], out["native"]["contexts"]["replay"]
    assert b["image_build_s_once"] != n["image_build_s_once"]
    # Native proof times as the map has them; bytecode's converted by the central ratio.
    assert n["proof_core_hours"] == pytest.approx((2.0 + 8.0 + 2 * 0.02) / 3600)
    assert b["proof_core_hours"] == pytest.approx((10.0 * RATIO_CENTRAL + 2 * 0.02) / 3600)
    assert out["bytecode"]["proof_times"]["converted"] == 2
    assert out["bytecode"]["modes"]["by_mode"]["native"]["base_build_s"] == NATIVE_BOOT_S
    assert out["bytecode"]["modes"]["cheapest"] in ("bytecode", "native", "auto")
    # What stands behind the figures, counted.
    assert out["native"]["check_durations"] == {"measured": 2, "estimated": 0, "unknown": 0}
    acc = n["account"]["by_mode"]["native"]
    assert (acc["files_loaded"], acc["unknown_loads"], acc["dropped_loads"]) == (4, 0, 0)
    assert acc["unpriced_proofs"] == 2 and acc["compile_s"] > 0     # A_THM, T1: no problems
    assert cli.main(["simulate", "--timeout-map", str(tmap), "--map-mode", "native", "--corpus",
                     str(corpus), "--context-root", str(root), "--hol-light", str(hol),
                     "--workers", "1", "--mode", "native"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "check durations: measured 2, estimated 0, unknown 0" in printed
    assert "4 files found" in printed and "0 unknown" in printed and "estimated by size" in printed
    assert "cheapest" in printed


def test_a_file_measured_whole_is_charged_as_measured(tmp_path):
    import hashlib
    from dataclasses import replace as dc_replace

    root, hol = dev_tree(tmp_path)
    digest = hashlib.sha256((root / "lib" / "a.ml").read_bytes()).hexdigest()[:12]
    model = dc_replace(MODELS["bytecode"], measured_files={("lib/a.ml", digest): (5.0, 7.0)})
    tree = build_context_tree({"ex.t.A": 'needs "lib/a.ml";;\n'}, "salt")
    [cost] = estimate(tree, {}, files=FileLoads(root, hol), model=model).values()
    setup = trust_s('needs "lib/a.ml";;\n')
    assert cost.measured_files == ("lib/a.ml",) and cost.in_measured == 1 and cost.unpriced == 0
    assert cost.build_s(ContextProofs.TRUST) == pytest.approx(setup + 5.0)
    assert cost.build_s(ContextProofs.REPLAY) == pytest.approx(setup + 7.0)
    # Another text under the same name is not that measure.
    (root / "lib" / "a.ml").write_text("let a1 = 2;;\n")
    [cost] = estimate(tree, {}, files=FileLoads(root, hol), model=model).values()
    assert cost.measured_files == () and cost.build_s(ContextProofs.TRUST) < 1.0
