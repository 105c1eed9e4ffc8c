"""Array tasks pull work from one pool (cluster/claims.py): real processes
race for claims on a real directory, as array tasks do on a shared disk."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

from cluster.claims import Claimer, Pool

PROBLEMS = [f"p{i:03d}" for i in range(200)]


def _claim_all(root, holder, lease_s, start, queue):
    pool = Pool(root, holder, lease_s=lease_s)
    pool.start_lease()
    start.wait()
    queue.put((holder, [p for p in PROBLEMS if pool.claim(p)]))


def _race(root, holders, lease_s=30.0):
    """Each holder, in its own process, claims every problem it can, all
    starting at once; what each won."""
    ctx = mp.get_context("fork")
    start, queue = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_claim_all, args=(root, h, lease_s, start, queue)) for h in holders]
    for p in procs:
        p.start()
    start.set()
    won = dict(queue.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=10)
    return won


def test_tasks_racing_for_the_same_problems_each_win_different_ones(tmp_path):
    won = _race(tmp_path, ["1_0", "1_1", "1_2", "1_3"])
    claimed = [p for ps in won.values() for p in ps]
    assert sorted(claimed) == PROBLEMS            # every problem once, none twice


def _hold_then_sleep(root, holder, ids, ready):
    pool = Pool(root, holder, lease_s=1.0)
    pool.start_lease()
    for p in ids:
        assert pool.claim(p)
    ready.set()
    time.sleep(600)


def test_a_dead_tasks_claims_return_after_its_lease_and_a_live_ones_never(tmp_path):
    ctx = mp.get_context("fork")
    dead_ready, live_ready = ctx.Event(), ctx.Event()
    dead = ctx.Process(target=_hold_then_sleep, args=(tmp_path, "7_0", PROBLEMS[:10], dead_ready))
    live = ctx.Process(target=_hold_then_sleep, args=(tmp_path, "7_1", PROBLEMS[10:20], live_ready))
    dead.start(), live.start()
    assert dead_ready.wait(30) and live_ready.wait(30)
    try:
        other = Pool(tmp_path, "7_2", lease_s=1.0)
        assert not any(other.claim(p) for p in PROBLEMS[:20])   # both alive
        os.kill(dead.pid, signal.SIGKILL)
        dead.join()
        time.sleep(2.5)                                         # past the dead one's lease
        assert all(other.claim(p) == "taken" for p in PROBLEMS[:10])
        # The live one renewed its lease all along: its claims stay its own.
        assert not any(other.claim(p) for p in PROBLEMS[10:20])
        assert other.holder_of(PROBLEMS[0]) == "7_2" and other.holder_of(PROBLEMS[10]) == "7_1"
    finally:
        live.kill()
        live.join()


def test_tasks_taking_over_the_same_stale_claims_never_both_win(tmp_path):
    gone = Pool(tmp_path, "9_0", lease_s=1.0)
    gone.renew()
    assert all(gone.claim(p) for p in PROBLEMS)
    old = time.time() - 60
    os.utime(tmp_path / "leases" / "9_0", (old, old))          # its holder stopped renewing
    won = _race(tmp_path, ["9_1", "9_2", "9_3"], lease_s=1.0)
    assert sorted(p for ps in won.values() for p in ps) == PROBLEMS


def test_the_driver_gives_back_an_ended_jobs_unfinished_claims_at_once(tmp_path):
    ended = Pool(tmp_path, "3_0")
    ended.renew()
    for p in PROBLEMS[:6]:
        assert ended.claim(p)
    done = set(PROBLEMS[:2])
    assert ended.release_holder("3_0", keep=lambda pid: pid in done) == PROBLEMS[2:6]
    # The done ones keep their claim (their rows are in the shards); the four
    # unfinished ones are free at once, with no lease to wait for.
    other = Pool(tmp_path, "3_1")
    assert [other.holder_of(p) for p in PROBLEMS[:6]] == ["3_0", "3_0", None, None, None, None]
    assert all(other.claim(p) for p in PROBLEMS[2:6])


def test_a_requeued_task_finds_its_claims_again(tmp_path):
    first = Pool(tmp_path, "5_3")
    first.renew()
    assert first.claim("a") == first.claim("b") == "new"
    again = Pool(tmp_path, "5_3")             # same job id after Slurm's requeue
    assert again.mine() == {"a", "b"} and again.claim("a") == "mine"
    assert not Pool(tmp_path, "5_4").claim("a")


def test_a_problem_taken_over_with_its_checks_recorded_is_never_run_again(tmp_path):
    # The replacement task 87 recorded "done" and "half" had a check left
    # when it ended; the driver gave back its lease. The requeued task 85_1
    # takes both over. Its executor asks again at the end for a problem it
    # was refused: by then the claim is 85_1's own, and must still say no.
    ended = Pool(tmp_path, "87")
    ended.renew()
    assert ended.claim("done") == ended.claim("half") == "new"
    ended.release_holder("87", keep=lambda pid: True)       # all recorded, as the driver saw
    claim = Claimer(Pool(tmp_path, "85_1"), recorded=lambda pid: pid == "done")
    assert not claim("done") and not claim("done")
    assert claim("half") and claim("half")                  # its own now: "mine"
    assert Pool(tmp_path, "observer").holder_of("done") == "85_1"
