"""Isabelle theory text: the lexer sees commands only outside terms and
comments, and a corpus goal theory is read into header, goal and placeholder."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.provers.isabelle import text as it

DEMO = Path(__file__).resolve().parents[2] / "examples" / "isabelle_demo"


def words(text: str) -> list[str]:
    return [t.text for t in it.code_tokens(it.lex(text)) if t.kind == "word"]


def test_sorry_inside_terms_comments_and_cartouches_is_not_a_command():
    text = ('lemma "sorry = x" (* sorry (* nested sorry *) still comment *)\n'
            '  text \\<open>we never write sorry \\<open>nested\\<close> here\\<close>\n'
            '  text ‹nor ‹here› sorry›  by (simp add: foo)')
    assert "sorry" not in words(text)
    assert words(text)[:1] == ["lemma"] and "by" in words(text)


def test_escaped_quote_does_not_end_a_string():
    toks = it.lex(r'lemma "a \" sorry" by simp')
    assert [t.kind for t in toks] == ["word", "string", "word", "word"]


@pytest.mark.parametrize("text", ['lemma "open', "(* open", "text ‹open", "{* open"])
def test_unterminated_text_is_a_lex_error(text):
    with pytest.raises(it.LexError):
        it.lex(text)


def test_demo_goal_theory_is_read_into_its_parts():
    goal = it.parse_goal((DEMO / "arith.add_comm" / "Goal.thy").read_text())
    assert goal.name == "Goal"
    assert goal.imports == ("Main", "Demo_Lib.Demo_Defs")
    assert goal.theorem == "add_comm_demo"
    assert goal.statement == ("add_comm_demo", ":", '"(a::nat) + b = b + a"')
    a, b = goal.placeholder
    assert goal.text[a:b] == "sorry"


def test_ntp4vc_shaped_goal_with_fixes_assumes_and_several_conclusions():
    goal = it.parse_goal((DEMO / "vc.bounded_sum" / "Goal.thy").read_text())
    assert goal.theorem == "bounded_sum'vc"
    assert goal.statement[goal.statement.index("shows") + 2] == "and"
    assert goal.statement.count("assumes") == 2


@pytest.mark.parametrize("text, problem", [
    ('theory T imports Main begin\nlemma a: "x" sorry\nlemma b: "y" sorry\nend', "has 2 `sorry`"),
    ('theory T imports Main begin\nlemma "x = x" sorry\nend', "has no name"),
    ('theory T imports Main begin\nlemma a: "x = x" by simp\nend', "has 0 `sorry`"),
    ('theory T imports Main\nlemma a: "x" sorry\nend', "no `begin`"),
    ('theory T imports Main begin\nlemma a: "x" sorry\nlemma b: "y" by simp\nend',
     "not the last command"),
    ('lemma a: "x" sorry', "does not start with `theory NAME`"),
])
def test_malformed_goal_theories_say_what_is_wrong(text, problem):
    with pytest.raises(it.TheoryError, match=problem.replace("`", ".")):
        it.parse_goal(text)


def test_rename_theory_changes_only_the_header_name():
    text = (DEMO / "lib.double_even" / "Goal.thy").read_text()
    renamed = it.rename_theory(text, "Proofbatch_Original")
    assert renamed.startswith("theory Proofbatch_Original\n")
    assert renamed.replace("Proofbatch_Original", "Goal", 1) == text


def test_statements_inside_context_blocks_are_counted_by_depth():
    text = ('theory T imports Main begin\ncontext fixes x :: nat assumes "x = 1" begin\n'
            'lemma g: "x = 1" by fact\nend\nlemma h: "True" by simp\nend')
    toks = it.code_tokens(it.lex(text))
    after = it.parse_theory(text)[3]
    depths = {toks[i + 1].text: d for i, d in it.outer_statements(toks, after)}
    assert depths == {"g": 1, "h": 0}
