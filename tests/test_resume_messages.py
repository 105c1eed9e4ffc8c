"""What a refused resume and a scaled map say (issue 46): the flag whose
change moved the limits, with the value the sweep ran with, and a host
factor shown with the digits that tell it from 1. The toy prover
(tests/toy_prover) runs the checks: these are messages, not proofs."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest


from .cli.test_clocks import run, toy  # noqa: F401  (toy: the toy prover registered, a fixture)
from .test_registry import toy_corpus


def limits(out) -> list[float]:
    return [r["timeout_s"] for r in pq.read_table(out / "results.parquet").to_pylist()]


@pytest.fixture
def sweep(toy, tmp_path):
    """A toy corpus of one problem and a map giving it 30 s."""
    corpus = toy_corpus(tmp_path / "corpus", {"quick": ("6 * 7", "42", "OK")})
    bench_map = tmp_path / "map.json"
    bench_map.write_text(json.dumps([{"problem_id": "quick", "prove_secs": 1.0, "timeout_sec": 30}]))
    return corpus, bench_map, tmp_path / "out"


def test_a_resume_under_another_host_factor_names_it_and_its_recorded_value(capsys, sweep):
    corpus, bench_map, out = sweep
    given = ("run", corpus, "--out", out, "--timeout-map", bench_map)
    assert run(capsys, *given, "--host-factor", "1.5")[0] == 0
    assert limits(out) == [45.0]
    for now, said in ((("--host-factor", "2"), "2"), (("--host-factor", "1"), "1")):
        code, text = run(capsys, *given, *now)
        assert code == 2, text
        assert f"this sweep was run with --host-factor 1.5, not {said}:" in text, text
        assert "pass --host-factor 1.5" in text and "--default-timeout" not in text, text
    # As it says: the same factor resumes.
    assert run(capsys, *given, "--host-factor", "1.5")[0] == 0
    # Issue 47: a map without a sidecar was measured elsewhere, so no
    # --host-factor is auto, which keeps the factor the sweep recorded
    # (before, no flag meant 1 and was refused here).
    assert run(capsys, *given)[0] == 0
    assert limits(out) == [45.0]


def test_a_resume_under_another_slack_names_it_and_its_recorded_value(capsys, sweep):
    corpus, bench_map, out = sweep
    given = ("run", corpus, "--out", out, "--timeout-map", bench_map)
    assert run(capsys, *given, "--limit-slack", "30")[0] == 0
    assert limits(out) == [60.0]
    code, text = run(capsys, *given, "--limit-slack", "10")
    assert code == 2, text
    assert "this sweep was run with --limit-slack 30, not 10:" in text, text
    assert "pass --limit-slack 30" in text and "--timeout-map, --category-timeouts" not in text, text


def test_a_host_factor_barely_above_1_is_shown_and_adds_no_second(capsys, sweep):
    """`--host-factor 1.0000001` read "host factor 1" and x1.00, and made a
    30 s limit 31 s (the ceiling of 30.000003)."""
    corpus, bench_map, out = sweep
    code, text = run(capsys, "run", corpus, "--out", out, "--timeout-map", bench_map,
                     "--host-factor", "1.0000001")
    assert code == 0, text
    assert "host factor 1.0000001 (given): the map's limits x1.0000001" in text, text
    assert limits(out) == [30.0]
    # A factor that moves a limit by a millisecond or more still rounds it up.
    code, text = run(capsys, "run", corpus, "--out", out.with_name("more"), "--timeout-map",
                     bench_map, "--host-factor", "1.001")
    assert code == 0 and "x1.001" in text, text
    assert limits(out.with_name("more")) == [31.0]


def test_every_row_records_the_host_factor_its_limits_were_scaled_by(capsys, sweep):
    """Issue 47: a check's row says which factor its limit carries, so rows
    of nodes of different speed can be told apart."""
    corpus, bench_map, out = sweep
    assert run(capsys, "run", corpus, "--out", out, "--timeout-map", bench_map,
               "--host-factor", "1.5")[0] == 0
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert [(r["host_factor"], r["timeout_s"]) for r in rows] == [(1.5, 45.0)]
    plain = out.parent / "plain"
    assert run(capsys, "run", corpus, "--out", plain, "--default-timeout", "30")[0] == 0
    assert [r["host_factor"] for r in pq.read_table(plain / "results.parquet").to_pylist()] == [None]
