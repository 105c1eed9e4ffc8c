"""`proofbatch extract` of many files (issue 33, point 4): linear, and it says how far it is.

2,000 one-theorem files once gave 300 s of silence: telling a library file
from a proof file walked every file for each file (50, 100, 200 files: 1.0,
2.6, 8.3 s). The loads are now indexed once (LoadGraph.loaders). What grew
with the square of the file count is counted here, not timed, so a loaded
host cannot fail it: the loads read and the paths resolved. The times are
benchmarks/scale/extract_scale.py's (docs/extract.md). Text only: no HOL Light boot.
"""

from __future__ import annotations

from pathlib import Path

from runner.cli import main
from runner.provers.hol_light.extract import command_extract
from runner.provers.hol_light.extract.extract import extract
from runner.provers.hol_light.extract.extract_model import ExtractConfig
from runner.provers.hol_light.install import DEBIAN_DIR
from runner.provers.hol_light.load_graph import LoadGraph


def one_theorem_files(folder: Path, n: int) -> list[Path]:
    """``n`` files of one theorem each, as benchmarks/scale/extract_scale.py makes them."""
    folder.mkdir(parents=True)
    files = []
    for k in range(n):
        f = folder / f"t{k}.ml"
        f.write_text(f"let T{k} = prove\n (`{k} + 0 = {k}`,\n  ARITH_TAC);;\n")
        files.append(f)
    return files


def _work(tmp_path: Path, n: int, monkeypatch) -> dict[str, int]:
    counts = {"loads": 0, "resolve": 0}
    loads, resolve = LoadGraph.loads, Path.resolve

    def counted_loads(self, path):
        counts["loads"] += 1
        return loads(self, path)

    def counted_resolve(self, *a, **kw):
        counts["resolve"] += 1
        return resolve(self, *a, **kw)

    files = one_theorem_files(tmp_path / f"f{n}", n)
    with monkeypatch.context() as m:
        m.setattr(LoadGraph, "loads", counted_loads)
        m.setattr(Path, "resolve", counted_resolve)
        result = extract(ExtractConfig(files=tuple(files), out=tmp_path / f"c{n}", hol_dir=DEBIAN_DIR))
    assert len(result.problems) == n
    return counts


def test_extract_s_work_grows_linearly_with_the_file_count(tmp_path, monkeypatch):
    small, large = _work(tmp_path, 40, monkeypatch), _work(tmp_path, 160, monkeypatch)
    # Four times the files: four times the work, not sixteen (the old code's 15.2 and 13.9;
    # 4.0 and 4.0 now).
    for what in ("loads", "resolve"):
        assert large[what] <= 4.5 * small[what], (what, small, large)


def test_extract_tells_each_stage_and_how_far_it_is(tmp_path):
    files = one_theorem_files(tmp_path / "f", 3)
    heard: list[tuple[str, int, int | None]] = []
    extract(ExtractConfig(files=tuple(files), out=tmp_path / "c", hol_dir=DEBIAN_DIR),
            lambda *told: heard.append(told))
    stages = list(dict.fromkeys(stage for stage, _, _ in heard))
    assert stages == ["reading files", "cutting theorems", "following loads", "listing problems",
                      "writing problems"]
    assert [t for t in heard if t[0] == "reading files"] == [("reading files", k, 3) for k in range(3)]
    assert heard[-1] == ("writing problems", 3, 3)


def test_a_long_extract_says_how_far_it_is_without_a_terminal(tmp_path, capsys, monkeypatch):
    """In a log (no terminal for a bar), a line every SAY_EVERY_S once
    extract has run SAY_AFTER_S; a quick one says only its result."""
    files = one_theorem_files(tmp_path / "f", 200)
    assert main(["extract", *map(str, files[:2]), "--out", str(tmp_path / "quick")]) == 0
    assert "extract:" not in capsys.readouterr().err
    monkeypatch.setattr(command_extract, "SAY_AFTER_S", 0.0)
    monkeypatch.setattr(command_extract, "SAY_EVERY_S", 0.01)
    assert main(["extract", *map(str, files), "--out", str(tmp_path / "c")]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("extract: ")]
    assert said, "nothing said while extracting"
    assert all(line.endswith(" s so far)") for line in said), said
    assert any(" of 200 (" in line for line in said), said


def test_a_library_file_is_still_told_from_a_proof_file(tmp_path):
    """The index gives library_file's answers: a file loaded by another
    after a file it does not load itself is one; a proof file loaded by
    another after both loaded the same base is not."""
    root = tmp_path / "dev"
    root.mkdir()
    (root / "base.ml").write_text("let base = 1;;\n")
    (root / "lib.ml").write_text("let L = prove(`1 = 1`, REFL_TAC);;\n")
    (root / "loader.ml").write_text('needs "base.ml";;\nneeds "lib.ml";;\n'
                                    "let M = prove(`2 = 2`, REFL_TAC);;\n")
    (root / "proof.ml").write_text('needs "base.ml";;\nlet P = prove(`3 = 3`, REFL_TAC);;\n')
    (root / "user.ml").write_text('needs "base.ml";;\nneeds "proof.ml";;\n'
                                  "let U = prove(`4 = 4`, REFL_TAC);;\n")
    graph = LoadGraph(root, DEBIAN_DIR)
    universe = [root / f for f in ("lib.ml", "loader.ml", "proof.ml", "user.ml")]
    loaders = graph.loaders(universe)
    assert graph.library_file(root / "lib.ml", loaders) == (root / "loader.ml", root / "base.ml")
    assert graph.library_file(root / "proof.ml", loaders) is None
    assert graph.library_file(root / "user.ml", loaders) is None
