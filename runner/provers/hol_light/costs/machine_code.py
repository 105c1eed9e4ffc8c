"""The machine code an s2n-bignum context decodes, for pricing its load.

An s2n-bignum proof file opens by defining its routine's machine code and
decoding it (``arm/proofs/bignum_even.ml``)::

    let bignum_even_mc = define_assert_from_elf "bignum_even_mc" "arm/generic/bignum_even.o"
    [ 0xb4000060; ... ];;
    let BIGNUM_EVEN_EXEC = ARM_MK_EXEC_RULE bignum_even_mc;;

The definition is a short phrase, but ``ARM_MK_EXEC_RULE`` (``X86_MK_EXEC_RULE``,
``X86_MK_CORE_EXEC_RULE``) decodes every instruction by inference, so the
phrase costs in proportion to the code, not to its own size: measured over
sweeps' file heads (benchmarks/planning/file_head_cost.py), 5-131 arm instructions
took 0.3-8 s natively and 1.6-19 s in bytecode where the size model gave
0.02-0.3 s. ``exec_bytes`` finds, for each such phrase, the bytes of the code
it decodes: the hex literals of its definition in the same text (arm: 32-bit
words, x86: bytes), else the ``.text`` of the object file the definition
names, resolved under the context root, as HOL Light's ``define_from_elf``
reads it. ``define_trimmed NAME SRC`` has SRC's bytes (a trimmed copy).
Only top-level ``let X = ..._EXEC_RULE NAME`` phrases count: a rule applied
inside a proof runs only when the proof does (``--context-proofs replay``),
where the proof is priced as a whole.
"""

from __future__ import annotations

import re
from pathlib import Path

_DEFINE = re.compile(r"let\s+([A-Za-z_][A-Za-z0-9_']*)\s*=\s*(define_[a-z_]*from_elf|"
                     r"define_mc_from_intlist|define_word_list|define_relocated_mc)\b")
_TRIMMED = re.compile(r"let\s+([A-Za-z_][A-Za-z0-9_']*)\s*=\s*define_trimmed\s+\"[^\"]*\"\s+"
                      r"([A-Za-z_][A-Za-z0-9_']*)")
_EXEC = re.compile(r"let\s+[A-Za-z_][A-Za-z0-9_']*\s*=\s*[A-Z0-9_]*MK_[A-Z_]*EXEC_RULE\s+"
                   r"([A-Za-z_][A-Za-z0-9_']*)\s*;;")
_HEX = re.compile(r"\b0x([0-9a-fA-F]+)\b")
_OBJECT = re.compile(r"\"([^\"]+\.(?:o|obj))\"")


def _literal_bytes(code: str) -> int:
    """Bytes of the hex literals of a definition (comments already out)."""
    return sum((len(h) + 1) // 2 for h in _HEX.findall(code))


def elf_text_bytes(path: Path) -> int | None:
    """The size of an ELF object's ``.text`` section; None when unreadable."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as f:
            text = ELFFile(f).get_section_by_name(".text")
            return None if text is None else int(text.data_size)
    except (OSError, ELFError, ValueError):
        return None


def exec_bytes(codes: list[str], root: Path | None) -> list[int | None]:
    """For each phrase's code (comments out, as normal_form gives it), the
    bytes of machine code it decodes when it is a top-level EXEC rule, else
    None. Definitions are looked up earlier in the same list; one not found
    (defined in another text) decodes 0 bytes: only the rule's own cost."""
    sizes: dict[str, int] = {}
    out: list[int | None] = []
    for code in codes:
        m = _DEFINE.match(code)
        if m:
            n = _literal_bytes(code[m.end():])
            if n == 0 and root is not None:
                obj = _OBJECT.search(code)
                n = (elf_text_bytes(root / obj.group(1)) or 0) if obj else 0
            sizes[m.group(1)] = n
            out.append(None)
            continue
        m = _TRIMMED.match(code)
        if m:
            sizes[m.group(1)] = sizes.get(m.group(2), 0)
            out.append(None)
            continue
        m = _EXEC.match(code)
        out.append(sizes.get(m.group(1), 0) if m else None)
    return out
