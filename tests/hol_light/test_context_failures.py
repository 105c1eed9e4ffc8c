"""Contexts that fail, and what a context's opens and loads cannot undo
(issue 23, bytecode), on real HOL Light.

- A context whose toplevel dies says how, as the OS names the signal, and
  quotes its last output; its image's log is kept under OUT/logs/images,
  since the session's work directory goes with the session.
- ``loads "update_database.ml"`` is skipped with a note, as HOL Light's
  inline_load.ml (the bench's pipeline) skips it: s2n-bignum's base.ml does
  it, and in an OCaml 4.13 toplevel it dies with a segmentation fault.
- Under ``--context-proofs trust`` a context's ``open`` or ``include`` of a
  module with HOL Light's own prove (a module-built checkout's Hol_lib) does
  not make the context's proofs run.

Debian's HOL Light has no Hol_lib; a module ``Core`` exporting HOL Light's
own prove stands in for it. The real thing runs when
PROOFBATCH_BENCH_HOL_LIGHT names a module-built checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.checks.context_proofs import ContextProofs
from runner.provers.hol_light.session.backend import HolLightBackend
from runner.provers.hol_light.load_graph import DROPPED_LOADS
from runner.provers.hol_light.session.image_logs import failure_reason, last_output
from runner.provers.hol_light.install import find_hol_light

from ..helpers import demo_config, make_corpus, sweep_with

NOTE = "'loads \"update_database.ml\";;' is omitted"


def sweep(session, corpus: Path, out: Path, **overrides) -> dict[str, dict]:
    config = demo_config(out, corpus=corpus, category_timeouts=None, default_timeout=120.0,
                         **overrides)
    return {row["problem_id"]: row for row in sweep_with(session, config).table.to_pylist()}


def image_log(session, row) -> str:
    """The log of the image a check ran in, in the session's work directory."""
    return (session.workdir / "images" / f"{row['image_key']}.log").read_text(errors="replace")


# -- a context that kills its own toplevel ------------------------------------------

CRASH_SETUP = ('let pb_before_crash = "the last phrase before the crash";;\n'
               "Unix.kill (Unix.getpid ()) Sys.sigsegv;;\n")


@pytest.fixture(scope="module")
def crashed(hol_session, tmp_path_factory):
    """A context that sends its toplevel SIGSEGV, as base.ml's loads of
    update_database.ml did, swept with the checks' logs kept in OUT/logs."""
    tmp = tmp_path_factory.mktemp("crash")
    corpus = make_corpus(tmp / "corpus", {"crash.segv": (CRASH_SETUP, "`T`\n", "ACCEPT_TAC TRUTH\n")})
    # As the sweep's own backend is built (runner/prover_registry.py), the
    # shared session's keeps logs in OUT/logs for this sweep.
    backend, saved = hol_session.backend, hol_session.backend.log_dir
    backend.log_dir = tmp / "out" / "logs"
    try:
        rows = sweep(hol_session, corpus, tmp / "out")
    finally:
        backend.log_dir = saved
    return rows["crash.segv"], tmp / "out"


def test_a_context_killed_by_a_signal_says_which_and_its_last_output(crashed):
    row, _ = crashed
    assert row["verdict"] == "ERROR", row["reason"]
    assert row["reason"].startswith("setup: "), row["reason"]
    assert "killed by SIGSEGV" in row["reason"], row["reason"]
    assert "the last phrase before the crash" in row["reason"], row["reason"]
    assert "\n" not in row["reason"]


def test_the_log_of_an_image_that_died_is_kept_in_out(crashed):
    row, out = crashed
    kept = out / "logs" / "images" / f"{row['image_key']}.log"
    assert kept.is_file(), sorted(str(p) for p in out.rglob("*"))
    assert "the last phrase before the crash" in kept.read_text(errors="replace")


def test_a_needs_of_a_missing_file_names_it_and_where_it_was_looked_for(hol_session, tmp_path):
    """Issue 24: HOL Light's loader says only `Exception: Not_found.`"""
    corpus = make_corpus(tmp_path / "corpus", {
        "missing.needs": ('let pb_fine = 1;;\nneeds "no/such/library.ml";;\n', "`T`\n",
                          "ACCEPT_TAC TRUTH\n")})
    row = sweep(hol_session, corpus, tmp_path / "out")["missing.needs"]
    assert row["verdict"] == "ERROR", row["reason"]
    reason = row["reason"]
    assert 'setup.ml: needs "no/such/library.ml" finds no file (looked in ' in reason, reason
    assert str(hol_session.backend.context_root) in reason, reason
    assert str(hol_session.backend.install.hol_dir) in reason, reason


def test_the_reason_is_bounded_and_one_line(tmp_path):
    log = tmp_path / "image.log"
    log.write_text("# val a : int = 1\n" + "x" * 5000 + "\n- : unit = ()\n# \n\n")
    last = last_output(log)
    assert last is not None and len(last) <= 240 and last.startswith("xxx") and "\n" not in last
    reason = failure_reason(None, "signal SIGSEGV", last)
    assert reason.startswith("the context's process was killed by SIGSEGV") and "\n" not in reason
    # Signals OCaml has no name for come as the OS's number.
    assert "killed by SIGUSR1" in failure_reason(None, "signal 10", None)
    assert failure_reason(None, "exit 2", "bye").endswith("exited with status 2 while it loaded; "
                                                          "last output: bye")


# -- loads "update_database.ml" ----------------------------------------------------

# Debian's own update_database.ml binds update_database (and search); a
# stand-in for a module-built checkout's Hol_loader brings back a loads that
# is Debian's own definition of it.
# Each file of the list the toplevel's loads skips (one list for native, the
# toplevel and extract), and one outside it: missing, so its load fails.
DROPPED = {f"loads.dropped.{name}": name for name in DROPPED_LOADS}
LOADS_SETUPS = {
    **{pid: f'loads "{name}";;\n' for pid, name in DROPPED.items()},
    "loads.kept": 'loads "pb_no_such_file.ml";;\n',
    "loads.not_bound": 'loads "update_database.ml";;\nlet pb_probe = update_database;;\n',
    "loads.after_open": ('module Loader = struct let loads s = load_on_path ["$"] s end;;\n'
                         "open Loader;;\n"
                         'loads "update_database.ml";;\nlet pb_probe = update_database;;\n'),
}


@pytest.fixture(scope="module")
def loads_rows(hol_session, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("loads")
    corpus = make_corpus(tmp / "corpus", {pid: (setup, "`T`\n", "ACCEPT_TAC TRUTH\n")
                                          for pid, setup in LOADS_SETUPS.items()})
    return sweep(hol_session, corpus, tmp / "out")


@pytest.mark.parametrize("pid", sorted(DROPPED))
def test_each_dropped_load_is_skipped_with_a_note(loads_rows, hol_session, pid):
    row = loads_rows[pid]
    assert row["verdict"] == "OK", row["reason"]
    assert f"'loads \"{DROPPED[pid]}\";;' is omitted" in image_log(hol_session, row)


def test_a_load_outside_the_list_is_not_skipped(loads_rows):
    row = loads_rows["loads.kept"]
    assert row["verdict"] == "ERROR" and "pb_no_such_file.ml" in row["reason"], row["reason"]


@pytest.mark.parametrize("pid", ["loads.not_bound", "loads.after_open"])
def test_what_update_database_defines_is_not_bound(loads_rows, pid):
    row = loads_rows[pid]
    assert row["verdict"] == "ERROR", row["reason"]
    assert "Unbound value update_database" in row["reason"], row["reason"]


# -- trust whatever the context opens ----------------------------------------------

# Each binds HOL Light's own prove over the trusted one, as a module-built
# checkout's `open Hol_lib;;` does: an open, an open in the same phrase as
# the proof, an include, and an open in a file the context needs.
TRUST_LIB = ("module Core_lib = struct let prove = Hol_trust.kernel_prove end;;\n"
             "open Core_lib;;\n"
             'let W = prove(`T`, (fun g -> failwith "ran in the needs\'d file"));;\n')
TRUST_SETUP = """\
module Core = struct let prove = Hol_trust.kernel_prove end;;
open Core;;
let X = prove(`T`, (fun g -> failwith "ran"));;

open Core let Y = prove(`T`, (fun g -> failwith "ran in the same phrase"));;

include Core;;
let Z = prove(`T`, (fun g -> failwith "ran after include"));;

needs "{lib}";;
"""


@pytest.fixture(scope="module")
def trust_rows(trust_session, tmp_path_factory, context_lib):
    # A file a context needs lies under the context root (a load outside it
    # is refused), where every image can read it (the sandbox mounts a
    # tmpfs over /tmp, runner/checks/sandbox.py).
    folder, name = context_lib
    (folder / "trust_lib.ml").write_text(TRUST_LIB)
    lib = f"{name}/trust_lib.ml"
    tmp = tmp_path_factory.mktemp("trust-open")
    corpus = make_corpus(tmp / "corpus", {
        "trust.opens": (TRUST_SETUP.format(lib=lib), "`T /\\ T /\\ T /\\ T`\n",
                        "REPEAT CONJ_TAC THEN FIRST (map ACCEPT_TAC [X; Y; Z; W])\n"),
        # The answer still proves for real, with the context's own prove.
        "trust.answer_real": (TRUST_SETUP.format(lib=lib), "`1 = 2`\n",
                              "ACCEPT_TAC (prove (`1 = 2`, ARITH_TAC))\n")})
    return sweep(trust_session, corpus, tmp / "out", context_proofs="trust")


@pytest.mark.hol
def test_trust_holds_after_the_context_opens_hol_lights_prove(trust_rows):
    row = trust_rows["trust.opens"]
    assert (row["verdict"], row["context_proofs"]) == ("OK", "trust"), row["reason"]


@pytest.mark.hol
def test_an_answer_after_such_opens_still_proves_for_real(trust_rows):
    row = trust_rows["trust.answer_real"]
    assert row["verdict"] == "FAIL" and "tactic failed" in row["reason"], row["reason"]


# -- the real thing: a module-built checkout -----------------------------------------

BENCH = os.environ.get("PROOFBATCH_BENCH_HOL_LIGHT")
BENCH_SETUP = """\
open Hol_lib;;
open Hol_loader;;
let X = prove(`T`, (fun g -> failwith "ran"));;
loads "update_database.ml";;
"""


@pytest.mark.hol
@pytest.mark.skipif(not BENCH, reason="PROOFBATCH_BENCH_HOL_LIGHT is not set: give it a HOL Light "
                    "checkout built with `make HOLLIGHT_USE_MODULE=1 hol_lib.cma hol.sh` (as the "
                    "bench's setup.sh does) to run a bench-style setup there")
def test_a_bench_style_setup_in_a_module_built_checkout(tmp_path):
    install = find_hol_light(Path(BENCH))
    assert install.module, f"{BENCH}'s hol.sh does not load the compiled Hol_lib"
    corpus = make_corpus(tmp_path / "corpus", {
        "bench.trusted": (BENCH_SETUP, "`T`\n", "ACCEPT_TAC X\n"),
        "bench.not_bound": (BENCH_SETUP + "let pb_probe = update_database;;\n", "`T`\n",
                            "ACCEPT_TAC X\n")})
    backend = HolLightBackend(install, context_root=corpus, context_proofs=ContextProofs.TRUST)
    with backend.start(tmp_path / "session") as session:
        rows = sweep(session, corpus, tmp_path / "out", hol_light=Path(BENCH), context_root=corpus,
                     context_proofs="trust")
        assert rows["bench.trusted"]["verdict"] == "OK", rows["bench.trusted"]["reason"]
        assert NOTE in image_log(session, rows["bench.trusted"])
        assert rows["bench.not_bound"]["verdict"] == "ERROR"
        assert "Unbound value update_database" in rows["bench.not_bound"]["reason"]
