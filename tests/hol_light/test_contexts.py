"""Tests for runner.provers.hol_light.contexts: phrase splitting and the tree of context images."""

from __future__ import annotations

import random
import re

import pytest

from runner.provers.hol_light.contexts import ImageNode, build_context_tree, image_key, normal_phrases
from runner.provers.hol_light.ocaml_lexer import normal_form, split_phrases

# ---------------------------------------------------------------- splitting


def check(text: str, expected: list[str]) -> None:
    assert split_phrases(text) == expected
    assert "".join(expected) == text


def test_plain_phrases_take_rest_of_line():
    check(
        'needs "Library/prime.ml";;\nlet x = 1;;  \nlet y = 2;; let z = 3;;\n',
        ['needs "Library/prime.ml";;\n', "let x = 1;;  \n", "let y = 2;; ", "let z = 3;;\n"],
    )


def test_crlf_and_empty_input():
    check("a;;\r\nb;;\r\n", ["a;;\r\n", "b;;\r\n"])
    check("", [])


def test_remainder_is_last():
    check("a;;\n\n(* done *)\n", ["a;;\n", "\n(* done *)\n"])
    check("a;;\nlet b = 1", ["a;;\n", "let b = 1"])
    check("  \n", ["  \n"])


def test_semis_in_comment():
    check("(* a ;; b *) let x = 1;;\ny;;\n", ["(* a ;; b *) let x = 1;;\n", "y;;\n"])


def test_nested_comment():
    check("(* a (* b *) ;; c *) x;;\ny;;", ["(* a (* b *) ;; c *) x;;\n", "y;;"])


def test_comment_close_inside_string_inside_comment():
    check('(* "*)" ;; *) x;;\ny;;', ['(* "*)" ;; *) x;;\n', "y;;"])
    check('(* {|*)|} ;; *) x;;\ny;;', ['(* {|*)|} ;; *) x;;\n', "y;;"])


def test_char_literal_double_quote_inside_comment():
    # '"' in a comment is a character, so it opens no string
    check("(* '\"' ;; *) x;;\ny;;", ["(* '\"' ;; *) x;;\n", "y;;"])
    # apostrophes in words are identifier characters
    check("(* don't ;; \"it's\" *) x;;\ny;;", ["(* don't ;; \"it's\" *) x;;\n", "y;;"])


def test_string_literal():
    check('let s = "a;;b\\";;c";;\nx;;', ['let s = "a;;b\\";;c";;\n', "x;;"])
    check('let s = "(*";;\nx;;', ['let s = "(*";;\n', "x;;"])
    check('let s = "a\\\\";;\nx;;', ['let s = "a\\\\";;\n', "x;;"])


def test_quoted_strings():
    check("let s = {|a;;\"b|};;\nx;;", ["let s = {|a;;\"b|};;\n", "x;;"])
    check("let s = {id|a|};;|}b|id};;\nx;;", ["let s = {id|a|};;|}b|id};;\n", "x;;"])
    check("let r = { a = 1 };;\nx;;", ["let r = { a = 1 };;\n", "x;;"])


@pytest.mark.parametrize("lit", ["';'", "'\\''", "'\"'", "'\\n'", "'\\065'", "'\\\\'", "'`'", "'('"])
def test_char_literals(lit):
    check(f"let c = {lit};;\nlet s = \";;\";;\n", [f"let c = {lit};;\n", 'let s = ";;";;\n'])


def test_type_variables_and_primes_are_not_chars():
    text = "let f (x:'a) (y:'b) = x;;\nlet g' (z:'a list) = z;;\nlet x'' = ';';;\n"
    check(text, ["let f (x:'a) (y:'b) = x;;\n", "let g' (z:'a list) = z;;\n", "let x'' = ';';;\n"])


def test_backquote_terms():
    check("let t = `a ;; b`;;\nx;;", ["let t = `a ;; b`;;\n", "x;;"])
    check("let t = `p (* q`;;\nx;;", ["let t = `p (* q`;;\n", "x;;"])
    check('let t = `"`;;\nx;;', ['let t = `"`;;\n', "x;;"])
    check("let t = `a\\`;;\nx;;", ["let t = `a\\`;;\n", "x;;"])  # no escapes


def test_unterminated_constructs_run_to_end():
    for text in ['x;;\n"abc;;', "x;;\n(* a ;;", "x;;\n`a ;;", "x;;\n{|a;;", 'x;;\n(* "a *) ;;']:
        assert split_phrases(text) == ["x;;\n", text[4:]]


def test_long_inputs_are_linear_enough():
    text = "let x = `a /\\ b` (* c *) \"s\";;\n" * 20000
    assert len(split_phrases(text)) == 20000
    assert split_phrases("(*" + "a" * 200000) == ["(*" + "a" * 200000]
    assert split_phrases("a" * 200000 + ";;") == ["a" * 200000 + ";;"]
    assert split_phrases('"' + "\\a" * 100000) == ['"' + "\\a" * 100000]


# ------------------------------------------------- randomized properties

_IDENTS = ["x", "x'", "f''", "LEMMA", "_a1", "don't", "REAL_ARITH_TAC", "1", "0x1F"]
_OPS = ["let", "=", "(", ")", "*", "^", ";", "->", "[", "]", "{", "}", "|", "THEN", ",", ".", "+"]
_CHARS = ["';'", "'\\''", "'\"'", "'\\n'", "'\\065'", "'\\\\'", "'`'", "'('", "'*'", "'{'"]
_TYVARS = ["'a", "'b", "'a list", "('a,'b)"]
_STR_BITS = [";;", "*)", "(*", '\\"', "\\\\", "'", "`", "a", "\n", "{|", "|}", " "]
_TERM_BITS = [";;", "(*", "*)", '"', "'", "\\", "x", "\n", " ", "{|", "/\\"]


def _string(rng):
    return '"' + "".join(rng.choice(_STR_BITS) for _ in range(rng.randint(0, 5))) + '"'


def _quoted(rng):
    delim = rng.choice(["", "id", "x_y"])
    bits = [";;", "*)", "(*", '"', "'", "a", "\n", "`"]
    if delim:
        bits += ["|}", "|other}"]
    body = "".join(rng.choice(bits) for _ in range(rng.randint(0, 5)))
    return "{" + delim + "|" + body + "|" + delim + "}"


def _term(rng):
    return "`" + "".join(rng.choice(_TERM_BITS) for _ in range(rng.randint(0, 5))) + "`"


def _comment(rng, depth=0):
    kinds = ["word", "word", "semi", "string", "quoted", "char", "tick"] + ["nested"] * (depth < 3)
    parts = []
    for _ in range(rng.randint(0, 5)):
        kind = rng.choice(kinds)
        parts.append({
            "word": lambda: rng.choice(["x", "it's", "don't", "a*b", "(", ")", "*"]),
            "semi": lambda: ";;",
            "string": lambda: _string(rng),
            "quoted": lambda: _quoted(rng),
            "char": lambda: rng.choice(["'\"'", "''", "';'", "'\\''"]),
            "tick": lambda: rng.choice(["`", "`x`"]),
            "nested": lambda: _comment(rng, depth + 1),
        }[kind]())
    return "(*" + " ".join([""] + parts + [""]) + "*)"


def _atom(rng):
    kind = rng.choice(["ident", "ident", "op", "op", "char", "tyvar", "string", "quoted", "term", "comment"])
    return {
        "ident": lambda: rng.choice(_IDENTS),
        "op": lambda: rng.choice(_OPS),
        "char": lambda: rng.choice(_CHARS),
        "tyvar": lambda: rng.choice(_TYVARS),
        "string": lambda: _string(rng),
        "quoted": lambda: _quoted(rng),
        "term": lambda: _term(rng),
        "comment": lambda: _comment(rng),
    }[kind]()


def _random_source(rng) -> tuple[str, list[str]]:
    """Random source built from lexical traps, with the phrases it must split into."""
    phrases, after_newline = [], True
    for _ in range(rng.randint(0, 6)):
        lead = rng.choice(["", "\n", "  \n", "(* lead ;; *)\n"]) if after_newline else ""
        atoms = [_atom(rng) for _ in range(rng.randint(1, 8))]
        if lead == "" and not after_newline and atoms[0] == ";":
            atoms[0] = "x"
        body = atoms[0] + "".join(rng.choice([" ", "\n", "\t "]) + a for a in atoms[1:])
        before = " " if atoms[-1] == ";" else rng.choice(["", " ", "\n"])
        newline = rng.choice(["\n", "\n", "\r\n", ""])
        phrases.append(lead + body + before + ";;" + rng.choice(["", " ", " \t"]) + newline)
        after_newline = bool(newline)
    tails = ["", "(* trailing ;; *)\n", "let unterminated = `a;;"]
    if after_newline:
        tails += ["\n", "  \n\n"]
    tail = rng.choice(tails)
    if tail:
        phrases.append(tail)
    return "".join(phrases), phrases


def test_random_sources_split_as_built():
    rng = random.Random(20240601)
    for _ in range(400):
        text, expected = _random_source(rng)
        assert split_phrases(text) == expected, text


_END = re.compile(r";;[ \t]*(?:\r?\n)?\Z")
_SOUP = [";", ";;", "(", "*", ")", '"', "'", "`", "{", "|", "}", "\\", "a", "x'", " ", "\n", "%", "(*", "*)"]


def test_random_soup_round_trips_and_prefixes_are_stable():
    rng = random.Random(7)
    for _ in range(400):
        text = "".join(rng.choice(_SOUP) for _ in range(rng.randint(0, 40)))
        phrases = split_phrases(text)
        assert "".join(phrases) == text
        assert all(phrases)
        for k in range(len(phrases)):
            if k < len(phrases) - 1:
                assert _END.search(phrases[k]), (text, phrases)
            assert split_phrases("".join(phrases[:k])) == phrases[:k], text


# ------------------------------------------------------------ normal form


@pytest.mark.parametrize("phrase, norm", [
    ("(* header *)\nlet x = 1;;\n", "let x = 1;;"),
    ("let   x =\n\t 1 ;;  \r\n", "let x = 1 ;;"),
    ("(* a (* nested *) still comment *) f x;;\n", "f x;;"),
    ("(* a string in a comment: \"*)\" *) f x;;", "f x;;"),
    # A comment between two words keeps them two words.
    ("let a(*c*)b = 1;;", "let a b = 1;;"),
    ("f(*c*)(*d*)x;;", "f x;;"),
    # Strings, quoted strings, chars and term quotations stay as written.
    ('let s = "a  (*  b" in  s;;', 'let s = "a  (*  b" in s;;'),
    ("let s = {id|  (* ;; |}  |id}  in s;;", "let s = {id|  (* ;; |}  |id} in s;;"),
    ("let c = ' ' and q = '\"'  in  c;;", "let c = ' ' and q = '\"' in c;;"),
    ("let t = `x  (*  y`  in  t;;", "let t = `x  (*  y` in t;;"),
    ("let th = prove(`!n.  n + 0 = n`,\n  ARITH_TAC);;\n",
     "let th = prove(`!n.  n + 0 = n`, ARITH_TAC);;"),
    # A prime ends an identifier, it opens no char literal.
    ("let x'  =  'a' in  x' (* c *);;", "let x' = 'a' in x' ;;"),
    ("(* only a comment *)\n\n", ""),
    ("  \n", ""),
    # Unterminated: as written, so it never shares an image with text that loads.
    ("x (* open  ", "x (* open  "),
    ('x "open  ', 'x "open  '),
])
def test_normal_form(phrase, norm):
    assert normal_form(phrase) == norm


def test_normal_form_is_idempotent_on_random_sources():
    rng = random.Random(5)
    for _ in range(300):
        text, phrases = _random_source(rng)
        for phrase in phrases:
            once = normal_form(phrase)
            assert normal_form(once) == once, phrase


def test_setups_differing_only_in_comments_and_blanks_share_every_image():
    library = "".join(f"let LIB_{i} = prove(`{i} + 0 = {i}`,\n  ARITH_TAC);;\n" for i in range(20))
    arm = ("(* arm/proofs/bignum_add.ml *)\n(* Copyright Amazon.com *)\n" + library
           + "let ADD = prove(`T`, MESON_TAC[]);;\n")
    x86 = ("(*\n * x86/proofs/bignum_mod_n25519.ml\n *)\n\n" + library.replace("\n  ", " ")
           + "(* the theorem *)\nlet ADD   = prove(`T`,\tMESON_TAC[]);;\n")
    tree = build_context_tree({"arm": arm, "x86": x86}, SALT)
    assert_sane(tree, {"arm": arm, "x86": x86})
    assert tree.image_of["arm"] == tree.image_of["x86"] == image_key(arm, SALT) == image_key(x86, SALT)
    assert len(tree.nodes) == 2
    # What the image loads is one problem's own text (the first by id), comments and all.
    assert tree.nodes[tree.image_of["arm"]].segment == arm
    # A problem's key does not depend on which problem represents its image.
    assert build_context_tree({"x86": x86}, SALT).image_of["x86"] == tree.image_of["arm"]


def test_a_shared_library_prefix_is_one_image_whatever_the_headers():
    library = "".join(f"let LIB_{i} = prove(`{i} + 0 = {i}`, ARITH_TAC);;\n" for i in range(20))
    setups = {f"file{j}.T{t}": f"(* file{j}.ml: line {j} *)\n" + library
              + "".join(f"let F{j}_{k} = {k};;\n" for k in range(t + 1))
              for j in range(3) for t in range(2)}
    tree = build_context_tree(setups, SALT)
    assert_sane(tree, setups)
    chains = {pid: [n.key for n in tree.chain(key)] for pid, key in tree.image_of.items()}
    shared = {c[1] for c in chains.values()}
    assert len(shared) == 1                    # the library: one image for all three files
    assert norms(tree.nodes[shared.pop()].segment) == norms(library)
    assert len(tree.nodes) == 1 + 1 + 3 * 2    # base, library, per file: T0 then T1


def test_setups_differing_in_a_string_or_quotation_do_not_share():
    one = 'let s = "a b";;\nlet t = `x + y`;;\n'
    for other in ('let s = "a  b";;\nlet t = `x + y`;;\n', 'let s = "a b";;\nlet t = `x  + y`;;\n',
                  "let s = \"a b\";;\nlet t = `x + y`;;\nlet c = ' ';;\n"):
        assert image_key(one, SALT) != image_key(other, SALT)
    tree = build_context_tree({"one": one, "two": 'let s = "a  b";;\nlet t = `x + y`;;\n'}, SALT)
    assert tree.image_of["one"] != tree.image_of["two"] and len(tree.nodes) == 3


def test_a_tree_splits_each_setup_as_alone_whatever_it_shares_with_the_previous():
    # Built in id order, each setup reuses the phrases of the one before
    # inside their common text; where a phrase ends hangs on what follows it.
    setups = {"p1": "a;; x;;\n", "p2": "a;; \ny;;\n", "p3": "a;; \r\nz;;", "p4": "a;; \rw;;",
              "p5": "a;;b;;c", "p6": "a;;b;;c;;\n", "p7": '"x;;";;\n', "p8": '"x;;" ;;\n(*'}
    tree = build_context_tree(setups, SALT)
    assert_sane(tree, setups)
    for pid, text in setups.items():
        assert tree.image_of[pid] == build_context_tree({pid: text}, SALT).image_of[pid]
    rng = random.Random(3)
    for _ in range(200):
        base = "".join(_random_source(rng)[0] for _ in range(2))
        setups = {f"q{i}": base[:rng.randint(0, len(base))] + _random_source(rng)[0]
                  for i in range(4)}
        tree = build_context_tree(setups, SALT)
        assert_sane(tree, setups)


def test_phrase_boundaries_are_part_of_the_key():
    # Two phrases on one line or on two run alike; one phrase more does not.
    assert image_key("a;;\nb;;\n", SALT) == image_key("a;; b;;", SALT)
    assert image_key("let x = 1;;\n", SALT) != image_key("let x = 1;;\nlet y = 2;;\n", SALT)
    assert image_key("(* nothing runs *)\n", SALT) == image_key("", SALT)


# ------------------------------------------------------------------- tree

SALT = "hol-light 3.0.0+20240601-1 / ocaml 4.14.1"
A1 = 'needs "Library/prime.ml";;\n'
A2 = "let L1 = prove(`1 + 1 = 2`, ARITH_TAC);;\n"
A = A1 + A2
B = A + "let L2 = prove(`2 + 2 = 4`, ARITH_TAC);;\n"
C = B + "(* ;; *) let L3 = prove(`x = x`, REFL_TAC);;\n"
D = A1 + "let M = prove(`T`, MESON_TAC[]);;\n"
SETUPS = {"A": A, "B": B, "C": C, "D": D}


def chain_segments(tree, pid):
    return [n.segment for n in tree.chain(tree.image_of[pid])]


def norms(text: str) -> list[str]:
    return [norm for _, norm in normal_phrases(text)]


def assert_sane(tree, setups):
    base = tree.nodes[tree.base]
    assert base == ImageNode(tree.base, None, "", 0, base.problems)
    for pid, text in setups.items():
        chain = tree.chain(tree.image_of[pid])
        assert chain[0].key == tree.base and pid in chain[-1].problems
        assert [n.depth for n in chain] == list(range(len(chain)))
        assert all(n.parent == p.key for p, n in zip(chain, chain[1:]))
        if normal_phrases(text):
            # The chain loads this setup's phrases, as some problem wrote them.
            assert norms("".join(n.segment for n in chain)) == norms(text)
            assert all(n.segment for n in chain[1:])
        else:
            assert chain == [base]
        assert tree.image_of[pid] == image_key(text, SALT)
    for node in tree.nodes.values():
        text = "".join(n.segment for n in tree.chain(node.key))
        assert node.key == image_key(text, SALT)
        kids = [n for n in tree.nodes.values() if n.parent == node.key]
        assert node.problems or len(kids) >= 2 or node.key == tree.base


def test_prefix_chain_and_branch():
    tree = build_context_tree(SETUPS, SALT)
    assert_sane(tree, SETUPS)
    assert len(tree.nodes) == 6  # base, branch after A1, A, B, C, D
    assert chain_segments(tree, "A") == ["", A1, A2]
    assert chain_segments(tree, "B") == ["", A1, A2, B[len(A):]]
    assert chain_segments(tree, "C") == ["", A1, A2, B[len(A):], C[len(B):]]
    assert chain_segments(tree, "D") == ["", A1, D[len(A1):]]
    branch = tree.chain(tree.image_of["A"])[1]
    assert branch.problems == () and branch.depth == 1 and branch.key == image_key(A1, SALT)
    assert tree.nodes[tree.image_of["C"]].problems == ("C",)


def test_identical_setups_share_a_node():
    setups = {**SETUPS, "E": B, "Z": ""}
    tree = build_context_tree(setups, SALT)
    assert_sane(tree, setups)
    assert len(tree.nodes) == 6
    assert tree.image_of["E"] == tree.image_of["B"]
    assert tree.nodes[tree.image_of["B"]].problems == ("B", "E")
    assert tree.image_of["Z"] == tree.base and tree.nodes[tree.base].problems == ("Z",)


def test_blank_setup_maps_to_base():
    tree = build_context_tree({"P": " \n\t"}, SALT)
    assert tree.image_of["P"] == tree.base == image_key("", SALT) == image_key("\n", SALT)
    assert list(tree.nodes) == [tree.base]


def test_keys_do_not_depend_on_other_problems():
    full = build_context_tree(SETUPS, SALT)
    for pid, text in SETUPS.items():
        alone = build_context_tree({pid: text}, SALT)
        assert alone.image_of[pid] == full.image_of[pid] == image_key(text, SALT)
        assert len(alone.nodes) == 2
    assert build_context_tree({"A": A, "C": C}, SALT).image_of == {k: full.image_of[k] for k in "AC"}


def test_salt_changes_every_key():
    one, two = build_context_tree(SETUPS, SALT), build_context_tree(SETUPS, SALT + "x")
    assert not set(one.nodes) & set(two.nodes)
    assert sorted(n.segment for n in one.nodes.values()) == sorted(n.segment for n in two.nodes.values())
    assert image_key(A, "ab") != image_key(A, "a")
    assert image_key("b" + A, "a") != image_key(A, "ab")


def test_descendants_problems():
    setups = {**SETUPS, "E": B, "Z": ""}
    tree = build_context_tree(setups, SALT)
    branch = tree.chain(tree.image_of["A"])[1].key
    assert tree.descendants_problems(tree.base) == set(setups)
    assert tree.descendants_problems(branch) == {"A", "B", "C", "D", "E"}
    assert tree.descendants_problems(tree.image_of["A"]) == {"A", "B", "C", "E"}
    assert tree.descendants_problems(tree.image_of["C"]) == {"C"}
    with pytest.raises(KeyError):
        tree.descendants_problems("nope")


def test_random_corpora_are_sane():
    rng = random.Random(11)
    for _ in range(60):
        pool = ["".join(_random_source(rng)[0] for _ in range(2)) for _ in range(3)]
        setups = {}
        for i in range(rng.randint(1, 8)):
            phrases = split_phrases(rng.choice(pool))
            setups[f"p{i}"] = "".join(phrases[: rng.randint(0, len(phrases))])
        tree = build_context_tree(setups, SALT)
        assert_sane(tree, setups)
