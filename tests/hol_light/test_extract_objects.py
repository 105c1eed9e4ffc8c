"""`proofbatch extract` says which object files a file's proofs read, and
whether they exist (issue 46, defect 1).

s2n-bignum's proofs read the machine code they verify from object files:
``define_assert_from_elf "x_mc" "arm/p521/unopt/x_base.o"``. The README's
``make -C arm`` built none of the ``arm/*/unopt/*.o`` that 15 arm proof
files read, and every problem of bignum_mul_p521.ml was ERROR
(``Sys_error(".../unopt/bignum_mul_p521_base.o: No such file or
directory")``). The fixture is a small tree shaped like s2n-bignum's: a
Makefile whose ``unopt`` target lists the unoptimised objects, a proof file
that reads one of them and one object ``make`` builds by default. Text
only: no HOL Light boots.
"""

from __future__ import annotations

import json
from pathlib import Path

from runner.cli import main
from runner.provers.hol_light.extract.extract_model import MANIFEST
from runner.provers.hol_light.object_reads import reads_in_phrase, reads_in_text

MAKEFILE = """\
OBJ = p521/bignum_mul_p521.o \\
      p521/bignum_sqr_p521.o

UNOPT_OBJ = p256/unopt/bignum_montmul_p256_base.o \\
            p521/unopt/bignum_mul_p521_base.o

%.o : %.S ; cpp $< | as -o $@ -

libs2nbignum.a: $(OBJ) ; ar -rc libs2nbignum.a $(OBJ)

unopt: $(UNOPT_OBJ)

build_proofs: $(UNOPT_OBJ) $(PROOF_BINS);
"""

PROOF = """\
needs "arm/proofs/base.ml";;

(**** print_literal_from_elf "arm/p521/unopt/commented_out.o";;
 ****)

let bignum_mul_p521_unopt_mc =
  define_assert_from_elf "bignum_mul_p521_unopt_mc" "arm/p521/unopt/bignum_mul_p521_base.o"
[ 0xd10103ff ];;

let T1 = prove(`T`, REWRITE_TAC[]);;

let bignum_mul_p521_mc = define_from_elf "bignum_mul_p521_mc"
    "arm/p521/bignum_mul_p521.o";;

let T2 = prove(`T /\\ T`, REWRITE_TAC[]);;
"""


def _tree(root: Path) -> Path:
    (root / "arm" / "proofs").mkdir(parents=True)
    (root / "arm" / "p521").mkdir()
    (root / "arm" / "Makefile").write_text(MAKEFILE)
    (root / "arm" / "proofs" / "base.ml").write_text(
        'let base_def = new_definition `base_def = 1`;;\n'
        'let word_of_elf = define_from_elf "base_mc" "arm/base_read.o";;\n')
    (root / "arm" / "base_read.o").write_bytes(b"\x7fELF")
    (root / "arm" / "p521" / "bignum_mul_p521.o").write_bytes(b"\x7fELF")
    proof = root / "arm" / "proofs" / "bignum_mul_p521.ml"
    proof.write_text(PROOF)
    return proof


def test_extract_names_each_object_a_file_reads_and_how_to_build_a_missing_one(tmp_path, capsys):
    proof = _tree(tmp_path / "s2n")
    arm = (tmp_path / "s2n" / "arm").resolve()
    out = tmp_path / "corpus"
    assert main(["extract", str(proof), "--out", str(out), "--prefix", "arm"]) == 0
    err = capsys.readouterr().err
    # base.ml's object counts (its problems load it), the commented-out one does not.
    assert (f"{proof}: reads 3 object files, 1 missing: arm/p521/unopt/bignum_mul_p521_base.o "
            f"(build it: make -C {arm} unopt); until then the problems that read it are ERROR"
            in err), err
    source, = json.loads((out / MANIFEST).read_text())["sources"]
    by_name = {o["name"]: o for o in source["object_files"]}
    assert set(by_name) == {"arm/p521/unopt/bignum_mul_p521_base.o", "arm/p521/bignum_mul_p521.o",
                            "arm/base_read.o"}
    missing = by_name["arm/p521/unopt/bignum_mul_p521_base.o"]
    assert missing["exists"] is False and missing["build"] == f"make -C {arm} unopt"
    assert missing["path"] == str(arm / "p521/unopt/bignum_mul_p521_base.o")
    assert by_name["arm/p521/bignum_mul_p521.o"]["exists"] is True
    assert "build" not in by_name["arm/p521/bignum_mul_p521.o"]

    # Built: said present. Another object is built by the target whose
    # prerequisites list it (the library), or by its own name.
    (arm / "p521" / "unopt").mkdir()
    (arm / "p521" / "unopt" / "bignum_mul_p521_base.o").write_bytes(b"\x7fELF")
    (arm / "p521" / "bignum_mul_p521.o").unlink()
    assert main(["extract", str(proof), "--out", str(out), "--prefix", "arm"]) == 0
    err = capsys.readouterr().err
    assert (f"reads 3 object files, 1 missing: arm/p521/bignum_mul_p521.o (build it: make -C {arm} "
            "libs2nbignum.a)") in err, err
    (arm / "base_read.o").unlink()
    assert main(["extract", str(proof), "--out", str(out), "--prefix", "arm"]) == 0
    assert f"(build them: make -C {arm} libs2nbignum.a; make -C {arm} base_read.o)" in \
        capsys.readouterr().err


def test_a_file_that_reads_no_object_says_nothing_of_objects(tmp_path, capsys):
    plain = tmp_path / "dev" / "plain.ml"
    plain.parent.mkdir()
    plain.write_text("let T1 = prove(`T`, REWRITE_TAC[]);;\n")
    assert main(["extract", str(plain), "--out", str(tmp_path / "c")]) == 0
    assert "object file" not in capsys.readouterr().err
    source, = json.loads((tmp_path / "c" / MANIFEST).read_text())["sources"]
    assert source["object_files"] == []


def test_the_two_readers_of_object_names_agree_on_s2n_bignum_s_forms():
    relocs = ('let x_mc, data =\n  define_assert_relocs_from_elf\n    ~map_symbol_name:(function\n'
              '      | "WHOLE_READONLY" -> "x_data" | s -> failwith ("unknown: " ^ s))\n'
              '    "x_mc"\n    "arm/curve25519/x.o"\n(fun w BL -> [ w 0xa9bf53f3 ]);;\n')
    assert reads_in_phrase(relocs) == ["arm/curve25519/x.o"]
    assert reads_in_text(relocs.encode()) == ["arm/curve25519/x.o"]
    win = 'let x_winmc = define_from_elf "x_winmc" "x86/p521/x.obj";;\n'
    assert reads_in_phrase(win) == ["x86/p521/x.obj"]
    # A string naming an object in a phrase that reads no ELF is no read.
    assert reads_in_phrase('let s = "arm/x.o";;\n') == []
    assert reads_in_phrase('(* define_from_elf "a" "arm/x.o" *) let s = 1;;\n') == []


def test_the_readme_s_s2n_path_builds_what_extract_asks_for_the_unopt_objects(tmp_path):
    """The README's arm build ran `make -C ~/s2n-bignum/arm -j2` only: 15
    arm proof files read `arm/*/unopt/*.o`, which its `unopt` target
    builds. Its commands, and the benchmark that runs them, must make the
    target extract names for such an object."""
    import inspect
    import re

    from runner.provers.hol_light.extract.extract_objects import build_command

    from ..helpers import ROOT

    _tree(tmp_path / "s2n")
    arm = (tmp_path / "s2n" / "arm").resolve()
    wanted = build_command(arm / "p521/unopt/bignum_mul_p521_base.o", tmp_path / "s2n", {})
    assert wanted == f"make -C {arm} unopt"
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("### s2n-bignum, as the bench's users have it"):]
    block = block[block.index("```sh"):block.index("```", block.index("```sh") + 5)]
    targets = {m.group(1) or "" for m in re.finditer(r"make -C ~/s2n-bignum/arm(?: -j\d+)?(?: (\w+))?",
                                                      block)}
    assert "unopt" in targets, block
    assert "--hol-light ~/hol-light" in next(line for line in block.splitlines()
                                             if line.startswith("proofbatch extract"))
    import sys
    sys.path.insert(0, str(ROOT / "benchmarks" / "s2n"))
    try:
        import s2n_readme_path
    finally:
        sys.path.remove(str(ROOT / "benchmarks" / "s2n"))
    # Every tree's proofs' targets (arm: unopt, x86: winobj), made by build_inputs.
    assert "unopt" in s2n_readme_path.S2N_TARGETS["arm"]
    assert "winobj" in s2n_readme_path.S2N_TARGETS["x86"]
    assert "S2N_TARGETS[arch]" in inspect.getsource(s2n_readme_path.build_inputs)
