"""Isabelle corpora: one theory per problem, a corpus description, and the
answer turned into the theory that is checked.

::

    CORPUS/isabelle.toml              the description (see IsabelleCorpus)
    CORPUS/<problem-id>/Goal.thy      the theory stating the goal, proof `sorry`
    CORPUS/<problem-id>/category.txt  optional; "generic" when absent
    CORPUS/<problem-id>/answer.txt    optional; the answer to check

This is NTP4VC's form: each verification condition is one theory whose one
theorem is proved by a final placeholder ``sorry``. An answer is either the
proof that replaces that ``sorry`` (``answer = "proof"``, the default, which
is what NTP4VC asks models for: "the Isabelle proof only") or the whole
theory text (``answer = "theory"``). Answers may also come from
``--answers DIR`` or ``--answers FILE.csv``, as for HOL Light.
"""

from __future__ import annotations

import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ... import answers as answer_files
from . import text as it
# The answer readers are the HOL Light corpus's, so every answer form
# (answer.txt, answer_<k>.txt, answers.jsonl, --answers DIR or CSV) works alike.
from ...corpus import PROBLEM_ID, Problem, _answers_from_csv, _answers_from_directory, _read_category
from ...errors import InputError, not_utf8, read_utf8
from ...settings import setting as _help
from ...verdicts import Outcome, Verdict

DESCRIPTION = "isabelle.toml"
ANSWER_FORMS = ("proof", "theory")


@dataclass(frozen=True)
class IsabelleCorpus:
    root: Path = _help("the corpus directory")
    parent_session: str = _help("the session every problem theory builds on: HOL, or a library "
                                "session such as NTP4VC's NTP4Verif", default="HOL")
    session_dirs: tuple[Path, ...] = _help("directories holding the ROOT of the parent session and "
                                           "of the sessions it needs (isabelle build -d); relative "
                                           "to the corpus", default=())
    sessions: tuple[str, ...] = _help("further sessions whose theories the problems import "
                                      "(ROOT `sessions`); loaded by every check", default=())
    external_provers: bool = _help("allow proofs that call provers outside Isabelle "
                                   "(sledgehammer, smt, sos)", default=False)
    answer_form: str = _help("proof: the answer replaces the placeholder sorry; theory: the "
                             "answer is the whole theory text", default="proof")
    theory_file: str = _help("the problem theory in each folder; \"*\" means the one .thy file "
                             "there", default="Goal.thy")
    heap_store: Path | None = _help("where built parent heaps are kept, shared by every node "
                                    "of a cluster; default ~/.cache/proofbatch/isabelle-heaps",
                                    default=None)


def is_isabelle_corpus(corpus: Path) -> bool:
    return (Path(corpus) / DESCRIPTION).is_file()


def load_description(corpus: Path) -> IsabelleCorpus:
    corpus = Path(corpus)
    path = corpus / DESCRIPTION
    try:
        data = tomllib.loads(read_utf8(path))
    except FileNotFoundError:
        raise InputError(path, "an Isabelle corpus needs this description",
                         'write [isabelle] parent_session = "HOL" into it') from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(path, f"not valid TOML ({exc})", "fix the syntax") from None
    table = data.get("isabelle")
    if not isinstance(table, dict):
        raise InputError(path, "has no [isabelle] table", 'add [isabelle] with parent_session = "HOL"')
    known = {"parent_session", "session_dirs", "sessions", "external_provers", "answer",
             "theory_file", "heap_store"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise InputError(path, f"unknown key(s) {', '.join(unknown)}", f"use only {', '.join(sorted(known))}")

    def typed(key, kind, default):
        value = table.get(key, default)
        if not isinstance(value, kind) or (kind is list and not all(isinstance(v, str) for v in value)):
            raise InputError(path, f"{key} = {value!r} has the wrong type",
                             f"write {key} as a {'list of strings' if kind is list else kind.__name__}")
        return value

    parent = typed("parent_session", str, "HOL")
    if not parent or not PROBLEM_ID.fullmatch(parent):
        raise InputError(path, f"parent_session {parent!r} is not a session name", 'write e.g. "HOL"')
    sessions = tuple(typed("sessions", list, []))
    for name in sessions:
        if not PROBLEM_ID.fullmatch(name):
            raise InputError(path, f"sessions entry {name!r} is not a session name", "fix the entry")
    form = typed("answer", str, "proof")
    if form not in ANSWER_FORMS:
        raise InputError(path, f"answer = {form!r}", 'write answer = "proof" or answer = "theory"')
    dirs = []
    for entry in typed("session_dirs", list, []):
        d = (corpus / entry).resolve()
        if not (d / "ROOT").is_file() and not (d / "ROOTS").is_file():
            raise InputError(path, f"session_dirs entry {entry!r} has no ROOT or ROOTS file",
                             "point it at the directory of the library session's ROOT")
        dirs.append(d)
    store = table.get("heap_store")
    if store is not None and not isinstance(store, str):
        raise InputError(path, "heap_store must be a path string", 'write heap_store = "/shared/heaps"')
    theory_file = typed("theory_file", str, "Goal.thy")
    if theory_file != "*" and (not theory_file.endswith(".thy") or "/" in theory_file):
        raise InputError(path, f"theory_file {theory_file!r} is not a .thy file name",
                         'write e.g. "Goal.thy", or "*" for the one .thy file of each folder')
    return IsabelleCorpus(root=corpus.resolve(), parent_session=parent, session_dirs=tuple(dirs),
                          sessions=sessions, external_provers=typed("external_provers", bool, False),
                          answer_form=form, theory_file=theory_file,
                          heap_store=(corpus / store).resolve() if store else None)


def _theory_path(desc: IsabelleCorpus, folder: Path) -> Path:
    if desc.theory_file != "*":
        path = folder / desc.theory_file
        if not path.is_file():
            raise InputError(path, f"problem {folder.name} is missing {desc.theory_file}",
                             "add the problem theory, or remove the folder")
        return path
    found = sorted(folder.glob("*.thy"))
    if len(found) != 1:
        raise InputError(folder, f"problem {folder.name} has {len(found)} .thy files, not one",
                         "keep one problem theory per folder, or set theory_file")
    return found[0]


def read_goal(path: Path) -> it.GoalTheory:
    try:
        goal = it.parse_goal(read_utf8(path, fix="save the theory as UTF-8"))
    except (it.TheoryError, it.LexError) as exc:
        raise InputError(path, f"not a goal theory: {exc}",
                         "state one named theorem whose proof is a final `sorry`") from None
    if goal.name + ".thy" != path.name:
        raise InputError(path, f"declares theory {goal.name}, but Isabelle requires the file "
                         f"name to match", f"rename the file to {goal.name}.thy")
    return goal


def load_isabelle_corpus(corpus: Path, answers: Path | None = None) -> list[Problem]:
    """The problems of an Isabelle corpus, sorted by id, with their answers.

    ``setup_path`` and ``query_path`` both name the problem theory: it is the
    context and the statement at once. Raises InputError on anything malformed.
    """
    corpus = Path(corpus)
    if not corpus.is_dir():
        raise InputError(corpus, "corpus directory does not exist", "check the path")
    desc = load_description(corpus)
    # A library session kept inside the corpus (session_dirs) is not a problem.
    folders = sorted((d for d in corpus.iterdir() if d.is_dir() and not d.name.startswith(".")
                      and d.resolve() not in desc.session_dirs), key=lambda d: d.name)
    if not folders:
        raise InputError(corpus, "corpus has no problem folders", "add <problem-id>/Goal.thy folders")
    for d in folders:
        if not PROBLEM_ID.fullmatch(d.name):
            raise InputError(d, f"problem id {d.name!r} has characters outside [A-Za-z0-9_.+-]",
                             "rename the folder")
    theories = {d.name: _theory_path(desc, d) for d in folders}
    for path in theories.values():
        read_goal(path)
    ids = set(theories)
    if answers is None:
        by_id = {d.name: answer_files.from_folder(d) for d in folders}
        missing = "no answer.txt in the problem folder"
    elif Path(answers).is_dir():
        by_id, missing = _answers_from_directory(Path(answers), ids), f"no answer.txt in {answers}/<problem-id>"
    elif Path(answers).suffix.lower() == ".csv" and Path(answers).is_file():
        by_id, missing = _answers_from_csv(Path(answers), ids), f"no row in {answers}"
    else:
        raise InputError(answers, "answers path is neither a directory nor a .csv file",
                         "pass a directory of <problem-id>/answer.txt or a .csv file")
    problems = []
    for d in folders:
        given = by_id.get(d.name) or []
        answer, source = (given[0].text, given[0].source) if given else (None, missing)
        problems.append(Problem(problem_id=d.name, directory=d, setup_path=theories[d.name],
                                query_path=theories[d.name], category=_read_category(d / "category.txt"),
                                answer=answer, answer_source=source, attempts=tuple(given),
                                answer_given=given[0].given if given else None))
    return problems


# -- the answer -------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """The theory to check, or the verdict that stops it before it runs."""

    text: str | None
    refusal: Outcome | None


def _outer_words(toks: list[it.Token]) -> list[str]:
    return [t.text for t in toks if t.kind in ("word", "symbol")]


def _screen_words(toks: list[it.Token], allow_external: bool,
                  original: Counter | None = None) -> Outcome | None:
    """The first refusal the answer's outer words earn: code first (it would
    run with our rights), then cheating, then forbidden external provers.

    ``original`` counts the words of the problem theory when the answer is a
    whole theory: what the corpus itself holds (an axiomatization of its own)
    is not the answer's cheating, but one more of it is. Its placeholder
    ``sorry`` is not counted: the answer must replace it.
    """
    words = _outer_words(toks)
    for w in words:
        if w in it.RUNS_CODE:
            return Outcome(Verdict.ERROR, f"the answer uses {w}, which runs code; ML is not allowed in answers")
    counts, allowed = Counter(words), original or Counter()
    for w in words:
        if w in it.CHEATS and counts[w] > allowed[w]:
            return Outcome(Verdict.CHEATING, it.CHEATS[w])
    if not allow_external:
        for w in words:
            if w in it.EXTERNAL_PROVERS:
                return Outcome(Verdict.ERROR, f"the answer calls the external prover {w}, which this "
                               "corpus does not allow (external_provers = false)")
    return None


def build_candidate(answer: bytes, goal: it.GoalTheory, desc: IsabelleCorpus) -> Candidate:
    """Turn an answer into the theory to check, or refuse it with a verdict."""
    try:
        text = answer.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Candidate(None, Outcome(Verdict.ERROR, f"the answer is not UTF-8 text "
                                       f"({not_utf8(answer, exc)})"))
    if it.ML_ANTIQUOTATION.search(text):
        return Candidate(None, Outcome(Verdict.ERROR, "the answer holds an ML antiquotation, which runs code"))
    try:
        toks = it.code_tokens(it.lex(text))
    except it.LexError as exc:
        return Candidate(None, Outcome(Verdict.ERROR, f"syntax: {exc} in the answer"))
    original = None
    if desc.answer_form == "theory":
        a, b = goal.placeholder
        original = Counter(_outer_words(it.code_tokens(it.lex(goal.text[:a] + goal.text[b:]))))
    refusal = _screen_words(toks, desc.external_provers, original)
    if refusal:
        return Candidate(None, refusal)
    if desc.answer_form == "proof":
        if not toks:
            return Candidate(None, Outcome(Verdict.ERROR, "the answer is empty"))
        escape = next((t.text for t in toks if t.kind == "word" and t.text in it.THEORY_LEVEL), None)
        if escape:
            return Candidate(None, Outcome(Verdict.ERROR, f"the proof holds the theory command {escape}; "
                                           "an answer is only the proof of the goal"))
        a, b = goal.placeholder
        return Candidate(goal.text[:a] + text.strip() + goal.text[b:], None)
    return Candidate(text, _compare_theory(text, goal))


def _compare_theory(text: str, goal: it.GoalTheory) -> Outcome | None:
    """A whole-theory answer must keep the header and the goal as stated, at
    the top level. (The check compares the proved proposition as well.)"""
    try:
        name, header, _, after = it.parse_theory(text)
    except it.TheoryError as exc:
        return Outcome(Verdict.ERROR, f"syntax: the answer {exc}")
    if name != goal.name:
        return Outcome(Verdict.CHEATING, f"the answer is theory {name}, not {goal.name}")
    if header != goal.header:
        return Outcome(Verdict.CHEATING, "the theory header (imports) changed from the original")
    toks = it.code_tokens(it.lex(text))
    for i, depth in it.outer_statements(toks, after):
        fact, statement, _ = it.statement_at(toks, i)
        if fact != goal.theorem:
            continue
        if depth != 0:
            return Outcome(Verdict.CHEATING, f"{fact} is stated inside a context block, with its assumptions")
        if statement != goal.statement:
            return Outcome(Verdict.CHEATING, f"the statement of {fact} changed from the original")
        return None
    return Outcome(Verdict.CHEATING, f"the answer does not prove {goal.theorem}")
