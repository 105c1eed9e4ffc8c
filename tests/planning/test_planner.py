"""The planner: heaviest first, memory never oversubscribed, a node keeps the
images it has built, the same plan for the same seed, and a plan file that
reads back as the same plan. No prover is needed: plans are data."""

from __future__ import annotations

import random
import threading

import pytest

from runner.errors import InputError
from runner.planning.planner import (Image, PlanCheck, PlanConfig, Workers, make_plan, plan_to_json, read_plan, write_plan)
from runner.planning.live_queue import LiveQueue
from runner.planning.simulate import simulate

GIB = 2**30


def images(n: int, build_s: float = 25.0, boot_s: float = 70.0) -> dict[str, Image]:
    out = {"base": Image("base", None, boot_s, "default")}
    out.update({f"ctx{i}": Image(f"ctx{i}", "base", build_s, "default") for i in range(n)})
    return out


def check(i: int, secs: float, image: str = "base", mem: int = GIB, attempt: int = 0,
          limit: float = 120.0) -> PlanCheck:
    return PlanCheck(f"p{i:04d}", attempt, "cat", secs, "map", mem, image, limit, i)


def heavy_tailed(n: int, seed: int, n_images: int = 6) -> list[PlanCheck]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        secs = rng.choice([0.05, 0.3, 2.0, 20.0]) if rng.random() > 0.05 else rng.uniform(300, 900)
        mem = 5 * GIB if secs > 100 else rng.choice([GIB // 2, GIB, 2 * GIB])
        out.append(check(i, secs, f"ctx{rng.randrange(n_images)}", mem))
    return out


def test_the_heaviest_problem_starts_first_and_the_rest_follow_longest_first():
    checks = heavy_tailed(300, seed=1)
    plan = make_plan(checks, images(6), "base", Workers(1, 4, 64 * GIB))
    # Longest first, where the first problem of each context also counts
    # the 25 s load of its context.
    seen, ranks = set(), []
    for c in plan.checks:
        ranks.append(c.expected_s + (25.0 if c.image_key not in seen else 0.0))
        seen.add(c.image_key)
    assert ranks == sorted(ranks, reverse=True)
    prediction = simulate(plan)
    heaviest = max(checks, key=lambda c: c.expected_s)
    worker, start, _ = prediction.schedule[(heaviest.problem_id, 0)]
    # It waits only for the boot and its own context, never behind other checks.
    assert start == pytest.approx(70.0 + 25.0)
    # The naive order (submission) leaves it for later.
    naive = simulate(plan.with_policy("naive"))
    assert naive.schedule[(heaviest.problem_id, 0)][1] > start


def test_attempts_of_a_problem_stay_together_in_attempt_order():
    checks = [check(0, 1.0, attempt=1), check(1, 50.0), check(0, 2.0, attempt=0)]
    checks = [PlanCheck(**{**c.__dict__, "index": i}) for i, c in enumerate(checks)]
    plan = make_plan(checks, images(0), "base", Workers(1, 2, 8 * GIB))
    assert [(c.problem_id, c.attempt) for c in plan.checks] == [("p0001", 0), ("p0000", 0),
                                                                 ("p0000", 1)]


@pytest.mark.parametrize("policy", ["planned", "naive", "shuffle"])
@pytest.mark.parametrize("layout", [(1, 4, 12), (3, 8, 20)])
def test_memory_is_never_oversubscribed(policy, layout):
    nodes, cores, gib = layout
    checks = heavy_tailed(400, seed=nodes)
    plan = make_plan(checks, images(6), "base", Workers(nodes, cores, gib * GIB),
                     PlanConfig(policy=policy))
    prediction = simulate(plan)
    mem = {(c.problem_id, c.attempt): c.mem_bytes for c in checks}
    events = []
    for key, (worker, start, end) in prediction.schedule.items():
        events += [(start, 1, worker // cores, mem[key]), (end, 0, worker // cores, -mem[key])]
    in_use = [0] * nodes
    peak = [0] * nodes
    for _, _, node, delta in sorted(events):     # ends (0) before starts (1) at the same instant
        in_use[node] += delta
        peak[node] = max(peak[node], in_use[node])
    assert max(peak) <= gib * GIB
    # ...and the packing still used most of it: five 5 GiB checks never fit in 20 GiB.
    assert max(peak) > (gib - 5) * GIB


def test_a_node_keeps_its_images():
    # Two nodes, four contexts, many light checks each: with affinity a node
    # stays on the contexts it has loaded; shuffled dispatch loads every
    # context on both nodes.
    checks = [check(i, 1.0, f"ctx{i % 4}") for i in range(200)]
    plan = make_plan(checks, images(4), "base", Workers(2, 2, 16 * GIB))
    ours, shuffled = simulate(plan), simulate(plan.with_policy("shuffle", seed=3))
    assert _contexts_per_node(plan, ours) <= 5        # each context once, plus at most one more
    assert _contexts_per_node(plan, shuffled) == 8
    assert (ours.build_s - ours.boots_s) / 25.0 == _contexts_per_node(plan, ours)
    # Affinity pays: fewer builds, so a shorter sweep.
    assert ours.makespan_s < shuffled.makespan_s


def _contexts_per_node(plan, prediction) -> int:
    image = {(c.problem_id, c.attempt): c.image_key for c in plan.checks}
    per_node = {(worker // plan.workers.cores_per_node, image[key])
                for key, (worker, _, _) in prediction.schedule.items()}
    return len(per_node)


def test_a_long_check_does_not_wait_for_affinity():
    # The node holds ctx0, with light checks left; the longest check needs
    # ctx1. It is shorter than 4 loads of ctx1 but long against the work left
    # per worker (critical), so it starts at once, after the boot and ctx1.
    checks = [check(0, 60.0, "ctx1")] + [check(i, 1.0, "ctx0") for i in range(1, 30)]
    plan = make_plan(checks, images(2), "base", Workers(1, 2, 16 * GIB), prebuilt=["ctx0"])
    prediction = simulate(plan)
    assert prediction.schedule[("p0000", 0)][1] == pytest.approx(70.0 + 25.0)
    # A light one in its place starts at once too: its context must be
    # loaded somewhere, and that load is long next to the work left.
    checks[0] = check(0, 1.5, "ctx1")
    plan = make_plan(checks, images(2), "base", Workers(1, 2, 16 * GIB), prebuilt=["ctx0"])
    assert simulate(plan).schedule[("p0000", 0)][1] == pytest.approx(70.0 + 25.0)
    # With ctx1 loaded too, nothing is long any more: ctx0's light checks go
    # on, the node keeps its images.
    plan = make_plan(checks, images(2), "base", Workers(1, 2, 16 * GIB), prebuilt=["ctx0", "ctx1"])
    assert simulate(plan).build_s == 70.0


def test_the_plan_is_deterministic_for_a_seed():
    checks = [check(i, 1.0, f"ctx{i % 5}") for i in range(50)]   # all tied
    a = plan_to_json(make_plan(checks, images(5), "base", Workers(2, 3, 8 * GIB), PlanConfig(seed=7)))
    b = plan_to_json(make_plan(checks, images(5), "base", Workers(2, 3, 8 * GIB), PlanConfig(seed=7)))
    c = plan_to_json(make_plan(checks, images(5), "base", Workers(2, 3, 8 * GIB), PlanConfig(seed=8)))
    assert a == b
    assert [x["problem_id"] for x in a["checks"]] != [x["problem_id"] for x in c["checks"]]
    # The first problem of each context leads (its load counts); after them,
    # ties are broken by image, so equal checks of one context stay together.
    keys = [x["image_key"] for x in a["checks"]]
    assert len(set(keys[:5])) == 5
    assert sum(1 for u, v in zip(keys[5:], keys[6:]) if u != v) == 4
    s1 = make_plan(checks, images(5), "base", Workers(1, 1, GIB), PlanConfig(policy="shuffle", seed=1))
    s2 = make_plan(checks, images(5), "base", Workers(1, 1, GIB), PlanConfig(policy="shuffle", seed=1))
    assert s1.checks == s2.checks and s1.checks != tuple(checks)


def test_a_plan_file_reads_back_as_the_same_plan(tmp_path):
    plan = make_plan(heavy_tailed(40, seed=2), images(6), "base", Workers(2, 4, 32 * GIB),
                     PlanConfig(seed=5), prebuilt=["ctx2"])
    prediction = simulate(plan)
    write_plan(tmp_path / "plan.json", plan, prediction, run_id="r1")
    again, data = read_plan(tmp_path / "plan.json")
    assert again == plan
    assert data["predicted"]["makespan_s"] == prediction.makespan_s
    assert data["run_id"] == "r1" and data["sources"] == {"map": 40}
    assert all("start_s" in c and "worker" in c for c in data["checks"])
    # Reused: the same plan simulates to the same schedule.
    assert simulate(again).schedule == prediction.schedule


def test_bad_plan_input_is_one_clear_error(tmp_path):
    with pytest.raises(InputError, match="unknown policy 'fastest'"):
        PlanConfig(policy="fastest")
    with pytest.raises(InputError, match="--cores-per-node"):
        Workers(1, 0, GIB)
    bad = tmp_path / "plan.json"
    bad.write_text("{}")
    with pytest.raises(InputError, match="not a proofbatch plan"):
        read_plan(bad)


def test_live_queue_blocks_a_worker_until_memory_is_free():
    # Two 3 GiB checks on a 4 GiB node of two cores: the second worker waits
    # for the first check to end, as executors' threads do.
    checks = [check(0, 5.0, mem=3 * GIB), check(1, 4.0, mem=3 * GIB)]
    plan = make_plan(checks, images(0), "base", Workers(1, 2, 4 * GIB))
    queue = LiveQueue(plan, {"p0000": "unit 0", "p0001": "unit 1"})
    assert queue.next(0) == "unit 0"
    got = []
    waiter = threading.Thread(target=lambda: got.append(queue.next(1)))
    waiter.start()
    waiter.join(timeout=0.3)
    assert waiter.is_alive() and got == []
    queue.done(0)
    waiter.join(timeout=5)
    assert got == ["unit 1"]
    queue.done(1)
    assert queue.next(0) is None


def test_a_context_slow_to_load_starts_early():
    # Four 50 s problems on the base and a 1 s problem whose context takes
    # 100 s to load, on two workers. Ranked by its load plus its time, the
    # context starts at once: 151 s (bound 150.51). By its time alone it would
    # start when a worker is free at 100 s, ending at 201 s.
    checks = [check(i, 50.0) for i in range(4)] + [check(4, 1.0, "ctx0")]
    plan = make_plan(checks, images(1, build_s=100.0), "base", Workers(1, 2, 16 * GIB),
                     PlanConfig(dispatch_s=0.0), prebuilt=["base"])
    assert plan.checks[0].problem_id == "p0004"
    assert simulate(plan).makespan_s == pytest.approx(151.0)
    assert plan.lower_bound() == pytest.approx(150.5)


def _proof_files(heads: dict[str, float], theorems: int) -> dict[str, Image]:
    """Proof files cut theorem by theorem: under a shared 60 s library, file
    f's k-th problem has the context of the (k-1)-th plus 1 s of phrases (its
    head, for the first)."""
    out = {"base": Image("base", None, 70.0, "default"), "lib": Image("lib", "base", 60.0, "default")}
    for f, head in heads.items():
        parent = "lib"
        for k in range(1, theorems + 1):
            out[f"{f}{k}"] = Image(f"{f}{k}", parent, head if k == 1 else 1.0, "default")
            parent = f"{f}{k}"
    return out


def test_a_chain_of_contexts_goes_shallowest_first_one_worker_per_chain():
    # Two files of 10 light theorems: two chains of 10 images under the
    # library. Deepest first (each problem ranked by the load of its whole
    # chain) sent both workers down file a, each waiting for the other's
    # builds, while file b needed only the library, and the session evicted
    # a's shallow images, needed later, to build the deep ones.
    checks = [PlanCheck(f"{f}{k}", 0, "cat", 0.1, "map", GIB, f"{f}{k}", 120.0, i)
              for i, (f, k) in enumerate((f, k) for f in "ab" for k in range(1, 11))]
    plan = make_plan(checks, _proof_files({"a": 20.0, "b": 10.0}, 10), "base",
                     Workers(1, 2, 16 * GIB, images_per_node=6), PlanConfig(dispatch_s=0.0))
    order = [c.problem_id for c in plan.checks]
    assert order == [f"a{k}" for k in range(1, 11)] + [f"b{k}" for k in range(1, 11)]
    prediction = simulate(plan)
    start = {pid: s for (pid, _), (_, s, _) in prediction.schedule.items()}
    worker = {pid: w for (pid, _), (w, _, _) in prediction.schedule.items()}
    # The second worker builds file b on the library while the first builds a.
    assert worker["b1"] != worker["a1"]
    assert start["b1"] == pytest.approx(70 + 60 + 10) and start["a1"] == pytest.approx(70 + 60 + 20)
    # Every image is built once, and the sweep ends when chain a is built.
    assert prediction.rebuild_s == 0
    assert prediction.build_s == pytest.approx(70 + 60 + 20 + 10 + 18 * 1.0)
    assert prediction.makespan_s == pytest.approx(70 + 60 + 20 + 9 * 1.0 + 0.1)


def test_on_two_nodes_each_chain_of_contexts_is_built_on_one():
    # The same files on two nodes of one core. Each node loads the library
    # (all the work is under it), then one file's chain; a node never builds
    # the other's chain again for its next problem, which the node holding
    # the chain continues for a second's load.
    checks = [PlanCheck(f"{f}{k}", 0, "cat", 0.1, "map", GIB, f"{f}{k}", 120.0, i)
              for i, (f, k) in enumerate((f, k) for f in "ab" for k in range(1, 11))]
    plan = make_plan(checks, _proof_files({"a": 20.0, "b": 10.0}, 10), "base",
                     Workers(2, 1, 16 * GIB), PlanConfig(dispatch_s=0.0))
    prediction = simulate(plan)
    nodes = {pid[0]: set() for (pid, _) in prediction.schedule}
    for (pid, _), (worker, _, _) in prediction.schedule.items():
        nodes[pid[0]].add(worker)
    assert nodes["a"] != nodes["b"] and all(len(n) == 1 for n in nodes.values())
    assert prediction.build_s == pytest.approx(2 * 70 + 2 * 60 + 20 + 10 + 18 * 1.0)


# -- a plan is never worse than submission order (issue 25, part 4) ------------

def _busy_holder_plan(policy: str = "planned"):
    """Two nodes of one core. A proof file's chain C1 -> C2 -> C3: C1 takes
    200 s to load and holds a 1,000 s proof, C2 and C3 a 30 s proof each;
    ten 1 s problems on a context D of their own."""
    imgs = {"base": Image("base", None, 0.0, "default"), "C1": Image("C1", "base", 200.0, "estimated"),
            "C2": Image("C2", "C1", 1.0, "estimated"), "C3": Image("C3", "C2", 1.0, "estimated"),
            "D": Image("D", "base", 5.0, "estimated")}
    spec = [("p1", "C1", 1000.0), ("p2", "C2", 30.0), ("p3", "C3", 30.0)] + \
        [(f"q{i}", "D", 1.0) for i in range(10)]
    checks = [PlanCheck(pid, 0, "generic", s, "map", GIB, key, 3600.0, n)
              for n, (pid, key, s) in enumerate(spec)]
    return make_plan(checks, imgs, "base", Workers(2, 1, 8 * GIB, 8), PlanConfig(policy=policy))


def test_a_node_does_not_wait_for_a_holder_busy_with_a_long_proof():
    """The cause of planned > naive on s2n-bignum's x86 proofs: a node
    whose next problem continues a chain another node holds waited for that
    node to do it, counting all of the holder's cores as free, though they
    ran proofs far longer than the load (and a worker whose node then ran
    nothing retired for good). Node 1 waited 1,000 s for node 0 to finish
    p1 before p2 and p3 ran there: 1,262 s against naive's 1,200 s. Now it
    loads C1 and C2 itself: both end with p1."""
    ours, naive = simulate(_busy_holder_plan()), simulate(_busy_holder_plan("naive"))
    assert ours.makespan_s <= naive.makespan_s
    assert ours.makespan_s == pytest.approx(1200.0, abs=1.0)
    assert ours.schedule[("p2", 0)][1] < 1000.0


def test_the_next_context_of_a_chain_counts_as_warm():
    """One worker keeping 4 images, two proof files each a chain of 6
    contexts (5 s each) under a library: longest first alternates between
    the files, and a chain's next problem, on its own image, looked as cold
    as the other file's, so the node evicted one chain to load the other
    and built it again (145 s of rebuilds, no faster than submission order).
    A node holding a chain's tip now counts the chain's next problem as
    warm."""
    imgs = {"base": Image("base", None, 0.0, "default"), "lib": Image("lib", "base", 50.0, "estimated")}
    for f in range(2):
        parent = "lib"
        for d in range(6):
            imgs[f"f{f}.{d}"] = Image(f"f{f}.{d}", parent, 5.0, "estimated")
            parent = f"f{f}.{d}"
    checks = [PlanCheck(f"f{f}.t{d}", 0, "generic", 100.0 - 10 * d - 0.1 * f, "map", GIB,
                        f"f{f}.{d}", 600.0, 2 * d + f) for d in range(6) for f in range(2)]
    plan = make_plan(checks, imgs, "base", Workers(1, 1, 8 * GIB, 4))
    ours, naive = simulate(plan), simulate(plan.with_policy("naive"))
    assert ours.rebuild_s <= 15.0
    assert ours.makespan_s < naive.makespan_s - 100


def _file_chains(rng: random.Random, shortest: int, longest: int):
    """Six proof files cut theorem by theorem: each a chain of contexts of
    ``shortest`` to ``longest`` images, one check on each, of 0.5-300 s."""
    imgs = {"base": Image("base", None, 10.0, "default")}
    checks = []
    for f in range(6):
        parent = "base"
        for d in range(rng.randint(shortest, longest)):
            key = f"f{f}.{d}"
            imgs[key] = Image(key, parent, rng.uniform(1, 30), "estimated")
            parent = key
            checks.append(PlanCheck(f"f{f}.t{d}", 0, "generic", rng.choice([0.5, 5, 50, 300]),
                                    "map", GIB, key, 600.0, len(checks)))
    return imgs, checks


def test_the_guard_keeps_whichever_order_simulates_faster():
    """runner.planning.simulate.guard: a planned sweep is dispatched in submission
    order when simulating both predicts that faster; never slower."""
    from runner.planning.simulate import guard

    rng = random.Random(5)
    for trial in range(6):
        imgs, checks = _file_chains(rng, 2, 8)
        plan = make_plan(checks, imgs, "base", Workers(1, rng.choice([2, 4, 8]), 64 * GIB, 4))
        kept = guard(plan)
        ours, naive = simulate(plan), simulate(plan.with_policy("naive"))
        assert simulate(kept).makespan_s == pytest.approx(min(ours.makespan_s, naive.makespan_s))
        assert kept.config.policy == "planned"
        assert kept.config.submission_order == (naive.makespan_s < ours.makespan_s)


def _long_chains_where_naive_order_wins():
    """Six files' chains of 360-500 contexts each on one node of 2 workers
    keeping 4 images (seed 0): submission order simulates faster than the
    plan, and the simulation runs past 2,048 events, where a time budget
    would first look at the clock."""
    imgs, checks = _file_chains(random.Random(0), 360, 500)
    return make_plan(checks, imgs, "base", Workers(1, 2, 64 * GIB, 4))


def test_the_guard_decides_by_events_not_by_the_hosts_clock(monkeypatch):
    """A plan must not depend on how busy the host was when it was made: the
    guard's budget counts the simulation's events, so a host whose clock
    races past any time budget still gets the faster order."""
    import time as real_time

    from runner.planning import simulate as sim

    plan = _long_chains_where_naive_order_wins()
    honest = sim.guard(plan)
    assert honest.config.submission_order, "a plan the guard dispatches in submission order"
    ticks = iter(range(0, 10**12, 10**6))        # every look at the clock: 11 days later
    monkeypatch.setattr(real_time, "monotonic", lambda: float(next(ticks)))
    with pytest.raises(sim.OutOfTime):          # any time budget is past
        sim.simulate(plan, keep_schedule=False, budget_s=3600.0)
    assert sim.guard(plan).config.submission_order
    # Past its events, the plan is kept as made (and says so by being unguarded).
    with pytest.raises(sim.OutOfTime):
        sim.simulate(plan, keep_schedule=False, max_steps=1)
    assert sim.guard(plan, max_steps=1) is plan
