"""One check as files and a command line: the per-problem session's ROOT,
the original and answer theories, and the theory that compares them."""

from __future__ import annotations

from pathlib import Path

from runner.provers.isabelle import check as ic
from runner.provers.isabelle.corpus import build_candidate, load_description, read_goal

DEMO = Path(__file__).resolve().parents[2] / "examples" / "isabelle_demo"
ISABELLE = ["/opt/Isabelle2024/bin/isabelle"]


def demo_check(tmp_path, problem="vc.bounded_sum", answer=b"using fact0 fact1 by auto"):
    desc = load_description(DEMO)
    goal = read_goal(DEMO / problem / "Goal.thy")
    cand = build_candidate(answer, goal, desc)
    files = ic.write_check(tmp_path / "c", "Proofbatch_Check_1_0", desc, goal, cand.text, 600,
                           "00ff00ff00ff00ff")
    return desc, goal, files


def test_root_is_a_session_on_the_parent_heap_with_the_limit(tmp_path):
    desc, goal, files = demo_check(tmp_path)
    assert (files.directory / "ROOT").read_text() == (
        'session "Proofbatch_Check_1_0" = "Demo_Lib" +\n'
        "  options [timeout = 600, threads = 1, document = false, quick_and_dirty = false]\n"
        "  theories [quick_and_dirty]\n"
        '    "Proofbatch_Original"\n'
        "  theories\n"
        '    "Goal"\n'
        '    "Proofbatch_Check"\n')


def test_only_the_original_gets_quick_and_dirty(tmp_path):
    """The original needs it for its placeholder sorry; the answer runs in
    the block without it, so a sorry in the answer fails in Isabelle too."""
    _, goal, files = demo_check(tmp_path)
    root = (files.directory / "ROOT").read_text()
    block_with_qd = root.split("  theories [quick_and_dirty]\n")[1].split("  theories\n")[0]
    assert block_with_qd.split() == ['"Proofbatch_Original"']
    original = (files.directory / "Proofbatch_Original.thy").read_text()
    assert original == goal.text.replace("theory Goal", "theory Proofbatch_Original", 1)


def test_answer_theory_keeps_its_name_and_has_the_answer_in_place(tmp_path):
    _, goal, files = demo_check(tmp_path)
    text = (files.directory / "Goal.thy").read_text()
    assert "  using fact0 fact1 by auto\n\nend\n" in text and "sorry" not in text


def test_check_theory_compares_the_named_theorem_under_the_nonce(tmp_path):
    _, goal, files = demo_check(tmp_path)
    text = (files.directory / "Proofbatch_Check.thy").read_text()
    assert text.startswith('theory Proofbatch_Check\n  imports "Proofbatch_Original" "Goal"\nbegin\n')
    assert 'val tag = "PROOFBATCH-00ff00ff00ff00ff "' in text
    # The fact name bounded_sum'vc is passed as an ML string literal.
    assert '(base ^ "." ^ "bounded_sum\'vc")' in text
    assert "Thm_Deps.all_oracles proved" in text and "aconv" in text
    assert text.count("\\<open>") == text.count("\\<close>") == 1


def test_ml_string_escapes_anything_but_plain_names():
    assert ic._ml_string("a'b.c_1") == '"a\'b.c_1"'
    assert ic._ml_string('x" ^ evil') == '"x\\034\\032\\094\\032evil"'


def test_check_command_line(tmp_path):
    desc, _, files = demo_check(tmp_path)
    assert ic.build_check_argv(ISABELLE, desc, files) == [
        *ISABELLE, "build", "-d", str(DEMO / "library"), "-d", str(files.directory),
        "Proofbatch_Check_1_0"]


def test_other_modes_command_lines(tmp_path):
    desc, _, files = demo_check(tmp_path)
    assert ic.process_argv(ISABELLE, desc, Path("/s/check.ML")) == [
        *ISABELLE, "process", "-l", "Demo_Lib", "-d", str(DEMO / "library"), "-f", "/s/check.ML"]
    assert ic.server_session_start_args(desc) == {"session": "Demo_Lib",
                                                  "dirs": [str(DEMO / "library")]}
    assert ic.server_use_theories_args("uuid-1", files, 600) == {
        "session_id": "uuid-1", "theories": ["Proofbatch_Check"],
        "master_dir": str(files.directory), "watchdog_timeout": 600.0}
