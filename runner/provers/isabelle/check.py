"""One Isabelle check as files and a command line: a per-problem session.

Each check is a session of its own on top of the parent's heap, in a scratch
directory::

    ROOT                       session Proofbatch_Check_<id> = <parent> + ...
    Proofbatch_Original.thy    the problem theory as shipped, proof `sorry`
    <Goal>.thy                 the theory under check (the answer in place)
    Proofbatch_Check.thy       compares the proved theorem with the original

``isabelle build`` processes the three theories against the parent heap
(without writing a heap of its own) and prints the result. The original is
processed in a theory block with ``quick_and_dirty``, which its placeholder
``sorry`` needs and which no other theory gets. The check theory then fails
the session, with a message tagged by a per-check nonce, if the answer's
theorem is missing, states a different proposition than the original (after
renaming the original theory's own constants and types to the answer's) or
depends on an oracle (``sorry`` under quick_and_dirty, ``skip_proof``, an
oracle-mode smt). The answer cannot know the nonce, so it cannot forge the
runner's messages; and nothing it prints can make the session finish.

Execution modes. This per-problem session (``build-session``) is the
recorded mode. ``isabelle process`` (raw ML, no JVM) lost its ``-T THEORY``
option in recent Isabelle versions, so a theory would have to be loaded by ML
code we write; a warm ``isabelle server`` with ``use_theories`` saves the JVM
and heap start per check, but all checks then share one ML process: one
answer's runaway proof or memory takes down the others' checks, and the
guard can only watch the whole server. We could not measure any of them here
(no Isabelle on this machine), so we chose isolation and Isabelle's own
outside timeout; ``server_use_theories_args`` and
``isabelle_output.classify_use_theories`` keep the server mode possible.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import text as it
from ...prover import Mode
from .corpus import IsabelleCorpus

ORIGINAL = "Proofbatch_Original"
CHECKER = "Proofbatch_Check"
MODE = Mode.BUILD_SESSION


def _quote(name: str) -> str:
    """An outer-syntax string; names here are [A-Za-z0-9_.+-] and paths we made."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def root_text(session: str, corpus: IsabelleCorpus, goal: it.GoalTheory, time_limit_s: float,
              threads: int = 1) -> str:
    """The ROOT of a check session (System manual, "Session ROOT specifications")."""
    lines = [f"session {_quote(session)} = {_quote(corpus.parent_session)} +",
             f"  options [timeout = {max(1, round(time_limit_s))}, threads = {threads}, "
             "document = false, quick_and_dirty = false]"]
    if corpus.sessions:
        lines.append("  sessions " + " ".join(_quote(s) for s in corpus.sessions))
    lines += ["  theories [quick_and_dirty]", f"    {_quote(ORIGINAL)}",
              "  theories", f"    {_quote(goal.name)}", f"    {_quote(CHECKER)}", ""]
    return "\n".join(lines)


def check_theory(goal: it.GoalTheory, nonce: str) -> str:
    """The theory that compares the proved theorem with the original (Isabelle/ML)."""
    cand, fact = goal.name, goal.theorem
    return f'''theory {CHECKER}
  imports {_quote(ORIGINAL)} {_quote(cand)}
begin

ML \\<open>
let
  val tag = "PROOFBATCH-{nonce} "
  fun stop verdict reason = error (tag ^ verdict ^ " " ^ reason)
  val thys = Theory.ancestors_of \\<^theory>
  fun theory base =
    (case find_first (fn thy => Context.theory_base_name thy = base) thys of
      SOME thy => thy
    | NONE => stop "ERROR" ("setup: theory " ^ base ^ " is not loaded"))
  fun facts base =
    Global_Theory.get_thms (theory base) (base ^ "." ^ {_ml_string(fact)})
      handle ERROR _ => stop "CHEATING" ("the answer does not prove " ^ {_ml_string(fact)})
  val original = facts "{ORIGINAL}"
  val proved = facts {_ml_string(cand)}
  val prefix = "{ORIGINAL}."
  fun rename s =
    if String.isPrefix prefix s then {_ml_string(cand + ".")} ^ String.extract (s, size prefix, NONE)
    else s
  fun rename_typ (Type (a, Ts)) = Type (rename a, map rename_typ Ts)
    | rename_typ T = T
  val rename_term =
    Term.map_types rename_typ o Term.map_aterms (fn Const (c, T) => Const (rename c, T) | t => t)
  val same =
    length original = length proved andalso
    forall (fn (a, b) => rename_term (Thm.prop_of a) aconv Thm.prop_of b) (original ~~ proved)
  val _ = if same then () else stop "CHEATING" ("the proved statement of " ^ {_ml_string(fact)} ^ " differs from the original")
  val oracles = Thm_Deps.all_oracles proved
  val _ =
    if null oracles then ()
    else stop "CHEATING" ({_ml_string(fact)} ^ " depends on the oracle(s) " ^ commas (map (#1 o #1) oracles))
in () end
\\<close>

end
'''


def _ml_string(text: str) -> str:
    """An ML string literal; fact and theory names are plain identifiers."""
    return '"' + "".join(c if c.isalnum() or c in "_.'" else f"\\{ord(c):03d}" for c in text) + '"'


@dataclass(frozen=True)
class CheckFiles:
    session: str
    directory: Path
    nonce: str


def write_check(directory: Path, session: str, corpus: IsabelleCorpus, goal: it.GoalTheory,
                candidate: str, time_limit_s: float, nonce: str, threads: int = 1) -> CheckFiles:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ROOT").write_text(root_text(session, corpus, goal, time_limit_s, threads), encoding="utf-8")
    (directory / f"{ORIGINAL}.thy").write_text(it.rename_theory(goal.text, ORIGINAL), encoding="utf-8")
    (directory / f"{goal.name}.thy").write_text(candidate, encoding="utf-8")
    (directory / f"{CHECKER}.thy").write_text(check_theory(goal, nonce), encoding="utf-8")
    return CheckFiles(session, directory, nonce)


def build_check_argv(isabelle: Sequence[str], corpus: IsabelleCorpus, files: CheckFiles) -> list[str]:
    """`isabelle build` of the check session, against the parent's heap:
    no -b (the check's own heap is never needed)."""
    argv = [*isabelle, "build"]
    for d in corpus.session_dirs:
        argv += ["-d", str(d)]
    return argv + ["-d", str(files.directory), files.session]


# -- the other modes, kept possible -------------------------------------------


def process_argv(isabelle: Sequence[str], corpus: IsabelleCorpus, ml_file: Path) -> list[str]:
    """`isabelle process -l PARENT -f FILE`: the raw ML process on the parent
    heap, loading the check by ML (``-T`` is gone from recent versions)."""
    argv = [*isabelle, "process", "-l", corpus.parent_session]
    for d in corpus.session_dirs:
        argv += ["-d", str(d)]
    return argv + ["-f", str(ml_file)]


def server_session_start_args(corpus: IsabelleCorpus) -> dict:
    """session_start arguments (System manual, "Command session_start")."""
    args: dict = {"session": corpus.parent_session}
    if corpus.session_dirs:
        args["dirs"] = [str(d) for d in corpus.session_dirs]
    if corpus.sessions:
        args["include_sessions"] = list(corpus.sessions)
    return args


def server_use_theories_args(session_id: str, files: CheckFiles, time_limit_s: float) -> dict:
    """use_theories arguments for one check: its scratch directory as master_dir;
    the watchdog ends a theory whose commands stop changing status."""
    return {"session_id": session_id, "theories": [CHECKER], "master_dir": str(files.directory),
            "watchdog_timeout": float(time_limit_s)}
