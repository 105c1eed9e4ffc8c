"""Time limits from s2n-bignum-bench's timeout-map.json and timeouts.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.corpus import Problem
from runner.errors import InputError
from runner.maps.provenance import load
from runner.maps.timeouts import TimeLimit, TimeoutPolicy, load_category_timeouts, resolve_limits

from ..helpers import ADD, BENCH_MAP, EMONTREDC

KECCAK = "x86.sha3_keccak_f1600.WORD_NEG_EL_DEMORGAN"

BENCH_CATEGORIES = {"program_state": 600, "bit_vector": 600, "generic": 1200,
                    "functional_correctness_x86": 7200, "functional_correctness_arm": 7200}


def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


def problem(pid: str, category: str = "generic") -> Problem:
    d = Path("/corpus") / pid
    return Problem(pid, d, d / "setup.ml", d / "query.txt", category, None, "")


def assert_error(exc: InputError, where: Path | str, *fragments: str) -> None:
    """The error names the offending file, says what is wrong, and says what to do."""
    assert exc.where == str(where)
    for fragment in fragments:
        assert fragment in exc.problem, (fragment, exc.problem)
    assert exc.fix


# --- loading --------------------------------------------------------------

def load_timeout_map(path: Path) -> dict[str, float]:
    """A map's limits as a sweep reads them, through the one loader."""
    return load(path).limits()


def test_load_bench_timeout_map(tmp_path):
    limits = load_timeout_map(write(tmp_path / "timeout-map.json", BENCH_MAP))
    assert limits == {EMONTREDC: 10800.0, ADD: 120.0, "arm.not_in_this_sweep.LEMMA": 120.0}
    assert all(isinstance(v, float) for v in limits.values())


def test_prove_secs_is_optional_in_a_map(tmp_path):
    path = write(tmp_path / "m.json", [{"problem_id": ADD, "timeout_sec": 30.5}])
    assert load_timeout_map(path) == {ADD: 30.5}


def test_load_bench_category_timeouts(tmp_path):
    limits = load_category_timeouts(write(tmp_path / "timeouts.json", BENCH_CATEGORIES))
    assert limits["generic"] == 1200.0
    assert limits["functional_correctness_arm"] == 7200.0
    assert len(limits) == 5


@pytest.mark.parametrize("loader", [load_timeout_map, load_category_timeouts])
def test_missing_file(tmp_path, loader):
    with pytest.raises(InputError) as e:
        loader(tmp_path / "absent.json")
    assert_error(e.value, tmp_path / "absent.json", "does not exist")


@pytest.mark.parametrize("loader", [load_timeout_map, load_category_timeouts])
def test_invalid_json_gives_line_and_column(tmp_path, loader):
    path = write(tmp_path / "t.json", '{\n  "generic": 600,\n  "bit_vector" 600\n}\n')
    with pytest.raises(InputError) as e:
        loader(path)
    assert_error(e.value, path, "line 3 column 16")


@pytest.mark.parametrize("loader, data, expected", [
    (load_timeout_map, BENCH_CATEGORIES, "not a list"),
    (load_category_timeouts, BENCH_MAP, "not an object"),
    (load_category_timeouts, 600, "not an object"),
])
def test_wrong_top_level_type(tmp_path, loader, data, expected):
    path = write(tmp_path / "t.json", data)
    with pytest.raises(InputError) as e:
        loader(path)
    assert_error(e.value, path, expected)


@pytest.mark.parametrize("entry, fragments", [
    ({"prove_secs": 1.0, "timeout_sec": 120}, ["entry 1", "'problem_id'"]),
    ({"problem_id": KECCAK, "prove_secs": 1.0}, ["entry 1", "'timeout_sec'"]),
    ("not an object", ["entry 1", "not an object"]),
    ({"problem_id": 42, "timeout_sec": 120}, ["entry 1", "problem_id 42"]),
    ({"problem_id": KECCAK, "timeout_sec": 120, "prove_secs": "fast"}, ["prove_secs", "'fast'"]),
])
def test_map_entry_that_is_malformed(tmp_path, entry, fragments):
    path = write(tmp_path / "m.json", [BENCH_MAP[0], entry])
    with pytest.raises(InputError) as e:
        load_timeout_map(path)
    assert_error(e.value, path, *fragments)


# JSON text of timeouts that must be refused (Python's json accepts NaN and Infinity).
BAD_SECONDS = ['"120"', "0", "-5", "true", "null", "NaN", "Infinity", "-Infinity", "1e400"]


@pytest.mark.parametrize("raw", BAD_SECONDS)
def test_map_timeout_that_is_not_a_positive_finite_number(tmp_path, raw):
    path = write(tmp_path / "m.json", f'[{{"problem_id": "{ADD}", "timeout_sec": {raw}}}]')
    with pytest.raises(InputError) as e:
        load_timeout_map(path)
    assert_error(e.value, path, "entry 0", ADD, "timeout_sec")


@pytest.mark.parametrize("raw", BAD_SECONDS)
def test_category_timeout_that_is_not_a_positive_finite_number(tmp_path, raw):
    path = write(tmp_path / "t.json", f'{{"generic": 600, "bit_vector": {raw}}}')
    with pytest.raises(InputError) as e:
        load_category_timeouts(path)
    assert_error(e.value, path, "'bit_vector'")


def test_duplicate_problem_in_map_names_both_entries(tmp_path):
    path = write(tmp_path / "m.json", BENCH_MAP + [{"problem_id": ADD, "timeout_sec": 60}])
    with pytest.raises(InputError) as e:
        load_timeout_map(path)
    assert_error(e.value, path, ADD, "entry 1", "entry 3")


def test_duplicate_category_key(tmp_path):
    path = write(tmp_path / "t.json", '{"generic": 600, "generic": 1200}')
    with pytest.raises(InputError) as e:
        load_category_timeouts(path)
    assert_error(e.value, path, "'generic'", "twice")


# --- precedence: map > category > default ---------------------------------

@pytest.fixture
def policy(tmp_path) -> TimeoutPolicy:
    map_path = write(tmp_path / "timeout-map.json", BENCH_MAP)
    cat_path = write(tmp_path / "timeouts.json", BENCH_CATEGORIES)
    return TimeoutPolicy(load_timeout_map(map_path), load_category_timeouts(cat_path), 300.0,
                         map_path, cat_path)


def test_map_wins_over_category_and_category_over_default(policy):
    problems = [problem(EMONTREDC, "functional_correctness_arm"),  # in the map
                problem(KECCAK, "bit_vector")]                     # only its category
    assert resolve_limits(problems, policy) == {
        EMONTREDC: TimeLimit(10800.0, "map"),
        KECCAK: TimeLimit(600.0, "category"),
    }


def test_default_applies_without_category_timeouts(policy):
    no_categories = TimeoutPolicy(policy.by_problem, None, 300.0, policy.map_path, None)
    limits = resolve_limits([problem(ADD), problem(KECCAK, "bit_vector")], no_categories)
    assert limits == {ADD: TimeLimit(120.0, "map"), KECCAK: TimeLimit(300.0, "default")}


def test_default_only():
    only_default = TimeoutPolicy({}, None, 42.0, None, None)
    assert only_default.limit_for(ADD, "generic") == TimeLimit(42.0, "default")


def test_map_entries_outside_the_corpus_are_fine(policy):
    # The map names three problems; the sweep covers one of them.
    assert resolve_limits([problem(ADD)], policy) == {ADD: TimeLimit(120.0, "map")}


def test_unknown_category_is_an_error_when_category_timeouts_are_given(policy):
    problems = [problem(ADD, "made_up"), problem(KECCAK, "made_up")]
    # ADD has a map entry, so its category does not matter; KECCAK's does.
    with pytest.raises(InputError) as e:
        resolve_limits(problems, policy)
    assert_error(e.value, policy.category_path, "unknown category 'made_up'", KECCAK)
    assert f"{KECCAK}/category.txt" in e.value.fix


@pytest.mark.parametrize("default", [0, -1.0, float("nan"), float("inf"), "600", True])
def test_default_must_be_positive(default):
    with pytest.raises(InputError) as e:
        TimeoutPolicy({}, None, default)
    assert "default" in e.value.where


def test_policy_keeps_its_own_copy_of_the_limits():
    by_problem = {ADD: 120.0}
    policy = TimeoutPolicy(by_problem, None, 300.0)
    by_problem[ADD] = 1.0
    assert policy.limit_for(ADD, "generic") == TimeLimit(120.0, "map")
    with pytest.raises(TypeError):
        policy.by_problem[ADD] = 5.0
