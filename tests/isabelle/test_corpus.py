"""The Isabelle corpus: its description, its problems, and the answer turned
into the theory to check, or refused before anything runs."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from runner.errors import InputError
from runner.provers.isabelle.corpus import build_candidate, load_description, load_isabelle_corpus, read_goal
from runner.verdicts import Verdict

DEMO = Path(__file__).resolve().parents[2] / "examples" / "isabelle_demo"


def expected() -> dict[str, tuple[str, str]]:
    with open(DEMO / "expected_verdicts.csv", newline="") as f:
        return {r["Problem"]: (r["Verdict"], r["Decided_by"]) for r in csv.DictReader(f)}


@pytest.fixture
def corpus(tmp_path) -> Path:
    """A private copy of the demo corpus, to change."""
    shutil.copytree(DEMO, tmp_path / "demo")
    return tmp_path / "demo"


def test_demo_description_names_its_library_session():
    desc = load_description(DEMO)
    assert desc.parent_session == "Demo_Lib"
    assert desc.session_dirs == ((DEMO / "library").resolve(),)
    assert desc.answer_form == "proof" and desc.external_provers is False


def test_demo_corpus_loads_every_problem_but_not_the_library():
    problems = load_isabelle_corpus(DEMO)
    assert [p.problem_id for p in problems] == sorted(expected())
    p = next(p for p in problems if p.problem_id == "logic.drinker")
    assert p.setup_path == p.query_path == DEMO / "logic.drinker" / "Goal.thy"
    assert p.category == "logic" and p.answer.startswith(b"proof cases")


def test_screening_gives_the_expected_verdicts_without_isabelle():
    """Every problem the demo marks as decided by the screen gets its verdict
    from the answer text alone; every other one becomes a theory to check,
    with the answer in place of the placeholder and nothing else changed."""
    desc = load_description(DEMO)
    want = expected()
    for p in load_isabelle_corpus(DEMO):
        goal = read_goal(p.setup_path)
        cand = build_candidate(p.answer, goal, desc)
        verdict, decided_by = want[p.problem_id]
        if decided_by == "screen":
            assert cand.refusal is not None and cand.refusal.verdict.value == verdict, p.problem_id
            assert cand.text is None
        else:
            assert cand.refusal is None, (p.problem_id, cand.refusal)
            a, b = goal.placeholder
            assert cand.text == goal.text[:a] + p.answer.decode().strip() + goal.text[b:]


def test_external_provers_are_allowed_when_the_corpus_says_so(corpus):
    toml = corpus / "isabelle.toml"
    toml.write_text(toml.read_text().replace("external_provers = false", "external_provers = true"))
    desc = load_description(corpus)
    p = next(p for p in load_isabelle_corpus(corpus) if p.problem_id == "fault.external_prover")
    assert build_candidate(p.answer, read_goal(p.setup_path), desc).refusal is None


@pytest.mark.parametrize("answer, verdict, reason", [
    (b'by simp\nML \\<open>Isabelle_System.bash "id"\\<close>', "ERROR", "runs code"),
    (b"by (simp add: @{ML_text x})", "ERROR", "ML antiquotation"),
    (b"by (metis \\<proof>)", "CHEATING", "skips the proof"),
    (b"by simp (* sorry in a comment is fine *)", None, None),
    (b'using [[simp_trace]] by (simp add: "sorry")', None, None),
    (b"by (simp", None, None),          # left to Isabelle: an outer syntax error
    (b"", "ERROR", "empty"),
    (b"\xff\xfe", "ERROR", "not UTF-8"),
    (b'by "unterminated', "ERROR", "unterminated"),
])
def test_answer_screen(answer, verdict, reason):
    desc = load_description(DEMO)
    goal = read_goal(DEMO / "arith.add_comm" / "Goal.thy")
    cand = build_candidate(answer, goal, desc)
    if verdict is None:
        assert cand.refusal is None and cand.text
    else:
        assert cand.refusal.verdict == Verdict(verdict) and reason in cand.refusal.reason


def whole_theory_corpus(corpus: Path) -> Path:
    toml = corpus / "isabelle.toml"
    toml.write_text(toml.read_text().replace('answer = "proof"', 'answer = "theory"'))
    return corpus


@pytest.mark.parametrize("edit, verdict, reason", [
    (lambda t: t.replace("sorry", "by simp"), None, None),
    (lambda t: t.replace("sorry", "by simp").replace("(a::nat) + b = b + a", "(a::nat) = a"),
     "CHEATING", "statement of add_comm_demo changed"),
    (lambda t: t.replace("sorry", "by simp").replace('"Demo_Lib.Demo_Defs"', ""),
     "CHEATING", "header"),
    (lambda t: t.replace("theorem add_comm_demo", "context assumes \"False\" begin\ntheorem add_comm_demo")
              .replace("sorry", "by simp\nend"), "CHEATING", "inside a context block"),
    (lambda t: t.replace("add_comm_demo", "other_name").replace("sorry", "by simp"),
     "CHEATING", "does not prove add_comm_demo"),
    (lambda t: t.replace("theory Goal", "theory Other").replace("sorry", "by simp"),
     "CHEATING", "not Goal"),
    (lambda t: t.replace("sorry", "by simp\naxiomatization where ax: False"), "CHEATING", "axiom"),
    (lambda t: "lemma x: True by simp", "ERROR", "syntax"),
])
def test_whole_theory_answers_keep_header_and_statement(corpus, edit, verdict, reason):
    desc = load_description(whole_theory_corpus(corpus))
    goal = read_goal(corpus / "arith.add_comm" / "Goal.thy")
    cand = build_candidate(edit(goal.text).encode(), goal, desc)
    if verdict is None:
        assert cand.refusal is None and cand.text == edit(goal.text)
    else:
        assert cand.refusal.verdict == Verdict(verdict) and reason in cand.refusal.reason, cand.refusal


@pytest.mark.parametrize("toml, problem", [
    ("parent_session = 'HOL'", "has no [isabelle] table"),
    ("[isabelle]\nparent = 'HOL'", "unknown key(s) parent"),
    ("[isabelle]\nanswer = 'tactic'", "answer = 'tactic'"),
    ("[isabelle]\nsession_dirs = ['nowhere']", "has no ROOT or ROOTS file"),
    ("[isabelle]\nexternal_provers = 'yes'", "has the wrong type"),
    ("[isabelle]\nparent_session = 'HOL Library'", "is not a session name"),
    ("[isabelle\n", "not valid TOML"),
])
def test_bad_description_is_one_clear_input_error(corpus, toml, problem):
    (corpus / "isabelle.toml").write_text(toml)
    with pytest.raises(InputError) as err:
        load_description(corpus)
    assert problem in str(err.value) and "isabelle.toml" in err.value.where


def test_bad_problem_theories_are_input_errors_naming_the_file(corpus):
    goal = corpus / "arith.add_comm" / "Goal.thy"
    goal.write_text(goal.read_text().replace("theory Goal", "theory Goal2"))
    with pytest.raises(InputError, match="rename the file to Goal2.thy"):
        load_isabelle_corpus(corpus)
    goal.write_text(goal.read_text().replace("sorry", "by simp"))
    with pytest.raises(InputError, match="not a goal theory: has 0 `sorry`") as err:
        load_isabelle_corpus(corpus)
    assert err.value.where == str(goal)
    goal.unlink()
    with pytest.raises(InputError, match="missing Goal.thy"):
        load_isabelle_corpus(corpus)


def test_theory_file_star_takes_the_one_thy_of_each_folder(corpus):
    """NTP4VC names each theory after its VC, not Goal.thy."""
    toml = corpus / "isabelle.toml"
    toml.write_text(toml.read_text().replace('theory_file = "Goal.thy"', 'theory_file = "*"'))
    for d in corpus.iterdir():
        if (d / "Goal.thy").is_file():
            text = (d / "Goal.thy").read_text().replace("theory Goal", "theory VC_goal0", 1)
            (d / "Goal.thy").unlink()
            (d / "VC_goal0.thy").write_text(text)
    problems = load_isabelle_corpus(corpus)
    assert problems, "no problem loaded: the theory files were not found"
    assert all(p.setup_path.name == "VC_goal0.thy" for p in problems)
    (corpus / "arith.add_comm" / "Extra.thy").write_text("theory Extra imports Main begin end")
    with pytest.raises(InputError, match="has 2 .thy files"):
        load_isabelle_corpus(corpus)


def test_whole_theory_may_keep_the_corpus_own_axiomatization_but_not_add_one(corpus):
    """NTP4VC's translation axiomatizes what Isabelle cannot prove terminating:
    a problem theory may hold such an axiomatization, and an answer that keeps
    it is not cheating; one that adds another is."""
    desc = load_description(whole_theory_corpus(corpus))
    path = corpus / "arith.add_comm" / "Goal.thy"
    path.write_text(path.read_text().replace(
        "begin\n", 'begin\n\naxiomatization f :: "nat \\<Rightarrow> nat" where f_def: "f n = n"\n', 1))
    goal = read_goal(path)
    kept = goal.text.replace("sorry", "by simp")
    assert build_candidate(kept.encode(), goal, desc).refusal is None
    added = kept.replace("by simp", 'by simp\naxiomatization where g: "(0::nat) = 1"')
    assert build_candidate(added.encode(), goal, desc).refusal.verdict == Verdict.CHEATING
    with_sorry = goal.text.replace("sorry", "sorry\nlemma x: True sorry")
    assert build_candidate(with_sorry.encode(), goal, desc).refusal.verdict == Verdict.CHEATING
