"""How a context's own proofs run while its image loads: replayed as
written, or trusted.

A corpus cut from a proof file gives each problem the file up to its
theorem as context, so loading that context replays every earlier proof of
the file. Under ``trust``, a top-level ``prove`` in a context returns its
stated theorem without running the tactic (those proofs were checked when
the library itself was built); the answer, and any function of the context
it calls, still proves for real, and ``axioms()`` is compared from after the
context loaded. The choice changes what an image holds, so it is part of
every image key, recorded in rows and in sweep.json, and a resume with the
other choice is refused.
"""

from __future__ import annotations

import enum


class ContextProofs(str, enum.Enum):
    REPLAY = "replay"   # the context runs as written (the default)
    TRUST = "trust"     # a context's top-level prove returns its statement unproved

    def __str__(self) -> str:
        return self.value


DEFAULT = ContextProofs.REPLAY
