"""Native HOL Light, on the real Debian HOL Light: built from scratch into a
cache once per session, then the example corpus checked natively must give
exactly the bytecode verdicts; a broken answer never sinks its batch; what
cannot be compiled runs in bytecode and says so; limits and modes per check.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner.checks import attempts
from runner.corpus import load_corpus
from runner.maps.provenance import load
from runner.provers.hol_light.install import find_hol_light
from runner.provers.hol_light.session.native import NativeHolLightBackend
from runner.provers.hol_light.session.native_session import MODE, NativeSession
from runner.provers.hol_light.costs.map_modes import RATIO_MIN, MapModes
from runner.provers.hol_light.session.native_auto import ModeBackend
from runner.provers.hol_light.native.native_build import build_native, load_build
from runner.prover import CheckLimits
from runner.sweep import prepare, run_sweep
from runner.maps.timeout_map import SIDECAR_FORMAT

from ..helpers import DEMO, ROOT, TEST_MEM_LIMIT, demo_config, expected_verdicts, make_corpus

pytestmark = pytest.mark.hol
LIMITS = CheckLimits(time_s=30.0, time_source="test", mem_bytes=TEST_MEM_LIMIT, expected_mem_bytes=0)


@pytest.fixture(scope="module")
def native_sweep(native_build, tmp_path_factory):
    """The example corpus through `--mode native`, two workers, as `proofbatch
    run` prepares it; the session stays up for the other tests."""
    from cluster.local import LocalExecutor

    prepared = prepare(demo_config(tmp_path_factory.mktemp("native") / "out", mode="native"))
    session = prepared.backend.start(tmp_path_factory.mktemp("native-session"))
    started = time.monotonic()
    summary = run_sweep(prepared, LocalExecutor(workers=2, session=session))
    yield prepared, session, summary, time.monotonic() - started
    session.close()


# -- the build ---------------------------------------------------------------

def test_build_from_scratch_is_complete_and_then_cached(native_build):
    assert not native_build.cached and native_build.build_secs > 1
    for name in ("hol-native-server", "hol-native-front", "hol_core.cmx", "hol_core.cmi",
                 "hol_native_slot.cmi", "build.json"):
        assert (native_build.dir / name).is_file(), name
    manifest = json.loads((native_build.dir / "build.json").read_text())
    assert manifest["hol_build"] == find_hol_light().build and manifest["ocaml"] == native_build.ocaml
    # The key names the HOL Light build and OCaml version: another version
    # gets another directory instead of a stale build.
    assert native_build.ocaml in native_build.key

    started = time.monotonic()
    again = build_native(find_hol_light(), native_build.dir.parent)
    assert again.cached and again.dir == native_build.dir
    assert time.monotonic() - started < 10


def test_a_damaged_cache_is_not_used(native_build, tmp_path):
    copy = tmp_path / native_build.key
    shutil.copytree(native_build.dir, copy, ignore=shutil.ignore_patterns("libs", "src"))
    assert load_build(copy) is not None
    with open(copy / "hol-native-front", "r+b") as f:     # a half-written file
        f.truncate(1000)
    assert load_build(copy) is None                        # so build_native rebuilds it


def test_missing_compiler_is_one_line_and_exit_2(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path), PROOFBATCH_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "runner.cli", "build-native"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "ocamlfind" in lines[0] and "apt-get install" in lines[0]


# -- the example corpus ---------------------------------------------------------

def test_example_corpus_gives_the_bytecode_verdicts(native_sweep, demo_sweep):
    _, _, summary, _ = native_sweep
    rows = {r["problem_id"]: r for r in summary.table.to_pylist()}
    native = {pid: r["verdict"] for pid, r in rows.items()}
    assert native == expected_verdicts()
    bytecode = {r["problem_id"]: r["verdict"] for r in demo_sweep.table.to_pylist()}
    assert native == bytecode
    assert {r["mode"] for r in rows.values()} == {MODE}


def test_every_native_proof_records_its_gc_counters(native_sweep):
    from .test_runtime import assert_gc_counters

    assert_gc_counters(native_sweep[2].table.to_pylist())


def test_nonallocating_loop_is_killed_from_outside(native_sweep):
    rows = {r["problem_id"]: r for r in native_sweep[2].table.to_pylist()}
    loop = rows["fault.loop_nonalloc"]
    # Native code never polls for signals in this loop: only the runner's kill ends it.
    assert loop["verdict"] == "TIMEOUT" and "killed from outside" in loop["reason"]
    # Its limit counts CPU time: the kill comes at the limit plus grace of it,
    # however much wall time a loaded host stretches that into.
    assert loop["timeout_s"] <= loop["cpu_secs"] < loop["timeout_s"] + 8
    assert loop["limit_clock"] == "cpu"


def test_memory_bomb_is_memout(native_sweep):
    rows = {r["problem_id"]: r for r in native_sweep[2].table.to_pylist()}
    assert rows["fault.memout"]["verdict"] == "MEMOUT"
    assert rows["fault.memout"]["wall_secs"] < 60


def test_heavy_proofs_are_faster_natively(native_sweep, demo_rows):
    rows = {r["problem_id"]: r for r in native_sweep[2].table.to_pylist()}
    heavy = [p for p in rows if p.startswith("heavy.")]
    native = sum(rows[p]["prove_secs"] for p in heavy)
    bytecode = sum(demo_rows[p]["prove_secs"] for p in heavy)
    assert native * 1.3 < bytecode, (native, bytecode)


def test_the_plan_expects_a_native_boot(native_sweep, hol_session):
    """A plan that expected the bytecode toplevel's boot would predict every
    native task's first check about a minute later than it starts."""
    prepared, session, _, _ = native_sweep
    planned = prepared.plan.images[prepared.plan.base]
    native, bytecode = (next(b.secs for b in s.image_builds if b.parent is None)
                        for s in (session, hol_session))
    assert planned.source == "default"
    assert abs(planned.build_s - native) < abs(planned.build_s - bytecode), (planned, native, bytecode)


# -- batches -------------------------------------------------------------------

def test_one_broken_answer_does_not_sink_its_batch(native_sweep, tmp_path):
    _, mode_session, _, _ = native_sweep
    native: NativeSession = mode_session._session(MODE)
    answers = {
        "good1": b"ARITH_TAC", "good2": b"REWRITE_TAC[ADD_SYM]", "good3": b"MESON_TAC[ADD_SYM]",
        "syntax": b"REWRITE_TAC[ADD_SYM", "type": b"ARITH_RULE `1 = 1`",
        "forbidden": b"(ignore (Unix.getpid ()); ALL_TAC)", "two": b"let x = 1 let y = 2",
        "injection": b"ALL_TAC;; let _ = 1",
    }
    done = native.compiler.compile_answers(answers, (native.backend.build.core_module,))
    refused = {k: c.refusal for k, c in done.items() if c.refusal}
    assert set(refused) == {"syntax", "type", "forbidden", "two", "injection"}
    assert refused["syntax"].startswith("syntax:") and refused["type"].startswith("type:")
    assert refused["forbidden"].startswith("forbidden: module Unix")
    assert "exactly one" in refused["two"] and "';;'" in refused["injection"]
    plugins = {done[k].plugin for k in ("good1", "good2", "good3")}
    assert len(plugins) == 1 and None not in plugins       # one compile for the batch

    corpus = make_corpus(tmp_path / "c", {
        "b.good": ("", "`!m n. m + n = n + m`", "ARITH_TAC"),
        "b.type": ("", "`!m n. m + n = n + m`", "ARITH_RULE `1 = 1`"),
    })
    problems = load_corpus(corpus, None)
    native.prepare(problems)
    verdicts = {p.problem_id: native.check(p, LIMITS) for p in problems}
    assert verdicts["b.good"].outcome.verdict.value == "OK"
    assert verdicts["b.type"].outcome.verdict.value == "ERROR"
    assert verdicts["b.type"].outcome.reason.startswith("type:")


def _attempts(native: NativeSession, tmp_path: Path, pid: str, query: str, answers: list[str]):
    """K attempts at one blank-context problem, prepared in ``native``."""
    folder = tmp_path / "c" / pid
    folder.mkdir(parents=True)
    (folder / "setup.ml").write_text("")
    (folder / "query.txt").write_text(query + "\n")
    (folder / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    [problem] = load_corpus(folder.parent, None)
    tries = [t.problem for t in attempts.tasks_for(problem, LIMITS)]
    native.prepare(tries)
    return tries


def test_the_attempts_of_a_problem_compile_in_one_batch(native_sweep, tmp_path):
    """pass@k: K answers to one problem are K Problems of one id; they share
    one plugin, so K attempts pay one compile."""
    native: NativeSession = native_sweep[1]._session(MODE)
    # Answers no other test here compiles for the blank context.
    tries = _attempts(native, tmp_path, "k.comm", "`!m n. m + n = n + m`",
                      ["ACCEPT_TAC ADD_SYM", "MESON_TAC[ADD_SYM; ADD_AC]", "GEN_TAC THEN ARITH_TAC",
                       "GEN_TAC THEN ALL_TAC"])
    results = [native.check(p, LIMITS) for p in tries]
    assert [r.outcome.verdict.value for r in results] == ["OK", "OK", "OK", "FAIL"]
    key = native._check_image("k.comm")
    assert len({native._compiled[(key, p.answer)].plugin for p in tries}) == 1


def test_workers_checking_one_batch_at_once_load_it_into_their_image_once(native_sweep, tmp_path):
    """Dynlink refuses a module already loaded: workers that check answers of
    one batch from one image at the same moment must load it once between
    them, not each (the second load failed the check, a false FAIL found on
    the bench's module-built checkout)."""
    native: NativeSession = native_sweep[1]._session(MODE)
    # Answers no other test here compiles, so the batch is new to the image.
    tries = _attempts(native, tmp_path, "r.race", "`!n. n + 0 = n`",
                      [f"GEN_TAC THEN {'ALL_TAC THEN ' * i}ARITH_TAC" for i in range(1, 9)])
    gate = threading.Barrier(len(tries))

    def check(p):
        gate.wait()
        return native.check(p, LIMITS)

    with ThreadPoolExecutor(len(tries)) as pool:
        results = list(pool.map(check, tries))
    assert [r.outcome.verdict.value for r in results] == ["OK"] * len(tries), \
        [r.outcome.reason for r in results]


def test_answers_of_two_batches_in_one_image_each_run_their_own(native_sweep, tmp_path):
    """Each batch's plugin registers its answers in the image's one table:
    an answer compiled and loaded alone, then another, then the first checked
    again, must run the first answer (it ran the second's, FAIL for OK: both
    were entry a0; a Dask worker, given problems one by one, compiles them so)."""
    native: NativeSession = native_sweep[1]._session(MODE)
    query = "`!m n. m * n = n * m`"        # answers no other test here compiles
    first, second = (load_corpus(make_corpus(tmp_path / name, {f"two.{name}": ("", query, answer)}),
                                 None)[0]
                     for name, answer in (("ok", "REWRITE_TAC[MULT_SYM]"),
                                          ("fail", "GEN_TAC THEN GEN_TAC THEN ALL_TAC")))
    native.prepare([first])
    assert native.check(first, LIMITS).outcome.verdict.value == "OK"
    native.prepare([second])
    assert native.check(second, LIMITS).outcome.verdict.value == "FAIL"
    key = native._check_image(first.problem_id)
    assert native._compiled[(key, first.answer)].plugin != native._compiled[(key, second.answer)].plugin
    again = native.check(first, LIMITS)
    assert again.outcome.verdict.value == "OK", again.outcome.reason


# -- fallback ------------------------------------------------------------------

def test_what_cannot_compile_runs_in_bytecode_and_says_why(native_build, hol_session, tmp_path):
    corpus = make_corpus(tmp_path / "c", {
        "fb.directive": ('#load "str.cma";;\nlet w = Str.regexp "a";;\n', "`T`", "ACCEPT_TAC TRUTH"),
        # A weak value at the top compiles (test_native_scope.py); inside a
        # module it still does not (native_weak.py settles top-level values).
        "fb.weak": ("module Pb_weak = struct let cache = ref [] end;;\n", "`T`", "ACCEPT_TAC TRUTH"),
        "fb.native": ("let two = 2;;\n", "`1 + 1 = 2`", "ARITH_TAC"),
    })
    problems = load_corpus(corpus, None)
    backend = NativeHolLightBackend(find_hol_light(), native_build, DEMO)
    session = NativeSession(backend, tmp_path / "w", bytecode=lambda: hol_session)
    try:
        session.prepare(problems)
        results = {p.problem_id: session.check(p, LIMITS) for p in problems}
    finally:
        session.close()
    assert all(r.outcome.verdict.value == "OK" for r in results.values()), results
    # Why each fell back is a field of its result, not only words in its reason.
    assert results["fb.directive"].mode == "bytecode"
    assert "#load" in results["fb.directive"].fallback
    assert "ran in bytecode" in results["fb.directive"].outcome.reason
    assert results["fb.weak"].mode == "bytecode"
    assert "does not compile natively" in results["fb.weak"].fallback
    assert (results["fb.native"].mode, results["fb.native"].fallback) == (MODE, "")


# -- modes and limits ----------------------------------------------------------

def test_auto_routes_by_expected_time_and_converts_limits_loudly(native_build, tmp_path):
    tmap = tmp_path / "map.json"
    tmap.write_text(json.dumps([
        {"problem_id": "heavy.big_mod", "prove_secs": 8.5, "timeout_sec": 60},
        {"problem_id": "arith.add_comm", "prove_secs": 0.01, "timeout_sec": 10}]))
    (tmp_path / "map.meta.json").write_text(json.dumps({"format": SIDECAR_FORMAT,
                                                         "provenance": {"mode": "bytecode-fork"}}))
    assert MapModes(load(tmap)).mode == "bytecode"    # a sidecar written before says bytecode-fork
    native = NativeHolLightBackend(find_hol_light(), native_build, DEMO)
    auto = ModeBackend("auto", native, load(tmap))
    problems = {p.problem_id: p for p in load_corpus(DEMO, None)}
    assert auto.route(problems["heavy.big_mod"]) == MODE
    assert auto.route(problems["arith.add_comm"]) == "bytecode"
    assert auto.route(problems["logic.drinker"]) == MODE          # no expected time: batched native
    limits = CheckLimits(time_s=60.0, time_source="map", mem_bytes=1 << 30, expected_mem_bytes=0)
    heavy = auto.limits_for(problems["heavy.big_mod"], limits)
    assert heavy.time_s == pytest.approx(60 / RATIO_MIN, abs=0.1) and "x" in heavy.time_source
    light = CheckLimits(10.0, "map", 1 << 30, 0)
    # Ran in its map's mode: its limit as it was, with the runtime setting it runs under.
    assert auto.limits_for(problems["arith.add_comm"], light) == dataclasses.replace(light, runtime="default")
    assert "CONVERTED" in auto.warnings()[0]


def test_native_checks_run_jailed_under_their_own_uid(native_sweep, tmp_path):
    """Where bubblewrap is available, a native check runs as the bytecode
    ones do: chrooted into its scratch directory under a uid of its own."""
    import threading

    import psutil

    from runner.checks import sandbox

    _, mode_session, _, _ = native_sweep
    native: NativeSession = mode_session._session(MODE)
    if not sandbox.jails(native.backend.sandbox_kind):
        pytest.skip(f"sandbox kind {native.backend.sandbox_kind}: no jail here")
    corpus = make_corpus(tmp_path / "c", {"j.spin": (
        "", "`T`", "(fun g -> let rec a = 0 :: a in let rec b = 0 :: b in "
        "if a = b then ALL_TAC g else NO_TAC g)")})
    problem = load_corpus(corpus, None)[0]
    native.prepare([problem])
    seen: list[tuple[int, str]] = []
    done = threading.Event()

    def spy():
        server = psutil.Process(native._images[native.base_key].pid)
        while not done.is_set():
            for child in server.children(recursive=True):
                try:
                    if child.uids().real >= sandbox.JAIL_UID_BASE:
                        seen.append((child.uids().real, os.readlink(f"/proc/{child.pid}/root")))
                except (psutil.Error, FileNotFoundError):     # it ended between the two looks
                    pass
            time.sleep(0.05)

    thread = threading.Thread(target=spy)
    thread.start()
    try:
        result = native.check(problem, CheckLimits(2.0, "test", TEST_MEM_LIMIT, 0))
    finally:
        done.set()
        thread.join()
    assert result.outcome.verdict.value == "TIMEOUT" and result.sandbox == "bwrap"
    # Its root directory is its own scratch directory (checks/<n>), not the host's.
    assert seen and all(Path(root).parent.name == "checks" for _, root in seen), seen


# -- answers as models and the bench write them ----------------------------------

def test_answers_as_the_bench_and_models_write_them_natively(native_build, tmp_path):
    """The bytecode catalogue (test_hol_light.answer_cases), checked natively:
    the front end's own screen, with HOL Light's lexer and one expression,
    gives the same verdicts, and no answer falls back to bytecode."""
    from cluster.local import LocalExecutor

    from ..helpers import answers_corpus, assert_answer_rows

    marker = tmp_path / "ran"
    corpus = answers_corpus(tmp_path / "corpus", marker)
    prepared = prepare(demo_config(tmp_path / "out", corpus=corpus, category_timeouts=None,
                                   default_timeout=30.0, mode="native"))
    session = prepared.backend.start(tmp_path / "session")
    try:
        summary = run_sweep(prepared, LocalExecutor(workers=1, session=session))
    finally:
        session.close()
    rows = {row["problem_id"]: row for row in summary.table.to_pylist()}
    assert_answer_rows(rows, marker)
    assert {row["mode"] for row in rows.values()} == {MODE}, {r["mode"] for r in rows.values()}
