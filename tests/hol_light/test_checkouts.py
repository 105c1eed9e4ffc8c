"""Any HOL Light a bench user has: Debian's package, a checkout built with its
own Makefile, and a checkout built as s2n-bignum-bench builds it
(HOLLIGHT_USE_MODULE=1, with hol_lib.cma and hol_lib.cmxa), each in bytecode
and native.

Debian's package is always here. The checkouts are not, and building the
bench's took 11 minutes here, so those tests take them from the environment
and skip, saying which variable to set, where they are absent:

- PROOFBATCH_BENCH_HOL_LIGHT: a module-built checkout
  (scripts/build-hol-light-checkout.sh SRC 5e62421 DIR native);
- PROOFBATCH_HOL_LIGHT_GIT (and PROOFBATCH_HOL_LIGHT_REV, default the bench's
  pin 5e62421): a HOL Light repository the tests clone and build with plain
  `make` (about 30 s) into a temporary directory.

Each HOL Light is loaded once per module (module-scoped sessions).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from runner.corpus import load_corpus
from runner.errors import InputError
from runner.provers.hol_light.install import find_hol_light
from runner.provers.hol_light.session.native import NativeHolLightBackend
from runner.provers.hol_light.session.native_session import MODE, NativeSession
from runner.provers.hol_light.native.native_build import build_key, build_native, toolchain_versions
from runner.prover import CheckLimits

from ..helpers import DEMO, ROOT, TEST_MEM_LIMIT, demo_config, expected_verdicts, make_corpus, sweep_with

# The checkouts' problems are in a category of the demo's timeouts.json.
CATEGORY = "arith"

pytestmark = pytest.mark.hol
LIMITS = CheckLimits(time_s=60.0, time_source="test", mem_bytes=TEST_MEM_LIMIT, expected_mem_bytes=0)
BENCH_REV = "5e62421"


def _bench_dir() -> Path:
    value = os.environ.get("PROOFBATCH_BENCH_HOL_LIGHT")
    if not value:
        pytest.skip("no module-built HOL Light checkout: set PROOFBATCH_BENCH_HOL_LIGHT to one built "
                    "with scripts/build-hol-light-checkout.sh SRC 5e62421 DIR native")
    path = Path(value)
    for name in ("hol.sh", "hol_lib.cma", "hol_lib.cmxa", "inline_load.ml"):
        if not (path / name).is_file():
            pytest.skip(f"PROOFBATCH_BENCH_HOL_LIGHT={path} has no {name}: build it with "
                        f"scripts/build-hol-light-checkout.sh SRC {BENCH_REV} {path} native")
    return path


# -- a development inlined as the bench inlines it -----------------------------

DEVELOPMENT = """\
(* A development in the shape of s2n-bignum's proof files. *)
needs "Library/binomial.ml";;
module Pb_helpers = struct let pb_base = ADD_CLAUSES end;;
open Pb_helpers;;
let PB_ADD_0 = prove(`!n. n + 0 = n`, REWRITE_TAC[pb_base]);;
"""


def bench_style_corpus(hol_dir: Path, root: Path) -> dict[str, str]:
    """Problems whose setup.ml is a development inlined by the checkout's own
    inline_load.ml, as the bench's are: it starts `open Hol_lib;; open
    Hol_loader;;`, carries `#N "file"` lines and updates loaded_files after
    each file. Returns problem id -> expected verdict."""
    dev = root / "dev.ml"
    dev.write_text(DEVELOPMENT)
    inlined = root / "dev.inlined.ml"
    subprocess.run(["ocaml", "inline_load.ml", str(dev), str(inlined)], cwd=hol_dir, check=True,
                   env=dict(os.environ, HOLLIGHT_DIR=str(hol_dir)), capture_output=True, timeout=120)
    text = inlined.read_text()
    assert text.startswith("open Hol_lib;;\nopen Hol_loader;;\n") and "loaded_files :=" in text
    before_helpers = text[:text.index("module Pb_helpers")]
    before_theorem = text[:text.index("let PB_ADD_0")]
    make_corpus(root / "corpus", category=CATEGORY, problems={
        # Problems sharing the library prefix; the second's context goes on
        # with a module and an open that its answer relies on.
        "bench.binom": (before_helpers, "`!n. binom(n,0) = 1`", "REWRITE_TAC[binom]"),
        "bench.open_reaches_answer": (before_theorem, "`!n. n + 0 = n`", "REWRITE_TAC[pb_base]"),
        # Names of Hol_loader are visible to answers, as in the toplevel.
        "bench.hol_loader_visible": (before_theorem, "`1 + 1 = 2`",
                                     "(fun g -> if !loaded_files = [] then NO_TAC g else ARITH_TAC g)"),
        "bench.cheat": (before_theorem, "`1 = 2`", "CHEAT_TAC"),
    })
    return {"bench.binom": "OK", "bench.open_reaches_answer": "OK", "bench.hol_loader_visible": "OK",
            "bench.cheat": "CHEATING"}


def with_demo(root: Path) -> Path:
    """The example corpus beside the bench-style problems, in one corpus."""
    corpus = root / "corpus"
    for problem in DEMO.iterdir():
        if problem.is_dir():
            shutil.copytree(problem, corpus / problem.name)
    return corpus


# -- telling the builds apart ----------------------------------------------------

def test_debian_package_is_neither_checkout_kind():
    install = find_hol_light()
    assert install.kind == "debian" and not install.module
    assert install.build.startswith("debian-hol-light-")


def test_native_cache_key_notices_a_rebuilt_pa_j(tmp_path):
    """A checkout rebuilt in place (same commit) gets a new native build."""
    fake = tmp_path / "hol"
    fake.mkdir()
    shutil.copy("/usr/share/hol-light/pa_j.cmo", fake / "pa_j.cmo")
    install = replace(find_hol_light(), kind="checkout", hol_dir=fake, build="checkout-x-plain")
    versions = toolchain_versions()
    before = build_key(install, versions)
    assert build_key(install, versions) == before
    with open(fake / "pa_j.cmo", "ab") as f:
        f.write(b"\0")
    assert build_key(install, versions) != before
    changed = build_key(install, versions)
    (fake / "hol_lib.cmxa").write_bytes(b"a module build")
    assert build_key(install, versions) != changed


def test_quotation_expander_defers_to_a_pa_j_that_has_one(native_build, tmp_path):
    """Debian's pa_j has no `tot` expander, a 2024 one has its own: with
    either, backquotes preprocess to parse_term, and nothing is added twice."""
    from runner.provers.hol_light.native.native_build import camlp5_argv

    source = tmp_path / "q.ml"
    source.write_text("let t = `x + 1`;;\n")
    pa_js = [find_hol_light()]
    if os.environ.get("PROOFBATCH_BENCH_HOL_LIGHT"):
        pa_js.append(find_hol_light(_bench_dir()))
    for install in pa_js:
        out = tmp_path / f"{install.kind}.ml"
        argv = camlp5_argv(install, native_build.dir / "hol_native_quot.cmo")
        proc = subprocess.run([*argv, "pr_o.cmo", str(source), "-o", str(out)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, (install.hol_dir, proc.stderr)
        assert 'parse_term "x + 1"' in out.read_text(), install.hol_dir


def test_a_later_context_segment_sees_an_earlier_segments_opens(native_build, tmp_path):
    """Each context segment compiles to its own module; an `open` in one
    reaches later segments and answers natively, as it does in the toplevel,
    and problems sharing a prefix share its compiled module."""
    prefix = "module Pb_m = struct let pb_thm = TRUTH end;;\nopen Pb_m;;\n"
    corpus = make_corpus(tmp_path / "c", category=CATEGORY, problems={
        "open.direct": (prefix, "`T`", "ACCEPT_TAC pb_thm"),
        "open.later": (prefix + "let pb_again = pb_thm;;\n", "`T`", "ACCEPT_TAC pb_again"),
        "open.later2": (prefix + "let pb_other = CONJ pb_thm pb_thm;;\n", "`T /\\ T`",
                        "ACCEPT_TAC pb_other"),
    })
    problems = load_corpus(corpus, None)
    backend = NativeHolLightBackend(find_hol_light(), native_build, DEMO)
    session = NativeSession(backend, tmp_path / "w")
    try:
        session.prepare(problems)
        results = {p.problem_id: session.check(p, LIMITS) for p in problems}
        images = {p.problem_id: session._image_of[p.problem_id] for p in problems}
        opens = {pid: session._scopes[key].opens for pid, key in images.items()}
    finally:
        session.close()
    assert {pid: (r.outcome.verdict.value, r.mode) for pid, r in results.items()} == {
        pid: ("OK", MODE) for pid in results}, results
    shared = f"Pb_ctx_{images['open.direct']}"          # the prefix's module, compiled once
    assert shared in opens["open.later"] and shared in opens["open.later2"]
    assert images["open.later"] != images["open.later2"]


# -- a checkout built with its own Makefile --------------------------------------

@pytest.fixture(scope="module")
def plain_checkout(tmp_path_factory) -> Path:
    src = os.environ.get("PROOFBATCH_HOL_LIGHT_GIT")
    if not src:
        pytest.skip("no HOL Light source to build a checkout from: set PROOFBATCH_HOL_LIGHT_GIT to "
                    "a clone or URL of jrh13/hol-light (`apt-get source hol-light` finds no "
                    "source tarball on this machine's mirror)")
    dest = tmp_path_factory.mktemp("hol-light-plain") / "hol-light"
    rev = os.environ.get("PROOFBATCH_HOL_LIGHT_REV", BENCH_REV)
    subprocess.run(["bash", str(ROOT / "scripts" / "build-hol-light-checkout.sh"), src, rev, str(dest),
                    "plain"], check=True, capture_output=True, timeout=900)
    return dest


def test_plain_checkout_is_told_apart_and_runs_the_example_corpus(plain_checkout, tmp_path_factory):
    install = find_hol_light(plain_checkout)
    assert install.kind == "checkout" and not install.module and install.build.endswith("-plain")
    out = tmp_path_factory.mktemp("plain") / "out"
    config = demo_config(out, hol_light=plain_checkout)
    from runner.sweep import prepare

    prepared = prepare(config)
    session = prepared.backend.start(tmp_path_factory.mktemp("plain-session"))
    try:
        summary = sweep_with(session, config)
    finally:
        session.close()
    verdicts = {r["problem_id"]: r["verdict"] for r in summary.table.to_pylist()}
    assert verdicts == expected_verdicts()


def test_plain_checkout_native_asks_for_the_module_build(plain_checkout, tmp_path):
    with pytest.raises(InputError) as err:
        build_native(find_hol_light(plain_checkout), tmp_path / "cache")
    assert "HOLLIGHT_USE_MODULE=1 hol_lib.cmxa" in str(err.value)


# -- the bench's module-built checkout -----------------------------------------------

@pytest.fixture(scope="module")
def bench_corpus(tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    hol_dir = _bench_dir()
    root = tmp_path_factory.mktemp("bench-style")
    expected = bench_style_corpus(hol_dir, root)
    with_demo(root)
    return hol_dir, root / "corpus", {**expected_verdicts(), **expected}


def _sweep(hol_dir: Path, corpus: Path, out: Path, workdir: Path, **overrides):
    from runner.sweep import prepare

    config = demo_config(out, corpus=corpus, hol_light=hol_dir, **overrides)
    prepared = prepare(config)
    session = prepared.backend.start(workdir)
    try:
        return sweep_with(session, config)
    finally:
        session.close()


def test_module_build_is_told_apart():
    install = find_hol_light(_bench_dir())
    assert install.kind == "checkout" and install.module and install.build.endswith("-module")


def test_module_checkout_bytecode_runs_bench_style_setups(bench_corpus, tmp_path_factory):
    hol_dir, corpus, expected = bench_corpus
    summary = _sweep(hol_dir, corpus, tmp_path_factory.mktemp("bench-bc") / "out",
                     tmp_path_factory.mktemp("bench-bc-session"))
    rows = {r["problem_id"]: r for r in summary.table.to_pylist()}
    assert {pid: r["verdict"] for pid, r in rows.items()} == expected, \
        {pid: r["reason"] for pid, r in rows.items() if r["verdict"] != expected[pid]}


def test_module_checkout_native_links_hol_lib_and_runs_bench_style_setups(bench_corpus,
                                                                           tmp_path_factory):
    hol_dir, corpus, expected = bench_corpus
    cache = tmp_path_factory.mktemp("bench-cache")
    build = build_native(find_hol_light(hol_dir), cache / "native")
    assert build.core_module == "Hol_lib" and hol_dir.resolve() in build.include_dirs
    with pytest.MonkeyPatch.context() as env:      # where `run --mode native` finds the build
        env.setenv("PROOFBATCH_CACHE", str(cache))
        summary = _sweep(hol_dir, corpus, tmp_path_factory.mktemp("bench-native") / "out",
                         tmp_path_factory.mktemp("bench-native-session"), mode="native")
    rows = {r["problem_id"]: r for r in summary.table.to_pylist()}
    assert {pid: r["verdict"] for pid, r in rows.items()} == expected, \
        {pid: r["reason"] for pid, r in rows.items() if r["verdict"] != expected[pid]}
    fell_back = {pid: r["reason"] for pid, r in rows.items() if r["mode"] != MODE}
    assert not fell_back
