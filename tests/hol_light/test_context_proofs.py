"""--context-proofs trust, on real HOL Light (runner/checks/context_proofs.py,
runner/provers/hol_light/ml/hol_trust.ml).

Contexts cut by `proofbatch extract` from Debian's own developments
(Library/binomial.ml, and Library/agm.ml, whose context needs
Library/products.ml) are swept under
replay and under trust: every ground truth is OK both ways, in bytecode and
native, and the needs'd library loads under trust too. Trust never changes
a verdict: the example corpus's faulty, cheating and hostile answers, placed
on a cut context, get the same verdicts both ways. Under trust the context's
own proofs are taken as stated (a false one included, which replay refuses),
while an answer, and the context's functions it calls, still prove for real
and cannot flip the flag. The choice is in image keys, rows and sweep.json,
and a resume with the other one is refused.

One bytecode session per choice for the whole test session (the replay one is
conftest's hol_session); native sessions likewise, one per choice.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from runner.provers.hol_light import contexts
from runner.results import done, shards
from runner.checks.context_proofs import ContextProofs
from runner.errors import InputError
from runner.provers.hol_light.session.backend import HolLightBackend
from runner.provers.hol_light.install import find_hol_light
from runner.results.rows import COLUMNS
from runner.sweep import prepare
from runner.sweep_dir import check_manifest

from ..helpers import DEMO, ROOT, demo_config, extracted_config, sweep_with

pytestmark = pytest.mark.hol
HOSTILE = ROOT / "examples" / "hostile"
# The extracted problem whose context hosts the hostile and faulty answers.
HOST_CONTEXT = "Library.binomial.BINOM_FACT"
# What the native sweeps check of the extracted corpus: compiling every
# context segment of both files natively, twice, is minutes more CPU.
NATIVE_SUBSET = ("Library.binomial.BINOM_0", "Library.binomial.BINOM_LT", "Library.binomial.BINOM_REFL",
                 "Library.binomial.BINOM_1", "Library.binomial.BINOM_FACT", "Library.agm.FORALL_2",
                 "Library.agm.NUMSEG_2", "Library.agm.AGM_2")


def _expected(path: Path) -> dict[str, str]:
    with open(path, newline="") as f:
        return {row["Problem"]: row["Verdict"] for row in csv.DictReader(f)}


# -- corpora -------------------------------------------------------------------

@pytest.fixture(scope="session")
def library_corpus(extracted_library) -> Path:
    """Debian's Library/binomial.ml and Library/agm.ml (whose context starts
    with needs "Library/products.ml"), cut by `proofbatch extract`."""
    return extracted_library.out


@pytest.fixture(scope="session")
def hosted_corpus(library_corpus, tmp_path_factory) -> Path:
    """The demo's fault.* and isolation.* problems and the hostile catalogue,
    each with an extracted binomial.ml context before its own setup."""
    out = tmp_path_factory.mktemp("trust-hosted") / "corpus"
    prefix = (library_corpus / HOST_CONTEXT / "setup.ml").read_text()
    sources = [*sorted(DEMO.glob("fault.*")), *sorted(DEMO.glob("isolation.*")),
               *sorted(p for p in HOSTILE.iterdir() if p.is_dir())]
    for src in sources:
        shutil.copytree(src, out / src.name)
        (out / src.name / "setup.ml").write_text(prefix + (src / "setup.ml").read_text())
        (out / src.name / "category.txt").write_text((src / "category.txt").read_text()
                                                     if (src / "category.txt").exists() else "fault\n")
    return out


# The probes' context: false statements proved at top level four ways (a
# plain prove, `time prove`, a prove the context rebinds over the old one,
# and a prove inside a file it needs), and a rule of its own that calls prove.
BAD_LIB = "let LIB_BAD = prove\n (`4 = 5`,\n  ARITH_TAC);;\n"
PROBE_SETUP = """\
let BAD = prove
 (`1 = 2`,
  ARITH_TAC);;

let BAD2 = time prove (`2 = 3`, ARITH_TAC);;

let old_prove = prove;;
let prove (t, tac) = old_prove (t, tac);;

let BAD3 = prove (`3 = 4`, ARITH_TAC);;

needs "{lib}";;

let MY_RULE tm = prove (tm, ARITH_TAC);;
"""
PROBES = {
    # (query, answer): under trust
    "probe.trusted_context": ("`1 = 2 /\\ 2 = 3 /\\ 3 = 4 /\\ 4 = 5`",
                              "CONJ_TAC THENL [ACCEPT_TAC BAD; CONJ_TAC THENL [ACCEPT_TAC BAD2; "
                              "CONJ_TAC THENL [ACCEPT_TAC BAD3; ACCEPT_TAC LIB_BAD]]]"),
    "probe.rule_true": ("`2 + 2 = 4`", "ACCEPT_TAC (MY_RULE `2 + 2 = 4`)"),
    "probe.rule_false": ("`5 = 6`", "ACCEPT_TAC (MY_RULE `5 = 6`)"),
    "probe.own_prove_false": ("`5 = 6`", "ACCEPT_TAC (prove (`5 = 6`, ARITH_TAC))"),
    "probe.flip_flag": ("`5 = 6`", "(Hol_trust.trusting := true; ACCEPT_TAC (MY_RULE `5 = 6`))"),
    "probe.switch": ("`5 = 6`", "ACCEPT_TAC (Hol_trust.Switch.prove (`5 = 6`, ARITH_TAC))"),
}
PROBES_UNDER_TRUST = {
    "probe.trusted_context": ("OK", "proved"),
    "probe.rule_true": ("OK", "proved"),
    "probe.rule_false": ("FAIL", "tactic failed"),
    "probe.own_prove_false": ("FAIL", "tactic failed"),
    "probe.flip_flag": ("ERROR", "forbidden: module Hol_trust"),
    "probe.switch": ("ERROR", "forbidden: module Hol_trust"),
}


@pytest.fixture(scope="session")
def probe_corpus(tmp_path_factory, context_lib) -> Path:
    # The file the context needs lies under the context root (a load outside
    # it is refused), where every image can read it (the sandbox mounts a
    # tmpfs over /tmp, runner/checks/sandbox.py).
    folder, name = context_lib
    (folder / "bad_lib.ml").write_text(BAD_LIB)
    lib = f"{name}/bad_lib.ml"
    out = tmp_path_factory.mktemp("trust-probes") / "corpus"
    for pid, (query, answer) in PROBES.items():
        d = out / pid
        d.mkdir(parents=True)
        (d / "setup.ml").write_text(PROBE_SETUP.format(lib=lib))
        (d / "query.txt").write_text(query + "\n")
        (d / "answer.txt").write_text(answer + "\n")
        (d / "category.txt").write_text("fault\n")
    return out


# -- sessions and sweeps ---------------------------------------------------------

def sessions_of(hol_session, trust_session):
    return {"replay": hol_session, "trust": trust_session}


def sweep_rows(session, corpus: Path, out: Path, choice: str, **overrides) -> dict[str, dict]:
    config = demo_config(out, corpus=corpus, context_proofs=choice, **overrides)
    summary = sweep_with(session, config)
    return {row["problem_id"]: row for row in summary.table.to_pylist()}


@pytest.fixture(scope="session")
def library_sweeps(extracted_sweep, trust_session, library_corpus, tmp_path_factory):
    """The extracted corpus's ground truths under replay (conftest's
    extracted_sweep, on hol_session) and under trust: (rows by choice, the
    sweep directory of each choice)."""
    summary, replay, _ = extracted_sweep
    out = tmp_path_factory.mktemp("trust-library-sweep") / "out"
    trust = sweep_with(trust_session, extracted_config(library_corpus, out, context_proofs="trust"))
    return ({"replay": replay, "trust": {r["problem_id"]: r for r in trust.table.to_pylist()}},
            {"replay": summary.out, "trust": out})


@pytest.fixture(scope="session")
def hosted_sweeps(hol_session, trust_session, hosted_corpus, tmp_path_factory):
    if hol_session.backend.sandbox_kind != "bwrap":
        pytest.skip("the hostile catalogue's jail.* cases need the bwrap sandbox (bubblewrap, root)")
    tmp = tmp_path_factory.mktemp("trust-hosted-sweeps")
    # As tests/hol_light/test_hostile.py: the catalogue's categories are its own.
    return {choice: sweep_rows(session, hosted_corpus, tmp / choice, choice, category_timeouts=None,
                               default_timeout=20.0)
            for choice, session in sessions_of(hol_session, trust_session).items()}


def build_secs(session, phrase: str) -> float:
    """Seconds one build of the images whose segment holds ``phrase`` took
    (each image's latest build: a session evicts and rebuilds images of a
    long chain, and the two sessions need not rebuild alike)."""
    return sum(secs for key, secs in session.image_build_secs.items()
               if key in session._nodes and phrase in session._nodes[key].segment)


# -- ground truths of real developments -------------------------------------------

def test_every_ground_truth_is_ok_under_replay_and_under_trust(library_sweeps, library_corpus):
    sweeps, _ = library_sweeps
    ids = sorted(p.name for p in library_corpus.iterdir() if p.is_dir())
    assert len(ids) >= 30 and any(i.startswith("Library.agm.") for i in ids)
    for choice, rows in sweeps.items():
        assert sorted(rows) == ids
        bad = {pid: (r["verdict"], r["reason"]) for pid, r in rows.items() if r["verdict"] != "OK"}
        assert not bad, f"under {choice}: {bad}"


def test_rows_and_manifest_record_the_choice(library_sweeps):
    sweeps, outs = library_sweeps
    for choice, rows in sweeps.items():
        assert {r["context_proofs"] for r in rows.values()} == {choice}
        assert json.loads((outs[choice] / "sweep.json").read_text())["context_proofs"] == choice
        with open(outs[choice] / "results.csv", newline="") as f:
            assert {row["context_proofs"] for row in csv.DictReader(f)} == {choice}


def test_images_of_the_two_choices_have_different_keys(library_sweeps):
    sweeps, _ = library_sweeps
    replay = {r["image_key"] for r in sweeps["replay"].values()}
    trust = {r["image_key"] for r in sweeps["trust"].values()}
    assert replay and trust and not replay & trust


def test_a_needs_inside_a_context_loads_under_trust_too(library_sweeps, hol_session, trust_session):
    """agm.ml's context needs Library/products.ml (983 lines of proofs):
    trusted, the image holding that needs loads several times faster."""
    library_sweeps  # built the images
    needs = 'needs "Library/products.ml"'
    replay, trust = build_secs(hol_session, needs), build_secs(trust_session, needs)
    assert replay > 0 and trust > 0
    # Measured 21.4 s against 12.0 s (load average 14-18 on 2 cores): under
    # trust the toplevel still parses and types every phrase, parses each
    # statement and evaluates each tactic expression (an ARITH_RULE in a
    # tactic's arguments runs). That its proofs were trusted at all is shown
    # by probe.trusted_context, whose needs'd file proves a false statement.
    assert trust < replay, f"products.ml: {replay:.1f} s replayed, {trust:.1f} s trusted"


def test_a_resume_with_the_other_choice_is_refused(library_sweeps, library_corpus):
    _, outs = library_sweeps
    for was, other in (("trust", "replay"), ("replay", "trust")):
        config = extracted_config(library_corpus, outs[was], context_proofs=other)
        with pytest.raises(InputError) as err:
            check_manifest(prepare(config))
        assert f"--context-proofs {was}" in str(err.value) and "\n" not in str(err.value)


# -- trust never changes a verdict ----------------------------------------------------

def test_hostile_and_cheating_answers_get_the_same_verdicts_under_both(hosted_sweeps, hosted_corpus):
    replay, trust = hosted_sweeps["replay"], hosted_sweeps["trust"]
    assert sorted(replay) == sorted(trust) == sorted(p.name for p in hosted_corpus.iterdir())
    differ = {pid: (replay[pid]["verdict"], trust[pid]["verdict"]) for pid in replay
              if replay[pid]["verdict"] != trust[pid]["verdict"]}
    assert not differ
    expected = {**_expected(DEMO / "expected_verdicts.csv"), **_expected(HOSTILE / "expected_verdicts.csv")}
    got = {pid: r["verdict"] for pid, r in trust.items()}
    assert got == {pid: expected[pid] for pid in got}
    assert {"CHEATING", "TIMEOUT", "MEMOUT", "ERROR", "FAIL", "OK"} <= set(got.values())


# -- what trust takes on trust, and what it never does ---------------------------------

@pytest.fixture(scope="session")
def probe_rows(trust_session, probe_corpus, tmp_path_factory):
    return sweep_rows(trust_session, probe_corpus, tmp_path_factory.mktemp("probes") / "out", "trust")


def test_trust_takes_the_contexts_own_proofs_as_stated(probe_rows):
    """prove, time prove, a prove the context rebinds over the old one and a
    prove in a needs'd file all returned their (false) statements."""
    row = probe_rows["probe.trusted_context"]
    assert (row["verdict"], row["context_proofs"]) == ("OK", "trust"), row["reason"]


@pytest.mark.parametrize("pid", sorted(PROBES_UNDER_TRUST))
def test_answers_and_the_context_functions_they_call_prove_for_real(probe_rows, pid):
    verdict, reason = PROBES_UNDER_TRUST[pid]
    row = probe_rows[pid]
    assert row["verdict"] == verdict and reason in row["reason"], (row["verdict"], row["reason"])


def test_replay_refuses_the_false_context(hol_session, probe_corpus, tmp_path):
    rows = sweep_rows(hol_session, probe_corpus, tmp_path / "out", "replay", only=("probe.rule_true",))
    row = rows["probe.rule_true"]
    # The first false prove stops the load (not a file it could not read).
    assert row["verdict"] == "ERROR" and row["reason"].startswith("setup:"), row["reason"]
    assert "Sys_error" not in row["reason"], row["reason"]


# -- profile --verify-trust -------------------------------------------------------------

def test_profile_verify_trust_lists_a_verdict_that_trust_changes(hol_session, trust_session,
                                                                 probe_corpus, library_corpus,
                                                                 tmp_path):
    """Binomial's ground truths verify under trust; a problem whose context
    replay refuses but trust loads is a defect that says so."""
    from cluster.local import LocalExecutor
    from runner.profile import ProfileConfig, profile

    corpus = tmp_path / "corpus"
    for src in [*sorted(library_corpus.glob("Library.binomial.BINOM_*"))[:3],
                probe_corpus / "probe.rule_true"]:
        shutil.copytree(src, corpus / src.name)
    sessions = sessions_of(hol_session, trust_session)
    result = profile(ProfileConfig(corpus=corpus, out=tmp_path / "profile", runs=1, ceiling_s=120.0,
                                   mem_limit=2 * 2**30, context_root=DEMO, verify_trust=True),
                     lambda prepared: LocalExecutor(workers=2, session=sessions[str(prepared.config.context_proofs)]))
    defects = {d.problem_id: d for d in result.defects}
    assert set(defects) == {"probe.rule_true"}
    assert defects["probe.rule_true"].verdict == "OK under trust"
    assert "ERROR under replay" in defects["probe.rule_true"].reason
    assert len(result.runs) == 3


# -- without HOL Light -----------------------------------------------------------------

def test_image_keys_include_the_choice():
    install = find_hol_light()
    salts = {c: HolLightBackend(install, DEMO, context_proofs=c).salt for c in ContextProofs}
    assert salts[ContextProofs.REPLAY] != salts[ContextProofs.TRUST]
    assert HolLightBackend(install, DEMO).salt == salts[ContextProofs.REPLAY]
    setups = {"p": "let x = 1;;\n"}
    keys = {c: contexts.build_context_tree(setups, s).image_of["p"] for c, s in salts.items()}
    assert keys[ContextProofs.REPLAY] != keys[ContextProofs.TRUST]


def test_the_trust_module_is_hashed_into_driver_and_native_keys():
    from runner.provers.hol_light.native import native_build
    from runner.provers.hol_light.session import backend as hol_light

    trust_ml = ROOT / "runner" / "provers" / "hol_light" / "ml" / "hol_trust.ml"
    assert trust_ml in hol_light.DRIVER_MODULES and trust_ml in native_build.SOURCES
    # Loaded before the module that clears its flag.
    assert hol_light.DRIVER_MODULES.index(trust_ml) < hol_light.DRIVER_MODULES.index(
        trust_ml.with_name("hol_check.ml"))


def test_shards_written_before_the_column_still_read(tmp_path):
    from runner.results.rows import ResultRow, rows_to_table, utcnow

    row = ResultRow(problem_id="p", attempt=0, category="c", verdict="OK", reason="proved",
                    prove_secs=0.1, wall_secs=0.2, peak_rss_mb=None, timeout_s=10.0,
                    timeout_source="default", worker="w", host="h", started_at=utcnow(),
                    finished_at=utcnow(), image_key="k", prover_build="b", mode="bytecode",
                    exit_status="exit 0", answer_sha256="", run_id="r")
    (tmp_path / done.SHARDS_DIR).mkdir()
    path = tmp_path / done.SHARDS_DIR / "w-000001.parquet"
    pq.write_table(rows_to_table([row]).drop(["context_proofs"]), path)
    table = done.read_shard(path)
    assert table is not None and table.column_names == list(COLUMNS)
    assert table.column("context_proofs").to_pylist() == [None]
    assert ("p", 0) in shards.scan(tmp_path).done


def test_an_isabelle_corpus_refuses_trust(tmp_path):
    config = demo_config(tmp_path / "out", corpus=ROOT / "examples" / "isabelle_demo",
                         context_root=None, context_proofs="trust")
    with pytest.raises(InputError) as err:
        prepare(config)
    assert "--context-proofs" in str(err.value) and "Isabelle" in str(err.value)


def test_an_unknown_choice_is_refused(tmp_path):
    with pytest.raises(InputError) as err:
        prepare(demo_config(tmp_path / "out", context_proofs="maybe"))
    assert "--context-proofs" in str(err.value)


# -- native ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def native_trust_sweeps(native_build, library_corpus, probe_corpus, tmp_path_factory):
    """The cut developments natively, one native session per choice; under
    trust the probes too."""
    from cluster.local import LocalExecutor
    from runner.sweep import run_sweep

    tmp = tmp_path_factory.mktemp("trust-native")
    found, builds = {}, {}
    for choice in ("replay", "trust"):
        corpora = [(library_corpus, NATIVE_SUBSET)] + ([(probe_corpus, None)] if choice == "trust" else [])
        session = None
        try:
            for corpus, only in corpora:
                prepared = prepare(demo_config(tmp / choice / corpus.parent.name, corpus=corpus,
                                               mode="native", context_proofs=choice, only=only,
                                               category_timeouts=None, default_timeout=300.0))
                session = session or prepared.backend.start(tmp / f"session-{choice}")
                summary = run_sweep(prepared, LocalExecutor(workers=2, session=session))
                found.setdefault(choice, {}).update(
                    {row["problem_id"]: row for row in summary.table.to_pylist()})
            builds[choice] = list(session.image_builds)
        finally:
            if session is not None:
                session.close()
    return found, builds


def test_native_ground_truths_are_ok_under_both_and_ran_natively(native_trust_sweeps, library_corpus):
    found, _ = native_trust_sweeps
    ids = sorted(NATIVE_SUBSET)
    assert all((library_corpus / pid).is_dir() for pid in ids)
    for choice in ("replay", "trust"):
        rows = {pid: found[choice][pid] for pid in ids}
        bad = {pid: (r["verdict"], r["reason"]) for pid, r in rows.items() if r["verdict"] != "OK"}
        assert not bad, f"native, {choice}: {bad}"
        assert {r["mode"] for r in rows.values()} == {"native"}
        assert {r["context_proofs"] for r in rows.values()} == {choice}


@pytest.mark.parametrize("pid", sorted(PROBES_UNDER_TRUST))
def test_native_trust_probes_match_bytecode(native_trust_sweeps, pid):
    found, _ = native_trust_sweeps
    verdict, reason = PROBES_UNDER_TRUST[pid]
    row = found["trust"][pid]
    assert row["verdict"] == verdict and reason in row["reason"], (row["verdict"], row["reason"])
    assert row["mode"] == "native", row["reason"]
