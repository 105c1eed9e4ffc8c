"""Shared fixtures. HOL Light is loaded once per test session: the base image
and every context image built here are reused by all tests that check
proofs, as a sweep reuses them across checks."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from runner.hol_light import HolLightBackend
from runner.hol_light_install import find_hol_light
from runner.sweep import SweepConfig, prepare, run_sweep

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "hol_light_demo"
TEST_MEM_LIMIT = 2 * 2**30


def expected_verdicts() -> dict[str, str]:
    with open(DEMO / "expected_verdicts.csv", newline="") as f:
        return {row["Problem"]: row["Verdict"] for row in csv.DictReader(f)}


@pytest.fixture(scope="session")
def hol_backend() -> HolLightBackend:
    return HolLightBackend(find_hol_light(), context_root=DEMO)


@pytest.fixture(scope="session")
def hol_session(hol_backend, tmp_path_factory):
    session = hol_backend.start(tmp_path_factory.mktemp("hol-session"))
    yield session
    session.close()


def demo_config(out: Path, **overrides) -> SweepConfig:
    settings = dict(corpus=DEMO, out=out, category_timeouts=DEMO / "timeouts.json",
                    workers=2, mem_limit=TEST_MEM_LIMIT, context_root=DEMO)
    settings.update(overrides)
    return SweepConfig(**settings)


def sweep_with(session, config: SweepConfig):
    """Run a sweep on the local executor, reusing the shared session."""
    from cluster.local import LocalExecutor

    return run_sweep(prepare(config), LocalExecutor(workers=config.workers, session=session))


@pytest.fixture(scope="session")
def demo_sweep(hol_session, tmp_path_factory):
    """The whole example corpus, swept once with two workers."""
    return sweep_with(hol_session, demo_config(tmp_path_factory.mktemp("demo") / "out"))


@pytest.fixture(scope="session")
def demo_rows(demo_sweep) -> dict[str, dict]:
    return {row["problem_id"]: row for row in demo_sweep.table.to_pylist()}


@pytest.fixture(scope="session")
def native_build(tmp_path_factory):
    """HOL Light compiled natively (runner/native_build.py), from scratch,
    once per test session, into a cache under the session's tmp directory.
    PROOFBATCH_CACHE points there, so sweeps run with mode native find it."""
    import os

    from runner.native_build import build_native

    cache = tmp_path_factory.mktemp("proofbatch-cache")
    os.environ["PROOFBATCH_CACHE"] = str(cache)
    return build_native(find_hol_light(), cache / "native")
