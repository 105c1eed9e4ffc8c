"""Where a check's memory guard comes from (runner/maps/mem_needs.py): a
measured or estimated need beats the default share, never a user's cap, and
never the node's memory. The story is a heavy s2n-bignum proof on a 32-core,
128 GB node, where the default share (80% of RAM over 32 workers, 3.2 GiB)
is below what the bench says a heavy proof needs (about 5 GB)."""

from __future__ import annotations

import pytest

from runner.maps import mem_needs
from runner.maps.timeout_map import MIN_GUARD_BYTES

GIB = 1 << 30
NODE = int(0.8 * 128 * GIB)            # what a 128 GB node's checks may use together
SHARE = int(0.8 * 128 * GIB / 32)      # the default --mem-limit there: 3.2 GiB
EXPECTED = 512 << 20


def limit(map_secs, profiled=None, cap=None, default=SHARE, node=NODE):
    return mem_needs.mem_limit(map_secs, profiled, cap=cap, default=default, node=node,
                               default_expected=EXPECTED)


def test_a_heavy_proof_with_no_measurement_gets_its_class_estimate_not_the_share():
    m = limit(5991.0)
    assert m.guard > SHARE
    assert m.guard >= 5 * 10**9 * mem_needs.MARGIN
    assert m.expected == 5 * 10**9        # the node packs by it: fewer checks at once
    assert "3,000 s or more" in m.source and "5 GB" in m.source


@pytest.mark.parametrize("secs", [150.0, 500.0, 2000.0])
def test_every_heavy_class_is_estimated_from_a_stated_basis(secs):
    m = limit(secs)
    cls = mem_needs.heavy_class(secs)
    assert cls is not None and cls.basis in m.source
    assert m.guard == max(SHARE, int(cls.peak_bytes * mem_needs.MARGIN))


def test_a_light_or_unlisted_problem_keeps_the_default_share():
    for secs in (None, 0.2, 119.9):
        m = limit(secs)
        assert (m.guard, m.expected, m.source) == (SHARE, EXPECTED, "default share")


def test_a_profiled_need_above_the_share_is_given_within_the_node():
    m = limit(30.0, profiled=(6 * GIB, 3 * GIB))
    assert (m.guard, m.expected, m.source) == (6 * GIB, 3 * GIB, "map's profile")
    huge = limit(30.0, profiled=(400 * GIB, 200 * GIB))
    assert huge.guard == NODE and huge.expected == NODE
    small = limit(30.0, profiled=(100 << 20, 80 << 20))
    assert small.guard == MIN_GUARD_BYTES           # an image's own pages need more than that


def test_a_users_mem_limit_is_a_cap_that_nothing_raises():
    assert limit(5991.0, cap=2 * GIB).guard == 2 * GIB
    assert limit(30.0, profiled=(6 * GIB, 3 * GIB), cap=4 * GIB).guard == 4 * GIB
    assert limit(None, cap=4 * GIB).source == "--mem-limit"


def test_the_estimate_never_exceeds_a_small_nodes_memory():
    node = 6 * GIB
    m = limit(5991.0, default=3 * GIB, node=node)
    assert m.guard == node and m.expected <= node


def test_run_says_how_many_checks_got_their_memory_from_where():
    line = mem_needs.summary({"a": limit(5991.0), "b": limit(0.5), "c": limit(0.7)})
    assert line.startswith("memory limits: 2 default share: 3.2 GiB; 1 estimated for map time 3,000 s")


def test_run_names_the_limits_only_when_one_is_above_the_sweeps():
    ids = ["heavy", "light"]
    limits, said = mem_needs.sweep_limits(ids, {"heavy": 5991.0, "light": 1.0}, {}, cap=None,
                                          default=SHARE, node=NODE, default_expected=EXPECTED)
    assert limits["heavy"].guard > SHARE and said and said[0].startswith("memory limits: ")
    # A profile that only tightens a user's cap, or an estimate below the
    # share, is no surprise: nothing said, the rows still record the source.
    _, said = mem_needs.sweep_limits(ids, {}, {"heavy": (2 * GIB, GIB)}, cap=4 * GIB, default=SHARE,
                                     node=NODE, default_expected=EXPECTED)
    assert said == ()
    _, said = mem_needs.sweep_limits(ids, {"heavy": 2000.0}, {}, cap=None, default=8 * GIB,
                                     node=NODE, default_expected=EXPECTED)
    assert said == ()
