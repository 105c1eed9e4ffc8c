"""OCaml source as HOL Light's toplevel reads it: the one lexer of this
package. Splitting a file into top-level phrases (``split_phrases``), what
the toplevel runs of a phrase (``normal_form``), whether text is comments
only (``only_comments``), and what a phrase is (``classify``: a load, a
directive, blank or code) all rest on the tokens below that can hide a
``;;`` or a ``*)``: comments, string literals, quoted strings, character
literals and HOL term quotations. Other scanners of OCaml text (extract's,
the native compiler's, the cost model's) build on the same token patterns
and ``skip_*`` functions rather than copies.
"""

from __future__ import annotations

import re

# The lexical classes below follow OCaml's lexer (parsing/lexer.mll): inside a
# comment it also lexes identifiers, string literals, quoted strings and
# character literals, so none of them can close the comment.
IDENT_WITH_PRIME = r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*'[A-Za-z0-9_']*"
CHAR = r"""'(?:[^\\'\n\r]|\r*\n|\\(?:[\\"'ntbr ]|[0-9]{3}|o[0-3][0-7]{2}|x[0-9a-fA-F]{2}))'"""
QUOTED = r"(?P<quoted>\{(?:%%?[A-Za-z_][A-Za-z0-9_'.]*(?:[ \t]+(?P<d1>[a-z_]*))?|(?P<d2>[a-z_]*))\|)"
_MAIN = re.compile(
    rf"(?P<semi>;;)|(?P<comment>\(\*)|(?P<string>\")|{QUOTED}|(?P<quote>`)|{CHAR}|{IDENT_WITH_PRIME}"
)
# In a comment OCaml also skips '' as a unit, so ''' cannot start a char there.
_IN_COMMENT = re.compile(
    rf"(?P<open>\(\*)|(?P<close>\*\))|(?P<string>\")|{QUOTED}|''|{CHAR}|{IDENT_WITH_PRIME}"
)
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_AFTER_SEMI = re.compile(r"[ \t]*(?:\r?\n)?")


def skip_string(text: str, i: int) -> int:
    """End of the string literal whose opening quote ends at ``i``."""
    m = _STRING_REST.match(text, i)
    return m.end() if m else len(text)


def skip_quoted(text: str, i: int, opening: re.Match) -> int:
    """End of the quoted string ``{id|...|id}`` whose opening ends at ``i``."""
    closing = "|" + (opening.group("d1") or opening.group("d2") or "") + "}"
    j = text.find(closing, i)
    return len(text) if j < 0 else j + len(closing)


def skip_comment(text: str, i: int) -> int:
    """End of the (nested) comment whose ``(*`` ends at ``i``."""
    end = comment_end(text, i)
    return len(text) if end is None else end


def comment_end(text: str, i: int) -> int | None:
    """End of the (nested) comment whose ``(*`` ends at ``i``; None if it never closes."""
    depth = 1
    while m := _IN_COMMENT.search(text, i):
        i, kind = m.end(), m.lastgroup
        if kind == "open":
            depth += 1
        elif kind == "close":
            depth -= 1
            if depth == 0:
                return i
        elif kind == "string":
            i = skip_string(text, i)
        elif kind == "quoted":
            i = skip_quoted(text, i, m)
    return None


# What OCaml's lexer skips between tokens (a no-break space is not one of them).
_OCAML_BLANKS = frozenset(" \t\n\r\x0c")


def only_comments(text: str) -> bool:
    """True when ``text`` is blanks and closed comments only: nothing for the
    toplevel to run (it says ``illegal begin of top_phrase``). A comment left
    open is not called empty: the toplevel names that mistake itself."""
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _OCAML_BLANKS:
            i += 1
        if i == n:
            return True
        if not text.startswith("(*", i):
            return False
        end = comment_end(text, i + 2)
        if end is None:
            return False
        i = end


def split_phrases(text: str) -> list[str]:
    """Split OCaml / HOL Light source into its top-level phrases.

    Each phrase ends with its ``;;`` plus the blanks after it and the end of
    that line, if nothing else follows on it. A remainder with no ``;;``
    (blank, comments, or an unterminated phrase) is the last element. A
    ``;;`` inside a comment, a string, a quoted string, a character literal
    or a HOL term quotation `...` does not end a phrase. Always
    ``"".join(split_phrases(text)) == text``, and splitting the text of the
    first k phrases (k below the count, or all of them) gives those phrases.
    """
    return split_from(text, 0)


def split_from(text: str, start: int) -> list[str]:
    """The phrases of ``text[start:]``, where ``start`` begins a phrase."""
    phrases: list[str] = []
    i = start
    while m := _MAIN.search(text, i):
        i, kind = m.end(), m.lastgroup
        if kind == "semi":
            i = _AFTER_SEMI.match(text, i).end()
            phrases.append(text[start:i])
            start = i
        elif kind == "comment":
            i = skip_comment(text, i)
        elif kind == "string":
            i = skip_string(text, i)
        elif kind == "quoted":
            i = skip_quoted(text, i, m)
        elif kind == "quote":
            j = text.find("`", i)
            i = len(text) if j < 0 else j + 1
    if start < len(text):
        phrases.append(text[start:])
    return phrases


# Where OCaml's lexer can be told apart from plain blanks and words: the
# tokens whose text must stay as written (strings, quoted strings, chars, HOL
# term quotations), comments, and primed identifiers (so that the prime of
# x' opens no char literal).
_NORMAL = re.compile(rf"(?P<comment>\(\*)|(?P<string>\")|{QUOTED}|(?P<quote>`)|(?P<char>{CHAR})"
                     rf"|{IDENT_WITH_PRIME}")
# OCaml's blanks (parsing/lexer.mll: space, tab, form feed, CR, LF).
_BLANKS = re.compile(r"[ \t\f\r\n]+")


def normal_form(phrase: str) -> str:
    """What the toplevel runs of ``phrase``: its comments removed and each
    run of blanks made one space, except inside string literals, quoted
    strings, char literals and HOL term quotations, which stay as written.

    A comment becomes a blank (``a(*c*)b`` reads as ``a b``, not ``ab``), and
    blanks at either end go. A comment-only or blank phrase gives "". An
    unterminated comment, string or quotation stays as written: the toplevel
    refuses it, so it cannot share an image with text that loads.
    """
    if not phrase:
        return ""
    out: list[str] = []
    gap_start, i, pending_gap = 0, 0, []
    last_was_gap = True
    while m := _NORMAL.search(phrase, i):
        kind, start = m.lastgroup, m.start()
        if kind is None or kind == "d1" or kind == "d2":
            kind = "quoted" if m.group("quoted") else None
        if kind is None:                      # a primed identifier: a word like any other
            i = m.end()
            continue
        if kind == "comment":
            end = comment_end(phrase, m.end())
            if end is not None:
                pending_gap += (phrase[gap_start:start], " ")
                gap_start = i = end
                continue
            end = len(phrase)
        elif kind == "string":
            end = _STRING_REST.match(phrase, m.end())
            end = end.end() if end else len(phrase)
        elif kind == "quoted":
            end = skip_quoted(phrase, m.end(), m)
        elif kind == "quote":
            j = phrase.find("`", m.end())
            end = len(phrase) if j < 0 else j + 1
        else:                                 # a char literal: m is all of it
            end = m.end()
        pending_gap.append(phrase[gap_start:start])
        out.append(_BLANKS.sub(" ", "".join(pending_gap)))
        out.append(phrase[start:end])
        pending_gap, gap_start, i = [], end, end
        last_was_gap = False
    if gap_start < len(phrase) or pending_gap:
        pending_gap.append(phrase[gap_start:])
        out.append(_BLANKS.sub(" ", "".join(pending_gap)))
        last_was_gap = True
    text = "".join(out).lstrip(" ")
    return text.rstrip(" ") if last_was_gap else text


def code_only(phrase: str) -> str:
    """``phrase`` with each comment, string, quoted string, char literal and
    term quotation a blank, so words in them are not read as code."""
    out, start, i = [], 0, 0
    while m := _NORMAL.search(phrase, i):
        if m.group("comment"):
            end = skip_comment(phrase, m.end())
        elif m.group("string"):
            end = skip_string(phrase, m.end())
        elif m.group("quoted"):
            end = skip_quoted(phrase, m.end(), m)
        elif m.group("quote"):
            j = phrase.find("`", m.end())
            end = len(phrase) if j < 0 else j + 1
        elif m.group("char"):
            end = m.end()
        else:                               # a primed identifier: code
            i = m.end()
            continue
        out += [phrase[start:m.start()], " "]
        start = i = end
    out.append(phrase[start:])
    return "".join(out)


# What the toplevel's loaders look like as a phrase of their own, and a
# toplevel directive (``#load``, ``#install_printer``).
_LOAD = re.compile(r'^(loads|loadt|needs)\s+"([^"\\]+)"\s*;;\s*$')
_DIRECTIVE = re.compile(r"^#\s*([a-z_]+)")


def strip_phrase(phrase: str) -> str:
    """A phrase without its leading blanks and comments, trimmed."""
    text = phrase.strip()
    while text.startswith("(*"):
        text = text[skip_comment(text, 2):].strip()
    return text


def classify(phrase: str) -> tuple[str, str]:
    """("load", path) for a literal loads/loadt/needs, ("directive", name),
    ("blank", "") or ("code", "")."""
    body = strip_phrase(phrase)
    if not body:
        return "blank", ""
    if m := _LOAD.match(body):
        return m.group(1), m.group(2)
    if m := _DIRECTIVE.match(body):
        return "directive", m.group(1)
    return "code", ""
