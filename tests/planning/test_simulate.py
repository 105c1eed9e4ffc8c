"""The simulator drives the planner's own dispatcher on a virtual clock.
Each case here is small enough to work out by hand; the figures in the
comments are that working."""

from __future__ import annotations

import json

import pytest

from runner import cli

from ..helpers import ROOT
from runner.planning.planner import Image, PlanCheck, PlanConfig, Workers, make_plan
from runner.planning.simulate import simulate

GIB = 2**30


def check(i: int, secs: float, image: str = "base", mem: int = GIB) -> PlanCheck:
    return PlanCheck(f"p{i}", 0, "cat", secs, "map", mem, image, 120.0, i)


def plan_of(durations, workers=Workers(1, 2, 8 * GIB), policy="planned", boot=0.0, images=None,
            checks=None, prebuilt=()):
    imgs = {"base": Image("base", None, boot, "default"), **(images or {})}
    checks = checks or [check(i, d) for i, d in enumerate(durations)]
    return make_plan(checks, imgs, "base", workers, PlanConfig(policy=policy, dispatch_s=0.0),
                     prebuilt)


def test_longest_first_against_submission_order():
    # Two workers, 1+1+1+1+4 s. Submission order: w0 runs 1,1 then the 4 at
    # t=2, ending at 6. Longest first: w0 runs the 4 (0-4), w1 the four 1s (0-4).
    # Bound: max(8 / 2, 4) = 4.
    ours = simulate(plan_of([1, 1, 1, 1, 4]))
    naive = simulate(plan_of([1, 1, 1, 1, 4], policy="naive"))
    assert ours.makespan_s == 4 and naive.makespan_s == 6
    assert ours.lower_bound_s == naive.lower_bound_s == 4
    assert ours.ratio == 1 and naive.ratio == 1.5
    assert ours.schedule[("p4", 0)] == (0, 0.0, 4.0)
    # Utilization: 8 s of work in 2 workers x 4 s; core-hours 2 x 4 s.
    assert ours.utilization == 1.0 and naive.utilization == pytest.approx(8 / 12)
    assert ours.core_hours == pytest.approx(8 / 3600)


def test_image_builds_are_work_and_the_boot_delays_everything():
    # One worker: the base boots in 10 s, the context loads in 5 s, then two
    # 3 s checks: 10 + 5 + 3 + 3 = 21. Bound: 10 + max(5 + 6, 5 + 3) = 21.
    plan = plan_of(None, Workers(1, 1, 8 * GIB), boot=10.0,
                   images={"c": Image("c", "base", 5.0, "default")},
                   checks=[check(0, 3.0, "c"), check(1, 3.0, "c")])
    p = simulate(plan)
    assert p.makespan_s == 21 and p.lower_bound_s == 21
    assert p.build_s == 15 and p.busy_s == 21


def test_a_worker_waits_for_the_image_another_is_building():
    # Two workers of one node, both checks need context c (5 s): worker 0
    # loads it (10-15) and checks (15-18); worker 1 waits for it, checks
    # 15-18. Makespan 18; busy 10 (boot, one process) + 5 + 3 + 3 = 21 of
    # 2 x 18 paid.
    plan = plan_of(None, Workers(1, 2, 8 * GIB), boot=10.0,
                   images={"c": Image("c", "base", 5.0, "default")},
                   checks=[check(0, 3.0, "c"), check(1, 3.0, "c")])
    p = simulate(plan)
    assert p.makespan_s == 18
    assert sorted(start for _, start, _ in p.schedule.values()) == [15.0, 15.0]
    assert p.utilization == pytest.approx(21 / 36)
    # Prebuilt images cost nothing: 3 s.
    assert simulate(plan_of(None, Workers(1, 2, 8 * GIB), boot=10.0,
                            images={"c": Image("c", "base", 5.0, "default")},
                            checks=[check(0, 3.0, "c"), check(1, 3.0, "c")],
                            prebuilt=["base", "c"])).makespan_s == 3


def test_a_node_that_keeps_few_images_builds_evicted_ones_again():
    # One worker, three contexts of 10 s each, twelve checks of 1 s in
    # submission order a b c a b c ... Without a limit each context loads
    # once: 3 x 10 + 12 = 42. Keeping 3 images (the base and two contexts),
    # naive order loads c over a (both needed later, equally dear: the least
    # recently used goes), then a over b, and so on: every check loads its
    # context, except the last: when b loads for the 11th check, the a
    # held is needed by no check left while c is, so a goes and c stays.
    # 11 x 10 + 12 = 122 (evicting by age alone: 12 loads, 132).
    images = {k: Image(k, "base", 10.0, "default") for k in "abc"}
    checks = [check(i, 1.0, "abc"[i % 3]) for i in range(12)]

    def run(cap, policy="naive", cores=1):
        return simulate(plan_of(None, Workers(1, cores, 8 * GIB, images_per_node=cap),
                                policy=policy, images=images, checks=checks))
    assert (run(None).makespan_s, run(None).build_s) == (42, 30)
    assert (run(3).makespan_s, run(3).build_s) == (122, 110)
    assert run(3).rebuild_s == 80 and run(None).rebuild_s == 0     # 11 loads, 3 images
    assert run(4).makespan_s == 42                   # room for all: nothing evicted
    # The planned policy does not load over an image with work left: it
    # drains a and b, then loads c over one of them. 3 x 10 + 12 = 42.
    assert (run(3, "planned").makespan_s, run(3, "planned").build_s) == (42, 30)
    # Two workers, room for the base and one context: an image in use by a
    # running check is never evicted, so the node may briefly hold more.
    two = run(2, "planned", cores=2)
    assert len(two.schedule) == 12 and two.build_s >= 30


def test_a_full_node_evicts_what_no_check_needs_then_what_is_cheapest_to_build_again():
    # One worker, room for the base and two contexts: a and c load in 10 s,
    # b in 2 s; checks of 1 s in naive order a b c a b. When c loads, a and b
    # are both needed again: b goes, cheaper to rebuild, although a is older.
    # a is then warm; for the last b, a is needed by no check left and goes.
    # Loads a, b, c, b: 24 s, + 5 s of checks = 29. (By age alone: a b c a b
    # all load, 34 + 5 = 39.)
    images = {"a": Image("a", "base", 10.0, "default"), "b": Image("b", "base", 2.0, "default"),
              "c": Image("c", "base", 10.0, "default")}
    checks = [check(i, 1.0, key) for i, key in enumerate("abcab")]
    p = simulate(plan_of(None, Workers(1, 1, 8 * GIB, images_per_node=3), policy="naive",
                         images=images, checks=checks))
    assert (p.makespan_s, p.build_s, p.rebuild_s) == (29, 24, 2)
    assert [p.schedule[(f"p{i}", 0)][1] for i in range(5)] == [10, 13, 24, 25, 28]


def test_the_demo_profile_fits_a_sessions_images_without_building_twice(capsys):
    """The shipped profile needs 9 images, the base included; a sweep's
    session keeps 8. Planned, the node drains an image before evicting it,
    so the limit costs nothing: the makespan of no limit at all."""
    def predict(cap: str) -> dict:
        assert cli.main(["simulate", "--profile", str(ROOT / "profiles" / "hol_light_demo"),
                         "--workers", "2", "--max-images", cap, "--json"]) == 0
        return json.loads(capsys.readouterr().out)
    limited, unlimited = predict("8"), predict("1000")
    assert limited["makespan_s"] == pytest.approx(unlimited["makespan_s"])
    assert limited["makespan_s"] <= limited["naive_makespan_s"]


def test_memory_serializes_checks_that_do_not_fit_together():
    # 4 GiB node, two cores, two 3 GiB checks of 10 s: one after the other, 20 s.
    # Bound: memory-time 2 x 10 s x 3 GiB over 4 GiB = 15 s.
    plan = plan_of(None, Workers(1, 2, 4 * GIB),
                   checks=[check(0, 10.0, mem=3 * GIB), check(1, 10.0, mem=3 * GIB)])
    p = simulate(plan)
    assert p.makespan_s == 20 and p.lower_bound_s == 15
    # A check bigger than the node still runs, alone.
    big = simulate(plan_of(None, Workers(1, 2, 4 * GIB), checks=[check(0, 7.0, mem=9 * GIB),
                                                                   check(1, 1.0)]))
    assert big.makespan_s == 8


def test_nodes_boot_in_parallel():
    # Two nodes of one core, 70 s boot each (at once), checks 30 + 20 s: 100 s.
    p = simulate(plan_of([30, 20], Workers(2, 1, 8 * GIB), boot=70.0))
    assert p.makespan_s == 100 and p.boots_s == 140
    assert p.lower_bound_s == 70 + max(50 / 2, 30)


def test_simulate_command_reads_the_bench_timeout_map(tmp_path, capsys):
    # The bench's format. Defaults: 70 s boot, 0.02 s per check. 2 workers.
    # Ours: c (100) on w0 from 70; a then b on w1: 70 + 2 x 50.02 = 170.04.
    # Naive: a on w0, b on w1 (70-120.02), c on w0 from 120.02: 220.04.
    path = tmp_path / "timeout-map.json"
    path.write_text(json.dumps([{"problem_id": "a", "prove_secs": 50, "timeout_sec": 150},
                                {"problem_id": "b", "prove_secs": 50, "timeout_sec": 150},
                                {"problem_id": "c", "prove_secs": 100, "timeout_sec": 300}]))
    assert cli.main(["simulate", "--timeout-map", str(path), "--workers", "2",
                     "--core-hour-price", "0.5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["workers"] == 2 and out["checks"] == 3
    assert out["makespan_s"] == pytest.approx(170.04)
    assert out["naive_makespan_s"] == pytest.approx(220.04)
    assert out["lower_bound_s"] == pytest.approx(70 + max(200.06 / 2, 100.02))
    assert out["core_hours"] == pytest.approx(2 * 170.04 / 3600)
    assert out["cost"] == pytest.approx(0.5 * 2 * 170.04 / 3600)
    assert out["durations_from"] == {"map": 3}
    # The table names both policies.
    assert cli.main(["simulate", "--timeout-map", str(path), "--nodes", "2",
                     "--cores-per-node", "1"]) == 0
    printed = capsys.readouterr().out
    assert "planned" in printed and "naive" in printed and "makespan" in printed


def test_simulate_command_refuses_bad_input_in_one_line(tmp_path, capsys):
    path = tmp_path / "timeout-map.json"
    path.write_text('[{"problem_id": "a", "prove_secs": "fast", "timeout_sec": 10}]')
    assert cli.main(["simulate", "--timeout-map", str(path), "--workers", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert str(path) in err and "prove_secs" in err and len(err.splitlines()) == 1
    assert cli.main(["simulate", "--timeout-map", str(path), "--workers", "3", "--nodes", "2"]) == 2
    assert "do not split evenly" in capsys.readouterr().err


def test_a_prediction_over_its_time_budget_is_dropped_not_waited_for():
    from runner.planning.simulate import OutOfTime, predict

    plan = plan_of([1.0] * 20_000, Workers(4, 8, 64 * GIB))
    with pytest.raises(OutOfTime):
        simulate(plan, budget_s=0.0)
    assert predict(plan, budget_s=0.0) is None
    assert predict(plan).makespan_s == pytest.approx(20_000 / 32, rel=0.01)


def test_a_recorded_plan_is_simulated_again_on_other_workers(tmp_path, capsys):
    from runner.planning.planner import write_plan

    plan = plan_of([1, 1, 1, 1, 4])
    write_plan(tmp_path / "plan.json", plan, simulate(plan))
    # On its own two workers: 4 s (see the first case); on one worker, 8 s.
    assert cli.main(["simulate", "--plan", str(tmp_path / "plan.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["workers"] == 2 and out["makespan_s"] == 4 and out["naive_makespan_s"] == 6
    assert cli.main(["simulate", "--plan", str(tmp_path / "plan.json"), "--workers", "1",
                     "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["makespan_s"] == 8


def test_simulate_converts_the_maps_proof_times_to_the_sweeps_mode(tmp_path, capsys):
    # A map measured natively: in --mode native its times stand; in bytecode
    # they are multiplied by the central ratio; auto routes each check by its
    # bytecode time (map_modes' conservative ratio, as the sweep routes) and
    # leaves the quick one in bytecode. Counts say what is measured.
    from runner.provers.hol_light.costs.map_modes import RATIO_CENTRAL

    path = tmp_path / "timeout-map.json"
    path.write_text(json.dumps([{"problem_id": "a", "prove_secs": 50, "timeout_sec": 150},
                                {"problem_id": "q", "prove_secs": 0.01, "timeout_sec": 10}]))
    out = {}
    for mode in ("native", "bytecode", "auto"):
        assert cli.main(["simulate", "--timeout-map", str(path), "--map-mode", "native", "--workers",
                         "1", "--mode", mode, "--json"]) == 0
        out[mode] = json.loads(capsys.readouterr().out)
    busy = {m: o["makespan_s"] - 70 for m, o in out.items()}       # 70 s: the default boot
    assert busy["native"] == pytest.approx(50.01 + 2 * 0.02)
    assert busy["bytecode"] == pytest.approx(50.01 * RATIO_CENTRAL + 2 * 0.02)
    assert busy["auto"] == pytest.approx(50 + 0.01 * RATIO_CENTRAL + 2 * 0.02)
    assert out["bytecode"]["proof_times"]["converted"] == 2 and out["native"]["proof_times"]["converted"] == 0
    assert out["auto"]["proof_times"]["converted"] == 1
    assert out["native"]["check_durations"] == {"measured": 2, "estimated": 0, "unknown": 0}
    assert cli.main(["simulate", "--timeout-map", str(path), "--workers", "1", "--mode", "bytecode"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "check durations: measured 2, estimated 0, unknown 0" in printed
    assert "mode unknown" in printed and "unconverted" in printed


def test_simulate_shows_rebuilds_and_each_choices_lower_bound(tmp_path, capsys):
    """Issue 25, part 3: the rebuilds a plan predicts (an evicted image built
    again) are on simulate's output, and the context table gives the lower
    bound of each choice of --context-proofs, not only of the chosen one."""
    from runner.planning.planner import write_plan

    images = {k: Image(k, "base", 10.0, "default") for k in "abc"}
    checks = [check(i, 1.0, "abc"[i % 3]) for i in range(12)]
    write_plan(tmp_path / "plan.json", plan_of(None, Workers(1, 1, 8 * GIB, images_per_node=3),
                                                policy="naive", images=images, checks=checks))
    args = ["simulate", "--plan", str(tmp_path / "plan.json"), "--policy", "naive"]
    assert cli.main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # As test_a_node_that_keeps_few_images_builds_evicted_ones_again: 8 rebuilds of 10 s.
    assert out["image_rebuild_core_hours"] * 3600 == pytest.approx(80.0)
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "of which rebuilds" in printed and "0.02" in printed.split("of which rebuilds")[1][:40]

    from .test_learned_costs import map_file, write_corpus

    corpus = write_corpus(tmp_path / "corpus")
    assert cli.main(["simulate", "--timeout-map", str(map_file(tmp_path)), "--corpus", str(corpus),
                     "--workers", "1", "--map-mode", "bytecode", "--json"]) == 0
    contexts = json.loads(capsys.readouterr().out)["contexts"]
    for choice in ("trust", "replay"):
        assert contexts[choice]["lower_bound_s"] > 0
        assert contexts[choice]["rebuild_core_hours"] == 0.0
        assert contexts[choice]["lower_bound_s"] <= contexts[choice]["makespan_s"] + 1e-6
    # Replay loads the earlier proofs in its contexts: its bound is higher.
    assert contexts["replay"]["lower_bound_s"] > contexts["trust"]["lower_bound_s"]
    assert cli.main(["simulate", "--timeout-map", str(map_file(tmp_path)), "--corpus", str(corpus),
                     "--workers", "1", "--map-mode", "bytecode"]) == 0
    table = capsys.readouterr().out.split("context images by --context-proofs")[1]
    assert "lower bound" in table and "of which rebuilds" in table


def test_a_host_factor_scales_what_a_map_and_its_profile_expect(capsys):
    """A host measured 3x slower than the map's (`proofbatch calibrate`)
    expects every proof 3x longer: the map's own times and those of the
    profile its sidecar names (the demo map's durations come from there)."""
    demo_map = ROOT / "timeout_maps" / "hol_light_demo.json"

    def priced(*extra) -> dict:
        assert cli.main(["simulate", "--timeout-map", str(demo_map), "--workers", "2", "--json",
                         *extra]) == 0
        return json.loads(capsys.readouterr().out)

    plain, slow = priced(), priced("--host-factor", "3")
    assert slow["lower_bound_s"] > 1.5 * plain["lower_bound_s"], (plain, slow)
    # Each check's own planned time, as --json lists them, moves by the factor.
    times = [{(c["problem_id"], c["attempt"]): c["expected_s"] for c in p["planned_checks"]}
             for p in (plain, slow)]
    assert times[0] and times[0].keys() == times[1].keys()
    assert all(times[1][k] == pytest.approx(3 * t) for k, t in times[0].items() if t > 0), times
    assert cli.main(["simulate", "--timeout-map", str(demo_map), "--workers", "2", "--host-factor", "0"]) == 2
    assert "is not a host factor" in capsys.readouterr().err


def test_a_host_factor_scales_a_recorded_plans_measured_times(tmp_path, capsys):
    """Issue 46, defect 7: `--plan P --host-factor X` gave one makespan for
    X = 1, 2 and 50. The plan's measured times (map, profile, their
    category's) move by X over the factor its sweep ran with; a default
    duration, a guess of no host, stays."""
    from runner.planning.planner import write_plan

    checks = [check(i, secs) for i, secs in enumerate([1, 1, 1, 1, 4])]
    checks.append(PlanCheck("d", 0, "cat", 3.0, "default", GIB, "base", 120.0, 5))
    write_plan(tmp_path / "plan.json", plan_of(None, checks=checks))

    def run(factor) -> dict:
        assert cli.main(["simulate", "--plan", str(tmp_path / "plan.json"), "--json",
                         "--host-factor", str(factor)]) == 0
        return json.loads(capsys.readouterr().out)

    # Two workers, longest first. x1: 4 on w0, the default's 3 on w1, then
    # the 1s to whichever is free: 6. x2: 8 on w0; 3, 2, 2, 2 on w1 (to 9)
    # and the last 2 on w0 at 8: 10. x50: 200 on w0; 3 and four 50s on w1: 203.
    assert [run(x)["makespan_s"] for x in (1, 2, 50)] == [6, 10, 203]
    assert run(2)["host_factor"]["scaled_checks"] == 5
    # Its sweep ran with factor 2: the times hold it already.
    (tmp_path / "sweep.json").write_text(json.dumps({"host_factor": 2.0}))
    assert run(2)["makespan_s"] == 6 and run(4)["makespan_s"] == 10
    assert cli.main(["simulate", "--plan", str(tmp_path / "plan.json"), "--host-factor", "4"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert ("host factor 4 (given): 5 of 6 checks' expected times (a map's or profile's, or their "
            "category's) scaled (its sweep ran with factor 2, so x2); 1 default durations") in said


@pytest.mark.parametrize("value", ["0", "-1", "auto", "1001", "nan", "inf", "fast"])
def test_a_bad_host_factor_says_the_range_and_not_auto_or_seconds(capsys, value):
    """Issue 46: simulate advised "pass auto", which it refuses, asked for "a
    number in seconds", and named no range."""
    demo_map = ROOT / "timeout_maps" / "hol_light_demo.json"
    assert cli.main(["simulate", "--timeout-map", str(demo_map), "--workers", "2",
                     "--host-factor", value]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("proofbatch: error: --host-factor: "), err
    line = err[0]
    assert "seconds" not in line and "pass auto" not in line
    assert ("at most 1000" in line) if value != "auto" else ("auto is run's" in line)


def test_simulate_says_a_factor_was_applied_and_its_help_matches_what_it_does(capsys, tmp_path):
    """Issue 46: no word in the output that a factor was applied; and its
    help called --map-mode required, yet it went on without it."""
    demo_map = ROOT / "timeout_maps" / "hol_light_demo.json"
    argv = ["simulate", "--timeout-map", str(demo_map), "--workers", "2", "--host-factor", "2.5"]
    assert cli.main(argv) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "host factor 2.5 (given): the map's proof times x2.5" in said and "its limits x2.50" in said
    assert cli.main(argv + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["host_factor"]["times_x"] == 2.5
    # The same range as run's --host-factor.
    from runner.commands.simulate_factor import MAX_HOST_FACTOR
    from runner.maps import host_factor

    assert host_factor.parse(str(MAX_HOST_FACTOR)) == MAX_HOST_FACTOR
    with pytest.raises(Exception):
        host_factor.parse(str(MAX_HOST_FACTOR * 1.01))
    # Without --map-mode: it proceeds, as its help says.
    bare = tmp_path / "timeout-map.json"
    bare.write_text(json.dumps([{"problem_id": "a", "prove_secs": 5, "timeout_sec": 120}]))
    assert cli.main(["simulate", "--timeout-map", str(bare), "--workers", "1"]) == 0
    # Rich wraps at the terminal's width: where depends on the map's path.
    assert "mode unknown" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit):
        cli.main(["simulate", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    map_mode = help_text.split("--map-mode {bytecode,native}")[-1].split("--map-build")[0]
    assert "required" not in map_mode.replace("unlike for `run`", "") and "Optional here" in map_mode
    assert "at most 1000" in help_text.split("--host-factor X")[-1]


# -- the heavy tail, priced before it runs (issue 44) ---------------------------------

def _heavy_tail_map(tmp_path):
    """Shaped like the bench's map: light problems, heavy ones, and one
    5,991 s proof that no number of workers shortens."""
    entries = [{"problem_id": f"arm.light.L{i}", "prove_secs": 0.5, "timeout_sec": 120} for i in range(40)]
    entries += [{"problem_id": f"arm.heavy.H{i}", "prove_secs": 200.0 + 100 * i, "timeout_sec": 5 * (200 + 100 * i)}
                for i in range(8)]
    entries.append({"problem_id": "arm.mldsa_intt.MLDSA_INTT_CORRECT", "prove_secs": 5991.24,
                    "timeout_sec": 10800})
    path = tmp_path / "timeout-map.json"
    path.write_text(json.dumps(entries))
    return path


def test_the_heavy_tail_of_a_map_is_priced_alone_and_its_longest_check_sets_the_bound(tmp_path, capsys):
    path = _heavy_tail_map(tmp_path)
    heavy = tmp_path / "heavy.txt"
    heavy.write_text("arm.heavy.*\narm.mldsa_intt.*\n")
    for workers in (64, 512):
        assert cli.main(["simulate", "--timeout-map", str(path), "--map-mode", "native", "--mode", "native",
                         "--problems", f"@{heavy}", "--workers", str(workers), "--host-factor", "1.5",
                         "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["checks"] == 9                      # --problems picked the map's heavy tail
        assert out["longest_check"] == "arm.mldsa_intt.MLDSA_INTT_CORRECT"
        terms = out["lower_bound_terms"]
        assert max(terms, key=terms.get) == "longest"
        assert terms["longest"] >= 5991.24 * 1.5
    assert cli.main(["simulate", "--timeout-map", str(path), "--map-mode", "native", "--mode", "native",
                     "--problems", f"@{heavy}", "--workers", "512"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "set by the longest check, arm.mldsa_intt.MLDSA_INTT_CORRECT" in printed
    # A pattern that matches nothing in the map is refused, naming the map.
    assert cli.main(["simulate", "--timeout-map", str(path), "--problems", "x86.*", "--workers", "2"]) == 2
    assert "matches no problem of the map" in capsys.readouterr().err


def test_a_heavy_proof_is_never_cut_at_a_32_core_nodes_share(tmp_path, capsys):
    """The bench's map has no memory, and the default share on a 32-core,
    128 GB node is 4 GiB: a 5,991 s proof is estimated at the bench's 5 GB
    and guarded above it, so the node runs fewer heavy checks at once."""
    path = _heavy_tail_map(tmp_path)
    assert cli.main(["simulate", "--timeout-map", str(path), "--map-mode", "native", "--mode", "native",
                     "--nodes", "1", "--cores-per-node", "32", "--mem-per-node", "128G"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "memory: 1 of 49 checks get more than the default share of 4 GiB" in printed
    assert "up to 9.3 GiB" in printed


# -- a mixed cluster (issue 47): each node's own factor --------------------------------

def test_on_a_mixed_cluster_the_heaviest_check_goes_to_the_fastest_node():
    slow_first = Workers(2, 1, 8 * GIB, node_factors=(2.0, 1.0))     # node 0 proves at half speed
    plan = plan_of([100, 10, 10, 10], workers=slow_first)
    p = simulate(plan)
    worker, start, end = p.schedule[("p0", 0)]
    assert worker == 1 and end - start == pytest.approx(100 + plan.config.dispatch_s)
    # The slow node's checks take twice their time; the bound knows the speeds.
    w, s, e = p.schedule[("p1", 0)]
    assert w == 0 and e - s == pytest.approx(2 * (10 + plan.config.dispatch_s))
    assert p.makespan_s >= p.lower_bound_s
    even = simulate(plan_of([100, 10, 10, 10], workers=Workers(2, 1, 8 * GIB)))
    assert p.makespan_s == pytest.approx(even.makespan_s)      # the slow node only took light work
    with pytest.raises(Exception, match="for each of 2 nodes"):
        Workers(2, 1, 8 * GIB, node_factors=(1.0,))


def test_simulate_prices_a_mixed_cluster_from_node_factors(tmp_path, capsys):
    path = _heavy_tail_map(tmp_path)
    # Work, not one check, sets this makespan: 8 heavy checks on 3 single cores.
    args = ["simulate", "--timeout-map", str(path), "--problems", "arm.heavy.*",
            "--cores-per-node", "1", "--json"]
    assert cli.main([*args, "--nodes", "3"]) == 0
    even = json.loads(capsys.readouterr().out)
    assert cli.main([*args, "--node-factors", "1.0,1.0,1.8"]) == 0
    mixed = json.loads(capsys.readouterr().out)
    assert mixed["nodes"] == 3 and mixed["node_factors"] == [1.0, 1.0, 1.8]
    assert mixed["makespan_s"] > even["makespan_s"] and mixed["core_hours"] > even["core_hours"]
    # Its longest check runs on a fast node: the bound is not the slow node's,
    # and the work shares out by speed.
    assert mixed["lower_bound_terms"]["longest"] == pytest.approx(even["lower_bound_terms"]["longest"])
    assert mixed["lower_bound_terms"]["work"] == pytest.approx(
        even["lower_bound_terms"]["work"] * 3 / (1 + 1 + 1 / 1.8))
    assert cli.main([*args, "--nodes", "2", "--node-factors", "1.0,1.0,1.8"]) == 2
    assert "gives 3 factors for 2 nodes" in capsys.readouterr().err
    assert cli.main([*args, "--node-factors", "1.0,0,2"]) == 2
    assert "above 0" in capsys.readouterr().err
