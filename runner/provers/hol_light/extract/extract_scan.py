"""Reading one top-level phrase of a HOL Light proof file as a theorem.

``scan_phrase`` recognises ``let NAME = prove (`GOAL`, TACTIC);;`` and its
usual variants (``time prove``, ``prove_by_refinement``), over any number of
lines, and says why any other phrase that proves something is not a problem.
It works on tokens: a comma, a ``;;`` or a bracket inside a comment, a
string, a quoted string, a character literal or a HOL term quotation is part
of that token and splits nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..ocaml_lexer import CHAR, QUOTED, skip_comment, skip_quoted, skip_string

# The functions that prove a goal with a tactic (prove) or a list of tactics
# applied one at a time to the first open goal (prove_by_refinement, defined
# by developments such as Jordan/ and Rqe/ of HOL Light).
PROVERS = ("prove", "prove_by_refinement")

_TOKEN = re.compile(
    rf"(?P<comment>\(\*)|(?P<string>\")|{QUOTED}|(?P<quote>`)"
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_']*)|(?P<char>" + CHAR + r")"
    r"|(?P<semi2>;;)|(?P<open>[(\[{])|(?P<close>[)\]}])|(?P<punct>[,=:;])|(?P<space>\s+)|(?P<other>.)",
    re.S,
)
_CLOSING = {"(": ")", "[": "]", "{": "}"}


@dataclass(frozen=True)
class Token:
    kind: str   # ident, quote, string, char, open, close, punct, semi2, other
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Theorem:
    """A phrase that proves one named theorem: the problem it becomes."""

    name: str
    form: str        # "prove", "time prove", "prove_by_refinement", ...
    query: str       # the goal's term quotation, backquotes included, as written
    answer: str      # a tactic expression proving the goal (the ground truth)


@dataclass(frozen=True)
class Skip:
    """A phrase that proves something but does not become a problem."""

    name: str        # the bound name, or "" when there is none
    reason: str


def tokens(text: str) -> list[Token]:
    """The tokens of ``text``, without blanks and comments.

    Raises ValueError on an unterminated comment, string or quotation.
    """
    out: list[Token] = []
    i = 0
    while m := _TOKEN.match(text, i):
        kind, start, i = m.lastgroup, m.start(), m.end()
        if kind == "comment":
            i = _closed(text, skip_comment(text, i), "*)", "comment")
            continue
        if kind == "string":
            i = _closed(text, skip_string(text, i), '"', "string")
        elif kind == "quoted":
            i = skip_quoted(text, i, m)
            kind = "string"
        elif kind == "quote":
            j = text.find("`", i)
            if j < 0:
                raise ValueError("unterminated term quotation")
            i = j + 1
        elif kind == "space":
            continue
        out.append(Token(kind, text[start:i], start, i))
    return out


def _closed(text: str, end: int, closer: str, what: str) -> int:
    if not text[:end].endswith(closer):
        raise ValueError(f"unterminated {what}")
    return end


def _matching(toks: list[Token], i: int) -> int:
    """Index of the bracket closing the one opened at ``toks[i]``."""
    stack = []
    for j in range(i, len(toks)):
        t = toks[j]
        if t.kind == "open":
            stack.append(_CLOSING[t.text])
        elif t.kind == "close":
            if not stack or stack.pop() != t.text:
                raise ValueError(f"unbalanced {t.text!r}")
            if not stack:
                return j
    raise ValueError(f"unclosed {toks[i].text!r}")


def _split_commas(toks: list[Token], lo: int, hi: int) -> list[tuple[int, int]]:
    """Token ranges [a, b) of the comma-separated parts of toks[lo:hi] at depth 0."""
    parts, depth, a = [], 0, lo
    for j in range(lo, hi):
        t = toks[j]
        if t.kind == "open":
            depth += 1
        elif t.kind == "close":
            depth -= 1
        elif t.kind == "punct" and t.text == "," and depth == 0:
            parts.append((a, j))
            a = j + 1
    parts.append((a, hi))
    return parts


def _unparen(toks: list[Token], a: int, b: int) -> tuple[int, int]:
    """The range without parentheses that wrap all of it."""
    while b - a >= 2 and toks[a].text == "(" and _matching(toks, a) == b - 1:
        a, b = a + 1, b - 1
    return a, b


def scan_phrase(phrase: str) -> Theorem | Skip | None:
    """What ``phrase`` (one top-level phrase, as split_phrases gives it) proves.

    A Theorem for ``let NAME = [time] prove (`GOAL`, TACTIC);;``; a Skip with
    the reason for any other phrase that calls a prover; None for phrases
    that prove nothing.
    """
    try:
        toks = tokens(phrase)
    except ValueError as exc:
        if any(p in phrase for p in PROVERS):
            return Skip("", f"cannot be read: {exc}")
        return None
    calls = [i for i, t in enumerate(toks) if t.kind == "ident" and t.text in PROVERS]
    if not calls:
        return None
    try:
        return _scan(toks, phrase, calls)
    except ValueError as exc:
        return Skip(_bound_name(toks), f"cannot be read: {exc}")


def _bound_name(toks: list[Token]) -> str:
    if len(toks) >= 2 and toks[0].text == "let" and toks[1].kind == "ident" and toks[1].text != "rec":
        return toks[1].text
    return ""


def _scan(toks: list[Token], text: str, calls: list[int]) -> Theorem | Skip:
    name = _bound_name(toks)
    if not name and toks[0].text == "let":
        return Skip("", "proves inside a recursive or pattern definition, not a top-level theorem")
    if not name:
        return Skip("", "not a top-level `let NAME = prove ...`: its theorem is not bound to a name")
    i = 3
    if [t.text for t in toks[2:5]] == [":", "thm", "="]:
        i = 5
    elif len(toks) > 2 and toks[2].text == ",":
        return Skip(name, "binds several names at once (let A, B = ...), not one theorem")
    elif len(toks) < 4 or toks[2].text != "=":
        return Skip(name, "proves inside a function, not a top-level theorem")
    if name == "_":
        return Skip(name, "the theorem is not bound to a name (let _ = ...)")
    form = []
    if i >= len(toks):
        return Skip(name, "cannot be read: the phrase ends after '='")
    if toks[i].text == "time":
        form.append("time")
        i += 1
    if i not in calls:
        return Skip(name, "proves inside a larger expression (a local definition, a rule applied "
                          "to the theorem, ...), not a top-level `let NAME = prove ...`")
    prover = toks[i].text
    form.append(prover)
    if i + 1 >= len(toks) or toks[i + 1].text != "(":
        return Skip(name, f"{prover} is not applied to a (goal, tactic) pair")
    close = _matching(toks, i + 1)
    rest = toks[close + 1:]
    if any(t.text == "and" for t in rest) and any(j > close for j in calls):
        return Skip(name, "proves several theorems in one phrase (let ... and ...)")
    if rest and rest[0].text == "in":
        return Skip(name, "proves a local lemma (let ... in ...), not a top-level theorem")
    if not rest or rest[0].kind != "semi2" or len(rest) > 1:
        return Skip(name, "the theorem is used in a larger expression, not bound as proved")
    parts = _split_commas(toks, i + 2, close)
    if len(parts) != 2 or parts[0][0] == parts[0][1] or parts[1][0] == parts[1][1]:
        return Skip(name, f"{prover}'s argument is not a (goal, tactic) pair")
    (ga, gb), (ta, tb) = parts
    ga, gb = _unparen(toks, ga, gb)
    if gb - ga != 1 or toks[ga].kind != "quote":
        return Skip(name, "the goal is evaluated at runtime, not a term quotation")
    query = toks[ga].text
    answer = text[toks[ta].start:toks[tb - 1].end]
    if prover == "prove_by_refinement":
        la, lb = _unparen(toks, ta, tb)
        if toks[la].text != "[" or _matching(toks, la) != lb - 1:
            return Skip(name, "prove_by_refinement's tactics are not a literal list")
        # prove_by_refinement applies each tactic to the first open goal, as
        # `e` does; `by` is that step, so this one tactic does the same.
        answer = f"(fun g -> rev_itlist by {text[toks[la].start:toks[lb - 1].end]} (mk_goalstate g))"
    return Theorem(name=name, form=" ".join(form), query=query, answer=answer)


def scan_bindings(phrase: str) -> list[tuple[int, Theorem | Skip]]:
    """What each binding of ``phrase`` proves: (offset in phrase, result) pairs.

    A ``let A = ... and B = prove (`GOAL`, TACTIC) and ...;;`` binds its
    names at once, none seeing the others, so each binding that proves
    something is read as a phrase ``let B = prove (...);;`` of its own (as
    the bench's dump of top-level theorems counts it; s2n-bignum's
    ``arm/proofs/arm.ml`` proves ``append_e2_nil`` so). Any other phrase is
    ``scan_phrase``'s single result at offset 0; [] when it proves nothing.
    """
    try:
        toks = tokens(phrase)
    except ValueError:
        toks = []
    cuts = _and_cuts(toks)
    if not cuts:
        got = scan_phrase(phrase)
        return [] if got is None else [(0, got)]
    out: list[tuple[int, Theorem | Skip]] = []
    bounds = [1, *(c + 1 for c in cuts)]
    ends = [*cuts, len(toks) - 1]   # the last binding ends at the phrase's ;;
    for a, b in zip(bounds, ends):
        if a >= b or not any(t.kind == "ident" and t.text in PROVERS for t in toks[a:b]):
            continue
        start = toks[a].start
        got = scan_phrase("let " + phrase[start:toks[b - 1].end] + ";;")
        if got is not None:
            out.append((start, got))
    return out


def _and_cuts(toks: list[Token]) -> list[int]:
    """Indices of the ``and`` tokens that separate the bindings of a
    non-recursive top-level ``let`` (outside brackets and nested let/in);
    [] for any other phrase."""
    if len(toks) < 3 or toks[0].text != "let" or toks[1].text == "rec" or toks[-1].kind != "semi2":
        return []
    cuts, depth, lets = [], 0, 0
    for j in range(1, len(toks) - 1):
        t = toks[j]
        if t.kind == "open":
            depth += 1
        elif t.kind == "close":
            depth -= 1
        elif t.kind == "ident" and depth == 0:
            if t.text == "let":
                lets += 1
            elif t.text == "in" and lets:
                lets -= 1
            elif t.text == "and" and lets == 0:
                cuts.append(j)
    return cuts
