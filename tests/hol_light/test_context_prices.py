"""Issue 25's context prices met on real sweeps: machine code priced by the
code an EXEC rule decodes, library compiles the native cache holds priced at
nothing, and simulate's per-class figures for the problems a sweep selects."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from runner import cli
from runner.checks.context_proofs import ContextProofs
from runner.provers.hol_light.costs.context_costs import estimate
from runner.provers.hol_light.costs.file_loads import FileLoads, read_phrases
from runner.provers.hol_light.costs.load_model import MODELS
from runner.provers.hol_light.contexts import build_context_tree
from runner.provers.hol_light.costs.machine_code import elf_text_bytes, exec_bytes
from runner.provers.hol_light.install import find_hol_light
from runner.provers.hol_light.native.native_build import build_key, toolchain_versions
from runner.provers.hol_light.native.native_cache import compiled_libraries, content_digest, library_marker

TRUST = ContextProofs.TRUST
# An arm file head as s2n-bignum writes it: 3 words of code, then their decoding.
HEAD = ('let tiny_mc = define_assert_from_elf "tiny_mc" "arm/tiny.o"\n[\n'
        '  0xb4000060;       (* arm_CBZ X0 (word 12) *)\n  0xf9400020;\n  0xd65f03c0\n];;\n'
        "let TINY_EXEC = ARM_MK_EXEC_RULE tiny_mc;;\n")


def assembled(tmp_path: Path, name: str, n: int) -> Path:
    """An arm object file assembled as s2n-bignum's arm Makefile assembles
    its own (binutils-aarch64-linux-gnu, scripts/setup.sh installs it), its
    .text ``n`` instructions of 4 bytes, where that Makefile leaves objects."""
    src = tmp_path / f"{name}.s"
    src.write_text(".text\n" + "".join("nop\n" for _ in range(n)))
    obj = tmp_path / "arm" / f"{name}.o"
    obj.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["aarch64-linux-gnu-as", "-o", str(obj), str(src)], check=True)
    return obj


def codes(text: str) -> list:
    from runner.provers.hol_light.ocaml_lexer import normal_form, split_phrases

    return [n for p in split_phrases(text) if (n := normal_form(p))]


def test_an_exec_rule_decodes_the_words_its_definition_lists():
    assert exec_bytes(codes(HEAD), None) == [None, 12]
    trimmed = HEAD + 'let tiny_tmc = define_trimmed "tiny_tmc" tiny_mc;;\n' \
        "let TINY_TEXEC = X86_MK_CORE_EXEC_RULE tiny_tmc;;\n"
    assert exec_bytes(codes(trimmed), None) == [None, 12, None, 12]
    # x86 lists bytes, not words.
    x86 = 'let t_mc = define_assert_from_elf "t_mc" "x86/t.o"\n[ 0x48; 0x89; 0xd7 ];;\n' \
          "let T_EXEC = X86_MK_EXEC_RULE t_mc;;\n"
    assert exec_bytes(codes(x86), None) == [None, 3]
    # A rule applied inside a proof runs only with the proof: no top-level rule.
    assert exec_bytes(codes("let X = prove(`T`, tac (ARM_MK_EXEC_RULE tiny_mc));;\n"), None) == [None]


def test_a_definition_without_words_reads_the_objects_text(tmp_path):
    obj = assembled(tmp_path, "tiny", 10)
    assert elf_text_bytes(obj) == 40
    assert elf_text_bytes(tmp_path / "tiny.s") is None      # not an object file
    head = 'let tiny_mc = define_from_elf "tiny_mc" "arm/tiny.o";;\n' \
           "let TINY_EXEC = ARM_MK_EXEC_RULE tiny_mc;;\n"
    assert exec_bytes(codes(head), tmp_path) == [None, 40]
    assert exec_bytes(codes(head), tmp_path / "elsewhere") == [None, 0]


@pytest.mark.parametrize("mode", ["bytecode", "native"])
def test_a_file_head_is_priced_by_the_code_it_decodes(mode):
    model = MODELS[mode]
    assert model.exec_per_kb_s > 0
    [rule] = [p for p in read_phrases(HEAD) if p.exec_bytes is not None]
    assert rule.exec_bytes == 12
    tree = build_context_tree({"arm.tiny.T": HEAD}, "salt")
    [cost] = estimate(tree, {}, mode=mode, files=FileLoads()).values()
    plain = sum(model.phrase_cost(p.kb) for p in read_phrases(HEAD))
    assert cost.execs == 1 and cost.exec_bytes == 12
    assert cost.load_s(TRUST) == pytest.approx(plain + model.exec_cost(12) + model.image_s)
    bigger = HEAD.replace("0xd65f03c0", "0xd65f03c0; " + "; ".join(["0x91000421"] * 200))
    [big] = estimate(build_context_tree({"arm.tiny.T": bigger}, "salt"), {}, mode=mode,
                     files=FileLoads()).values()
    assert big.load_s(TRUST) - cost.load_s(TRUST) > 200 * 4 / 1024 * model.exec_per_kb_s * 0.9


def test_a_library_the_native_cache_holds_costs_no_compile(tmp_path):
    root, hol = tmp_path / "dev", tmp_path / "hol"
    root.mkdir()
    hol.mkdir()
    (hol / "hol.ml").write_text("let core_x = 1;;\n")
    (root / "lib.ml").write_text("".join(f"let l{i} = {i};;\n" for i in range(200)))
    tree = build_context_tree({"ex.t.X": 'needs "lib.ml";;\nlet x = 1;;\n'}, "salt")
    [cold] = estimate(tree, {}, mode="native", files=FileLoads(root, hol, compiled=frozenset())).values()
    marker = library_marker(root / "lib.ml", content_digest((root / "lib.ml").read_bytes()))
    [warm] = estimate(tree, {}, mode="native", files=FileLoads(root, hol, compiled=frozenset({marker}))
                      ).values()
    assert warm.cached == ("lib.ml",) and cold.cached == ()
    model = MODELS["native"]
    assert cold.compile_s() - warm.compile_s() == pytest.approx(
        model.compile_chunk_s + (cold.compile_kb - warm.compile_kb) * model.compile_per_kb_s)
    assert warm.compile_kb < 0.1 * cold.compile_kb
    assert warm.load_s(TRUST) == cold.load_s(TRUST)     # loading it costs the same
    # A changed file is another file: its old marker does not hold.
    (root / "lib.ml").write_text("let changed = 0;;\n")
    [changed] = estimate(tree, {}, mode="native", files=FileLoads(root, hol, compiled=frozenset({marker}))
                         ).values()
    assert changed.cached == ()


def test_markers_are_read_from_the_build_a_sweep_would_use_now(tmp_path):
    """An older native build of the same HOL Light (another toolchain, or an
    earlier proofbatch) is another cache: its markers would price a cold
    cache as warm."""
    install = find_hol_light()
    versions = toolchain_versions()
    now = build_key(install, versions)
    cache = tmp_path / "native"
    for name in (now, "debian-older-build"):
        (cache / name / "libs" / "files").mkdir(parents=True)
        (cache / name / "build.json").write_text(json.dumps({
            "key": name, "hol_dir": str(install.hol_dir), **versions}))
        (cache / name / "libs" / "files" / f"m-{name}").touch()
    assert compiled_libraries(install.hol_dir, cache) == {f"m-{now}"}
    assert compiled_libraries(install.hol_dir, tmp_path / "empty") == frozenset()
    assert compiled_libraries(None, cache) == frozenset()


def corpus_of(root: Path, setups: dict[str, str]) -> Path:
    for pid, setup in setups.items():
        (root / pid).mkdir(parents=True)
        (root / pid / "setup.ml").write_text(setup)
        (root / pid / "query.txt").write_text("`T`\n")
        (root / pid / "answer.txt").write_text("ALL_TAC\n")
    return root


def test_simulate_plans_the_problems_a_sweep_selects_and_prices_each_class(tmp_path, capsys):
    lib = "let shared = 1;;\n"
    setups = {"ex.a.A1": lib + HEAD, "ex.a.A2": lib + HEAD + "let A1 = prove(`T`, ALL_TAC);;\n",
              "ex.b.B1": lib + "let b = 2;;\n", "ex.c.C1": lib + "let c = 3;;\n"}
    corpus = corpus_of(tmp_path / "corpus", setups)
    tmap = tmp_path / "map.json"
    tmap.write_text(json.dumps([{"problem_id": p, "prove_secs": 1.0, "timeout_sec": 60} for p in setups]))
    chosen = tmp_path / "chosen.txt"
    chosen.write_text("ex.a.*\nex.b.B1\n")
    base = ["simulate", "--timeout-map", str(tmap), "--map-mode", "native", "--corpus", str(corpus),
            "--workers", "2", "--mode", "native", "--context-proofs", "trust", "--json"]
    assert cli.main(base + ["--problems", f"@{chosen}"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["checks"] == 3
    classes = out["image_classes"]
    assert {k: v["images"] for k, v in classes.items()} == {
        "boot": 1, "library prefix": 1, "file head": 2, "chain image": 1}
    model = MODELS["native"]
    # ex.a's head decodes 12 bytes of code; ex.b's decodes none.
    assert classes["file head"]["build_s"] > model.exec_cost(12)
    assert out["contexts"]["trust"]["account"]["by_mode"]["native"]["machine_code_rules"] == 1
    assert cli.main(base) == 0
    assert json.loads(capsys.readouterr().out)["image_classes"]["file head"]["images"] == 3


def test_simulate_without_a_corpus_picks_the_maps_problems(tmp_path, capsys):
    """Issue 44: --problems without --corpus selects among the map's own
    problems (the bench's heavy tail, priced alone); one that matches none
    of them is refused in one line, naming the map."""
    tmap = tmp_path / "map.json"
    tmap.write_text(json.dumps([{"problem_id": "a.b.C", "prove_secs": 1.0, "timeout_sec": 60},
                                {"problem_id": "x.y.Z", "prove_secs": 2.0, "timeout_sec": 60}]))
    assert cli.main(["simulate", "--timeout-map", str(tmap), "--map-mode", "native",
                     "--workers", "1", "--problems", "a.*", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["checks"] == 1
    assert cli.main(["simulate", "--timeout-map", str(tmap), "--map-mode", "native",
                     "--workers", "1", "--problems", "q.*"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--problems" in err[0] and "matches no problem of the map" in err[0]
