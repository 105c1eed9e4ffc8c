"""Loading a corpus in s2n-bignum-bench's retrieve layout, with its answers."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from runner.corpus import Problem, corpus_fingerprint, load_corpus
from runner.errors import InputError

from .helpers import ADD

KECCAK = "x86.sha3_keccak_f1600.WORD_NEG_EL_DEMORGAN"


def make_problem(corpus: Path, pid: str, *, setup="needs \"arm/proofs/base.ml\";;\n",
                 query="`!x:int64. word_not x = x` ", category=None, answer=None) -> Path:
    d = corpus / pid
    d.mkdir(parents=True)
    if setup is not None:
        (d / "setup.ml").write_text(setup)
    if query is not None:
        (d / "query.txt").write_text(query)
    if category is not None:
        (d / "category.txt").write_text(category)
    if answer is not None:
        (d / "answer.txt").write_bytes(answer)
    return d


@pytest.fixture
def corpus(tmp_path) -> Path:
    """Two problems as retrieve-problem.py writes them, plus the files the
    bench keeps next to them."""
    root = tmp_path / "corpus"
    make_problem(root, KECCAK, category="bit_vector\n", answer=b"WORD_BLAST_TAC\n")
    make_problem(root, ADD)
    (root / "expected_verdicts.csv").write_text("problem_id,verdict\n")
    (root / "timeouts.json").write_text("{}")
    (root / "README.md").write_text("notes")
    (root / ".cache").mkdir()
    return root


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def assert_error(exc: InputError, where: Path | str, *fragments: str) -> None:
    """The error names the offending file, says what is wrong, and says what to do."""
    assert exc.where == str(where)
    for fragment in fragments:
        assert fragment in exc.problem, (fragment, exc.problem)
    assert exc.fix


# --- the happy path -------------------------------------------------------

def test_problems_are_the_subfolders_sorted_by_id(corpus):
    problems = load_corpus(corpus)
    assert [p.problem_id for p in problems] == [ADD, KECCAK]
    add = problems[0]
    assert add.directory == corpus / ADD
    assert add.setup_path == corpus / ADD / "setup.ml"
    assert add.query_path == corpus / ADD / "query.txt"


def test_category_is_stripped_and_defaults_to_generic(corpus):
    by_id = {p.problem_id: p for p in load_corpus(corpus)}
    assert by_id[KECCAK].category == "bit_vector"
    assert by_id[ADD].category == "generic"


def test_answer_in_problem_folder_is_kept_as_raw_bytes(tmp_path):
    raw = "REWRITE_TAC[WORD_NOT]\r\n(* caf\u00e9 *)\n".encode("latin-1")  # not UTF-8 on purpose
    make_problem(tmp_path / "c", KECCAK, answer=raw)
    make_problem(tmp_path / "c", ADD)
    by_id = {p.problem_id: p for p in load_corpus(tmp_path / "c")}
    assert by_id[KECCAK].answer == raw
    assert by_id[KECCAK].answer_source == str(tmp_path / "c" / KECCAK / "answer.txt")
    # A problem without an answer is loaded; the caller records it.
    assert by_id[ADD].answer is None
    assert "answer.txt" in by_id[ADD].answer_source


def test_answers_directory_replaces_folder_answers(corpus, tmp_path):
    answers = tmp_path / "answers"
    (answers / ADD).mkdir(parents=True)
    (answers / ADD / "answer.txt").write_bytes(b"ARITH_TAC")
    (answers / "summary.txt").write_text("top-level files are ignored")
    by_id = {p.problem_id: p for p in load_corpus(corpus, answers)}
    assert by_id[ADD].answer == b"ARITH_TAC"
    assert by_id[ADD].answer_source == str(answers / ADD / "answer.txt")
    # KECCAK has an answer.txt in the corpus, but --answers wins: none here.
    assert by_id[KECCAK].answer is None
    assert str(answers) in by_id[KECCAK].answer_source


def test_answers_csv_with_extra_columns_replaces_folder_answers(corpus, tmp_path):
    multi_line = 'CONV_TAC(WORD_BLAST)\nTHEN ASM_REWRITE_TAC[], "quoted"'
    path = write_csv(tmp_path / "challenger.csv", ["category", "problem_id", "query", "answer"],
                     [["generic", ADD, "`x = x`", multi_line]])
    by_id = {p.problem_id: p for p in load_corpus(corpus, path)}
    assert by_id[ADD].answer == multi_line.encode("utf-8")
    assert by_id[ADD].answer_source == f"{path} line 2"
    assert by_id[KECCAK].answer is None  # the folder's answer.txt is not used


def test_csv_line_numbers_count_physical_lines(corpus, tmp_path):
    path = write_csv(tmp_path / "a.csv", ["problem_id", "answer"],
                     [[ADD, "line one\nline two\nline three"], [KECCAK, "\u00e9t\u00e9"]])
    by_id = {p.problem_id: p for p in load_corpus(corpus, path)}
    assert by_id[ADD].answer_source.endswith("line 2")
    assert by_id[KECCAK].answer_source.endswith("line 5")
    assert by_id[KECCAK].answer == "\u00e9t\u00e9".encode("utf-8")


def test_csv_with_byte_order_mark_is_read(corpus, tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbfproblem_id,answer\r\n" + ADD.encode() + b",ARITH_TAC\r\n")
    by_id = {p.problem_id: p for p in load_corpus(corpus, path)}
    assert by_id[ADD].answer == b"ARITH_TAC"


def test_problem_is_frozen(corpus):
    problem = load_corpus(corpus)[0]
    assert isinstance(problem, Problem)
    with pytest.raises(AttributeError):
        problem.category = "other"


# --- fingerprint ----------------------------------------------------------

def test_fingerprint_is_stable_and_ignores_answers(corpus, tmp_path):
    first = corpus_fingerprint(load_corpus(corpus))
    assert first == corpus_fingerprint(reversed(load_corpus(corpus)))
    (corpus / KECCAK / "answer.txt").write_bytes(b"a different proof")
    assert corpus_fingerprint(load_corpus(corpus)) == first


@pytest.mark.parametrize("change", ["setup", "query", "category", "new problem"])
def test_fingerprint_changes_with_the_corpus(corpus, change):
    before = corpus_fingerprint(load_corpus(corpus))
    if change == "setup":
        (corpus / ADD / "setup.ml").write_text('needs "arm/proofs/other.ml";;\n')
    elif change == "query":
        (corpus / ADD / "query.txt").write_text("`T`")
    elif change == "category":
        (corpus / ADD / "category.txt").write_text("program_state")
    else:
        make_problem(corpus, "x86.extra.LEMMA")
    assert corpus_fingerprint(load_corpus(corpus)) != before


# --- errors in the corpus -------------------------------------------------

def test_missing_corpus(tmp_path):
    with pytest.raises(InputError) as e:
        load_corpus(tmp_path / "nowhere")
    assert_error(e.value, tmp_path / "nowhere", "does not exist")


def test_corpus_that_is_a_file(tmp_path):
    (tmp_path / "corpus.txt").write_text("")
    with pytest.raises(InputError) as e:
        load_corpus(tmp_path / "corpus.txt")
    assert_error(e.value, tmp_path / "corpus.txt", "not a directory")


def test_corpus_with_only_files_and_hidden_folders_has_no_problems(tmp_path):
    (tmp_path / "expected_verdicts.csv").write_text("")
    (tmp_path / ".git").mkdir()
    with pytest.raises(InputError) as e:
        load_corpus(tmp_path)
    assert_error(e.value, tmp_path, "no problems")


@pytest.mark.parametrize("missing", ["setup.ml", "query.txt"])
def test_problem_folder_missing_a_file(corpus, missing):
    (corpus / ADD / missing).unlink()
    with pytest.raises(InputError) as e:
        load_corpus(corpus)
    assert_error(e.value, corpus / ADD / missing, ADD, missing)


@pytest.mark.parametrize("query", ["", " \n\t\n"])
def test_empty_query(corpus, query):
    (corpus / ADD / "query.txt").write_text(query)
    with pytest.raises(InputError) as e:
        load_corpus(corpus)
    assert_error(e.value, corpus / ADD / "query.txt", ADD, "empty")


@pytest.mark.parametrize("bad_id", ["has space", "semi;colon", "caf\u00e9"])
def test_problem_id_with_bad_characters(tmp_path, bad_id):
    make_problem(tmp_path, bad_id)
    with pytest.raises(InputError) as e:
        load_corpus(tmp_path)
    assert_error(e.value, tmp_path / bad_id, repr(bad_id))


def test_category_with_two_words(corpus):
    (corpus / ADD / "category.txt").write_text("bit vector\n")
    with pytest.raises(InputError) as e:
        load_corpus(corpus)
    assert_error(e.value, corpus / ADD / "category.txt", "bit vector")


# --- errors in the answers ------------------------------------------------

def test_answers_path_that_does_not_exist(corpus, tmp_path):
    with pytest.raises(InputError) as e:
        load_corpus(corpus, tmp_path / "answers.csv")
    assert_error(e.value, tmp_path / "answers.csv", "does not exist")


def test_answers_file_that_is_not_csv(corpus, tmp_path):
    (tmp_path / "answers.json").write_text("{}")
    with pytest.raises(InputError) as e:
        load_corpus(corpus, tmp_path / "answers.json")
    assert_error(e.value, tmp_path / "answers.json", ".csv")


def test_answers_directory_with_a_folder_for_an_unknown_problem(corpus, tmp_path):
    (tmp_path / "answers" / "x86.gone.LEMMA").mkdir(parents=True)
    with pytest.raises(InputError) as e:
        load_corpus(corpus, tmp_path / "answers")
    assert_error(e.value, tmp_path / "answers" / "x86.gone.LEMMA", "unknown problem id x86.gone.LEMMA")


@pytest.mark.parametrize("header, missing", [
    (["problem_id", "proof"], "answer"),
    (["id", "answer"], "problem_id"),
])
def test_csv_missing_a_column(corpus, tmp_path, header, missing):
    path = write_csv(tmp_path / "a.csv", header, [[ADD, "ARITH_TAC"]])
    with pytest.raises(InputError) as e:
        load_corpus(corpus, path)
    assert_error(e.value, path, missing, "line 1")


def test_csv_row_with_unknown_problem_id(corpus, tmp_path):
    path = write_csv(tmp_path / "a.csv", ["problem_id", "answer"],
                     [[ADD, "ARITH_TAC"], ["x86.gone.LEMMA", "MESON_TAC[]"]])
    with pytest.raises(InputError) as e:
        load_corpus(corpus, path)
    assert_error(e.value, path, "line 3", "unknown problem id", "x86.gone.LEMMA")


def test_csv_with_duplicate_problem_ids_names_both_lines(corpus, tmp_path):
    path = write_csv(tmp_path / "a.csv", ["problem_id", "answer"],
                     [[ADD, "ARITH_TAC"], [KECCAK, "multi\nline"], [ADD, "MESON_TAC[]"]])
    with pytest.raises(InputError) as e:
        load_corpus(corpus, path)
    assert_error(e.value, path, ADD, "line 2", "line 5")


@pytest.mark.parametrize("content", [b"", b"problem_id,answer\n", b"\n\n"])
def test_empty_answers_csv(corpus, tmp_path, content):
    path = tmp_path / "a.csv"
    path.write_bytes(content)
    with pytest.raises(InputError) as e:
        load_corpus(corpus, path)
    assert_error(e.value, path)
    assert "CSV" in e.value.problem


def test_csv_that_is_not_utf8_names_the_line(corpus, tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes(b"problem_id,answer\n" + ADD.encode() + b",caf\xe9\n")
    with pytest.raises(InputError) as e:
        load_corpus(corpus, path)
    assert_error(e.value, path, "line 2", "UTF-8")


def test_csv_row_with_wrong_field_count(corpus, tmp_path):
    path = tmp_path / "a.csv"
    path.write_text(f"problem_id,answer\n{ADD},REWRITE_TAC[A, B]\n")
    with pytest.raises(InputError) as e:
        load_corpus(corpus, path)
    assert_error(e.value, path, "line 2", "3 fields")


# Every file a sweep reads as text says the same of bytes that are not UTF-8
# (runner.errors.utf8_text): the file, the first bad byte, its offset and line,
# and what to do. Five readers used to say it five ways (some without a line,
# some without the byte).

def _reads_query(tmp_path, text: bytes):
    make_problem(tmp_path / "c", ADD, query=None)
    path = tmp_path / "c" / ADD / "query.txt"
    path.write_bytes(text)
    return path, lambda: load_corpus(tmp_path / "c")


def _reads_category(tmp_path, text: bytes):
    make_problem(tmp_path / "c", ADD)
    path = tmp_path / "c" / ADD / "category.txt"
    path.write_bytes(text)
    return path, lambda: load_corpus(tmp_path / "c")


def _reads_answers_csv(tmp_path, text: bytes):
    make_problem(tmp_path / "c", ADD)
    path = tmp_path / "a.csv"
    path.write_bytes(text)
    return path, lambda: load_corpus(tmp_path / "c", path)


def _reads_problem_list(tmp_path, text: bytes):
    from runner.corpus import problem_patterns, select_problems

    make_problem(tmp_path / "c", ADD)
    path = tmp_path / "subset.txt"
    path.write_bytes(text)
    return path, lambda: select_problems(load_corpus(tmp_path / "c"),
                                         problem_patterns(f"@{path}"))


def _reads_answers_jsonl(tmp_path, text: bytes):
    from runner.answers import from_jsonl

    path = tmp_path / "answers.jsonl"
    path.write_bytes(text)
    return path, lambda: from_jsonl(path)


def _reads_category_timeouts(tmp_path, text: bytes):
    from runner.maps.timeouts import load_category_timeouts

    path = tmp_path / "timeouts.json"
    path.write_bytes(text)
    return path, lambda: load_category_timeouts(path)


def _reads_isabelle_goal(tmp_path, text: bytes):
    from runner.provers.isabelle.corpus import read_goal

    path = tmp_path / "Goal.thy"
    path.write_bytes(text)
    return path, lambda: read_goal(path)


@pytest.mark.parametrize("reader", [_reads_query, _reads_category, _reads_answers_csv,
                                    _reads_problem_list, _reads_answers_jsonl, _reads_category_timeouts,
                                    _reads_isabelle_goal])
def test_every_reader_says_the_same_of_a_file_that_is_not_utf8(tmp_path, reader):
    # A byte order mark first (which the CSV reader drops): offsets are the file's.
    text = "\ufeff".encode() + b'"first line"\n"caf\xe9"\n'
    path, read = reader(tmp_path, text)
    with pytest.raises(InputError) as e:
        read()
    assert e.value.where == str(path)
    assert e.value.problem.endswith("is not UTF-8 text (byte 0xe9 at offset 20, line 2)"), \
        e.value.problem
    assert "UTF-8" in e.value.fix
    assert "\n" not in str(e.value)
