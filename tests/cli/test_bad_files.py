"""Bad input that was once accepted without a word, refused in words that
misled, or met with a traceback; now each gets one line and exit code 2.
Issue 24: a query without backquotes, a sub-millisecond timeout, a map's
negative or infinite times, an answer.txt that is a folder, hidden problem
folders, a report written to a folder. Issue 33, points 5 and 6: sizes that
ran away (a billion simulated workers took 258 s and 21 GB before the
kernel killed it), a 1 KiB Slurm node, a NaN price, and profile, summary
and sweep.json files spoilt by hand or written over. The rest of the
catalogue of bad input is in tests/cli/test_bad_inputs.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ..helpers import ADD, FAST_S, ROOT, assert_one_line_error, snapshot
from .test_bad_inputs import cli_result


# -- issue 24: inputs accepted without a word, or refused in words that misled ---

def test_a_query_without_backquotes_names_the_query_file(run, corpus, hol):
    """Accepted, the text was checked as an OCaml term: FAIL "Too deep"."""
    query = corpus / ADD / "query.txt"
    query.write_text("1 + 1 = 2\n")
    result = run(corpus, "--hol-light", hol)
    assert_one_line_error(result, query, f"query of problem {ADD} is not a backquoted HOL term "
                          "(it reads '1 + 1 = 2')", "; write the goal between backquotes")


def test_a_default_timeout_below_a_millisecond(run, corpus, hol):
    result = run(corpus, "--default-timeout=0.0001", "--hol-light", hol)
    assert_one_line_error(result, "default timeout", "0.0001 seconds is below a millisecond",
                          "; give seconds, e.g. 600")


@pytest.mark.parametrize("prove_secs", [-3.5, 1e400])
def test_a_map_with_a_negative_or_infinite_prove_secs(run, corpus, hol, tmp_path, prove_secs):
    """Accepted, simulate planned with it (47.9% utilization of nothing)."""
    timeout_map = tmp_path / "timeout-map.json"
    timeout_map.write_text(json.dumps([{"problem_id": ADD, "prove_secs": prove_secs,
                                        "timeout_sec": 120}]).replace("Infinity", "1e400"))
    result = run(corpus, "--timeout-map", timeout_map, "--map-mode", "native", "--hol-light", hol)
    shown = "-3.5" if prove_secs < 0 else "inf"
    assert_one_line_error(result, timeout_map, f"entry 0 ({ADD}): prove_secs {shown} is not a "
                          "measured time", "; write the measured proof time in seconds (0 or more)")


def test_simulate_refuses_a_map_with_a_negative_prove_secs(capsys, tmp_path):
    timeout_map = tmp_path / "timeout-map.json"
    timeout_map.write_text(json.dumps([{"problem_id": ADD, "prove_secs": -3.5, "timeout_sec": 120}]))
    result = cli_result(capsys, "simulate", "--timeout-map", timeout_map, "--map-mode", "native",
                        "--workers", "4")
    assert_one_line_error(result, timeout_map, f"entry 0 ({ADD}): prove_secs -3.5 is not a measured "
                          "time", "; write the measured proof time")


def test_an_answer_txt_that_is_a_folder(run, corpus, hol):
    """It was read as no answer: ERROR "no answer given"."""
    answer = corpus / ADD / "answer.txt"
    answer.unlink()
    answer.mkdir()
    result = run(corpus, "--hol-light", hol)
    assert_one_line_error(result, answer, "is a folder, not a file, so it gives no answer",
                          "; put the answer's text in a file named answer.txt")


def test_a_corpus_of_hidden_problem_folders_says_they_are_skipped(run, hol, tmp_path):
    from ..helpers import make_problem

    corpus = tmp_path / "hidden-corpus"
    make_problem(corpus, ".p2")
    (corpus / ".git").mkdir()          # not a problem: not counted
    result = run(corpus, "--hol-light", hol)
    assert_one_line_error(result, corpus, "corpus has no problems (no problem folders; 1 hidden "
                          "folder that looks like a problem is skipped (.p2))", "; pass the folder")


def test_report_html_to_a_folder_names_the_folder(capsys, tmp_path):
    """It named the page's temp file (.DIR.<pid>.tmp: Is a directory), after the whole report."""
    import datetime as dt

    from runner.results import shards
    from runner.results.rows import ResultRow

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps({"config": {"workers": 1}}))
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    with shards.ShardWriter(sweep, "w0") as writer:
        writer.add(ResultRow(
            problem_id=ADD, attempt=0, category="generic", verdict="OK", reason="proved",
            prove_secs=0.1, wall_secs=0.2, peak_rss_mb=None, timeout_s=60.0,
            timeout_source="default", worker="h/1/w0", host="h", started_at=now, finished_at=now,
            image_key="k", prover_build="b", mode="bytecode", exit_status="exit 0",
            answer_sha256="", run_id="r"))
    folder = tmp_path / "pages"
    folder.mkdir()
    result = cli_result(capsys, "report", sweep, "--html", folder)
    assert_one_line_error(result, folder, "is a folder, not an HTML file",
                          f"; pass the path of the page to write, e.g. {folder / 'report.html'}")
    assert list(folder.iterdir()) == []


# -- issue 33, points 5 and 6: sizes that ran away, files that gave a traceback ------

DEMO_MAP = ROOT / "timeout_maps" / "hol_light_demo.json"


@pytest.fixture
def no_dispatch(monkeypatch):
    """Fail at once where a refusal should have come first: simulating a
    billion workers took 258 s and 21 GB before the kernel killed it."""
    def refuse(self, plan):
        raise AssertionError(f"dispatched {plan.workers} instead of refusing")

    monkeypatch.setattr("runner.planning.dispatch.Dispatcher.__init__", refuse)


@pytest.mark.parametrize("flags, where, fragments", [
    (["--workers", "1000000000"], "--workers",
     ["1,000,000,000 is more than simulate models (1,000,000 workers at most)", "; pass 1000000"]),
    (["--nodes", "1000000000", "--cores-per-node", "1"], "--nodes",
     ["1,000,000,000 is more than simulate models (1,000 nodes at most)", "; pass 1000 or fewer"]),
    (["--nodes", "1000", "--cores-per-node", "2000"], "--cores-per-node",
     ["2,000,000 workers (1,000 nodes x 2,000 cores) are more than simulate models", "; pass"]),
    (["--workers", "8", "--mem-per-node", "1K"], "--mem-per-node",
     ["1 KiB per node cannot hold a prover session and a check", "; give 1G or more"]),
    (["--workers", "8", "--mem-per-node", "1P"], "--mem-per-node",
     ["1 PiB per node is more than any one machine has", "; give one node's memory"]),
    (["--workers", "8", "--core-hour-price", "nan"], "--core-hour-price",
     ["nan is not a price (a finite number, 0 or more)", "; pass the price of one core-hour"]),
    (["--workers", "8", "--core-hour-price", "inf"], "--core-hour-price", ["inf is not a price"]),
    (["--workers", "8", "--core-hour-price", "-1"], "--core-hour-price", ["-1 is not a price"]),
], ids=["billion-workers", "billion-nodes", "nodes-x-cores", "mem-1K", "mem-1P", "price-nan",
        "price-inf", "price-negative"])
def test_simulate_refuses_absurd_sizes_and_prices(capsys, no_dispatch, flags, where, fragments):
    started = time.monotonic()
    result = cli_result(capsys, "simulate", "--timeout-map", DEMO_MAP, *flags)
    assert time.monotonic() - started < FAST_S
    assert_one_line_error(result, where, *fragments)


def test_simulate_still_models_a_million_workers(capsys):
    """The bounds are where simulating stops being seconds, not below."""
    code, stdout, err = cli_result(capsys, "simulate", "--timeout-map", DEMO_MAP, "--nodes", "1000",
                                   "--cores-per-node", "1000", "--json")
    assert (code, err) == (0, [])
    assert json.loads(stdout)["workers"] == 1_000_000


def test_a_slurm_node_of_one_kib_is_refused(capsys, corpus, hol, tmp_path, tripwire):
    """Slurm reads --mem=0M as all of a node's memory."""
    result = cli_result(capsys, "run", corpus, "--out", tmp_path / "out", "--hol-light", hol,
                        "--cluster", "slurm", "--mem-per-node", "1K")
    assert_one_line_error(result, "--mem-per-node", "1 KiB per node cannot hold a prover session")
    assert not (tmp_path / "out").exists()
    assert not tripwire.exists()


def test_report_refuses_a_nan_price(capsys, tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text("{}")
    result = cli_result(capsys, "report", sweep, "--core-hour-price", "nan")
    assert_one_line_error(result, "--core-hour-price", "nan is not a price")


@pytest.fixture
def profile(tmp_path) -> Path:
    """The demo profile's two records, to spoil."""
    copy = tmp_path / "profile"
    copy.mkdir()
    for name in ("profile.json", "summary.json"):
        (copy / name).write_bytes((ROOT / "profiles" / "hol_light_demo" / name).read_bytes())
    return copy


def spoil_summary(profile: Path, how) -> Path:
    path = profile / "summary.json"
    summary = json.loads(path.read_text())
    how(summary)
    path.write_text(json.dumps(summary))          # NaN and Infinity as Python's json writes them
    return path


def _set_first(field, value):
    def how(summary):
        summary["problems"][0][field][0] = value
    return how


@pytest.mark.parametrize("how, fragments", [
    (_set_first("prove_secs", float("nan")),
     ["entry 0 (arith.add_comm): prove_secs[0] is nan, not a measurement", "; profile again"]),
    (_set_first("prove_secs", -1.5),
     ["entry 0 (arith.add_comm): prove_secs[0] is -1.5, not a measurement (a finite number of "
      "seconds, 0 or more)"]),
    (_set_first("wall_secs", float("inf")), ["entry 0 (arith.add_comm): wall_secs[0] is inf"]),
    (_set_first("peak_rss_mb", "320"), ["entry 0 (arith.add_comm): peak_rss_mb[0] is '320'"]),
    (lambda s: s["problems"][0].pop("prove_secs"), ["entry 0 (arith.add_comm) has no prove_secs"]),
    (lambda s: s["problems"][1].update(prove_secs=[]), ["entry 1 (arith.linear_bound): prove_secs "
                                                         "is empty"]),
    (lambda s: s["problems"][0].update(prove_cpu_secs=[0.1, None, 0.2]),
     ["entry 0 (arith.add_comm): prove_cpu_secs[1] is None"]),
    (lambda s: s["problems"][0].update(cpu_secs=[0.1, -2.0, None]),
     ["entry 0 (arith.add_comm): cpu_secs[1] is -2.0"]),
    (lambda s: s["problems"].append(s["problems"][0]),
     ["problem id arith.add_comm appears in entry 0 and entry 26", "; keep one entry per problem"]),
    (lambda s: s["problems"].__setitem__(2, ["not", "an", "entry"]), ["entry 2 is ['not', 'an'"]),
    (lambda s: s.update(problems={}), ["its problems is {}, not a list"]),
    (lambda s: s["defects"].append({"problem_id": "x"}), ["defect 6 has no verdict"]),
], ids=["nan", "negative", "inf-wall", "text-rss", "missing-field", "no-runs", "cpu-null",
        "cpu-negative", "duplicate-id", "entry-not-object", "problems-not-list", "defect-short"])
@pytest.mark.parametrize("command", ["timeout-map", "simulate"])
def test_a_spoilt_profile_summary(capsys, tmp_path, no_dispatch, profile, how, fragments, command):
    """timeout-map gave ValueError (NaN), KeyError: 'prove_secs' (a missing
    field), and wrote negative times and duplicated ids into a map that run
    then refused; simulate --profile gave the KeyError too."""
    path = spoil_summary(profile, how)
    out_map = tmp_path / "map.json"
    argv = (["timeout-map", profile, "--out", out_map] if command == "timeout-map"
            else ["simulate", "--profile", profile, "--workers", "4"])
    assert_one_line_error(cli_result(capsys, *argv), path, *fragments)
    assert not out_map.exists()


def test_a_map_written_into_its_profile_is_refused(capsys, profile):
    """It overwrote summary.json, and the next timeout-map said AttributeError."""
    before = snapshot(profile)
    for target in (profile / "summary.json", profile / "maps" / "demo.json"):
        result = cli_result(capsys, "timeout-map", profile, "--out", target)
        assert_one_line_error(result, target, f"is inside the profile {profile}, which timeout-map "
                              "reads and never writes", "; pass a map path outside it")
    assert snapshot(profile) == before


@pytest.mark.parametrize("record", ["summary.json", "profile.json"])
def test_a_profile_whose_record_a_map_was_written_over(capsys, tmp_path, profile, record):
    (profile / record).write_text(DEMO_MAP.read_text())
    result = cli_result(capsys, "timeout-map", profile, "--out", tmp_path / "map.json")
    what = "profile summary" if record == "summary.json" else "profile's provenance"
    assert_one_line_error(result, profile / record, f"is not a {what} (a JSON list, not an object; "
                          "a timeout map written over it?)", "; profile again into a new --out")


@pytest.mark.parametrize("manifest, complaint", [
    ("[]", "is not a sweep manifest (a JSON list, not an object)"),
    ('"sweep"', "is not a sweep manifest (a JSON str, not an object)"),
    ('{"config": []}', "its config is [], not a JSON object"),
    ('{"checks": "many"}', 'its checks is "many", not a JSON whole number'),
    ("{", "unreadable sweep manifest (Expecting property name"),
])
@pytest.mark.parametrize("command", ["status", "report"])
def test_status_and_report_on_a_spoilt_sweep_json(capsys, tmp_path, manifest, complaint, command):
    """A sweep.json of [] gave AttributeError: 'list' object has no attribute 'get'."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(manifest)
    result = cli_result(capsys, command, sweep)
    assert_one_line_error(result, sweep / "sweep.json", complaint,
                          "; restore it from a backup, or run the sweep again into a new --out")
