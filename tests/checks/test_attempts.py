"""Many attempts per problem, checked on the real HOL Light.

The fixture examples/hol_light_demo_attempts/ gives five attempts to each
of seven demo problems, in all three input forms (answer.txt and
answer_<k>.txt files, answers.jsonl, and attempts.csv with the same
answers), mixing OK, FAIL, CHEATING, an ERROR and repeated answers; its
expected_verdicts.csv gives the verdict of every attempt and which earlier
attempt a repeat reuses. Every sweep here reuses the session's loaded HOL
Light through a thin wrapper that lists the checks it really ran, so that
"checked once" and "early stop saves checks" are counted, not assumed.
"""

from __future__ import annotations

import csv
from collections import defaultdict

import pytest

from cluster.slurm_worker import PullWorker
from runner import cli
from runner.checks import attempts
from runner.results import shards
from runner.results.done import read_shard
from runner.corpus import load_corpus
from runner.errors import InputError
from runner.reporting.status import read_status
from runner.sweep import prepare

from ..helpers import ATTEMPTS, attempts_config, DEMO, expected, first_ok, kept_by_early_stop, sweep_attempts


def rows_by_key(table) -> dict[tuple[str, int], dict]:
    return {(r["problem_id"], r["attempt"]): r for r in table.to_pylist()}


class Interrupt(KeyboardInterrupt):
    """Stands for Ctrl-C arriving in the middle of a problem's attempts."""


@pytest.fixture(scope="module")
def full(hol_session, tmp_path_factory):
    return sweep_attempts(hol_session, tmp_path_factory.mktemp("attempts") / "out")


@pytest.fixture(scope="module")
def early(hol_session, tmp_path_factory):
    """The fixture with --stop-on-first-ok: (summary, checks run, progress told)."""
    progress: dict = {}
    summary, checked = sweep_attempts(hol_session, tmp_path_factory.mktemp("early") / "out",
                                      stop_on_first_ok=True, progress=progress)
    return summary, checked, progress


# -- input -------------------------------------------------------------------------

def test_the_three_input_forms_give_the_same_attempts():
    def texts(problems):
        return {(p.problem_id, a.attempt): a.text.strip() for p in problems for a in p.attempts}

    from_dir = texts(load_corpus(DEMO, ATTEMPTS))
    from_csv = texts(load_corpus(DEMO, ATTEMPTS / "attempts.csv"))
    assert set(from_dir) == set(expected())
    assert from_dir == from_csv
    # The folder holds answer.txt (attempt 0), answer_<k>.txt and answers.jsonl.
    by_id = {p.problem_id: p for p in load_corpus(DEMO, ATTEMPTS)}
    assert by_id["arith.add_comm"].attempts[0].source.endswith("arith.add_comm/answer.txt")
    assert by_id["arith.false_claim"].attempts[4].source.endswith("answers.jsonl line 5")
    assert by_id["arith.add_comm"].answer == b"ARITH_TAC\n"     # the lowest attempt's


def test_tasks_mark_repeated_answers_and_stay_contiguous_in_attempt_order(tmp_path):
    prepared = prepare(attempts_config(tmp_path / "out"))
    keys = [(t.problem.problem_id, t.attempt) for t in prepared.tasks]
    assert sorted(keys) == sorted(expected())
    seen: list[str] = []
    for pid, k in keys:
        if not seen or seen[-1] != pid:
            assert pid not in seen, f"attempts of {pid} are split"
            seen.append(pid)
    assert all(keys[i][1] < keys[i + 1][1] for i in range(len(keys) - 1) if keys[i][0] == keys[i + 1][0])
    assert {(t.problem.problem_id, t.attempt): t.dedup_of for t in prepared.tasks} == \
        {key: dedup for key, (_, dedup) in expected().items()}
    # Whatever order a planner gives problems, contiguous() regroups attempts.
    scrambled = prepared.tasks[1::2] + prepared.tasks[0::2]
    regrouped = attempts.contiguous(scrambled)
    assert [t.problem.problem_id for t in attempts.problem_runs(regrouped)[0]] == \
        [scrambled[0].problem.problem_id] * 5


BAD_FOLDERS = {
    "answer_x.txt": ({"answer_x.txt": "ARITH_TAC"}, "attempt 'x' is not a whole number"),
    "answer_01.txt": ({"answer_01.txt": "ARITH_TAC"}, "without leading zeros"),
    "answer_0.txt": ({"answer.txt": "ARITH_TAC", "answer_0.txt": "MESON_TAC[]"},
                     "attempt 0 is also given by answer.txt"),
    "answers.jsonl": ({"answers.jsonl": '"ARITH_TAC"\n{"tactic": \n'}, "line 2 is not JSON"),
    "answers.jsonl ": ({"answers.jsonl": '"ARITH_TAC"\n42\n'}, "line 2 is a JSON int, not a string"),
    "answer_1.txt": ({"answers.jsonl": '"ARITH_TAC"\n', "answer_1.txt": "ARITH_TAC"},
                     "has both answers.jsonl and answer_1.txt"),
}


@pytest.mark.parametrize("name", list(BAD_FOLDERS))
def test_bad_attempt_files_are_one_line_exit_2_and_nothing_written(name, tmp_path, capsys):
    files, message = BAD_FOLDERS[name]
    folder = tmp_path / "answers" / "arith.add_comm"
    folder.mkdir(parents=True)
    for fname, text in files.items():
        (folder / fname).write_text(text)
    out = tmp_path / "out"
    assert cli.main(["run", str(DEMO), "--answers", str(tmp_path / "answers"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert str(folder) in err[0]
    assert not out.exists()


BAD_CSV = {
    "non-integer attempt": ("arith.add_comm,one,ARITH_TAC\n", "line 2: attempt 'one'"),
    "duplicate key": ("arith.add_comm,0,ARITH_TAC\narith.add_comm,0,MESON_TAC[]\n",
                      "problem arith.add_comm attempt 0 appears on line 2 and line 3"),
    "unknown problem": ("arith.gone,0,ARITH_TAC\n", "line 2: unknown problem id 'arith.gone'"),
}


@pytest.mark.parametrize("case", list(BAD_CSV))
def test_bad_attempt_csv_rows_are_one_line_exit_2(case, tmp_path, capsys):
    body, message = BAD_CSV[case]
    path = tmp_path / "attempts.csv"
    path.write_text("problem_id,attempt,answer\n" + body)
    assert cli.main(["run", str(DEMO), "--answers", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and str(path) in err[0], err
    assert not (tmp_path / "out").exists()


def test_an_unknown_problem_folder_of_attempts_is_refused(tmp_path):
    (tmp_path / "answers" / "arith.gone").mkdir(parents=True)
    (tmp_path / "answers" / "arith.gone" / "answers.jsonl").write_text('"ARITH_TAC"\n')
    with pytest.raises(InputError, match="unknown problem id arith.gone"):
        load_corpus(DEMO, tmp_path / "answers")


# -- running on HOL Light -------------------------------------------------------------

@pytest.mark.hol
def test_every_attempt_gets_its_expected_verdict(full):
    summary, _ = full
    rows = rows_by_key(summary.table)
    assert {key: (r["verdict"], r["dedup_of"]) for key, r in rows.items()} == expected()
    # Isolation holds between attempts forked from one image: attempts 0 and
    # 1 of isolation.redefine both define `triple`, and attempt 3 adds an axiom.
    assert rows["isolation.redefine", 1]["verdict"] == "OK"
    assert "Sys" in rows["logic.drinker", 4]["reason"]
    images = {r["image_key"] for key, r in rows.items() if key[0] == "isolation.redefine"}
    assert len(images) == 1


@pytest.mark.hol
def test_a_repeated_answer_is_checked_once_and_its_verdict_reused(full):
    summary, checked = full
    distinct = {(pid, text) for pid, text in checked}
    assert len(checked) == len(distinct), "an answer was checked twice"
    repeats = {key: dedup for key, (_, dedup) in expected().items() if dedup is not None}
    assert len(checked) == len(expected()) - len(repeats)
    rows = rows_by_key(summary.table)
    for (pid, k), original in repeats.items():
        row = rows[pid, k]
        assert row["exit_status"] == f"deduplicated: the check of attempt {original}"
        assert row["wall_secs"] == 0.0 and row["prove_secs"] is None
        assert (row["verdict"], row["reason"]) == (rows[pid, original]["verdict"],
                                                   rows[pid, original]["reason"])


@pytest.mark.hol
def test_one_worker_drains_each_problem_in_attempt_order(full):
    summary, _ = full
    by_problem = defaultdict(list)
    for r in summary.table.to_pylist():
        by_problem[r["problem_id"]].append(r)
    workers = set()
    for pid, rs in by_problem.items():
        assert len({r["worker"] for r in rs}) == 1, f"{pid}'s attempts ran on two workers"
        workers |= {r["worker"] for r in rs}
        starts = [r["started_at"] for r in sorted(rs, key=lambda r: r["attempt"])]
        assert starts == sorted(starts)
    assert len(workers) == 2, "both workers should have drained problems"


@pytest.mark.hol
def test_results_have_attempt_columns_and_verdicts_csv_one_line_per_problem(full):
    summary, _ = full
    with open(summary.out / "results.csv", newline="") as f:
        results = list(csv.DictReader(f))
    assert len(results) == len(expected())
    assert {(r["problem_id"], int(r["attempt"])): r["dedup_of"] for r in results} == \
        {key: "" if d is None else str(d) for key, (_, d) in expected().items()}
    with open(summary.out / "verdicts.csv", newline="") as f:
        verdicts = {r["Problem"]: r["Verdict"] for r in csv.DictReader(f)}
    by_problem = defaultdict(list)
    for (pid, k), (v, _) in sorted(expected().items()):
        by_problem[pid].append(v)
    # OK if any attempt is; else CHEATING if any cheated; else attempt 0's.
    want = {pid: "OK" if "OK" in vs else "CHEATING" if "CHEATING" in vs else vs[0]
            for pid, vs in by_problem.items()}
    assert verdicts == want
    assert want["arith.false_claim"] == "CHEATING" and want["lists.append_nil"] == "FAIL"


@pytest.mark.hol
def test_stop_on_first_ok_skips_the_rest_and_saves_the_expected_checks(early, full):
    summary, checked, _ = early
    exp, solved_at, kept = expected(), first_ok(expected()), kept_by_early_stop()
    rows = rows_by_key(summary.table)
    assert {key: (r["verdict"], r["dedup_of"]) for key, r in rows.items()} == kept
    skipped = attempts.read_skipped(summary.out)
    assert sorted(skipped) == sorted(set(exp) - set(kept)) and summary.skipped == len(skipped)
    assert all(v != "OK" or key[1] == solved_at[key[0]] for key, (v, _) in kept.items())
    # Checks really run: the kept attempts that are not repeats.
    assert len(checked) == sum(1 for _, dedup in kept.values() if dedup is None)
    assert len(checked) < len(full[1])
    assert summary.ran_now == len(kept)
    # Skipped attempts are not checks: no verdict is counted for them.
    assert sum(summary.counts.values()) == len(kept)


@pytest.mark.hol
def test_progress_and_status_count_skipped_attempts_as_settled(early):
    summary, _, told = early
    # The bar starts at every attempt and ends full: rows plus skips.
    assert told["start"] == (len(expected()), 0)
    assert told["rows"] == len(kept_by_early_stop())
    assert told["skipped"] == summary.skipped > 0
    assert told["rows"] + told["skipped"] == len(expected())
    # `proofbatch status` says the same from the sweep directory alone.
    status = read_status(summary.out)
    assert (status.total, status.done, status.skipped) == \
        (len(expected()), told["rows"], summary.skipped)
    # Nothing is left to run, so the plan has no work left either.
    assert status.eta_s == 0


@pytest.mark.hol
def test_a_requeued_slurm_task_reruns_neither_recorded_nor_skipped_attempts(early):
    """A Slurm array task filters its pool as the sweep does: a pool whose
    attempts are all recorded or skipped by early stop runs nothing, so
    starts no prover."""
    summary, _, _ = early
    prepared = prepare(attempts_config(summary.out, stop_on_first_ok=True))
    skipped = set(attempts.read_skipped(summary.out))
    share = [t for t in prepared.tasks if (t.problem.problem_id, t.attempt) in skipped]
    assert share and PullWorker(prepared.backend, share, None, summary.out, "requeued", 1)() == 0
    assert PullWorker(prepared.backend, prepared.tasks, None, summary.out, "requeued", 1)() == 0


@pytest.mark.hol
def test_interrupted_mid_attempts_resumes_exactly_once_reusing_recorded_originals(hol_session, tmp_path):
    out = tmp_path / "out"

    def interrupt(row):
        if (row.problem_id, row.attempt) == ("arith.false_claim", 0):
            raise Interrupt()

    with pytest.raises(KeyboardInterrupt):
        sweep_attempts(hol_session, out, workers=1, on_row=interrupt)
    first = shards.scan(out).done
    assert ("arith.false_claim", 0) in first and ("arith.false_claim", 2) not in first
    assert len(first) < len(expected())

    summary, checked = sweep_attempts(hol_session, out, workers=1)
    assert summary.resumed == len(first) and summary.ran_now == len(expected()) - len(first)
    # Attempts 2 and 4 repeat attempt 0, recorded by the interrupted run: reused, not checked.
    assert ("arith.false_claim", "ARITH_TAC") not in checked
    rows = rows_by_key(summary.table)
    assert {key: (r["verdict"], r["dedup_of"]) for key, r in rows.items()} == expected()
    assert rows["arith.false_claim", 2]["exit_status"].startswith("deduplicated")
    # Exactly once: no key in two shards.
    keys = [(r["problem_id"], r["attempt"]) for path in shards.scan(out).shards
            for r in read_shard(path).to_pylist()]
    assert len(keys) == len(set(keys)) == len(expected())


@pytest.mark.hol
def test_an_interrupted_early_stop_sweep_does_not_rerun_a_solved_problem(hol_session, tmp_path):
    out = tmp_path / "out"

    def interrupt(row):
        if (row.problem_id, row.attempt) == ("logic.drinker", 1):
            raise Interrupt()

    with pytest.raises(KeyboardInterrupt):
        sweep_attempts(hol_session, out, workers=1, stop_on_first_ok=True, on_row=interrupt)
    assert shards.scan(out).done["logic.drinker", 1]["verdict"] == "OK"
    summary, checked = sweep_attempts(hol_session, out, workers=1, stop_on_first_ok=True)
    assert not [c for c in checked if c[0] == "logic.drinker"]
    assert {("logic.drinker", k) for k in (2, 3, 4)} <= set(attempts.read_skipped(out))
    assert not [k for k in rows_by_key(summary.table) if k[0] == "logic.drinker" and k[1] > 1]


def test_run_takes_stop_on_first_ok_off_by_default():
    parser = cli.build_parser()
    base = ["run", str(DEMO), "--out", "/nonexistent/out", "--answers", str(ATTEMPTS)]
    assert parser.parse_args(base).stop_on_first_ok is False
    assert parser.parse_args(base + ["--stop-on-first-ok"]).stop_on_first_ok is True


def recorded_row():
    """One recorded row, to write as a shard of an older sweep."""
    import datetime as dt

    from runner.results.rows import ResultRow

    now = dt.datetime.now(dt.timezone.utc)
    return ResultRow(problem_id="arith.add_comm", attempt=0, category="arith", verdict="OK",
                     reason="proved", prove_secs=0.01, wall_secs=0.02, peak_rss_mb=None,
                     timeout_s=10.0, timeout_source="category", worker="w", host="h",
                     started_at=now, finished_at=now, image_key="k", prover_build="b", mode="m",
                     exit_status="exited 0", answer_sha256="0" * 64, run_id="old")


def test_shards_written_before_the_dedup_column_still_resume(tmp_path):
    """A sweep recorded before attempts existed has shards without dedup_of:
    they are read (the column is null), not quarantined and redone."""
    import pyarrow.parquet as pq

    from runner.results.rows import rows_to_table

    row = recorded_row()
    table = rows_to_table([row]).drop(["dedup_of"])
    (tmp_path / "shards").mkdir()
    pq.write_table(table, tmp_path / "shards" / "old-w0-000001.parquet")
    scan = shards.scan(tmp_path)
    assert not scan.quarantined
    assert scan.done["arith.add_comm", 0]["dedup_of"] is None


def test_shards_written_before_the_unwrapped_column_still_resume(tmp_path):
    import pyarrow.parquet as pq

    from runner.results.rows import rows_to_table

    row = recorded_row()
    (tmp_path / "shards").mkdir()
    pq.write_table(rows_to_table([row]).drop(["answer_unwrapped"]),
                   tmp_path / "shards" / "old-w0-000001.parquet")
    scan = shards.scan(tmp_path)
    assert not scan.quarantined
    assert scan.done["arith.add_comm", 0]["answer_unwrapped"] is None
    table = shards.merge(tmp_path)
    assert table.column("answer_unwrapped").to_pylist() == [None]
