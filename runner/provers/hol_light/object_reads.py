"""The object files HOL Light proof files read when they load.

s2n-bignum's proofs read the machine code they verify from the object files
its Makefiles build: ``define_assert_from_elf "bignum_mul_p521_unopt_mc"
"arm/p521/unopt/bignum_mul_p521_base.o"``, and likewise ``define_from_elf``,
``define_assert_relocs_from_elf``, ``define_coda_from_elf`` ... (its
``arm/proofs/decode.ml`` and ``x86/proofs/decode.ml``). The name is opened
as written, relative to the toplevel's working directory, which for a
check is the context root (session/backend.py runs HOL Light there). A
missing object makes every problem whose setup reads it ERROR with
``Sys_error("...: No such file or directory")`` (issue 46): s2n-bignum's
``make -C arm`` builds no ``arm/*/unopt/*.o``, its ``make -C arm unopt`` does.

Two readers: extract says per file which objects its proofs read and
whether they exist (``reads_in_phrase``, comments skipped, so a
commented-out ``print_literal_from_elf`` counts for nothing), and the
problem hash covers them (``reads_in_text``, one regular expression over a
setup's bytes, comments included: a needless recheck when such a file
changes, never a missed one; session/context_inputs.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from .ocaml_lexer import CHAR, QUOTED, skip_comment, skip_quoted, skip_string

# An OCaml identifier with "elf" as one of its _-separated words: the
# functions above, and load_elf_contents_arm and the like.
_ELF_WORD = re.compile(r"(?<![A-Za-z0-9_'])(?:[A-Za-z0-9']+_)*elf(?:_[A-Za-z0-9_']+)?(?![A-Za-z0-9_'])")
# What such a call reads: an object file's name (s2n-bignum's x86 Windows
# lemmas read .obj files, built by `make -C x86 winobj`).
OBJECT_SUFFIXES = (".o", ".obj")
_TEXT_ELF = re.compile(rb"(?:\b|_)elf(?:\b|_)")
_TEXT_OBJECT = re.compile(rb'"([^"\\\n]+\.(?:o|obj))"')
_TOKENS = re.compile(rf'(?P<comment>\(\*)|(?P<string>")|{QUOTED}|(?P<quote>`)|{CHAR}')


def _code_and_strings(phrase: str) -> tuple[str, list[str]]:
    """``phrase`` without comments, string literals, quoted strings and term
    quotations, and the string literals' contents, in order."""
    code, strings, start, i = [], [], 0, 0
    while m := _TOKENS.search(phrase, i):
        code.append(phrase[start:m.start()])
        if m.group("comment"):
            end = skip_comment(phrase, m.end())
        elif m.group("string"):
            end = skip_string(phrase, m.end())
            strings.append(phrase[m.end():end - 1])
        elif m.group("quoted"):
            end = skip_quoted(phrase, m.end(), m)
        elif m.group("quote"):
            j = phrase.find("`", m.end())
            end = len(phrase) if j < 0 else j + 1
        else:                               # a character literal
            end = m.end()
        code.append(" ")
        start = i = end
    code.append(phrase[start:])
    return "".join(code), strings


def reads_in_phrase(phrase: str) -> list[str]:
    """The object files one top-level phrase reads, as written: the string
    literals naming a .o or .obj in a phrase that calls an ``*_elf*``
    function; [] for any other phrase."""
    if "elf" not in phrase:
        return []
    code, strings = _code_and_strings(phrase)
    if not _ELF_WORD.search(code):
        return []
    return [s for s in strings if s.endswith(OBJECT_SUFFIXES) and "\\" not in s]


def reads_in_text(text: bytes) -> list[str]:
    """The object files a file's text may read, as written, fast and
    generous: every quoted .o/.obj name in a text that names an ``*_elf*``
    function, in comments too."""
    if not _TEXT_ELF.search(text):
        return []
    return sorted({m.group(1).decode("utf-8", "surrogateescape") for m in _TEXT_OBJECT.finditer(text)})


def object_path(name: str, workdir: Path) -> Path:
    """Where a check opens ``name``: as it is when absolute, else under the
    toplevel's working directory (the context root)."""
    return Path(name) if Path(name).is_absolute() else Path(workdir) / name
