"""The OCaml runtime setting a check runs under (--runtime,
runner/provers/hol_light/runtime.py): its parameters reach the prover's
images and every check forked from them, it is recorded with every row and
in sweep.json, and a resume under another setting is refused, since proof
times differ between settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from runner.errors import InputError
from runner.provers.hol_light import runtime

from ..helpers import ROOT, make_corpus


def test_a_setting_has_one_canonical_key_and_sets_only_its_own_environment():
    r = runtime.parse("settle=compact, o=120,s=4M")
    assert r.key == "s=4M,o=120,settle=compact"
    assert runtime.parse("default") is runtime.DEFAULT and runtime.DEFAULT.key == "default"
    env = r.environment({"PATH": "/bin", "OCAMLRUNPARAM": "v=0x400", "CAMLRUNPARAM": "b"})
    assert env == {"PATH": "/bin", "OCAMLRUNPARAM": "s=4M,o=120", "PROOFBATCH_SETTLE": "compact"}
    # The runner's own OCAMLRUNPARAM never sets a check's heap unsaid.
    assert "OCAMLRUNPARAM" not in runtime.DEFAULT.environment({"OCAMLRUNPARAM": "s=16M"})


def test_checks_default_to_the_grid_s_best_in_their_mode():
    class Config:
        runtime = None

    for mode, want in (("native", "s=16M,o=200"), ("auto", "s=16M,o=200"), ("bytecode", "s=4M,o=200")):
        Config.mode = mode
        assert runtime.default_for(mode).key == want and runtime.of_config(Config).key == want
    Config.runtime = "default"      # as the bench's program runs
    assert runtime.of_config(Config) is runtime.DEFAULT


def test_a_check_sets_every_parameter_ocaml_s_own_where_its_setting_names_none():
    # Its image may have started under another setting (`serve --runtime`).
    assert runtime.DEFAULT.check_gc == "s=256k,o=120,i=15"
    assert runtime.parse("i=4M,settle=compact").check_gc == "s=256k,o=120,i=4M"
    assert runtime.TUNED.check_gc == "s=16M,o=200,i=15"
    assert runtime.BYTECODE_TUNED.check_gc == "s=4M,o=200,i=15"


def test_a_map_of_ocaml_s_defaults_holds_under_a_mode_s_default_and_no_other():
    assert runtime.holds_under("default", runtime.TUNED.key)
    assert runtime.holds_under("default", runtime.BYTECODE_TUNED.key)
    assert runtime.holds_under("s=4M", "s=4M")
    # Measured only for the grid's best; a map of it is not a map of the defaults.
    assert not runtime.holds_under("default", "s=4M")
    assert not runtime.holds_under(runtime.TUNED.key, "default")


@pytest.mark.parametrize("spec, said", [
    ("", "is empty"), ("s=0", "whole number above 0"), ("s=4X", "whole number above 0"),
    ("q=1", "'q' is not a setting"), ("s=1M,s=2M", "given twice"), ("settle=sometimes", "settle="),
    ("s", "is not NAME=VALUE")])
def test_a_bad_setting_is_refused_saying_what_is_wrong(spec, said):
    with pytest.raises(InputError) as e:
        runtime.parse(spec)
    assert said in str(e.value) and "s=4M,o=120,settle=compact" in str(e.value)


# A context that notes the runtime its image started with (an answer may not
# name Gc or Sys: the screen refuses them), and an answer that proves only
# where it was the one asked for: 4M words of minor heap, told to compact.
NOTES_IT = ("let pb_runtime_ok = (Gc.get ()).Gc.minor_heap_size = 4194304 && "
            "Sys.getenv \"PROOFBATCH_SETTLE\" = \"compact\";;\n")
SEES_IT = "(fun g -> if pb_runtime_ok then ARITH_TAC g else failwith \"not the runtime asked for\")"


@pytest.mark.hol
def test_a_sweep_runs_under_its_setting_records_it_and_keeps_it_on_resume(native_build, tmp_path):
    corpus = make_corpus(tmp_path / "corpus", {"rt.sees": (NOTES_IT, "`x + 0 = x`\n", SEES_IT + "\n")})
    out = tmp_path / "out"

    # Natively (the session's build, PROOFBATCH_CACHE): a server starts in
    # about 12 s here, where the bytecode toplevel reads hol.ml for 60-90 s.
    def run(*extra):
        return subprocess.run([sys.executable, "-m", "runner.cli", "run", str(corpus), "--out", str(out),
                               "--default-timeout", "300", "--mem-limit", "2G", "--mode", "native",
                               "--no-fallback", *extra],
                              cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              env={**os.environ, "OCAMLRUNPARAM": "s=1M"})

    r = run("--runtime", "s=4M,settle=compact")
    assert r.returncode == 0, r.stderr
    (row,) = [line.split(",") for line in (out / "verdicts.csv").read_text().splitlines()[1:]]
    assert row == ["rt.sees", "OK"], (out / "results.csv").read_text()
    assert "s=4M,settle=compact" in (out / "results.csv").read_text()
    assert json.loads((out / "sweep.json").read_text())["runtime"] == "s=4M,settle=compact"
    # Another setting would mix proof times: refused in one line, nothing run.
    r = run("--runtime", "default")
    assert r.returncode == 2 and "--runtime s=4M,settle=compact" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


# -- the garbage collector's counters over each proof (why a setting wins) ----

def test_a_record_gives_its_gc_counters_and_one_without_them_still_reads():
    from runner.provers.hol_light.session.verdict_record import GC_FIELDS, RECORD, gc_counters

    fields = ",".join(str(n) for n in range(1, len(GC_FIELDS) + 1))
    new = RECORD.match(f"PBV2\tab\tOK\t0.5\t0.4\t100\tgc={fields}\tproved in 0.500 s\n")
    assert new["reason"] == "proved in 0.500 s"
    assert json.loads(gc_counters(new["gc"])) == dict(zip(GC_FIELDS, range(1, len(GC_FIELDS) + 1)))
    # Before prove ran (an answer that did not type): an empty field, no counters.
    assert gc_counters(RECORD.match("PBV2\tab\tERROR\t0\t0\t100\tgc=\tanswer: x\n")["gc"]) == ""
    old = RECORD.match("PBV2\tab\tOK\t0.5\t0.4\t100\tproved in 0.500 s\n")
    assert old["reason"] == "proved in 0.500 s" and gc_counters(old["gc"]) == ""


def assert_gc_counters(rows) -> None:
    """Every proof that ran records the collector's counters over it, read
    from the check itself: a forked check starts from its image's heap."""
    from runner.provers.hol_light.session.verdict_record import GC_FIELDS

    proved = [r for r in rows if r["verdict"] == "OK"]
    assert proved
    counters = [json.loads(r["gc"]) for r in proved]
    for row, gc in zip(proved, counters):
        assert set(gc) == set(GC_FIELDS), row
        assert gc["minor_words"] > 0, row                   # every proof allocates
        assert gc["heap_words_before"] > 0 and gc["top_heap_words"] >= gc["heap_words"], row
        assert gc["top_heap_words"] >= gc["top_heap_words_before"], row
    assert sum(gc["minor_collections"] for gc in counters) > 0


@pytest.mark.hol
def test_every_bytecode_proof_records_its_gc_counters(demo_rows):
    assert_gc_counters(demo_rows.values())
