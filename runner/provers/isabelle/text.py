"""Isabelle theory text: the outer-syntax lexer, the goal theory's parts, and
the screening of an answer before anything runs.

Lexical classes follow Isabelle's outer syntax (isar-ref, "Lexical matters"):
nested comments ``(* *)``, double-quoted and back-quoted strings with
backslash escapes, cartouches ``‹…›`` (also written ``\\<open>…\\<close>``),
which nest, and verbatim text ``{* *}``. A word inside any of these is
term or document text, never a command, so only *outer* words are screened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OPEN, CLOSE = ("‹", "\\<open>"), ("›", "\\<close>")
_WORD = re.compile(r"(?:[A-Za-z_]|\\<[A-Za-z][A-Za-z0-9_']*>)(?:[A-Za-z0-9_'.?]|\\<[A-Za-z][A-Za-z0-9_']*>|\\<\^sub>)*")
_SYMBOL = re.compile(r"\\<\^?[A-Za-z][A-Za-z0-9_']*>")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


@dataclass(frozen=True)
class Token:
    kind: str      # word, string, cartouche, comment, verbatim, number, symbol, other
    text: str
    start: int
    end: int

    @property
    def outer_word(self) -> str | None:
        return self.text if self.kind == "word" else None


class LexError(ValueError):
    """The text ends inside a comment, string, cartouche or verbatim block."""


def _cartouche_end(text: str, i: int) -> int:
    depth = 0
    while i < len(text):
        if text.startswith(OPEN, i):
            depth += 1
            i += 1 if text[i] == "‹" else len("\\<open>")
        elif text.startswith(CLOSE, i):
            depth -= 1
            i += 1 if text[i] == "›" else len("\\<close>")
            if depth == 0:
                return i
        else:
            i += 1
    raise LexError("unterminated cartouche")


def _comment_end(text: str, i: int) -> int:
    depth = 0
    while i < len(text):
        if text.startswith("(*", i):
            depth, i = depth + 1, i + 2
        elif text.startswith("*)", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    raise LexError("unterminated comment")


def _quoted_end(text: str, i: int, quote: str) -> int:
    i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == quote:
            return i + 1
        else:
            i += 1
    raise LexError(f"unterminated {quote}-string")


def lex(text: str) -> list[Token]:
    """Tokens of ``text``; whitespace is dropped. Raises LexError."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if text.startswith("(*", i):
            kind, j = "comment", _comment_end(text, i)
        elif text.startswith("{*", i):
            j = text.find("*}", i + 2)
            if j < 0:
                raise LexError("unterminated verbatim text")
            kind, j = "verbatim", j + 2
        elif text.startswith(OPEN, i):
            kind, j = "cartouche", _cartouche_end(text, i)
        elif c in "\"`":
            kind, j = "string", _quoted_end(text, i, c)
        elif m := _WORD.match(text, i):
            kind, j = "word", m.end()
        elif m := _SYMBOL.match(text, i):
            kind, j = "symbol", m.end()
        elif m := _NUMBER.match(text, i):
            kind, j = "number", m.end()
        elif text.startswith("..", i):
            kind, j = "other", i + 2
        else:
            kind, j = "other", i + 1
        out.append(Token(kind, text[i:j], i, j))
        i = j
    return out


def code_tokens(tokens: list[Token]) -> list[Token]:
    """The tokens that carry meaning: comments dropped."""
    return [t for t in tokens if t.kind != "comment"]


# Commands that begin a theorem statement (isar-ref, "Goals").
STATEMENT_KEYWORDS = {"theorem", "lemma", "corollary", "proposition", "schematic_goal"}
# Words that begin the proof of a statement: where the statement ends.
PROOF_START = {"proof", "by", "apply", "apply_end", "using", "unfolding", "including", "supply",
               "subgoal", "sorry", "oops", "done", ".", "..", "\\<proof>", "sledgehammer",
               "nitpick", "quickcheck", "try", "try0", "defer", "prefer", "back", "nunchaku"}
# Theory-level commands that may not appear in a proof body: a body that holds
# one has left its proof and is adding to the theory.
THEORY_LEVEL = {
    "theory", "end", "begin", "theorem", "lemma", "corollary", "proposition", "schematic_goal",
    "lemmas", "definition", "abbreviation", "fun", "function", "primrec", "datatype",
    "codatatype", "record", "typedef", "typedecl", "type_synonym", "consts", "axiomatization",
    "locale", "context", "class", "instantiation", "instance", "interpretation",
    "global_interpretation", "sublocale", "notation", "no_notation", "syntax", "translations",
    "declare", "named_theorems", "bundle", "inductive", "coinductive", "inductive_set",
    "overloading", "specification", "experiment", "notepad", "setup", "section", "subsection",
    "chapter",
}
# Anything that runs Isabelle/ML, or makes the code generator run or write
# code, runs arbitrary code with the runner's rights: refused outright.
RUNS_CODE = {
    "ML", "ML_val", "ML_command", "ML_prf", "ML_file", "ML_file_debug", "ML_file_no_debug",
    "ML_export", "ML_import", "SML_file", "SML_file_debug", "SML_file_no_debug", "SML_import",
    "SML_export", "setup", "local_setup", "declaration", "syntax_declaration",
    "method_setup", "attribute_setup", "simproc_setup", "oracle", "parse_translation",
    "print_translation", "typed_print_translation", "parse_ast_translation",
    "print_ast_translation", "tactic", "raw_tactic", "code_printing", "code_reflect",
    "export_code", "generate_file", "export_generated_files", "compile_generated_files",
    "external_file", "scala_build_generated_files", "isabelle_system", "theory_export",
    "export_files", "document_files", "bibtex_file", "ML_antiquotation",
}
ML_ANTIQUOTATION = re.compile(r"@\{\s*ML|\\<\^ML")
# Cheating: the proof is skipped, or the logic is extended.
CHEATS = {"sorry": "sorry skips the proof", "oops": "oops abandons the proof",
          "\\<proof>": "\\<proof> skips the proof",
          "axiomatization": "axiomatization adds an axiom", "axioms": "axioms adds an axiom",
          "quick_and_dirty": "quick_and_dirty lets proofs be skipped",
          "skip_proofs": "skip_proofs lets proofs be skipped"}
# Proof methods and commands that call provers outside Isabelle's kernel.
EXTERNAL_PROVERS = {"sledgehammer", "smt", "try", "sos", "nunchaku"}


@dataclass(frozen=True)
class GoalTheory:
    """A problem theory: its header, its goal statement and the placeholder."""

    name: str                   # the theory name, which is also its file name
    header: tuple[str, ...]     # tokens from `theory` to `begin`
    imports: tuple[str, ...]    # as written, quotes removed
    theorem: str                # the goal's fact name
    statement: tuple[str, ...]  # tokens of the statement, keyword excluded
    placeholder: tuple[int, int]  # character span of the final `sorry`
    text: str


class TheoryError(ValueError):
    """The text is not a theory of the expected shape; the message says why."""


def _unquote(token: Token) -> str:
    return token.text[1:-1] if token.kind == "string" else token.text


def parse_theory(text: str) -> tuple[str, tuple[str, ...], tuple[str, ...], int]:
    """(name, header tokens, imports, index after `begin`) of a theory text."""
    toks = code_tokens(lex(text))
    if not toks or toks[0].text != "theory" or len(toks) < 2:
        raise TheoryError("does not start with `theory NAME`")
    name = _unquote(toks[1])
    try:
        begin = next(i for i, t in enumerate(toks) if t.text == "begin")
    except StopIteration:
        raise TheoryError("its header has no `begin`") from None
    header = toks[:begin + 1]
    imports, inside = [], False
    for t in header[2:-1]:
        if t.text in ("imports",):
            inside = True
        elif t.text in ("keywords", "abbrevs"):
            inside = False
        elif inside:
            imports.append(_unquote(t))
    return name, tuple(t.text for t in header), tuple(imports), begin + 1


def statement_at(toks: list[Token], i: int) -> tuple[str | None, tuple[str, ...], int]:
    """The goal stated by the command at ``toks[i]``: (fact name or None,
    statement tokens, index of the first proof token)."""
    j = i + 1
    name = None
    if j + 1 < len(toks) and toks[j].kind in ("word", "string") and toks[j + 1].text in (":", "["):
        name = _unquote(toks[j])
    while j < len(toks) and toks[j].text not in PROOF_START:
        j += 1
    return name, tuple(t.text for t in toks[i + 1:j]), j


def outer_statements(toks: list[Token], start: int) -> list[tuple[int, int]]:
    """(token index, block depth) of every statement command after the header;
    depth counts the `begin` ... `end` blocks (context, locale, ...) it is in."""
    found, depth = [], 0
    for i in range(start, len(toks)):
        word = toks[i].text
        if toks[i].kind != "word":
            continue
        if word == "begin":
            depth += 1
        elif word == "end":
            depth -= 1
        elif word in STATEMENT_KEYWORDS:
            found.append((i, depth))
    return found


def parse_goal(text: str) -> GoalTheory:
    """Read a corpus problem theory: one named goal whose proof is the
    placeholder ``sorry``, the last proof command before the final ``end``
    (the form NTP4VC ships). Raises TheoryError."""
    name, header, imports, after = parse_theory(text)
    toks = code_tokens(lex(text))
    sorries = [i for i, t in enumerate(toks) if t.kind == "word" and t.text == "sorry"]
    if len(sorries) != 1:
        raise TheoryError(f"has {len(sorries)} `sorry`; the goal's proof must be the one placeholder `sorry`")
    statements = [i for i, _ in outer_statements(toks, after) if i < sorries[0]]
    if not statements:
        raise TheoryError("states no theorem before its `sorry`")
    theorem, statement, proof_at = statement_at(toks, statements[-1])
    if proof_at != sorries[0]:
        raise TheoryError("the goal's proof is not just the placeholder `sorry`")
    if theorem is None:
        raise TheoryError("its goal has no name; name it, e.g. `theorem goal: ...`")
    if [t.text for t in toks[sorries[0] + 1:]] != ["end"]:
        raise TheoryError("the placeholder `sorry` is not the last command before `end`")
    span = (toks[sorries[0]].start, toks[sorries[0]].end)
    return GoalTheory(name, header, imports, theorem, statement, span, text)


def rename_theory(text: str, new_name: str) -> str:
    """``text`` with the name in its `theory NAME` header replaced."""
    toks = code_tokens(lex(text))
    if len(toks) < 2 or toks[0].text != "theory":
        raise TheoryError("does not start with `theory NAME`")
    return text[:toks[1].start] + new_name + text[toks[1].end:]
