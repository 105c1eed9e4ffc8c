"""Weakly typed values across natively compiled units, and the compiler's
own words in a reason.

The toplevel types each phrase on its own and lets a value keep weak type
variables (``ref []``, a partial application such as s2n-bignum's
``GEN_PROVE_SAFETY_SPEC_TAC``, which has optional arguments) until a later
phrase fixes them. A compilation unit may not export such a value: ``Error:
The type of this expression, ..., contains type variables that cannot be
generalized``. native_compile.py therefore

- keeps a unit that fails so **pending**: its code goes on into the next
  unit in toplevel order (across loaded files), so the value is compiled
  with its first use, which fixes its type as the toplevel does;
- at the end of an image's segment, where the image must be compiled as it
  is, **settles** what is still weak: ``ocamlopt -i`` names the weak values
  and their types, each weak variable becomes an abstract type of the unit
  (``type pb_weak_1``, declared first) and a constraint at the unit's end
  gives each value that type;
- in the child segment, **re-weakens** those values first thing:
  ``let (v, w) = (Obj.magic (M.v, M.w) : (t1) * (t2))`` with the abstract
  types back to type variables, one phrase for all of them so values that
  shared a variable share it again. The abstract types have no values, so
  nothing was put in at them: the cast gives back the toplevel's typing, and
  the child's first use fixes the type, as the toplevel's would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

# What OCaml 4.13 says of a unit that would export a weak type variable
# (typemod.ml: Non_generalizable and Non_generalizable_module).
_NONGEN = "contains type variables that cannot be generalized"
# A weak variable as -i prints it: '_weak3, or '_pbw_1 for one that a
# re-weakening phrase named.
_WEAK_VAR = re.compile(r"'_([A-Za-z][A-Za-z0-9_]*)")
_VAL = re.compile(r"^val\s+(\(\s*[^)]*?\s*\)|[A-Za-z_][A-Za-z0-9_']*)\s*:\s*(.*)$", re.S)
PLACEHOLDER = "pb_weak_"
_PLACEHOLDER_VAR = "'pbw_"
# A variable the value's type has generalized ('a): each value's own.
_GENERIC_VAR = re.compile(r"'([a-z][A-Za-z0-9_]*)")
# A reason quotes the compiler's complaint: its start and its end, with the
# middle cut out when it is longer than this (a type can run to pages).
REASON_CHARS = 480


def is_weak_error(stderr: str) -> bool:
    """The compile failed only because a value stayed weakly typed."""
    return _NONGEN in stderr


@dataclass(frozen=True)
class WeakValue:
    """A value an image's segment left weakly typed: ``module.name``, of
    ``type_text`` with each weak variable written ``'pbw_<n>``."""

    module: str
    name: str
    type_text: str


def weak_values(interface: str) -> list[tuple[str, str]]:
    """(name, type) of each top-level value with a weak variable in the
    output of ``ocamlopt -i`` (items start in column 0, continuations are
    indented)."""
    items: list[str] = []
    for line in interface.splitlines():
        if line[:1].isspace() and items:
            items[-1] += "\n" + line
        elif line.strip():
            items.append(line)
    out = []
    for item in items:
        m = _VAL.match(item)
        if m and _WEAK_VAR.search(m.group(2)):
            out.append((m.group(1), " ".join(m.group(2).split())))
    return out


def _expr(name: str, module: str = "") -> str:
    """``name`` as an expression (an operator in parentheses), qualified."""
    prefix = f"{module}." if module else ""
    if name.startswith("("):
        return f"{prefix}( {name[1:-1].strip()} )"
    return prefix + name


def settle(source: str, interface: str, module: str) -> tuple[str, list[WeakValue]] | None:
    """``source`` with its weak values given abstract types (declared
    first, constrained last), and those values for the child segment to
    re-weaken; None when ``interface`` shows no weak top-level value (the
    weak type is inside a module: nothing to settle here)."""
    values = weak_values(interface)
    if not values:
        return None
    names = sorted({n for _, t in values for n in _WEAK_VAR.findall(t)})
    number = {n: i for i, n in enumerate(names, 1)}
    header = "".join(f"type {PLACEHOLDER}{i};;\n" for i in number.values())

    def fixed(t: str) -> str:
        return _WEAK_VAR.sub(lambda m: f"{PLACEHOLDER}{number[m.group(1)]}", t)

    def weakened(t: str) -> str:
        return _WEAK_VAR.sub(lambda m: f"{_PLACEHOLDER_VAR}{number[m.group(1)]}", t)

    def own(i: int, t: str) -> str:
        # -i names each value's generalized variables from 'a afresh: in the
        # one phrase that binds them all again, they must stay apart (a
        # variable only in covariant places is generalized again there).
        return _GENERIC_VAR.sub(lambda m: f"'pbg{i}_{m.group(1)}", t)

    footer = "".join(f"let _ = ({_expr(name)} : {fixed(t)});;\n" for name, t in values)
    kept = [WeakValue(module, name, weakened(own(i, t))) for i, (name, t) in enumerate(values)]
    return header + source + "\n" + footer, kept


def reweaken(values: Sequence[WeakValue]) -> str:
    """The phrase that starts a child segment: every value its parent left
    weak, bound again with weak type variables (see the module's doc)."""
    if not values:
        return ""
    names = ", ".join(_expr(v.name) for v in values)
    sources = ", ".join(_expr(v.name, v.module) for v in values)
    types = " * ".join(f"({v.type_text})" for v in values)
    if len(values) == 1:
        return f"let {names} = (Obj.magic {sources} : {types});;\n"
    return f"let ({names}) = (Obj.magic ({sources}) : {types});;\n"


def error_line(stderr: str) -> int | None:
    """The line of the compiler's first error, as its ``File`` line says."""
    m = re.search(r'File "[^"]*", line (\d+)', stderr)
    return int(m.group(1)) if m else None


def compiler_words(stderr: str, limit: int = REASON_CHARS) -> str:
    """The compiler's complaint on one line: the line of the first error
    (``line 12:``) and its message whole, or, past ``limit`` characters, its
    start and its end with `` ... `` between, so the reason always ends with
    the compiler's own last words."""
    lines = stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("Error")), None)
    if start is None:
        # camlp5's "Parse error": its File line names a folder removed since.
        words = re.sub(r'File "[^"]*", line', "line",
                       " ".join(line.strip() for line in lines if line.strip())) or "no output"
        where = ""
    else:
        message = [lines[start].strip()]
        for line in lines[start + 1:]:
            if not line[:1].isspace() or not line.strip():
                break
            message.append(line.strip())
        words = " ".join(message)
        where = ""
        for line in reversed(lines[:start]):
            if m := re.match(r'File "[^"]*", line (\d+)', line):
                where = f"line {m.group(1)}: "
                break
    if len(words) > limit:
        half = (limit - 5) // 2
        words = f"{words[:half].rstrip()} ... {words[-half:].lstrip()}"
    return where + words
