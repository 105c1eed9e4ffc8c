"""The Slurm driver's watch for new rows (SlurmExecutor._new_rows): a driver
restarted on a sweep reads every shard its tasks left, older and damaged
ones included, and reports each check once, as a ResultRow. Needs no Slurm:
the watch reads the sweep directory only."""

from __future__ import annotations

from cluster import slurm as slurm_module
from cluster.slurm import SlurmExecutor
from runner.results import shard_reads
from runner.results.rows import ResultRow

from ..results.test_shard_reads import BAD, mixed_shards


def test_a_restarted_driver_reads_older_shards_as_rows_of_today(tmp_path):
    paths = mixed_shards(tmp_path, modern=5)
    readable = [p for p in paths if p.name not in BAD]
    executor = SlurmExecutor()
    wanted = {("p000", 0): "ab" * 32, ("old", 0): "ab" * 32, ("renamed", 0): "ab" * 32}
    rows = executor._new_rows(tmp_path, wanted)
    # The renamed column's shard (hol_build, before prover_build) made
    # ResultRow(**row) raise TypeError when the watch read shards raw.
    got = {r["problem_id"]: ResultRow(**r) for r in rows}
    assert set(got) == {"p000", "old", "renamed"}
    assert got["renamed"].prover_build == "1.0" and got["old"].verdict == "FAIL"
    assert executor._solved == {"p000", "renamed"}
    # Each shard read is seen; the damaged ones are tried again next time,
    # and nothing is reported twice.
    assert executor._seen_shards == set(readable)
    assert executor._new_rows(tmp_path, wanted) == []


def test_the_watch_reads_new_shards_together_never_one_by_one(tmp_path, monkeypatch):
    mixed_shards(tmp_path, modern=40)
    calls = []
    real = shard_reads.read_shards

    def counting(paths, *args, **kwargs):
        calls.append(len(paths))
        return real(paths, *args, **kwargs)

    monkeypatch.setattr(slurm_module, "read_shards", counting)
    SlurmExecutor()._new_rows(tmp_path, {})
    assert calls == [45]
