"""Eviction on a real HOL Light session that keeps few images (the base and
two contexts): an image pending checks still need stays while one no check
needs goes; if a needed one must go, the cheaper to build again goes; a
problem's attempts each count, and a withdrawn check counts no more; on a
chain, an ancestor with a loaded image below it is needed no more. Then a
sweep that must rebuild, and its report showing the rebuilds.

The module borrows the shared session (no HOL Light boot of its own: a
cold load costs about 90 s) and lowers its image budget to three."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from runner import cli
from runner.corpus import load_corpus
from runner.prover import CheckLimits
from runner.reporting.report import load
from runner.reporting.html import render

from ..helpers import DEMO, TEST_MEM_LIMIT, demo_config, sweep_with

pytestmark = pytest.mark.hol

LIMITS = CheckLimits(time_s=120.0, time_source="default", mem_bytes=TEST_MEM_LIMIT,
                     expected_mem_bytes=0)
QUERY, ANSWER = "`1 + 1 = 2`", "ARITH_TAC"
# About a second of bytecode work to load (benchmarks/images/prefix_sharing.py's part).
DEAR = ("let pb_poly = new_definition `pb_poly (a:num) b c d = (a + b + c + d) EXP 7`;;\n"
        "let PB_POLY_SYM = prove(`!a b c d. pb_poly a b c d = pb_poly d c b a`,\n"
        "  REWRITE_TAC[pb_poly] THEN ARITH_TAC);;\n"
        "let PB_ANDREWS = prove\n"
        " (`((?x:A. !y. p x <=> p y) <=> ((?x. q x) <=> (!y. q y))) <=>\n"
        "   ((?x. !y. q x <=> q y) <=> ((?x. p x) <=> (!y. p y)))`,\n"
        "  MESON_TAC[]);;\n")
CONTEXTS = {"a": "let pb_a = 1;;\n", "b": "let pb_b = 2;;\n", "c": "let pb_c = 3;;\n",
            "d": "let pb_d = 4;;\n", "e": DEAR, "f": "let pb_f = 6;;\n",
            "g": "let pb_g = 7;;\n", "h": "let pb_h = 8;;\n", "k": "let pb_k = 9;;\n",
            "l": "let pb_l = 10;;\n",
            "x": "let pb_x = 11;;\n", "y": "let pb_y = 12;;\n", "z": "let pb_z = 13;;\n"}
# A chain, as a proof file cut theorem by theorem: each context the last plus a phrase.
CHAIN = {"s.1.p": DEAR, "s.2.q": DEAR + "let pb_q = 15;;\n",
         "s.3.r": DEAR + "let pb_q = 15;;\n" + "let pb_r = 16;;\n"}
# problem id -> its context: "<test>.<n>.<context>", sorted as each test checks them.
PROBLEMS = ["u.1.a", "u.2.b", "u.3.c", "u.4.a",
            "v.1.e", "v.2.d", "v.3.f", "v.4.d", "v.5.e",
            "w.1.g", "w.2.h", "w.3.k", "w.4.l",
            "r1.x", "r2.y", "r3.z", "r4.x", "r5.y", "r6.z",
            "s.1.p", "s.2.q", "s.3.r", "t.1.y"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("eviction")
    for pid in PROBLEMS:
        d = root / pid
        d.mkdir()
        (d / "setup.ml").write_text(CHAIN.get(pid) or CONTEXTS[pid[-1]])
        (d / "query.txt").write_text(QUERY)
        (d / "answer.txt").write_text(ANSWER)
        (d / "category.txt").write_text("arith")
    return root


@pytest.fixture(scope="module")
def session(hol_session):
    """The shared session, keeping three images while this module runs. Its
    contexts load no files, so the demo's context root serves them; images
    other modules left are unneeded here and go first, oldest first."""
    backend = hol_session.backend
    saved, backend.max_images = backend.max_images, 3
    # Checks other modules prepared and never ran would keep their images
    # needed; this module's story starts with none pending.
    pending = dict(hol_session._pending)
    hol_session._pending.clear()
    try:
        yield hol_session
    finally:
        backend.max_images = saved
        hol_session._pending.update(pending)


@pytest.fixture(scope="module")
def problems(corpus):
    return {p.problem_id: p for p in load_corpus(corpus)}


def ok(session, problem) -> None:
    result = session.check(problem, LIMITS)
    assert result.outcome.verdict.value == "OK", result


def key_of(session, pid: str) -> str:
    return session._image_of[pid]


def alive(session, pid: str) -> bool:
    return key_of(session, pid) in session._images


def builds(session, pid: str) -> int:
    key = key_of(session, pid)
    return sum(b.key == key for b in session.image_builds)


def test_an_image_a_pending_check_needs_stays_while_an_unneeded_one_goes(session, problems):
    u = [problems[pid] for pid in PROBLEMS if pid.startswith("u.")]
    session.prepare(u)
    for p in u[:3]:                     # a, b, then c must evict one of them
        ok(session, p)
    # a is the least recently used, but u.4.a still needs it; nothing needs b.
    assert alive(session, "u.1.a") and not alive(session, "u.2.b") and alive(session, "u.3.c")
    ok(session, u[3])
    assert builds(session, "u.1.a") == 1


def test_if_a_needed_image_must_go_the_cheapest_to_rebuild_goes(session, problems):
    v = [problems[pid] for pid in PROBLEMS if pid.startswith("v.")]
    session.prepare(v)
    ok(session, v[0])                   # e: a second of proofs to load
    ok(session, v[1])                   # d: one definition
    secs = session.image_build_secs
    assert secs[key_of(session, "v.1.e")] > 5 * secs[key_of(session, "v.2.d")], secs
    ok(session, v[2])                   # f: e and d are both needed again
    # e is the least recently used, yet d goes: it is cheaper to build again.
    assert alive(session, "v.1.e") and not alive(session, "v.2.d")
    ok(session, v[3])
    ok(session, v[4])
    assert (builds(session, "v.1.e"), builds(session, "v.2.d")) == (1, 2)


def test_on_a_chain_the_ancestor_goes_and_the_tip_a_later_problem_forks_from_stays(session, problems):
    s1, s2, s3, t1 = (problems[pid] for pid in ("s.1.p", "s.2.q", "s.3.r", "t.1.y"))
    session.prepare([s1, s2, s3, t1])
    ok(session, s1)                     # p: a second of proofs to load
    ok(session, s2)                     # p + q, forked from p
    ok(session, t1)                     # y must evict p or p + q
    # Both are on s.3's chain, and p + q is far cheaper to build again, yet
    # p goes: s.3 forks from p + q, and nothing forks from p any more.
    assert alive(session, "s.2.q") and not alive(session, "s.1.p")
    ok(session, s3)
    assert (builds(session, "s.1.p"), builds(session, "s.2.q")) == (1, 1)


def test_each_attempt_counts_once_and_a_withdrawn_check_not_at_all(session, problems):
    g, h, k, l = (problems[pid] for pid in PROBLEMS if pid.startswith("w."))
    session.prepare([g, g, h, k, l])    # two attempts of g
    ok(session, g)                      # one attempt of g is still to come
    ok(session, h)
    ok(session, k)                      # evicts h, not g (older, but needed)
    assert alive(session, "w.1.g") and not alive(session, "w.2.h")
    session.withdraw(g)                 # its second attempt will not run (reused, skipped)
    ok(session, l)                      # g and k are both unneeded now: the older, g, goes
    assert not alive(session, "w.1.g") and alive(session, "w.3.k")


def test_a_sweep_that_must_rebuild_reports_its_rebuilds(session, corpus, tmp_path, capsys):
    out = tmp_path / "out"
    # Submission order x y z x y z, one worker, room for two contexts: when z
    # loads, x and y are both needed again, so one of them is built twice.
    config = demo_config(out, corpus=corpus, context_root=DEMO, workers=1, max_images=3,
                         policy="naive", only=tuple(p for p in PROBLEMS if p.startswith("r")))
    summary = sweep_with(session, config)
    assert summary.counts == Counter({"OK": 6})
    report = load(out)
    c = report.image_counts()
    assert c["rebuilds"] >= 1 and c["builds"] == c["images"] + c["rebuilds"]
    assert c["images"] == 3 and c["rebuild_s"] > 0
    assert c["build_s"] == pytest.approx(sum(b["secs"] for b in report.builds))
    assert cli.main(["report", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert f"{c['builds']} builds of 3 distinct images" in printed
    assert f"{c['rebuilds']} rebuilt after an eviction" in printed
    page = render(report)
    assert "<h2>Images</h2>" in page and "rebuilds (built again after an eviction)" in page
