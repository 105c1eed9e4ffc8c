"""Replay the hostile catalogue against the installed `proofbatch`, as users run it.

Two parts:

- the command-line cases of ``cli_cases.json``: each sets up a scratch
  folder (files written, copied or edited, symlinks), runs one command of
  the installed CLI and checks its exit code and the first line it prints
  (on stderr, or stdout when the case says so), and that nothing printed a
  Python traceback. A case marked ``"hol": true`` loads HOL Light; the
  others answer in a second or two, before any prover loads.
- the hostile answers (every problem folder beside this file): one sweep,
  whose verdicts and reasons must be those of ``expected_verdicts.csv``.
  It loads HOL Light (minutes).

    .venv/bin/python examples/hostile/replay.py              # everything
    .venv/bin/python examples/hostile/replay.py --cli-only   # no HOL Light: seconds
    .venv/bin/python examples/hostile/replay.py --case NAME  # one case
    .venv/bin/python examples/hostile/replay.py --cli-only --jobs 2   # two at a time

Prints one line per case (ok or FAIL with why) and exits 1 if any failed.
The proofbatch run is ``PROOFBATCH`` if set, else the one beside this
Python (``.venv/bin/proofbatch``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CASES = HERE / "cli_cases.json"
TRACEBACK = "Traceback (most recent call last)"
# A command that must refuse its input answers in seconds; a HOL Light
# case loads the prover (70-90 s of CPU) and checks.
LIMIT_S, HOL_LIMIT_S = 60.0, 1200.0


def installed() -> str:
    return os.environ.get("PROOFBATCH") or str(Path(sys.executable).with_name("proofbatch"))


def _fill(text: str, tmp: Path, *, pattern: bool = False) -> str:
    """{tmp} the case's scratch folder, {root} the repository, {host} this
    host's name, {now} and {now-N} epoch seconds (a heartbeat written now,
    or N seconds ago); in a ``pattern``, each stands for itself."""
    quote = re.escape if pattern else str
    for name, value in (("{tmp}", tmp), ("{root}", ROOT), ("{host}", socket.gethostname())):
        text = text.replace(name, quote(str(value)))
    return re.sub(r"\{now(?:-(\d+))?\}", lambda m: f"{time.time() - float(m[1] or 0):.3f}", text)


def set_up(case: dict, tmp: Path) -> None:
    for dest, source in case.get("copy", {}).items():
        src, dst = ROOT / source, tmp / dest
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    for dest, text in case.get("files", {}).items():
        path = tmp / dest
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_fill(text, tmp))
    for dest in case.get("executable", []):
        (tmp / dest).chmod(0o755)
    for dest, edits in case.get("edit", {}).items():
        path = tmp / dest
        text = path.read_text()
        for old, new in edits:
            if old not in text:
                raise ValueError(f"{dest}: the text to edit is not there: {old[:60]!r}")
            text = text.replace(old, _fill(new, tmp), 1)
        path.write_text(text)
    for dest, target in case.get("symlinks", {}).items():
        path = tmp / dest
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)
    for dest in case.get("dirs", []):
        (tmp / dest).mkdir(parents=True, exist_ok=True)


def run_command(argv: list[str], env: dict, *, close_output: bool = False, stop: dict | None = None,
                timeout: float) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``proofbatch ARGV``. ``close_output``:
    its stdout and stderr are a pipe whose reader is gone (`| head -1`
    after one line). ``stop``: {"signal": "TERM", "after_s": S} sent to it."""
    cmd = [installed(), *argv]
    if close_output:
        read, write = os.pipe()
        os.close(read)
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=write, stderr=write,
                                stdin=subprocess.DEVNULL)
        os.close(write)
        return proc.wait(timeout=timeout), "", ""
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    if stop:
        try:
            proc.wait(timeout=float(stop["after_s"]))
        except subprocess.TimeoutExpired:
            proc.send_signal(getattr(signal, "SIG" + stop["signal"]))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return -1, out, err + f"\n(replay: killed after {timeout:g} s)"
    return proc.returncode, out, err


def _line(text: str, which: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    return lines[-1] if which == "last" else lines[0]


def check(case: dict, tmp: Path, step: dict, env: dict) -> list[str]:
    """What is wrong with one command of a case (empty: nothing)."""
    argv = [_fill(a, tmp) for a in step["argv"]]
    timeout = HOL_LIMIT_S if case.get("hol") else LIMIT_S
    code, out, err = run_command(argv, env, close_output=step.get("close_output", False),
                                 stop=step.get("stop"), timeout=timeout)
    wrong = []
    if TRACEBACK in out or TRACEBACK in err:
        tb = (err if TRACEBACK in err else out).strip().splitlines()
        wrong.append(f"printed a traceback, ending {tb[-1][:200]!r}")
    if code != step["exit"]:
        wrong.append(f"exit {code}, not {step['exit']} (stderr: {_line(err, 'last')[:300]!r})")
    for stream, text in (("stderr", err), ("stdout", out)):
        for which in ("first", "last"):
            key = stream if which == "first" else f"{stream}_last"
            if key in step:
                line, pattern = _line(text, which), _fill(step[key], tmp, pattern=True)
                if not re.match(pattern, line):
                    wrong.append(f"{which} line of {stream} {line[:300]!r} does not match {pattern!r}")
    if "says" in step and not re.search(_fill(step["says"], tmp, pattern=True), out + err):
        wrong.append(f"does not say {step['says']!r} (stdout: {out[-300:]!r})")
    return wrong


def replay_case(case: dict) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="proofbatch-replay-") as d:
        tmp = Path(d)
        try:
            set_up(case, tmp)
        except (OSError, ValueError) as exc:
            return [f"could not set up: {exc}"]
        env = {**os.environ, **{k: _fill(v, tmp) for k, v in case.get("env", {}).items()}}
        for k in case.get("unset", []):
            env.pop(k, None)
        wrong = []
        for i, step in enumerate([case, *case.get("then", [])]):
            wrong += [f"{'' if i == 0 else f'then {i}: '}{w}" for w in check(case, tmp, step, env)]
            if wrong:
                break
        return wrong


def replay_answers(workers: int) -> list[tuple[str, list[str]]]:
    """One sweep of the hostile answers; each problem's verdict and reason
    against expected_verdicts.csv."""
    with tempfile.TemporaryDirectory(prefix="proofbatch-replay-") as d:
        out = Path(d) / "out"
        argv = ["run", str(HERE), "--out", str(out), "--context-root",
                str(ROOT / "examples" / "hol_light_demo"), "--workers", str(workers)]
        code, stdout, stderr = run_command(argv, dict(os.environ), timeout=HOL_LIMIT_S)
        if TRACEBACK in stdout + stderr or code != 0:
            return [("answers: the sweep", [f"exit {code}, last line {_line(stderr, 'last')!r}"
                                            + (" with a traceback" if TRACEBACK in stdout + stderr else "")])]
        with open(out / "results.csv", newline="") as f:
            got = {r["problem_id"]: r for r in csv.DictReader(f)}
        with open(HERE / "expected_verdicts.csv", newline="") as f:
            want = list(csv.DictReader(f))
        results = []
        for row in want:
            pid, r = row["Problem"], got.get(row["Problem"])
            if r is None:
                results.append((f"answers: {pid}", ["no row"]))
            elif r["verdict"] != row["Verdict"] or row["Reason"] not in r["reason"]:
                results.append((f"answers: {pid}", [f"{r['verdict']} {r['reason'][:200]!r}, not "
                                                    f"{row['Verdict']} {row['Reason']!r}"]))
            else:
                results.append((f"answers: {pid}", []))
        return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli-only", action="store_true",
                   help="only the command-line cases that load no prover (seconds)")
    p.add_argument("--case", action="append", default=[], metavar="NAME",
                   help="only this case (repeatable); 'answers' is the sweep of the answers")
    p.add_argument("--workers", type=int, default=2, help="workers of the answers' sweep")
    p.add_argument("--jobs", type=int, default=1, help="command-line cases run at once")
    args = p.parse_args(argv)
    cases = json.loads(CASES.read_text())["cases"]
    names = [c["name"] for c in cases]
    if len(set(names)) != len(names):
        print("replay: cli_cases.json names a case twice", file=sys.stderr)
        return 2
    chosen = [c for c in cases if (not args.case or c["name"] in args.case)
              and not (args.cli_only and c.get("hol"))]
    def timed(case: dict) -> tuple[list[str], float]:
        started = time.monotonic()
        return replay_case(case), time.monotonic() - started

    failed = 0
    # Each case is its own process in its own scratch folder: they run side by side.
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for case, (wrong, took) in zip(chosen, pool.map(timed, chosen)):
            failed += bool(wrong)
            print(f"{'FAIL' if wrong else 'ok  '} {case['name']} ({took:.1f} s)" +
                  "".join(f"\n       {w}" for w in wrong), flush=True)
    if not args.cli_only and (not args.case or "answers" in args.case):
        for name, wrong in replay_answers(args.workers):
            failed += bool(wrong)
            print(f"{'FAIL' if wrong else 'ok  '} {name}" + "".join(f"\n       {w}" for w in wrong),
                  flush=True)
    print(f"replay: {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
