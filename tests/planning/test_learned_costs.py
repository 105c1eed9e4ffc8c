"""Measured image costs are used again (issue 25, part 1): a sweep records
each image build's seconds (OUT/images/*.json), and a later `simulate` on
the same corpus, or one sharing its contexts, prices its plan with them
(`--costs-from OUT...`), as a later sweep does through the cost cache
(PROOFBATCH_COST_CACHE). A build measured in another mode, or under the
other --context-proofs, is not used as it is. Text only: no HOL Light."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from runner import cli
from runner.planning.planner import PlanConfig, Workers
from runner.planning.inputs import plan_sweep
from runner.planning.learned_costs import cached_builds, lay_over, measured_sweeps
from runner.prover import ImagePlan
from runner.provers.hol_light.contexts import build_context_tree
from ..helpers import make_corpus

# A proof file cut into three problems: a chain of three contexts.
DEFINE = "let double = new_definition `double n = n + n`;;\n"
T1 = "let T1 = prove(`double 0 = 0`, REWRITE_TAC[double] THEN ARITH_TAC);;\n"
T2 = "let T2 = prove(`double 1 = 2`, REWRITE_TAC[double] THEN ARITH_TAC);;\n"
SETUPS = {"ex.f.T1": DEFINE, "ex.f.T2": DEFINE + T1, "ex.f.T3": DEFINE + T1 + T2}
PROVE_SECS = {"ex.f.T1": 2.0, "ex.f.T2": 3.0, "ex.f.T3": 5.0}


def write_corpus(root: Path) -> Path:
    """Problems of these setups, each proving `T` by ALL_TAC."""
    return make_corpus(root, {pid: (setup, "`T`\n", "ALL_TAC\n") for pid, setup in SETUPS.items()})


def write_sweep(out: Path, *, mode: str, choice: str, salt: str, secs: dict[int, float],
                run_id: str = "r1") -> dict[str, str]:
    """A finished sweep's directory as far as costs go: its manifest, its
    plan (which image each problem ran in, keyed by the sweep's own salt)
    and the builds it recorded, ``secs`` by depth (0: the boot)."""
    tree = build_context_tree(SETUPS, salt)
    out.mkdir(parents=True)
    (out / "sweep.json").write_text(json.dumps({"mode": mode, "context_proofs": choice,
                                                "prover_build": "b", "config": {"workers": 1}}))
    (out / "plan.json").write_text(json.dumps({"checks": [
        {"problem_id": p, "attempt": 0, "image_key": k} for p, k in tree.image_of.items()]}))
    (out / "images").mkdir()
    builds = [{"key": n.key, "parent": n.parent, "secs": secs[n.depth], "finished_at": 0.0}
              for n in tree.nodes.values()]
    (out / "images" / f"{run_id}.json").write_text(json.dumps({"run_id": run_id, "builds": builds}))
    return dict(tree.image_of)


def map_file(tmp_path: Path) -> Path:
    tmap = tmp_path / "map.json"
    tmap.write_text(json.dumps([{"problem_id": p, "prove_secs": s, "timeout_sec": 120}
                                for p, s in PROVE_SECS.items()]))
    return tmap


def simulate_json(capsys, *args) -> dict:
    assert cli.main(["simulate", *map(str, args), "--workers", "1", "--map-mode", "bytecode",
                     "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_second_plan_is_priced_from_the_first_sweeps_measurements(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus")
    first = tmp_path / "first"
    write_sweep(first, mode="bytecode", choice="trust", salt="the first sweep's build",
                secs={0: 50.0, 1: 11.0, 2: 22.0, 3: 33.0})
    out = simulate_json(capsys, "--timeout-map", map_file(tmp_path), "--corpus", corpus,
                        "--mode", "bytecode", "--context-proofs", "trust", "--costs-from", first)
    trust = out["contexts"]["trust"]
    # Its three contexts as measured, laid over the corpus's tree by shape; the boot too.
    assert trust["image_sources"] == {"measured": 3}
    assert trust["image_build_s_once"] == 11.0 + 22.0 + 33.0
    assert trust["boot_core_hours"] * 3600 == 50.0
    assert out["image_costs_learned"]["measured"] == 4          # the base among them
    assert out["image_costs_learned"]["images"] == 4
    # Measured under trust: replay's contexts stay estimated.
    assert out["contexts"]["replay"]["image_sources"] == {"estimated": 3}
    # Said on the table too.
    assert cli.main(["simulate", "--timeout-map", str(map_file(tmp_path)), "--corpus", str(corpus),
                     "--mode", "bytecode", "--context-proofs", "trust", "--costs-from", str(first),
                     "--workers", "1", "--map-mode", "bytecode"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "image costs measured by --costs-from: 4 of 4 images" in printed


def test_a_build_measured_in_another_mode_is_not_used_as_it_is(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus")
    native = tmp_path / "native"
    write_sweep(native, mode="native", choice="trust", salt="native build",
                secs={0: 14.0, 1: 1.0, 2: 2.0, 3: 3.0})
    bytecode = tmp_path / "bytecode"
    write_sweep(bytecode, mode="bytecode", choice="trust", salt="bytecode build",
                secs={0: 70.0, 1: 10.0, 2: 20.0, 3: 30.0})
    out = simulate_json(capsys, "--timeout-map", map_file(tmp_path), "--corpus", corpus,
                        "--mode", "bytecode", "--context-proofs", "trust",
                        "--costs-from", native, bytecode)
    assert out["contexts"]["trust"]["image_build_s_once"] == 60.0       # the bytecode sweep's
    said = out["image_costs_learned"]
    assert said["sweeps"] == [str(bytecode)] and said["other_mode"] == [f"{native} (native)"]
    out = simulate_json(capsys, "--timeout-map", map_file(tmp_path), "--corpus", corpus,
                        "--mode", "native", "--context-proofs", "trust",
                        "--costs-from", native, bytecode)
    assert out["contexts"]["trust"]["image_build_s_once"] == 6.0        # the native sweep's


def test_a_profile_is_read_as_its_runs(tmp_path):
    profile = tmp_path / "profile"
    (profile / "runs").mkdir(parents=True)
    write_sweep(profile / "runs" / "seed0", mode="bytecode", choice="replay", salt="p",
                secs={0: 70.0, 1: 1.0, 2: 2.0, 3: 3.0})
    [m] = measured_sweeps([profile])
    assert (m.mode, m.choice, len(m.builds), len(m.image_of)) == ("bytecode", "replay", 4, 3)


def test_measured_builds_are_laid_over_a_tree_of_another_salt_by_shape():
    ours = build_context_tree(SETUPS, "ours")
    theirs = build_context_tree(SETUPS, "theirs")
    builds = {n.key: (n.parent, 10.0 * n.depth + 1) for n in theirs.nodes.values()}
    plan = ImagePlan(ours.base, dict(ours.image_of), {k: n.parent for k, n in ours.nodes.items()},
                     {k: 0.0 for k in ours.nodes})
    laid = lay_over(plan, dict(theirs.image_of), builds)
    assert sorted(laid.values()) == [1.0, 11.0, 21.0, 31.0]
    assert laid[ours.image_of["ex.f.T3"]] == 31.0


def _estimating_backend(tree):
    """A backend whose plan estimates every image (70 s the base, 25 s each
    context), as a prover's backend does before anything was measured."""
    class Backend:
        def image_plan(self, problems, prove_secs):
            return ImagePlan(tree.base, dict(tree.image_of),
                             {k: n.parent for k, n in tree.nodes.items()},
                             {k: (70.0 if n.parent is None else 25.0) for k, n in tree.nodes.items()},
                             {k: ("default" if n.parent is None else "estimated")
                              for k, n in tree.nodes.items()})
    return Backend


def _tasks() -> list:
    """One task per problem of SETUPS, as the sweep hands them to the planner."""
    return [SimpleNamespace(problem=SimpleNamespace(problem_id=p, category="generic"), attempt=0,
                            limits=SimpleNamespace(time_s=60.0, expected_mem_bytes=2**20))
            for p in SETUPS]


def test_a_later_sweeps_plan_is_priced_from_the_cost_cache(tmp_path, monkeypatch):
    """The first sweep is remembered when it is planned; the second sweep's
    plan reads what the first recorded since, by image key (the session's
    salt: prover build, context root and driver), so only the very images."""
    cache = tmp_path / "cache" / "image-costs.json"
    monkeypatch.setenv("PROOFBATCH_COST_CACHE", str(cache))
    tree = build_context_tree(SETUPS, "the sweeps' salt")

    Backend, tasks = _estimating_backend(tree), _tasks()
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    plan1 = plan_sweep(tasks, Backend(), workers=Workers(1, 1), config=PlanConfig(), out=first)
    assert {i.source for i in plan1.images.values()} == {"default", "estimated"}
    # The first sweep runs and records its builds (cluster.base.record_image_builds).
    (first / "images").mkdir()
    (first / "images" / "r1.json").write_text(json.dumps({"run_id": "r1", "builds": [
        {"key": n.key, "parent": n.parent, "secs": 100.0 + n.depth, "finished_at": 0.0}
        for n in tree.nodes.values()]}))
    second.mkdir()
    plan2 = plan_sweep(tasks, Backend(), workers=Workers(1, 1), config=PlanConfig(), out=second)
    assert {k: (i.build_s, i.source) for k, i in plan2.images.items()} == \
        {k: (100.0 + n.depth, "measured") for k, n in tree.nodes.items()}
    assert str(first.resolve()) in json.loads(cache.read_text())["sweeps"]
    # Without the cache set, nothing is remembered or read.
    monkeypatch.delenv("PROOFBATCH_COST_CACHE")
    assert cached_builds(second) == {}


def test_a_sweep_run_with_costs_from_is_planned_with_what_they_measured(tmp_path, monkeypatch, capsys):
    """`run --costs-from OUT...`: a sweep's plan takes the builds earlier
    sweeps recorded of its very images (by key), no cache needed; a folder
    that is no sweep is refused before anything runs."""
    monkeypatch.delenv("PROOFBATCH_COST_CACHE", raising=False)
    tree = build_context_tree(SETUPS, "the sweeps' salt")

    Backend, tasks = _estimating_backend(tree), _tasks()
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "images").mkdir(parents=True)
    (first / "images" / "r1.json").write_text(json.dumps({"run_id": "r1", "builds": [
        {"key": n.key, "parent": n.parent, "secs": 100.0 + n.depth, "finished_at": 0.0}
        for n in tree.nodes.values()] + [{"key": "another image", "parent": None, "secs": 1.0,
                                          "finished_at": 0.0}]}))
    second.mkdir()
    plan = plan_sweep(tasks, Backend(), workers=Workers(1, 1), config=PlanConfig(), out=second,
                      costs_from=(str(first),))
    assert {k: (i.build_s, i.source) for k, i in plan.images.items()} == \
        {k: (100.0 + n.depth, "measured") for k, n in tree.nodes.items()}
    corpus = write_corpus(tmp_path / "corpus")
    assert cli.main(["run", str(corpus), "--out", str(tmp_path / "out"),
                     "--costs-from", str(corpus)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--costs-from" in err[0] and "no sweep directory" in err[0]
    assert not (tmp_path / "out").exists()


def test_a_recorded_plan_takes_measured_builds_by_image_key(tmp_path, capsys):
    from runner.planning.planner import Image, PlanCheck, make_plan, write_plan

    images = {"base": Image("base", None, 70.0, "default"), "k1": Image("k1", "base", 25.0, "default")}
    plan = make_plan([PlanCheck("p", 0, "generic", 1.0, "map", 2**20, "k1", 60.0, 0)], images, "base",
                     Workers(1, 1))
    write_plan(tmp_path / "plan.json", plan)
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps({"mode": "bytecode"}))
    (sweep / "images").mkdir()
    (sweep / "images" / "r.json").write_text(json.dumps({"run_id": "r", "builds": [
        {"key": "k1", "parent": "base", "secs": 5.0}, {"key": "other", "parent": "base", "secs": 9.0}]}))
    assert cli.main(["simulate", "--plan", str(tmp_path / "plan.json"), "--costs-from", str(sweep),
                     "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["image_costs_learned"]["measured"] == 1
    assert out["image_build_core_hours"] * 3600 == 70.0 + 5.0
