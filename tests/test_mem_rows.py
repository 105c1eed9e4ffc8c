"""Every row says which memory guard its check ran under and where that
guard came from (runner/maps/mem_needs.py), so a MEMOUT can be read against
its limit: here the example corpus swept with an explicit --mem-limit."""

from __future__ import annotations

from .helpers import TEST_MEM_LIMIT


def test_every_checked_row_records_its_memory_guard_and_its_source(demo_rows):
    checked = [r for r in demo_rows.values() if r["dedup_of"] is None]
    assert checked
    for row in checked:
        assert row["mem_limit_mb"] == TEST_MEM_LIMIT / 2**20, row["problem_id"]
        assert row["mem_source"] == "--mem-limit", row["problem_id"]
        if row["peak_rss_mb"] is not None and row["verdict"] != "MEMOUT":
            assert row["peak_rss_mb"] <= row["mem_limit_mb"], row["problem_id"]
