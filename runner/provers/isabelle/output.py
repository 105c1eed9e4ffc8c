"""What Isabelle prints, read into verdicts.

The formats come from Isabelle's sources (src/Pure/Build/build_job.scala,
build.scala, src/Pure/General/timing.scala, src/Pure/Tools/server.scala) and
the System manual (sections "Invoking the build process" and "The Isabelle
server"). Samples of each are in tests/samples/isabelle/, with where they come
from.

``isabelle build`` prints, per session: ``Finished NAME (0:00:07 elapsed
time, ...)`` on success; on failure ``NAME FAILED (see also "isabelle
build_log -H Error NAME")``, then the tail of the session log, where every
error line starts with ``*** ``; ``*** Timeout`` when its own timer (run by
the JVM, outside ML) cancelled the session; and finally ``Unfinished
session(s): NAME``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ...verdicts import Outcome, Verdict

_FINISHED = re.compile(r"^Finished (?P<session>\S+) \((?P<elapsed>\d+:\d\d:\d\d) elapsed time")
_FAILED = re.compile(r"^(?P<session>\S+) FAILED(?: |$)")
_AT = re.compile(r'^At command "(?P<command>[^"]*)" \(line (?P<line>\d+) of "(?P<file>[^"]*)"\)')
_LINE_OF = re.compile(r'\(line (?P<line>\d+) of "(?P<file>[^"]*)"\)')


def hms_seconds(text: str) -> float:
    h, m, s = text.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


@dataclass
class BuildReport:
    session: str
    finished: bool = False
    failed: bool = False
    timeout: bool = False
    interrupt: bool = False
    out_of_store: bool = False     # Poly/ML's own report that the ML heap is exhausted
    elapsed_s: float | None = None
    errors: list[str] = field(default_factory=list)   # messages, continuation lines joined
    # Where each error arose, from its "At command" line: (command, line, file), or None.
    where: list[tuple[str, int, str] | None] = field(default_factory=list)

    def _add(self, block: list[str], where: tuple[str, int, str] | None) -> None:
        self.errors.append(" ".join(block))
        self.where.append(where)


def parse_build(output: str, session: str) -> BuildReport:
    """Read ``isabelle build`` console output for ``session``.

    Only lines naming exactly this session count as its result: the output of
    a problem theory can never print a line that does not start with ``***``
    when the session fails, and it cannot make the session finish.
    """
    report = BuildReport(session)
    # One error message spans several "*** " lines; Isabelle ends the message
    # of a failed command with its position, "At command ...".
    block: list[str] = []
    for raw in output.splitlines():
        line = raw.rstrip("\r")
        if line.startswith("*** ") or line == "***":
            body = line[4:].strip()
            if body == "Timeout":
                report.timeout = True
            elif body == "Interrupt":
                report.interrupt = True
            elif m := _AT.match(body):
                report._add(block or ["(no message)"], (m["command"], int(m["line"]), m["file"]))
                block = []
            elif body:
                block.append(body)
            continue
        if block:
            report._add(block, None)
            block = []
        if line.startswith("Run out of store"):
            report.out_of_store = True
        if (m := _FINISHED.match(line)) and m["session"] == session:
            report.finished, report.elapsed_s = True, hms_seconds(m["elapsed"])
        elif (m := _FAILED.match(line)) and m["session"] == session:
            report.failed = True
    if block:
        report._add(block, None)
    return report


# Error messages from Isabelle/Isar (src/Pure/Isar/proof.ML, method.ML,
# outer_syntax.ML, syntax_phases.ML, thy_info.ML, resources.ML ...), by verdict.
_CHEAT = ("Cheating requires quick_and_dirty mode",)
_SYNTAX = ("Outer syntax error", "Inner syntax error", "Inner lexical error", "Malformed",
           "Bad theory name", "Bad context for command", "Illegal application of proof command",
           "Type unification failed", "Undefined type name", "Bad name", "Bad number of arguments",
           "Extra variables on rhs", "Unknown outer syntax", "Undefined command")
_THEORY = ("No such file", "Bad theory import", "Undefined theory", "Theory loader",
           "Could not find", "Undefined session", "Bad session", "Unknown session",
           "Failed to load theory", "Unknown ancestor theory")
_PROOF = ("Failed to finish proof", "Failed to apply initial proof method",
          "Failed to apply proof method", "Failed to apply terminal proof method",
          "Failed to refine any pending goal", "Undefined fact", "Unknown fact",
          "Result contains obtained variables", "Local statement fails to refine",
          "No matching", "Failed to solve", "Proof failed", "Unsolved goals")
_MEMORY = ("Run out of store", "Out of memory", "exception Interrupt_Breakdown")


def _starts(message: str, prefixes: tuple[str, ...]) -> bool:
    return message.startswith(prefixes)


def classify_build(report: BuildReport, *, nonce: str, original_file: str, exit_code: int) -> Outcome:
    """The verdict of a check session from its build report.

    ``nonce`` marks the messages of the runner's own check theory; nothing
    else can know it. ``original_file`` is the runner's copy of the unanswered
    theory, whose failure is a broken problem, not a wrong answer.
    """
    marker = f"PROOFBATCH-{nonce} "
    for message in report.errors:
        if message.startswith(marker):
            verdict, _, reason = message[len(marker):].partition(" ")
            if verdict in Verdict.__members__:
                return Outcome(Verdict(verdict), reason)
    if report.timeout:
        return Outcome(Verdict.TIMEOUT, "Isabelle's build timeout cancelled the check")
    if report.finished and not report.failed and exit_code == 0 and not report.errors:
        return Outcome(Verdict.OK, "theory checked; statement and dependencies verified")
    first = report.errors[0] if report.errors else ""
    where = report.where[0] if report.where else None
    if (where and where[2].endswith(original_file)) or original_file in first:
        return Outcome(Verdict.ERROR, f"setup: the problem theory itself fails: {first}")
    at = f" (at {where[0]!r}, line {where[1]})" if where else ""
    if report.out_of_store or _starts(first, _MEMORY):
        return Outcome(Verdict.MEMOUT, f"Isabelle ran out of memory: {first or 'Run out of store'}")
    if _starts(first, _CHEAT):
        return Outcome(Verdict.CHEATING, f"{first}{at}")
    if _starts(first, _SYNTAX):
        return Outcome(Verdict.ERROR, f"syntax: {first}{at}")
    if _starts(first, _THEORY):
        return Outcome(Verdict.ERROR, f"theory: {first}{at}")
    if _starts(first, _PROOF):
        return Outcome(Verdict.FAIL, f"{first}{at}")
    if report.interrupt:
        return Outcome(Verdict.ERROR, "Isabelle interrupted the check")
    if first and where:
        # Any other error raised by a proof command is that proof failing.
        return Outcome(Verdict.FAIL, f"{first}{at}")
    if first:
        return Outcome(Verdict.ERROR, first)
    return Outcome(Verdict.ERROR, f"isabelle build exited {exit_code} without a result for {report.session}")


# -- the server (src/Pure/Tools/server.scala; System manual "The Isabelle server")


@dataclass(frozen=True)
class ServerReply:
    name: str          # OK, ERROR, FINISHED, FAILED, NOTE
    value: object      # the JSON argument, or None


def parse_server_line(line: str) -> ServerReply:
    """One server message: a name, then optionally a JSON value. (Long
    messages are sent as a byte count line followed by the message; the
    transport reads those, this reads the message.)"""
    name, _, rest = line.strip().partition(" ")
    return ServerReply(name, json.loads(rest) if rest else None)


def classify_use_theories(result: dict, *, theory: str, nonce: str) -> Outcome:
    """The verdict of a ``use_theories`` result (type use_theories_results:
    {ok, errors: [message], nodes: [node ⊕ node_results]})."""
    marker = f"PROOFBATCH-{nonce} "
    errors = [e.get("message", "") for e in result.get("errors", [])]
    for message in errors:
        if message.startswith(marker):
            verdict, _, reason = message[len(marker):].partition(" ")
            if verdict in Verdict.__members__:
                return Outcome(Verdict(verdict), reason)
    nodes = {n.get("theory_name", ""): n for n in result.get("nodes", [])}
    node = next((n for name, n in nodes.items() if name.endswith("." + theory) or name == theory), None)
    if result.get("ok") and not errors:
        if node is None or not node.get("status", {}).get("consolidated", False):
            return Outcome(Verdict.ERROR, f"server: theory {theory} was not consolidated")
        return Outcome(Verdict.OK, "theory checked; statement and dependencies verified")
    if node is not None and node.get("status", {}).get("canceled"):
        return Outcome(Verdict.TIMEOUT, "the server cancelled the theory (watchdog or interrupt)")
    where = []
    for e in result.get("errors", []):
        pos = e.get("pos") or {}
        where.append(("?", int(pos["line"]), str(pos["file"])) if "line" in pos and "file" in pos else None)
    report = BuildReport(session="", errors=errors, where=where)
    return classify_build(report, nonce=nonce, original_file="Proofbatch_Original.thy", exit_code=1)
