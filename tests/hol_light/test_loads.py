"""Issue 33 in the real HOL Light, on the shared session (context root: the
demo corpus).

Point 7: a file a context loads that fails is the context's ERROR, naming
the file and its first error; a load outside the context root is refused as
such; a setup that loads itself is refused. Point 1: a resume checks again a
problem whose query, setup or loaded file changed. Point 2: the provers get
a TMPDIR of their session's own, and the driver's temporary file falls back
when it is gone.

Files a context loads must sit under the context root: they go in a hidden
folder of the demo corpus (conftest's context_lib), removed after.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runner.verdicts import Verdict

from ..helpers import DEMO, check, demo_config, problem, sweep_with


@pytest.fixture(scope="module")
def lib(context_lib):
    """A folder under the context root, named relative to it: (path, name)."""
    folder, name = context_lib
    (folder / "loads").mkdir(exist_ok=True)
    return folder / "loads", f"{name}/loads"


def verdict(session, p):
    result = check(session, p)
    return result.outcome.verdict, result.outcome.reason


# -- point 7: loads that fail, and loads outside the root -----------------------

def test_a_load_outside_the_context_root_is_refused(hol_session, tmp_path):
    v, why = verdict(hol_session, problem(tmp_path, "load.passwd", "T", "ACCEPT_TAC TRUTH",
                                          setup='needs "../../../../../../../../etc/passwd";;\n'))
    assert v is Verdict.ERROR and why.startswith("setup: "), why
    assert "is refused" in why and "/etc/passwd is outside the context root" in why, why
    v, why = verdict(hol_session, problem(tmp_path, "load.shadow", "T", "ACCEPT_TAC TRUTH",
                                          setup='loadt "/etc/shadow";;\n'))
    assert v is Verdict.ERROR and 'loadt "/etc/shadow" is refused' in why, why


def test_a_setup_that_loads_itself_is_refused(hol_session, lib):
    folder, name = lib
    p = problem(folder, "p.self", "T", "ACCEPT_TAC TRUTH", setup=f'loadt "{name}/p.self/setup.ml";;\n')
    v, why = verdict(hol_session, p)
    assert v is Verdict.ERROR and "loads itself" in why, why


def test_a_load_with_a_parse_error_is_the_contexts_error_naming_the_file(hol_session, lib, tmp_path):
    folder, name = lib
    (folder / "lib_bad.ml").write_text("let MY_LEMMA = prove(`T`, REWRITE_TAC[]);;\nlet x = (1 + ;;\n")
    p = problem(tmp_path, "load.bad", "T", "ACCEPT_TAC MY_LEMMA", setup=f'needs "{name}/lib_bad.ml";;\n')
    v, why = verdict(hol_session, p)
    assert v is Verdict.ERROR, why
    assert why.startswith(f'setup: needs "{name}/lib_bad.ml" ('), why
    assert "did not load" in why and "line 2" in why and "Unbound value MY_LEMMA" not in why, why


def test_a_nested_load_with_a_type_error_names_the_innermost_file(hol_session, lib, tmp_path):
    folder, name = lib
    (folder / "inner_bad.ml").write_text("let y = no_such_value_here + 1;;\n")
    (folder / "outer.ml").write_text(f'needs "{name}/inner_bad.ml";;\nlet z = 1;;\n')
    p = problem(tmp_path, "load.nested", "T", "ACCEPT_TAC TRUTH", setup=f'loadt "{name}/outer.ml";;\n')
    v, why = verdict(hol_session, p)
    assert v is Verdict.ERROR and f'needs "{name}/inner_bad.ml"' in why, why
    assert "Unbound value no_such_value_here" in why, why


def test_good_loads_still_load(hol_session, lib, tmp_path):
    folder, name = lib
    (folder / "good_inner.ml").write_text("let PB_GOOD = new_definition `pb_good n = n + 1`;;\n")
    (folder / "good.ml").write_text(f'needs "{name}/good_inner.ml";;\nneeds "{name}/good_inner.ml";;\n')
    p = problem(tmp_path, "load.good", "!n. pb_good n = n + 1", "REWRITE_TAC[PB_GOOD]",
                setup=f'needs "{name}/good.ml";;\n')
    v, why = verdict(hol_session, p)
    assert v is Verdict.OK, why


# -- point 1: a resume checks changed problems again ----------------------------

def test_a_resume_checks_changed_queries_setups_and_loaded_files_again(hol_session, lib, tmp_path):
    folder, name = lib
    (folder / "lemma.ml").write_text("let PB_LEMMA = new_definition `pb_lemma n = n + 2`;;\n")
    corpus = tmp_path / "corpus"
    for pid in ("arith.add_comm", "lists.append_nil", "logic.drinker"):
        shutil.copytree(DEMO / pid, corpus / pid)
    p = corpus / "p.uses_lemma"
    p.mkdir()
    (p / "setup.ml").write_text(f'needs "{name}/lemma.ml";;\n')
    (p / "query.txt").write_text("`!n. pb_lemma n = n + 2`\n")
    (p / "answer.txt").write_text("REWRITE_TAC[PB_LEMMA]\n")
    config = demo_config(tmp_path / "out", corpus=corpus, category_timeouts=None, default_timeout=60.0)
    first = sweep_with(hol_session, config)
    assert dict(first.counts) == {"OK": 4}, first.counts

    (corpus / "arith.add_comm" / "query.txt").write_text("`!m n. m + n = n + m + 1`\n")
    (corpus / "lists.append_nil" / "setup.ml").write_text("let oops = (1 + ;;\n")
    (folder / "lemma.ml").write_text("let PB_LEMMA_RENAMED = new_definition `pb_lemma n = n + 2`;;\n")
    notes: list[str] = []
    from cluster.local import LocalExecutor
    from runner.sweep import prepare, run_sweep

    again = run_sweep(prepare(config), LocalExecutor(workers=2, session=hol_session), on_note=notes.append)
    rows = {r["problem_id"]: r for r in again.table.to_pylist()}
    assert again.ran_now == 3, (again.ran_now, notes)
    assert rows["arith.add_comm"]["verdict"] == "FAIL"
    assert rows["lists.append_nil"]["verdict"] == "ERROR"
    assert rows["p.uses_lemma"]["verdict"] == "ERROR" and "PB_LEMMA" in rows["p.uses_lemma"]["reason"]
    assert rows["logic.drinker"]["verdict"] == "OK"
    assert any(n.startswith("3 problems changed since the last run") for n in notes), notes


# -- point 2: the machine's temporary files ---------------------------------------

def test_the_provers_get_a_tmpdir_of_their_sessions_own(hol_session):
    base = hol_session._images[hol_session.base_key].pid
    environ = Path(f"/proc/{base}/environ").read_bytes().split(b"\0")
    assert f"TMPDIR={hol_session.workdir / 'tmp'}".encode() in environ


def test_the_drivers_temporary_file_falls_back_when_tmpdir_is_gone(hol_session, tmp_path):
    """TMPDIR gone (as TMPDIR=/nonexistent/tmp was): the answer's parse error
    is still captured and said, never ERROR "exception: Sys_error(...)"."""
    own = hol_session.workdir / "tmp"
    away = hol_session.workdir / "tmp-away"
    own.rename(away)
    try:
        v, why = verdict(hol_session, problem(tmp_path, "tmp.gone", "T", "ACCEPT_TAC (TRUTH"))
        assert v is Verdict.ERROR and why.startswith("syntax:"), why
        assert "Sys_error" not in why
        v, why = verdict(hol_session, problem(tmp_path, "tmp.gone_ok", "T", "ACCEPT_TAC TRUTH"))
        assert v is Verdict.OK, why
    finally:
        away.rename(own)
