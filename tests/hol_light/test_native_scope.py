"""Native contexts see what the toplevel would (issue 23): every loaded file
sees everything loaded before it, side effects run in toplevel order,
`loads "update_database.ml"` is dropped as HOL Light's inline_load.ml drops
it, words in comments and strings are no runtime loads, a trusted context
stays trusted after an `open` of the core, and a failed library compile
leaves no temporary folder in the shared cache. Weakly typed values (issue
32) compile across files and images, their type fixed by their first use;
a compile error's reason ends with the compiler's own words, its log kept.

One native server per choice of context proofs, booted once for the module;
no check may fall back to bytecode (the fallback raises, naming why).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.checks.context_proofs import ContextProofs
from runner.corpus import load_corpus
from runner.prover import CheckLimits
from runner.provers.hol_light.install import find_hol_light
from runner.provers.hol_light.session.native import NativeHolLightBackend
from runner.provers.hol_light.session.native_session import MODE, NativeSession
from runner.provers.hol_light.native.native_cache import compiled_libraries, content_digest, library_marker
from runner.provers.hol_light.load_graph import DROPPED_LOADS
from runner.provers.hol_light.native.native_compile import NativeCompiler, NotNative, Scope

from ..helpers import TEST_MEM_LIMIT, make_corpus

pytestmark = pytest.mark.hol
LIMITS = CheckLimits(time_s=60.0, time_source="test", mem_bytes=TEST_MEM_LIMIT, expected_mem_bytes=0)

# The development the contexts load, as files under the context root.
# s2n-bignum's arm/proofs/base.ml needs Library/words.ml, then loadt's
# common/for_hollight.ml, which names words.ml's dest_word_ty unqualified:
# c.ml is that shape (d.ml names a.ml's and b.ml's values without loading them).
FILES = {
    "a.ml": "let pb_a_value = 3;;\nlet PB_A_DEF = new_definition `pb_a_const = 3`;;\n",
    "b.ml": 'loadt "a.ml";;\nlet pb_b_value = pb_a_value + 1;;\n',
    "c.ml": 'needs "b.ml";;\nloadt "d.ml";;\n',
    "d.ml": "let pb_d_value = pb_b_value + pb_a_value;;\n"
            "let PB_D_TH = prove(`pb_a_const = 3`, REWRITE_TAC[PB_A_DEF]);;\n",
    # Parsed when it loads: `x + y` is real only if prioritize_real() ran first.
    "ord.ml": "let pb_ord_ty = type_of `pb_x + pb_y`;;\n",
    # Reads a reference the context set before loading it.
    "flag.ml": "let pb_flag_seen = !pb_flag;;\n",
    "u.ml": '(* as s2n-bignum\'s base.ml *)\nloads "update_database.ml";;\nlet pb_u_value = 5;;\n',
    "bad.ml": 'let pb_bad = 1 + "not a number";;\n',
    # As s2n-bignum's common/consttime.ml: a partial application (its `let
    # ... in` evaluates a rule first) with optional arguments, whose `exec`
    # stays weakly typed until arm/proofs/consttime.ml (weak_arm.ml here)
    # uses it, in another file: another unit natively.
    "weak_common.ml": "let PB_GEN_SAFE_TAC =\n"
                      "  let pth = ARITH_RULE `1 + 1 = 2` in\n"
                      "  let mainfn ?(public_vars:term list option) ?(tac_before:tactic option) exec\n"
                      "      (extra:thm list) single_step_tac : tactic =\n"
                      "    (match tac_before with Some t -> t | None -> ALL_TAC) THEN\n"
                      "    REWRITE_TAC (pth :: extra) THEN single_step_tac exec \"s0\" in\n"
                      "  mainfn;;\n"
                      "let pb_weak_stored = ref [];;\n",
    # Loaded while the context has a weak value: its chunk binds it again.
    "after_weak.ml": "let pb_after_weak = 4;;\n",
    "weak_arm.ml": 'needs "weak_common.ml";;\n'
                   "let PB_SAFE_TAC ?(public_vars:term list option) exec : tactic =\n"
                   "  PB_GEN_SAFE_TAC ?public_vars exec [] (fun th (s:string) -> ACCEPT_TAC th);;\n"
                   "pb_weak_stored := [`T`];;\n",
}


@pytest.fixture(scope="module")
def dev_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("scope-root")
    for name, text in FILES.items():
        (root / name).write_text(text)
    return root


class RanInBytecode(Exception):
    pass


def _no_bytecode():
    raise RanInBytecode


def _session(native_build, root: Path, workdir: Path, proofs: ContextProofs) -> NativeSession:
    """A native session whose bytecode fallback refuses to start: a check
    that cannot run natively fails its test (``_check`` says why)."""
    backend = NativeHolLightBackend(find_hol_light(), native_build, root, context_proofs=proofs)
    return NativeSession(backend, workdir, bytecode=_no_bytecode)


@pytest.fixture(scope="module")
def replay_session(native_build, dev_root, tmp_path_factory):
    session = _session(native_build, dev_root, tmp_path_factory.mktemp("scope-replay"), ContextProofs.REPLAY)
    yield session
    session.close()


@pytest.fixture(scope="module")
def trust_session(native_build, dev_root, tmp_path_factory):
    session = _session(native_build, dev_root, tmp_path_factory.mktemp("scope-trust"), ContextProofs.TRUST)
    yield session
    session.close()


def _check(session: NativeSession, corpus: Path, problems: dict) -> dict[str, tuple[str, str, str]]:
    """problem id -> (verdict, reason, mode), every problem checked in ``session``."""
    loaded = load_corpus(make_corpus(corpus, problems), None)
    before = set(session._not_native)
    try:
        session.prepare(loaded)
    except RanInBytecode:
        why = {k: v for k, v in session._not_native.items() if k not in before}
        pytest.fail(f"ran in bytecode: {why}")
    results = {p.problem_id: session.check(p, LIMITS) for p in loaded}
    return {pid: (r.outcome.verdict.value, r.outcome.reason, r.mode) for pid, r in results.items()}


def _all_ok_natively(results: dict) -> None:
    assert all(v == "OK" and mode == MODE for v, _, mode in results.values()), results


def test_each_loaded_file_sees_everything_loaded_before_it(replay_session, tmp_path):
    results = _check(replay_session, tmp_path / "c", {
        # b.ml uses the a.ml it loads itself.
        "s.b": ('needs "b.ml";;\n', "`T`",
                '(if pb_b_value = 4 then ACCEPT_TAC TRUTH else failwith "pb_b_value")'),
        # d.ml uses what c.ml loaded before it: a.ml's definition and both values.
        "s.c": ('needs "c.ml";;\n', "`pb_a_const = 3`",
                '(if pb_d_value = 7 then ACCEPT_TAC PB_D_TH else failwith "pb_d_value")'),
    })
    _all_ok_natively(results)


def test_a_call_before_a_load_runs_before_the_loaded_file(replay_session, tmp_path):
    results = _check(replay_session, tmp_path / "c", {
        # As base.ml's `prioritize_num();; needs ...`: the call runs before the
        # library loads, so the library parses its terms under it.
        "o.prioritize": ('prioritize_real();;\nneeds "ord.ml";;\n', "`T`",
                         '(if pb_ord_ty = `:real` then ACCEPT_TAC TRUTH else failwith "num")'),
    })
    _all_ok_natively(results)


def test_a_loaded_file_reads_what_the_context_set_before_it(replay_session, tmp_path):
    results = _check(replay_session, tmp_path / "c", {
        "o.flag": ('let pb_flag = ref 0;;\npb_flag := 7;;\nneeds "flag.ml";;\npb_flag := 9;;\n', "`T`",
                   '(if pb_flag_seen = 7 && !pb_flag = 9 then ACCEPT_TAC TRUTH else failwith "order")'),
    })
    _all_ok_natively(results)


def test_words_of_loads_in_comments_and_strings_are_no_runtime_loads(replay_session, tmp_path):
    results = _check(replay_session, tmp_path / "c", {
        "w.comment": ("let pb_w = 1 (* with initial loads *);;\n"
                      'let pb_w_name = "needs" ^ {|loadt|} ^ String.make 1 \'"\';;\n'
                      "let pb_w_tm = `needs:bool`;;\n", "`T`",
                      '(if pb_w = 1 && pb_w_name = "needsloadt\\"" then ACCEPT_TAC TRUTH else failwith "w")'),
    })
    _all_ok_natively(results)


def test_loads_of_update_database_is_dropped(replay_session, tmp_path):
    results = _check(replay_session, tmp_path / "c", {
        "u.library": ('needs "u.ml";;\n', "`T`",
                      '(if pb_u_value = 5 then ACCEPT_TAC TRUTH else failwith "u")'),
        "u.context": ("".join(f'loads "{name}";;\n' for name in DROPPED_LOADS) + "let pb_u_ctx = 6;;\n", "`T`",
                      '(if pb_u_ctx = 6 then ACCEPT_TAC TRUTH else failwith "u")'),
    })
    _all_ok_natively(results)


def test_a_trusted_context_stays_trusted_after_opening_the_core(trust_session, native_build, tmp_path):
    """An `open` of a core module rebinds `prove` to the core's own; under
    trust the switchable one must be opened again after it, so a trusted
    context never runs a tactic."""
    core = native_build.core_opens[0]
    results = _check(trust_session, tmp_path / "c", {
        "t.open": (f"let pb_t = 1;;\nopen {core};;\n"
                   'let PB_T_TH = prove(`T`, (fun g -> failwith "ran"));;\n', "`T`", "ACCEPT_TAC PB_T_TH"),
    })
    _all_ok_natively(results)


def test_a_failed_library_compile_leaves_no_temporary_folder(native_build, dev_root, tmp_path):
    compiler = NativeCompiler(native_build, find_hol_light(), dev_root, tmp_path / "w")
    with pytest.raises(NotNative, match="does not compile natively"):
        compiler.compile_context('needs "bad.ml";;\n', "Pb_scope_bad", Scope(compiler.base_opens))
    left = sorted(p.name for p in compiler.libdir.iterdir() if p.name.startswith(".pb_lib_"))
    assert left == []


def test_a_library_compiled_into_the_cache_is_marked_for_plans(native_build, dev_root, tmp_path):
    """Plans price the compile of a library the cache holds at nothing
    (native_cache.py): the compiler marks each file whose modules all went there."""
    compiler = NativeCompiler(native_build, find_hol_light(), dev_root, tmp_path / "w")
    compiler.compile_context('needs "u.ml";;\n', "Pb_scope_marked", Scope(compiler.base_opens))
    marker = library_marker(dev_root / "u.ml", content_digest((dev_root / "u.ml").read_bytes()))
    assert (compiler.libdir / "files" / marker).is_file()
    assert marker in compiled_libraries(find_hol_light().hol_dir, native_build.dir.parent)


# -- weakly typed values (issue 32) ----------------------------------------------

def test_a_weak_partial_application_with_optional_arguments_crosses_files(replay_session, tmp_path):
    """s2n-bignum's SAFE contexts: GEN_PROVE_SAFETY_SPEC_TAC is weakly typed
    in common/consttime.ml and fixed in arm/proofs/consttime.ml. Each file
    is a unit natively; before issue 32 the first did not compile
    (`contains type variables that cannot be generalized`)."""
    results = _check(replay_session, tmp_path / "c", {
        "w.safe": ('needs "weak_arm.ml";;\nlet PB_WEAK_TH = prove(`T`, PB_SAFE_TAC TRUTH);;\n', "`T`",
                   '(if !pb_weak_stored = [`T`] then ACCEPT_TAC PB_WEAK_TH else failwith "stored")'),
    })
    _all_ok_natively(results)


def test_a_weak_value_crosses_images_and_its_first_use_fixes_it(replay_session, tmp_path):
    """A `ref []` of one problem's context that the next problem's context
    fills: two images, two units. The first image has it weak (its answer
    uses it at no type); the second's first use fixes it, and a function
    that read it in the first image reads the same cell at that type."""
    first = "let pb_cache = ref [];;\nlet pb_get () = !pb_cache;;\n"
    second = first + "let pb_n = List.length !pb_cache;;\npb_cache := [1; 2];;\n"
    results = _check(replay_session, tmp_path / "c", {
        "w.first": (first, "`T`", '(if !pb_cache = [] && pb_get () = [] then ACCEPT_TAC TRUTH else failwith "1")'),
        "w.second": (second, "`T`",
                     '(if pb_n = 0 && pb_get () = [1; 2] && !pb_cache = [1; 2] then ACCEPT_TAC TRUTH '
                     'else failwith "2")'),
        # Left weak to the end: the answer may use it at no particular type.
        "w.unused": ("let pb_unused = ref [];;\n", "`T`",
                     '(if List.length !pb_unused = 0 then ACCEPT_TAC TRUTH else failwith "u")'),
    })
    _all_ok_natively(results)


def test_a_weak_value_fixed_at_a_type_defined_after_it(replay_session, tmp_path):
    """The toplevel fixes a weak variable at a type defined after it; in one
    unit OCaml refuses that ("would escape its scope"), so the unit is cut
    before the phrase that fixes it: in one image, and across two."""
    first = "let pb_late = ref [];;\n"
    second = first + "type pb_late_t = Pb_late of int;;\npb_late := [Pb_late 3];;\n"
    results = _check(replay_session, tmp_path / "c", {
        "e.one": ("let pb_esc = ref [];;\ntype pb_esc_t = Pb_esc_a | Pb_esc_b;;\npb_esc := [Pb_esc_b];;\n", "`T`",
                  '(if !pb_esc = [Pb_esc_b] then ACCEPT_TAC TRUTH else failwith "esc")'),
        "e.first": (first, "`T`", "ACCEPT_TAC TRUTH"),
        "e.second": (second, "`T`", '(if !pb_late = [Pb_late 3] then ACCEPT_TAC TRUTH else failwith "late")'),
    })
    _all_ok_natively(results)


def test_a_library_chunk_that_binds_a_contexts_weak_value_stays_the_sessions(native_build, dev_root, tmp_path):
    """The shared cache holds only chunks that name shared modules: a
    library loaded while a context's value is weak binds it again, naming
    the context's module, so that chunk goes to the session's folder."""
    compiler = NativeCompiler(native_build, find_hol_light(), dev_root, tmp_path / "w")
    scope = compiler.compile_context('let pb_cw = ref [];;\nneeds "after_weak.ml";;\npb_cw := [1];;\n',
                                     "Pb_weak_lib", Scope(compiler.base_opens))
    assert scope.weak == ()
    shared = [p for p in compiler.libdir.glob("*.src.ml") if "Pb_weak_lib" in p.read_text()]
    assert shared == []
    assert any("Pb_weak_lib" in p.read_text() for p in (tmp_path / "w").glob("pb_lib_*.src.ml"))


def test_a_weak_value_cannot_be_fixed_at_two_types(native_build, dev_root, tmp_path):
    """The toplevel refuses a second use at another type; so does native
    code, although each use is in another image (another unit)."""
    compiler = NativeCompiler(native_build, find_hol_light(), dev_root, tmp_path / "w")
    scope = compiler.compile_context("let pb_twice = ref [];;\n", "Pb_weak_twice", Scope(compiler.base_opens))
    assert [v.name for v in scope.weak] == ["pb_twice"]
    scope = compiler.compile_context("pb_twice := [1];;\n", "Pb_weak_twice_int", scope)
    assert scope.weak == ()
    with pytest.raises(NotNative, match="expected of type\\s+int"):
        compiler.compile_context('pb_twice := ["one"];;\n', "Pb_weak_twice_string", scope)


def test_a_compile_error_ends_with_the_compilers_words_and_its_log_is_kept(native_build, dev_root, tmp_path):
    """The reason keeps the compiler's start and end (a type can run to
    pages: the middle goes), and the whole output is in the log it names."""
    long_type = " -> ".join(["?public_vars:term list", "?tac_before_maychange_simp:tactic"]
                            + ["thm list"] * 40 + ["tactic"])
    args = " ".join(f"a{i}" for i in range(40))
    text = (f"let pb_long : {long_type} = fun ?public_vars ?tac_before_maychange_simp {args} -> ALL_TAC;;\n"
            "let pb_wrong : int = pb_long;;\n")
    logs = tmp_path / "logs"
    compiler = NativeCompiler(native_build, find_hol_light(), dev_root, tmp_path / "w", log_dir=logs)
    with pytest.raises(NotNative) as raised:
        compiler.compile_context(text, "Pb_long_error", Scope(compiler.base_opens))
    reason = str(raised.value)
    assert reason.startswith("does not compile natively (log: ")
    assert "line 3: Error: This expression has type" in reason and " ... " in reason
    assert reason.endswith("but an expression was expected of type int"), reason
    log = Path(reason.split("(log: ", 1)[1].split(")", 1)[0])
    assert log.parent == logs / "native-compile" and log.is_file()
    full = log.read_text()
    assert full.count("thm list") >= 40 and "expected of type int" in full      # the middle the reason cut
    assert (log.parent / (log.name[:-len(".log")] + ".src.ml")).read_text().endswith(text)
