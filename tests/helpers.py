"""Helpers the tests share: the demo corpus, corpora made on the fly, sweep
configs, rows and answers. Fixtures live in conftest.py."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from cluster.local import LocalExecutor
from runner.corpus import Problem
from runner.planning.sweep_config import SweepConfig
from runner.prover import CheckLimits, ProverSession
from runner.results.rows import ResultRow
from runner.sweep import prepare, run_sweep

ROOT = Path(__file__).resolve().parents[1]


DEMO = ROOT / "examples" / "hol_light_demo"


TEST_MEM_LIMIT = 2 * 2**30


def expected_verdicts() -> dict[str, str]:
    with open(DEMO / "expected_verdicts.csv", newline="") as f:
        return {row["Problem"]: row["Verdict"] for row in csv.DictReader(f)}


def beside_coverage(prepared) -> tuple[str, ...]:
    """The warnings other than the map's coverage of the corpus (these maps
    name a few demo problems: runner/maps/provenance.coverage says so)."""
    return tuple(w for w in prepared.warnings if not (w.startswith("MAP: ") and " covers " in w))


def make_corpus(root: Path, problems: dict[str, tuple[str, str, str]],
                category: str | None = None) -> Path:
    """problem id -> (setup.ml, query, answer); ``category`` written to each
    problem's category.txt when given."""
    for pid, (setup, query, answer) in problems.items():
        d = root / pid
        d.mkdir(parents=True)
        (d / "setup.ml").write_text(setup)
        (d / "query.txt").write_text(query)
        (d / "answer.txt").write_text(answer)
        if category is not None:
            (d / "category.txt").write_text(category)
    return root


def demo_config(out: Path, **overrides) -> SweepConfig:
    settings = dict(corpus=DEMO, out=out, category_timeouts=DEMO / "timeouts.json",
                    workers=2, mem_limit=TEST_MEM_LIMIT, context_root=DEMO)
    settings.update(overrides)
    return SweepConfig(**settings)


def sweep_with(session, config: SweepConfig):
    """Run a sweep on the local executor, reusing the shared session."""
    from cluster.local import LocalExecutor

    return run_sweep(prepare(config), LocalExecutor(workers=config.workers, session=session))


HOL_LIBRARY = Path("/usr/share/hol-light/Library")


# binomial.ml needs nothing; agm.ml's context starts with needs "Library/products.ml".
EXTRACTED_FILES = ("binomial.ml", "agm.ml")


def extracted_config(corpus: Path, out: Path, **overrides) -> SweepConfig:
    """A sweep of an extracted Library corpus. Its needs resolve in HOL
    Light's directory whatever the root; the demo's root keeps the salt of
    ``hol_backend``, so the sweep shares ``hol_session`` and its base image."""
    settings = dict(corpus=corpus, out=out, workers=2, mem_limit=TEST_MEM_LIMIT,
                    context_root=DEMO, default_timeout=300.0)
    settings.update(overrides)
    return SweepConfig(**settings)


T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


def row(problem_id: str, attempt: int = 0, *, verdict: str = "OK", wall: float = 0.1,
        finished: float = 0.0, reason: str = "proved", prove_secs: float | None = 0.05,
        worker: str = "w0") -> ResultRow:
    """A ResultRow with plausible defaults; ``finished`` is seconds after T0."""
    return ResultRow(
        problem_id=problem_id, attempt=attempt, category="generic", verdict=verdict,
        reason=reason, prove_secs=prove_secs, wall_secs=wall, peak_rss_mb=None,
        timeout_s=60.0, timeout_source="default", worker=worker, host="node1",
        started_at=T0, finished_at=T0 + dt.timedelta(seconds=finished),
        image_key="img", prover_build="1.0", mode="bytecode", exit_status="exited 0",
        answer_sha256="ab" * 32, run_id="run1",
    )


def spin_then_prove(n: int) -> str:
    """An answer that counts ``n`` down without allocating (300M: about a
    second of CPU on a quiet EPYC here), then proves its goal by ARITH_TAC."""
    return f"(fun g -> let rec go n = if n = 0 then ARITH_TAC g else go (n - 1) in go {n})"


SPIN = ("(fun g -> let rec a = 0 :: a and b = 0 :: b in "
        "if compare a b = 0 then ALL_TAC g else ALL_TAC g)")


ADD = "arm.bignum_add.BIGNUM_ADD_CORRECT"
EMONTREDC = "arm.bignum_emontredc_8n.BIGNUM_EMONTREDC_8N_CORRECT"


# Shaped like the bench's files (values taken from them).
BENCH_MAP = [
    {"problem_id": EMONTREDC, "prove_secs": 9300.683, "timeout_sec": 10800},
    {"problem_id": ADD, "prove_secs": 11.268, "timeout_sec": 120},
    {"problem_id": "arm.not_in_this_sweep.LEMMA", "prove_secs": 0.03, "timeout_sec": 120},
]


ATTEMPTS = ROOT / "examples" / "hol_light_demo_attempts"


def expected() -> dict[tuple[str, int], tuple[str, int | None]]:
    """(problem, attempt) -> (verdict, the attempt a repeat reuses)."""
    with open(ATTEMPTS / "expected_verdicts.csv", newline="") as f:
        return {(r["Problem"], int(r["Attempt"])): (r["Verdict"], int(r["DedupOf"]) if r["DedupOf"] else None)
                for r in csv.DictReader(f)}


class CountingSession(ProverSession):
    """The shared HOL Light session, listing every check it runs."""

    def __init__(self, inner: ProverSession):
        self.inner, self.info, self.checked = inner, inner.info, []

    @property
    def image_builds(self):
        return self.inner.image_builds

    def prepare(self, problems):
        self.inner.prepare(problems)

    def image_key(self, problem):
        return self.inner.image_key(problem)

    def check(self, problem, limits):
        self.checked.append((problem.problem_id, problem.answer.strip()))
        return self.inner.check(problem, limits)

    def close(self):
        pass     # the session fixture owns it


def attempts_config(out: Path, **overrides):
    settings = dict(answers=ATTEMPTS, only=IDS)
    settings.update(overrides)
    return demo_config(out, **settings)


def sweep_attempts(session, out: Path, *, on_row=lambda row: None, progress=None, **overrides):
    """Sweep the attempts fixture; returns (summary, the checks really run).
    ``progress``, a dict, gets what a progress bar is told: the start
    (total, settled), the rows and the attempts skipped."""
    counting = CountingSession(session)
    config = attempts_config(out, **overrides)
    told = progress if progress is not None else {}
    told.update(start=None, rows=0, skipped=0)

    def row_in(row):
        told["rows"] += 1
        on_row(row)

    summary = run_sweep(prepare(config), LocalExecutor(workers=config.workers, session=counting),
                        on_row=row_in, on_start=lambda total, done: told.update(start=(total, done)),
                        on_skip=lambda n: told.update(skipped=told["skipped"] + n))
    return summary, counting.checked


def first_ok(exp) -> dict[str, int]:
    out: dict[str, int] = {}
    for (pid, k), (verdict, _) in sorted(exp.items()):
        if verdict == "OK" and pid not in out:
            out[pid] = k
    return out


def kept_by_early_stop() -> dict[tuple[str, int], tuple[str, int | None]]:
    """The expected rows of an early-stop sweep: each attempt up to the first OK."""
    exp, solved_at = expected(), first_ok(expected())
    return {key: v for key, v in exp.items() if key[0] not in solved_at or key[1] <= solved_at[key[0]]}


def problem(root: Path, pid: str, query: str, answer: str, setup: str = "") -> Problem:
    folder = root / pid
    folder.mkdir(parents=True)
    (folder / "setup.ml").write_text(setup)
    (folder / "query.txt").write_text(f"`{query}`\n")
    return Problem(problem_id=pid, directory=folder, setup_path=folder / "setup.ml",
                   query_path=folder / "query.txt", category="generic",
                   answer=answer.encode(), answer_source=str(folder))


def check(session, p: Problem, time_s: float = 10.0):
    session.prepare([p])
    return session.check(p, CheckLimits(time_s=time_s, time_source="default",
                                        mem_bytes=TEST_MEM_LIMIT, expected_mem_bytes=2**20))


# A context and a ground truth in the bench's shape: its proofs keep notes in
# comments, ";;" included (arm.bignum_mod_n25519.BIGNUM_MOD_N25519_SAFE has
# "(* safety_print_log := 1;; revealed that ... *)").
ANSWERS_SETUP = "let PB_DOUBLE = new_definition `pb_double n = n + n`;;\n"


ANSWERS_QUERY = "`!n. pb_double n = 2 * n`\n"


GROUND_TRUTH = ("GEN_TAC THEN REWRITE_TAC[PB_DOUBLE] THEN\n"
                "(* safety_print_log := 1;; revealed that the goal is linear *)\nARITH_TAC\n")


SEMICOLONS = "syntax: ';;' is not allowed in an answer"


ONE_EXPRESSION = "syntax: the answer must be exactly one OCaml expression"


def answer_cases(marker: Path) -> dict[str, tuple[str, str, str | None, bool]]:
    """problem id -> (answer.txt, verdict, start of the reason or None, unwrapped).
    Every refused answer would touch ``marker`` if any of it ran."""
    run = f'let _ = Sys.command "touch {marker}"'
    return {
        "ans.ground_truth": (GROUND_TRUTH, "OK", None, False),
        "ans.fenced": (f"Here is the proof:\n\n```ocaml\n{GROUND_TRUTH}```\n", "OK", None, True),
        "ans.fenced_last": (f"```ocaml\nALL_TAC\n```\nBetter:\n```hol\n{GROUND_TRUTH}```", "OK", None, True),
        "ans.nested_comment": ("(* (* ;; *) ;; *) " + GROUND_TRUTH, "OK", None, False),
        "ans.string": ('(ignore ";;"; ' + GROUND_TRUTH.strip() + ")", "OK", None, False),
        "ans.quoted_string": ("(ignore {|;; *)|}; " + GROUND_TRUTH.strip() + ")", "OK", None, False),
        "ans.char_in_comment": ("(* '\"' ;; *) " + GROUND_TRUTH, "OK", None, False),
        # A real separator, however it is dressed: refused before anything runs.
        "ans.plain_separator": (f"ARITH_TAC;; {run}", "ERROR", SEMICOLONS, False),
        "ans.trailing_separator": ("ARITH_TAC;;\n", "ERROR", SEMICOLONS, False),
        "ans.closer_in_string": (f'ARITH_TAC (* "*)" *) ;; {run}', "ERROR", SEMICOLONS, False),
        "ans.opener_in_string": (f'(ignore "(*"; ARITH_TAC) ;; {run}', "ERROR", SEMICOLONS, False),
        "ans.quote_char": (f"(ignore '\"'; ARITH_TAC) ;; {run}", "ERROR", SEMICOLONS, False),
        "ans.opener_in_quoted": (f"(ignore {{|(*|}}; ARITH_TAC) ;; {run}", "ERROR", SEMICOLONS, False),
        "ans.fenced_separator": (f"```ocaml\nARITH_TAC;; {run}\n```", "ERROR", SEMICOLONS, True),
        # HOL Light's lexer (camlp5's) reads these comments otherwise than
        # OCaml's: there a quote skips the character after it, and a quoted
        # extension opens no quoted string. Its ";;" is found by that lexer.
        "ans.camlp5_quote": (f"ARITH_TAC (* '\" *) ;; {run} (* \"\" *)", "ERROR", SEMICOLONS, False),
        "ans.camlp5_quoted_extension": (f"ARITH_TAC (* {{%ext| *) ;; {run} (* |}} *)", "ERROR",
                                        SEMICOLONS, False),
        # One expression: a definition is none, even of it (the name newer
        # pa_j gives a bare expression), as in the bench.
        "ans.let_it": ("let it = ARITH_TAC", "ERROR", ONE_EXPRESSION, False),
        "ans.let_it_typed": ("let it : tactic = ARITH_TAC", "ERROR", ONE_EXPRESSION, False),
        # (camlp5's toplevel reads one definition per phrase: a syntax error there)
        "ans.two_definitions": ("let x = 1 let y = 2", "ERROR", "syntax:", False),
    }


def answers_corpus(root: Path, marker: Path) -> Path:
    for pid, (answer, *_rest) in answer_cases(marker).items():
        d = root / pid
        d.mkdir(parents=True)
        (d / "setup.ml").write_text(ANSWERS_SETUP)
        (d / "query.txt").write_text(ANSWERS_QUERY)
        (d / "category.txt").write_text("defs\n")
        (d / "answer.txt").write_text(answer)
    return root


def assert_answer_rows(rows: dict[str, dict], marker: Path) -> None:
    import hashlib

    from runner.provers.hol_light.ocaml_lexer import split_phrases

    cases = answer_cases(marker)
    assert set(rows) == set(cases)
    for pid, (answer, verdict, reason, unwrapped) in cases.items():
        row = rows[pid]
        assert row["verdict"] == verdict, (pid, row["reason"])
        if reason is not None:
            assert row["reason"].startswith(reason), (pid, row["reason"])
        assert row["answer_unwrapped"] is unwrapped, pid
        assert row["answer_sha256"] == hashlib.sha256(answer.encode()).hexdigest(), pid
    # The camlp5 cases are ones that OCaml's rules (and so the screen's first
    # pass) read as a single phrase: HOL Light's own lexer is what refused them.
    for pid in ("ans.camlp5_quote", "ans.camlp5_quoted_extension"):
        assert len(split_phrases(cases[pid][0])) == 1
    assert not marker.exists()


IDS = tuple(sorted({pid for pid, _ in expected()}))


def sacct(job_id: str, fields: str = "JobID,State,ExitCode") -> list[list[str]]:
    out = subprocess.run(["sacct", "-n", "-P", "-D", "-j", job_id, "-o", fields],
                         capture_output=True, text=True, check=True).stdout
    return [line.split("|") for line in out.splitlines() if line]


PROOFBATCH = Path(sys.executable).with_name("proofbatch")


FAST_S = 2.0  # validation reads a few small files; HOL Light takes minutes to load


WORD = "x86.sha3_keccak_f1600.WORD_NEG_EL_DEMORGAN"


# The tripwire HOL Light records being started in a file under the test's
# temp dir; inside the sandbox (runner/checks/sandbox.py) that write would fail, and
# the tripwire could never fire. These tests are about validation, not the box.
NO_BOX = ("--sandbox", "none")


def make_problem(corpus: Path, pid: str, *, query: str | None = "`!x:int64. word_not x = x`\n",
                 category: str | None = None, answer: str | None = "WORD_BLAST_TAC\n") -> Path:
    d = corpus / pid
    d.mkdir(parents=True)
    (d / "setup.ml").write_text('let proofbatch_test_context = 1;;\n')
    if query is not None:
        (d / "query.txt").write_text(query)
    if category is not None:
        (d / "category.txt").write_text(category)
    if answer is not None:
        (d / "answer.txt").write_text(answer)
    return d


def previous_sweep(out: Path) -> None:
    """What an earlier sweep leaves under --out (contents only need to be distinctive)."""
    (out / "shards").mkdir(parents=True)
    (out / "sweep.json").write_text(json.dumps({"prover": "hol-light", "hol_build": "old",
                                                "mode": "bytecode-fork", "limit_clock": "cpu"},
                                               indent=2) + "\n")
    (out / "shards" / "node7-123-20240101T000000-w0.parquet").write_bytes(bytes(range(256)) * 4)
    (out / "results.parquet").write_bytes(b"PAR1" + os.urandom(512) + b"PAR1")
    (out / "results.csv").write_text(f"problem_id,verdict\n{WORD},PROVED\n")
    (out / "verdicts.csv").write_text(f"problem_id,verdict\n{WORD},PROVED\n")


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` with its bytes (files) and mtime: what "untouched" means."""
    snap = {}
    for path in sorted(root.rglob("*")):
        st = path.stat()
        content = path.read_bytes() if path.is_file() else "<dir>"
        snap[str(path.relative_to(root))] = (content, st.st_mtime_ns)
    return snap


def assert_one_line_error(result, where: Path | str, *fragments: str) -> str:
    """Exit 2, nothing on stdout, one stderr line naming ``where``, what is
    wrong and the fix (each given fragment, in order)."""
    code, stdout, err = result
    assert code == 2, (code, err)
    assert stdout == ""
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith(f"proofbatch: error: {where}: "), line
    rest = line[len(f"proofbatch: error: {where}: "):]
    assert "; " in rest, f"no fix after the problem: {line}"
    position = 0
    for fragment in fragments:
        found = rest.find(fragment, position)
        assert found >= 0, (fragment, line)
        position = found + len(fragment)
    return line


# Three light demo problems.
LIGHT = ["arith.add_comm", "lists.append_nil", "logic.drinker"]


def tiny_corpus(root: Path, *, spin_limit: int) -> tuple[Path, Path]:
    """Light problems (limit 30 s, so they run first) and one answer that spins
    in a C primitive until the runner kills it at its limit."""
    corpus = root / "corpus"
    for pid in LIGHT:
        shutil.copytree(DEMO / pid, corpus / pid)
        (corpus / pid / "category.txt").write_text("light\n")
    spin = corpus / "slow.spin"
    spin.mkdir()
    (spin / "setup.ml").write_text("")
    (spin / "query.txt").write_text("`F`\n")
    (spin / "answer.txt").write_text(SPIN + "\n")
    (spin / "category.txt").write_text("slow\n")
    timeouts = root / "timeouts.json"
    timeouts.write_text(json.dumps({"light": 30, "slow": spin_limit}))
    return corpus, timeouts


def on_its_checks(session, p: Problem, times: int, act) -> threading.Thread:
    """Call ``act(check)`` (a psutil.Process) on each of the first ``times``
    checks that ``p``'s image forks, from a thread, as each appears; the
    thread gives up after two minutes."""
    import time

    import psutil

    image = psutil.Process(session._images[session.image_key(p)].pid)
    # Children already there are not this test's checks: an earlier check
    # whose reap is still under way on a loaded host would use up ``times``.
    before = {child.pid for child in image.children()}

    def watcher():
        seen: set[int] = set()
        deadline = time.monotonic() + 120
        while len(seen) < times and time.monotonic() < deadline:
            for child in image.children():
                if child.pid not in seen and child.pid not in before:
                    seen.add(child.pid)
                    act(child)
            time.sleep(0.02)

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    return thread


def left_by_a_dead_runner(board) -> None:
    """Make a RunningBoard's entry one a runner killed without a word left:
    its process (a ``true`` that has exited) is gone."""
    import json
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    entry = json.loads(board.path.read_text())
    board.path.write_text(json.dumps({**entry, "pid": gone.pid}))
