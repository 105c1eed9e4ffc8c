"""`proofbatch extract` on hostile input (issue 46): a symlink loop given as
a file is one line, exit 2 (it was a traceback, exit 1), and each message
that misled says what helps: an empty --prefix is said to be empty; a
UTF-8 byte order mark before `let` is no OCaml and is read past; a file
name outside an id's characters is to be renamed (--prefix cannot help);
symlinks in a folder that lead nowhere are said and listed in extract.json;
loads found nowhere in Debian's HOL Light, without --hol-light, say that
the checkout the corpus runs with may well have them. Text only: no HOL
Light boots.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from runner.cli import main
from runner.provers.hol_light.extract.extract_model import MANIFEST

THEOREM = "let T1 = prove(`T`, REWRITE_TAC[]);;\n"


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_a_symlink_loop_given_as_a_file_is_one_line_exit_2(tmp_path, capsys):
    loop = tmp_path / "loop.ml"
    os.symlink("loop.ml", loop)
    assert main(["extract", str(loop), "--out", str(tmp_path / "c")]) == 2
    assert f"{loop}: is a symlink loop: it leads back to itself" in _one_line(capsys)
    dangling = tmp_path / "gone.ml"
    os.symlink("nowhere.ml", dangling)
    assert main(["extract", str(dangling), "--out", str(tmp_path / "c")]) == 2
    assert "is a dangling symlink: its target nowhere.ml does not exist" in _one_line(capsys)
    assert not (tmp_path / "c").exists()


def test_misleading_extract_messages_say_what_helps(tmp_path, capsys):
    good = tmp_path / "dev" / "good.ml"
    good.parent.mkdir()
    good.write_text(THEOREM)

    # An empty --prefix: said empty, not "characters outside [A-Za-z0-9_.+-]".
    assert main(["extract", str(good), "--out", str(tmp_path / "c0"), "--prefix", ""]) == 2
    err = _one_line(capsys)
    assert "--prefix: is empty" in err and "characters outside" not in err, err

    # A byte order mark before `let`: the theorem is read.
    bom = tmp_path / "dev" / "bom.ml"
    bom.write_bytes(b"\xef\xbb\xbf" + THEOREM.replace("T1", "T2").encode())
    assert main(["extract", str(bom), "--out", str(tmp_path / "c1")]) == 0
    capsys.readouterr()
    assert (tmp_path / "c1" / "dev.bom.T2" / "query.txt").read_text() == "`T`"
    assert (tmp_path / "c1" / "dev.bom.T2" / "setup.ml").read_text() == ""

    # A space in the file's name: --prefix does not help, renaming does.
    spaced = tmp_path / "dev" / "my proofs.ml"
    spaced.write_text(THEOREM)
    assert main(["extract", str(spaced), "--out", str(tmp_path / "c2"), "--prefix", "p"]) == 2
    err = _one_line(capsys)
    assert "its name 'my proofs' has characters outside" in err and "--prefix" not in err, err
    assert "rename the file, or copy it under such a name (e.g. my_proofs.ml)" in err, err
    # A folder's name outside them: --prefix is the fix, and it works.
    odd = tmp_path / "my dev" / "x.ml"
    odd.parent.mkdir()
    odd.write_text(THEOREM)
    assert main(["extract", str(odd), "--out", str(tmp_path / "c3")]) == 2
    assert "pass --prefix NAME" in _one_line(capsys)
    assert main(["extract", str(odd), "--out", str(tmp_path / "c3"), "--prefix", "dev"]) == 0
    capsys.readouterr()

    # Symlinks in a folder that lead nowhere: said, and listed.
    os.symlink("loop.ml", tmp_path / "dev" / "loop.ml")
    os.symlink("missing.ml", tmp_path / "dev" / "dangling.ml")
    (tmp_path / "dev" / "bom.ml").unlink()
    spaced.unlink()
    assert main(["extract", str(tmp_path / "dev"), "--out", str(tmp_path / "c4")]) == 0
    err = capsys.readouterr().err
    assert "skipped 2 symlinks that lead to no file" in err, err
    assert f"{tmp_path / 'dev' / 'loop.ml'}: is a symlink loop" in err
    assert f"{tmp_path / 'dev' / 'dangling.ml'}: is a dangling symlink" in err
    listed = json.loads((tmp_path / "c4" / MANIFEST).read_text())["skipped_links"]
    assert sorted(Path(x["source"]).name for x in listed) == ["dangling.ml", "loop.ml"]


def test_a_load_missing_from_debian_s_hol_light_says_the_checkout_may_have_it(tmp_path, capsys):
    """s2n-bignum's base.ml does `loadt "Library/records.ml"`, which newer
    checkouts have and Debian's package lacks."""
    dev = tmp_path / "dev"
    (dev / "proofs").mkdir(parents=True)
    (dev / "proofs" / "base.ml").write_text('loadt "Library/no_such_records.ml";;\n')
    proof = dev / "proofs" / "p.ml"
    proof.write_text('needs "proofs/base.ml";;\n' + THEOREM)
    assert main(["extract", str(proof), "--out", str(tmp_path / "c")]) == 0
    line, = [x for x in capsys.readouterr().err.splitlines() if x.startswith("missing load:")]
    assert line.endswith("looked for in Debian's HOL Light, not the checkout you will sweep "
                         "with: harmless if that checkout has it (pass --hol-light CHECKOUT to "
                         "check)"), line
