"""benchmarks/tables.py: the docs' measured tables are written from the
records, and ``--check`` names every figure that differs from its record or
has none (issue 45, point 4). Planted records in temp folders; the real
tree's check runs here too, which is how CI runs it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import tables  # noqa: E402
from table_registry import TABLES, Figure, Row, Table  # noqa: E402

HEAD = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                      text=True, check=True).stdout.strip()

TOY = {"toy": Table("toy", "README.md", ("what", "figure"), (
    Row("speed", "overhead", ("overhead", "median {overhead_median_ms:.1f} ms, cold {cold_start_s:.1f} s")),
    Row("ratio", "throughput", ("throughput", "{speedup:.2f}×")),
))}
README = """# toy

Some prose.
<!-- table: toy (from overhead.py, throughput.py) -->
| what | figure | record |
|---|---|---|
| overhead | old | x |
| throughput | old | x |

The end.
"""


def plant(results, script, figures, *, commit=HEAD, dirty=False, stamp="20260101T000000Z",
          command=None, passed=True, host_factor=None):
    folder = results / script
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stamp}-{commit[:10]}.json"
    path.write_text(json.dumps({
        "script": script, "command": command or [f"{script}.py"], "commit": commit, "dirty": dirty,
        "load": {"before": 0.4, "during": {"min": 0.5, "max": 2.1}, "after": 1.0},
        "host_factor": host_factor, "figures": figures, "pass": passed}))
    return path


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(README)
    results = tmp_path / "results"
    plant(results, "overhead", {"overhead_median_ms": 11.83, "cold_start_s": 65.8})
    plant(results, "throughput", {"speedup": 2.0233}, host_factor=1.44)
    return tmp_path, results


def check(root, results, unrecorded=None, registry=TOY, write=False, figures=None):
    return tables.run(root, results, unrecorded or root / "none.txt", write=write, tables=registry,
                      figures=figures or {})


def test_written_from_the_records_then_checked_and_one_changed_digit_is_named(tree):
    root, results = tree
    before = check(root, results)
    assert any("row speed, figure: the file has 'old', its record gives 'median 11.8 ms, cold 65.8 s'"
               in p for p in before), before
    check(root, results, write=True)
    text = (root / "README.md").read_text()
    assert "| overhead | median 11.8 ms, cold 65.8 s | `" + HEAD[:7] + "`, load 0.4-2.1 |" in text
    assert "| throughput | 2.02× | `" + HEAD[:7] + "`, load 0.4-2.1, factor 1.44 |" in text
    assert text.startswith("# toy\n\nSome prose.\n") and text.endswith("\nThe end.\n")
    assert check(root, results) == []
    # One digit of a figure in the page ...
    (root / "README.md").write_text(text.replace("2.02×", "2.03×"))
    assert check(root, results) == [
        "README.md:8: table toy, row ratio, figure: the file has '2.03×', its record gives '2.02×'"]
    # ... or in the record.
    (root / "README.md").write_text(text)
    plant(results, "overhead", {"overhead_median_ms": 12.83, "cold_start_s": 65.8}, stamp="20260102T000000Z")
    assert [p.split(", figure")[0] for p in check(root, results)] == ["README.md:7: table toy, row speed"]


def test_the_newest_clean_record_of_the_rows_settings_is_used(tree):
    root, results = tree
    plant(results, "throughput", {"speedup": 9.0}, dirty=True, stamp="20260105T000000Z")
    plant(results, "throughput", {"speedup": 3.0}, stamp="20260104T000000Z", passed=False)
    check(root, results, write=True)
    assert "| throughput | 3.00× | `" + HEAD[:7] + "`, load 0.4-2.1, MISS |" in (root / "README.md").read_text()
    # A row asking for --mode native takes no record of another command.
    registry = {"toy": Table("toy", "README.md", ("what", "figure"), (
        TOY["toy"].rows[0], Row("ratio", "throughput", ("throughput", "{speedup:.2f}×"),
                                args=("--mode", "native"))))}
    (root / "README.md").write_text(README)
    assert "toy/ratio" in " ".join(check(root, results, registry=registry))


def test_a_row_with_no_record_must_be_listed_and_a_listed_one_with_a_record_fails(tree):
    root, results = tree
    check(root, results, write=True)
    for p in (results / "throughput").iterdir():
        p.unlink()
    problems = check(root, results)
    assert problems == ["README.md: table toy, row ratio: no record yet; run its script, or list "
                        "'toy/ratio' in benchmarks/unrecorded.txt with the reason"]
    listed = root / "unrecorded.txt"
    listed.write_text("# why\ntoy/ratio   throughput.py has not run\n")
    assert check(root, results, listed) == []
    listed.write_text("toy/ratio   throughput.py has not run\ntoy/speed   stale\n")
    assert check(root, results, listed) == [
        "benchmarks/unrecorded.txt: toy/speed has a record now: render it (benchmarks/tables.py) "
        "and drop the line"]
    listed.write_text("toy/ratio\n")
    with pytest.raises(tables.TableError, match="gives no reason"):
        check(root, results, listed)


def test_a_pooled_row_is_written_from_one_record_of_each_run_it_names(tree):
    """A figure pooled over several runs (predictions' kept-out seeds 5 and
    9) comes from the newest record of each; while one run has none, the row
    is unrecorded."""
    root, results = tree
    def medians(figures: list[dict]) -> str:
        return " / ".join(f"{f['overhead_median_ms']:.1f}" for f in figures)

    pooled = {"toy": Table("toy", "README.md", ("what", "figure"), (
        Row("speed", "overhead", ("overhead", medians), args=("--quiet",),
            pool=(("--seed", "5"), ("--seed", "9"))),
        Row("ratio", "throughput", ("throughput", "{speedup:.2f}×")),
    ))}
    for f in (results / "overhead").iterdir():
        f.unlink()
    plant(results, "overhead", {"overhead_median_ms": 9.0},
          command=["overhead.py", "--seed", "5", "--quiet"])
    # Without --quiet, and of another seed: neither is a run the row names.
    plant(results, "overhead", {"overhead_median_ms": 99.0}, command=["overhead.py", "--seed", "9"],
          stamp="20260102T000000Z")
    plant(results, "overhead", {"overhead_median_ms": 98.0},
          command=["overhead.py", "--seed", "7", "--quiet"], stamp="20260102T000000Z")
    assert any("no record yet" in p and "toy/speed" in p for p in check(root, results, registry=pooled))
    plant(results, "overhead", {"overhead_median_ms": 12.5},
          command=["overhead.py", "--quiet", "--seed", "9"], stamp="20260103T000000Z")
    check(root, results, registry=pooled, write=True)
    cell = f"`{HEAD[:7]}`, load 0.4-2.1"
    assert f"| overhead | 9.0 / 12.5 | {cell}; {cell} |" in (root / "README.md").read_text()
    assert check(root, results, registry=pooled) == []


def test_a_figure_in_prose_is_written_from_its_record_and_one_changed_digit_is_named(tree):
    """A README sentence's figure between ``<!-- figure: NAME -->`` and
    ``<!-- /figure -->`` comes from its record as a table's cell does, and
    is no longer an unmarked prose figure."""
    root, results = tree
    check(root, results, write=True)
    text = (root / "README.md").read_text()
    (root / "README.md").write_text(text.replace(
        "Some prose.", "Some prose: 2 workers gave <!-- figure: toy-speedup -->9.99×<!-- /figure --> here."))
    figures = {"toy-speedup": Figure("toy-speedup", "README.md", "throughput", "{speedup:.2f}×")}
    assert check(root, results, figures=figures) == [
        "README.md:3: figure toy-speedup: the file has '9.99×', its record gives '2.02×'"]
    check(root, results, figures=figures, write=True)
    assert "gave <!-- figure: toy-speedup -->2.02×<!-- /figure --> here." in (root / "README.md").read_text()
    assert check(root, results, figures=figures) == []
    # Unregistered, it is named; registered with no marker, too.
    assert check(root, results, figures={}) == ["README.md:3: figure 'toy-speedup' is not in FIGURES"]
    (root / "README.md").write_text(text)
    assert check(root, results, figures=figures) == [
        "README.md: figure toy-speedup is in FIGURES but no marker names it"]


def test_a_record_of_a_commit_outside_the_history_is_named(tree):
    root, results = tree
    plant(results, "overhead", {"overhead_median_ms": 11.83, "cold_start_s": 65.8},
          commit="0123456789" * 4, stamp="20260103T000000Z")
    assert any("names commit '0123456789" in p and "not in this repository's history" in p
               for p in check(root, results))


def test_unmarked_figures_and_tables_without_formats_are_named(tree):
    root, results = tree
    check(root, results, write=True)
    text = (root / "README.md").read_text()
    (root / "README.md").write_text(text + "\nIt ran 1.44x slower.\n\n| a | b |\n|---|---|\n| x | 3.5 s |\n")
    (root / "docs" / "page.md").write_text("| what | figure |\n|---|---|\n| speed | 7.25 s |\n"
                                           "\n| verdict | when |\n|---|---|\n| OK | 3 times |\n")
    problems = check(root, results)
    assert "README.md:12: figure '1.44x' outside any marked table" in problems
    assert any(p.startswith("README.md:14: a table of figures with no") for p in problems)
    assert any(p.startswith("docs/page.md:1: a table of figures with no") for p in problems)
    assert not any("docs/page.md:5" in p for p in problems)     # no figure in it
    listed = root / "unrecorded.txt"
    listed.write_text("README.md:1.44x  a factor measured before records\nREADME.md:9.9x  gone\n")
    problems = check(root, results, listed)
    assert not any("'1.44x'" in p for p in problems)
    assert "benchmarks/unrecorded.txt: README.md:9.9x is no longer in README.md: drop the line" in problems
    # A table registered by its scripts only is kept until a record comes.
    registry = {**TOY, "bare": Table("bare", "docs/page.md", scripts=("overhead",))}
    (root / "docs" / "page.md").write_text("<!-- table: bare (from overhead.py) -->\n"
                                           "| what | figure |\n|---|---|\n| speed | 7.25 s |\n")
    assert any("table bare: overhead.py has a record" in p and "write its rows" in p
               for p in check(root, results, registry=registry))
    # One that describes the run of given arguments takes no record of another run.
    registry["bare"] = Table("bare", "docs/page.md", scripts=("overhead",), args=("--seed", "1"))
    plant(results, "overhead", {"overhead_median_ms": 9.0, "cold_start_s": 60.0}, stamp="20260106T000000Z",
          command=["overhead.py", "--seed", "48", "--files", "1"])
    unlisted = check(root, results, registry=registry)
    assert not any("table bare" in p and "has a record" in p for p in unlisted), unlisted
    assert "docs/page.md: table bare: no record yet; run its script, or list 'bare' in " \
        "benchmarks/unrecorded.txt with the reason" in unlisted, unlisted


def test_markers_must_name_a_registered_table_and_its_scripts(tree):
    root, results = tree
    check(root, results, write=True)
    text = (root / "README.md").read_text()
    (root / "README.md").write_text(text.replace("(from overhead.py, throughput.py)", "(from overhead.py)"))
    assert check(root, results) == [
        "README.md:4: table toy's marker should read '<!-- table: toy (from overhead.py, throughput.py) -->'"]
    (root / "README.md").write_text(text.replace("table: toy", "table: nosuch"))
    problems = check(root, results)
    assert "README.md:4: marker of table 'nosuch', which TABLES lacks" in problems
    assert "README.md: table toy is in TABLES but no marker names it" in problems
    (root / "README.md").write_text(text.replace("<!-- table: toy", "<!-- table toy"))
    with pytest.raises(tables.TableError, match="README.md:4: a table marker must read"):
        check(root, results)
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tables.py"), "--check",
                          "--root", str(root)], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.startswith("tables.py: README.md:4: a table marker")


def test_the_registrys_formats_give_the_readmes_wording():
    def cells(table, key, figures):
        row = next(r for r in TABLES[table].rows if r.key == key)
        return tables.render_cells(row, {"figures": figures, "commit": HEAD, "pass": True})
    planning = {"makespan": [{"workers": w, "planned_ratio": r} for w, r in
                             ((8, 1.0004), (8, 1.0011), (64, 1.0), (512, 1.0002))]}
    assert cells("headline", "planning", planning)[1] == "1.001 on 8 workers, 1.000 on 64 and 512"
    startup = {n: {"median_s": s} for n, s in
               (("--version", 0.214), ("--help", 0.12), ("status", 0.2), ("python -c pass", 0.081))}
    assert cells("headline", "startup", startup)[1] == \
        "`--version` 0.21 s, `--help` 0.12 s, `status` 0.20 s (bare Python 0.08 s)"
    elastic = {"hol_mode": "native", "scenarios": {"cancel": {"pulling": {"ratio": 1.0304}}}}
    assert cells("headline", "slurm_elastic", elastic)[1] == "1.030× of the prediction natively"
    assert cells("headline", "native", {"heavy_speedup": 5.372, "native_start_s": 13.7,
                                        "bytecode_start_s": 79.0})[1] == "5.37×; start-up 13.7 s vs 79.0 s"
    with pytest.raises(tables.TableError, match="row passk's format needs a figure"):
        cells("headline", "passk", {"speed": 21.3})


def test_the_docs_match_their_records_or_are_listed_as_unrecorded():
    """CI's run of ``benchmarks/tables.py --check`` on the tree."""
    assert tables.run() == []


def test_a_history_table_is_kept_as_written_whatever_records_its_script_has(tree):
    """A table of runs today's code cannot make again (its code changed since)
    stays as written, is neither checked against the script's records nor
    listed as unrecorded; without the reason it is a table to format."""
    root, results = tree
    (root / "README.md").write_text(README.replace("table: toy (from overhead.py, throughput.py)",
                                                   "table: old (from overhead.py)"))
    kept = {"old": Table("old", "README.md", scripts=("overhead",), history="ran code since removed")}
    assert check(root, results, registry=kept) == []
    check(root, results, registry=kept, write=True)
    assert "| overhead | old | x |" in (root / "README.md").read_text()
    unkept = {"old": Table("old", "README.md", scripts=("overhead",))}
    assert "formats none of this table's rows" in " ".join(check(root, results, registry=unkept))
