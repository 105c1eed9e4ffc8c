"""ERROR rows can be checked again (issue 46, defect 2).

On the README's s2n-bignum path every problem of bignum_mul_p521.ml was
ERROR: its setup reads ``arm/p521/unopt/bignum_mul_p521_base.o``, which
``make -C arm`` does not build. After ``make unopt`` the same command
resumed with "29 of 29 checks already recorded" and the ERRORs stayed.
Now (a) the object files a setup reads are part of what a problem's hash
covers, so a rebuilt object gets its problems checked again as a changed
setup does; (b) ``run --recheck VERDICT[,VERDICT]`` checks again the
recorded checks with those verdicts (the environment is no part of the
hash), says how many, and keeps the old rows as history.

The sweeps run in the real HOL Light (the shared session); the hashes are
computed without booting it.
"""

from __future__ import annotations

import dataclasses

import pyarrow.parquet as pq
import pytest

from runner import cli
from runner.checks import attempts
from runner.planning.sweep_config import SweepConfig
from runner.results.done import Done
from runner.sweep import prepare

from .helpers import DEMO, SPIN, TEST_MEM_LIMIT, make_corpus, row

# The shape of s2n-bignum's readers (arm/proofs/decode.ml): an OCaml
# function whose name says it reads an ELF object, given the object's path
# relative to the context root, where checks run. Reading a missing one
# raises Sys_error while the context loads.
READER = ("let load_elf_size file =\n"
          "  let ic = open_in_bin file in let n = in_channel_length ic in close_in ic; n;;\n")


def _corpus(root, lib: str):
    return make_corpus(root / "corpus", {
        "obj.reads": (READER + f'let x_mc = load_elf_size "{lib}/x.o";;\n', "`T`\n",
                      "ACCEPT_TAC TRUTH\n"),
        "obj.plain": ("let y = 1;;\n", "`T`\n", "ACCEPT_TAC TRUTH\n")})


def _config(corpus, out, **kw) -> SweepConfig:
    return SweepConfig(corpus=corpus, out=out, context_root=DEMO, workers=1,
                       mem_limit=TEST_MEM_LIMIT, **{"default_timeout": 30, **kw})


def _sweep(session, config, notes):
    from cluster.local import LocalExecutor
    from runner.sweep import run_sweep

    return run_sweep(prepare(config), LocalExecutor(workers=1, session=session),
                     on_note=notes.append)


def _verdicts(out) -> dict[str, str]:
    table = pq.read_table(out / "results.parquet", columns=["problem_id", "verdict"])
    return dict(zip(table["problem_id"].to_pylist(), table["verdict"].to_pylist()))


def test_a_problem_s_hash_covers_the_object_files_its_setup_reads(tmp_path):
    """Without a prover: what prepare hashes into each task."""
    ctx = tmp_path / "ctx"
    (ctx / "lib").mkdir(parents=True)
    (ctx / "lib" / "reader.ml").write_text(
        'let x_mc = define_assert_from_elf "x_mc" "obj/x.o";;\n')
    corpus = make_corpus(tmp_path / "corpus", {
        "p.direct": ('let a_mc = define_from_elf "a_mc" "obj/a.o";;\n', "`T`\n", "ALL_TAC\n"),
        "p.loaded": ('needs "lib/reader.ml";;\n', "`T`\n", "ALL_TAC\n"),
        "p.none": ("let x = 1;;\n", "`T`\n", "ALL_TAC\n")})

    def hashes() -> dict[str, str]:
        prepared = prepare(SweepConfig(corpus=corpus, out=tmp_path / "out", context_root=ctx,
                                       mem_limit=TEST_MEM_LIMIT))
        return {t.problem.problem_id: t.problem_sha256 for t in prepared.tasks}

    before = hashes()
    (ctx / "obj").mkdir()
    (ctx / "obj" / "a.o").write_bytes(b"\x7fELF a")
    now = hashes()
    assert now["p.direct"] != before["p.direct"]
    assert (now["p.loaded"], now["p.none"]) == (before["p.loaded"], before["p.none"])
    (ctx / "obj" / "x.o").write_bytes(b"\x7fELF x")
    later = hashes()
    assert later["p.loaded"] != now["p.loaded"] and later["p.direct"] == now["p.direct"]


@pytest.mark.hol
def test_an_object_built_after_a_sweep_gets_its_problems_checked_again(hol_session, context_lib,
                                                                      tmp_path):
    folder, lib = context_lib
    corpus, out = _corpus(tmp_path, lib), tmp_path / "out"
    notes: list[str] = []
    first = _sweep(hol_session, _config(corpus, out), notes)
    assert first.ran_now == 2
    assert _verdicts(out) == {"obj.reads": "ERROR", "obj.plain": "OK"}
    (folder / "x.o").write_bytes(b"\x7fELF built")      # make unopt
    notes.clear()
    again = _sweep(hol_session, _config(corpus, out), notes)
    assert (again.ran_now, again.resumed) == (1, 1), notes
    assert any(n.startswith("1 problems changed since the last run") and "obj.reads" in n
               for n in notes), notes
    assert _verdicts(out) == {"obj.reads": "OK", "obj.plain": "OK"}


@pytest.mark.hol
def test_recheck_checks_the_rows_of_those_verdicts_again_and_keeps_them_as_history(hol_session,
                                                                                  tmp_path):
    """In the shared session a context that failed to load stays failed
    (a real rerun boots afresh: there `--recheck ERROR` after the fix gives
    OK), so the verdict rechecked here is a TIMEOUT, run again as it is."""
    corpus = make_corpus(tmp_path / "corpus", {
        "env.spins": ("", "`T`\n", SPIN + "\n"), "env.fine": ("", "`T`\n", "ACCEPT_TAC TRUTH\n")})
    out = tmp_path / "out"
    notes: list[str] = []
    _sweep(hol_session, _config(corpus, out, default_timeout=1), notes)
    assert _verdicts(out) == {"env.spins": "TIMEOUT", "env.fine": "OK"}
    first_run = _current(out)["env.spins"]
    # A plain resume checks nothing again: nothing of the problem changed.
    assert _sweep(hol_session, _config(corpus, out, default_timeout=1), notes).ran_now == 0
    notes.clear()
    again = _sweep(hol_session, _config(corpus, out, default_timeout=1, recheck=("TIMEOUT",)), notes)
    assert (again.ran_now, again.rechecked, again.resumed) == (1, 1, 1), notes
    assert "--recheck TIMEOUT: checking 1 recorded checks again (their rows stay as history)" in notes
    # The new row is current; the old one stays in the shards as history.
    assert _current(out)["env.spins"] != first_run
    history = [r["run_id"] for p in sorted((out / "shards").glob("*.parquet"))
               for r in pq.read_table(p, columns=["problem_id", "run_id"]).to_pylist()
               if r["problem_id"] == "env.spins"]
    assert sorted(history) == sorted([first_run, _current(out)["env.spins"]])
    # The next resume keeps it; a verdict no row has rechecks nothing, and says so.
    assert _sweep(hol_session, _config(corpus, out, default_timeout=1), notes).ran_now == 0
    notes.clear()
    none = _sweep(hol_session, _config(corpus, out, default_timeout=1, recheck=("ERROR", "MEMOUT")),
                  notes)
    assert none.ran_now == 0
    assert ("--recheck ERROR,MEMOUT: no recorded check of the selected problems has that verdict: "
            "none to check again") in notes


def _current(out) -> dict[str, str]:
    table = pq.read_table(out / "results.parquet", columns=["problem_id", "run_id"])
    return dict(zip(table["problem_id"].to_pylist(), table["run_id"].to_pylist()))


def test_a_rechecked_row_supersedes_the_row_it_rechecks_in_every_reader():
    """The row of a later run of the same answer is current (the earlier
    one history); within one run the first finished stays current."""
    old = dataclasses.replace(row("p", verdict="ERROR", finished=10), run_id="run1").as_dict()
    new = dataclasses.replace(row("p", verdict="OK", finished=50), run_id="run2").as_dict()
    twice = dataclasses.replace(row("p", verdict="FAIL", finished=60), run_id="run2").as_dict()
    assert Done.from_rows([old, new])[("p", 0)]["verdict"] == "OK"
    assert Done.from_rows([new, old, twice])[("p", 0)]["verdict"] == "OK"
    # A task marked to recheck the ERROR row is pending until a later row lands.
    done = Done.from_rows([old])
    cut = done.with_verdicts(["ERROR"], ["p"])
    assert list(cut) == [("p", 0)]
    assert len(done.since(cut)) == 0 and len(Done.from_rows([old, new]).since(cut)) == 1


def test_recheck_refuses_a_name_that_is_no_verdict_in_one_line(tmp_path, capsys):
    corpus = make_corpus(tmp_path / "corpus", {"p.a": ("", "`T`\n", "ACCEPT_TAC TRUTH\n")})
    code = cli.main(["run", str(corpus), "--out", str(tmp_path / "out"), "--recheck", "ERROR,ERRORS"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "--recheck: ERRORS is no verdict; give one or more of OK, FAIL, CHEATING, TIMEOUT, " \
           "MEMOUT, ERROR" in err
    assert not (tmp_path / "out").exists()


def test_status_s_resume_command_does_not_repeat_a_recheck():
    from runner.sweep_dir import resume_command

    manifest = {"corpus": "/c", "config": {"recheck": ["ERROR"], "workers": 1}}
    assert "--recheck" not in resume_command(manifest, "/out")
