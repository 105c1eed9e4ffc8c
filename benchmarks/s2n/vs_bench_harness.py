"""The same s2n-bignum problems through the bench's own Pass@1 harness and
through ``proofbatch run``, on the same host with the same workers.

(a) **The bench's flow, by its own scripts**, read from its repository (a git
mirror) at run time into ``WORK/bench`` and run as they are:
``combine-answer-and-setup.py ANSWERS W`` (its syntax check ``synchk.sh`` per
answer, then one program per proof file with each problem's ``bench_run``
inserted at its line) and ``run-answers.sh EVAL W`` (``compile_and_run``
under ``xargs -P W``: ``ocamlopt.byte`` against ``hol_lib.cmxa``, link, run in
``objfiles``); one change, forced by this host's OCaml 4.13: ``num`` added
to its link's packages (see ``bench_inputs``). Its inputs are what its
``setup.sh``/``collect-problems.py`` would leave, built here from the sources
because its TacticTrace cannot be built on this host: per proof file a
template, the file with every load inlined once (``s2n_cut.py``, as HOL Light's ``inline_load.ml`` does:
``open Hol_lib;; open Hol_loader;;`` first, ``update_database.ml`` dropped)
and every top-level ``prove``'s tactic replaced by ``CHEAT_TAC``
(collect-problems.py's rewrite), and a ``problems.json`` giving each problem
its query and line. Its scripts run without opam (they call ``opam env``,
which fails harmlessly here: the Debian compilers are on PATH).

(b) **proofbatch**: ``proofbatch extract FILES --out CORPUS --prefix arm``
then ``proofbatch run CORPUS --answers CSV --mode native --no-fallback
--context-proofs trust --timeout-map MAP --map-mode native`` through the
installed CLI.

Both get the same answers: the ground truths, except ``--wrong`` problems
given a wrong tactic, so FAIL shows in both. Rounds run the flows in
alternating order (ABBA). Each flow's CPU time is read from a cpuacct cgroup
holding its whole process tree (the native server's forks are never reaped
into our children's times), else from our children's rusage.

Each flow's figures are kept in ``WORK/flow-SEED-ROUND-FLOW.json`` as it
ends, with a record of what made them (``vs_bench_flows.py``); ``--resume``
reads a kept flow instead of running it again only when that record has this
run's commit, host, draw (seed, problems, answers, workers), builds (the
HOL Light checkout's commit and native build key, s2n-bignum's commit), the
bench's revision and map, and ``--min-secs``; else it runs the flow again and
says why. So a stopped run, or one given more ``--rounds`` later, loses no
finished flow, and no flow of other settings is reported as this run's (each
kept flow says when it ran, the run's record names every flow it reused, and
the report prints every flow's load).

**Runtime settings** (issue 48; docs/native.md): ``--runtime SETTING`` runs
proofbatch's checks under it (``run --runtime``). A setting other than
OCaml's defaults adds two flows per round: the bench's program under the
same ``OCAMLRUNPARAM`` (``s``, ``o``, ``i``; ``settle`` has no equivalent, as
the bench's program loads its context and proves in one process, with no
image to settle), and proofbatch under ``--runtime default``. The report
gives the proof CPU ratio against the bench's ``PROFILE`` (its program under
OCaml's defaults) with the setting and with the defaults, and what the
bench's own program gains from the same ``OCAMLRUNPARAM``: what the runner
adds, not only what OCaml's defaults cost. The record names each side's runtime.

It passes when every verdict is the same in every flow, proofbatch's proof
time is within 1.05 of the bench's and its proof CPU at most 0.85 of the
bench's ``PROFILE`` (medians over the checks of at least ``--min-secs`` OK
in both), and its end-to-end wall within a third of the bench flow's
(median over rounds).

    .venv/bin/python benchmarks/s2n/vs_bench_harness.py --work /work/build/vs-bench \\
        --hol-light /work/build/hol-light --s2n-bignum /work/build/s2n-bignum \\
        --bench-repo /work/.mirror/kings-crown+s2n-bignum-bench/repo \\
        --bench-map /work/build/timeout-map.json --seed 1 --problems 24 --files 4
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # noqa: F401  (puts the project root on sys.path)
import record
from common import ROOT, arg_parser, emit, log
from s2n_cut import Inliner, dir_source, read_proof_file
from s2n_readme_path import PROOFBATCH, LoadSampler, read_rows, step
from vs_bench_flows import bench_environment, keep, kept_flow, settings
from vs_bench_report import report
from runner.errors import InputError
from runner.provers.hol_light import runtime
from runner.provers.hol_light.ocaml_lexer import split_phrases
from runner.provers.hol_light.extract.extract_scan import Theorem, scan_phrase

# The bench's scripts and data, read from its repository as its users clone it.
BENCH_FILES = ("combine-answer-and-setup.py", "run-answers.sh", "synchk.sh",
               "timeouts.json", "timeout-map.json")
OPENS = "open Hol_lib;;\nopen Hol_loader;;\n"      # inline_load.ml's first lines
WRONG = ("ALL_TAC", "NO_TAC", "REWRITE_TAC[]")     # type-check as tactics, prove nothing
PROFILE = re.compile(r"^PROFILE (\S+) ([0-9.]+) (\S+)$", re.M)
CGROUP = Path("/sys/fs/cgroup/cpuacct")


# -- drawing the problems ------------------------------------------------------------------

def draw_files(bench_map: list[dict], s2n: Path, args) -> list[str]:
    """Proof files the map lists, light enough, in a seeded random order,
    until there are ``--files`` of them and ``--problems`` listed problems."""
    total: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for entry in bench_map:
        arch, stem, _ = entry["problem_id"].split(".", 2)
        if arch == "arm":
            total[stem] += float(entry["prove_secs"])
            count[stem] += 1
    pool = sorted(s for s, secs in total.items()
                  if secs <= args.max_file_secs and (s2n / "arm/proofs" / f"{s}.ml").is_file())
    random.Random(args.seed).shuffle(pool)
    files: list[str] = []
    for stem in pool:
        if len(files) >= args.files and sum(count[f] for f in files) >= args.problems:
            break
        files.append(stem)
    return sorted(files)


def chosen_ids(text: str, listed: dict, s2n: Path) -> set[str]:
    """``--only``: ids given inline or in @FILE, each an arm problem of the
    map whose proof file is in the s2n-bignum tree; raises InputError."""
    try:
        raw = Path(text[1:]).read_text() if text.startswith("@") else text.replace(",", "\n")
    except OSError as exc:
        raise InputError(text[1:], f"cannot be read ({exc.strerror})", "pass --only @FILE of ids") from None
    ids = {line.strip() for line in raw.splitlines() if line.strip()}
    bad = sorted(i for i in ids if i not in listed or not i.startswith("arm.")
                 or not (s2n / "arm/proofs" / f"{i.split('.')[1]}.ml").is_file())
    if not ids or bad:
        raise InputError("--only", f"{', '.join(bad) or 'no ids'}: not an arm problem of the bench's "
                         "map with its proof file in --s2n-bignum", "pass arm.<file>.<theorem> ids "
                         "the map lists")
    return ids


def cheat(phrase: str) -> str:
    """The phrase with its top-level ``prove``'s tactic replaced by
    ``CHEAT_TAC``, as collect-problems.py rewrites every proof of a template."""
    thm = scan_phrase(phrase)
    if isinstance(thm, Theorem) and thm.form in ("prove", "time prove"):
        at = phrase.rfind(thm.answer)
        if at >= 0:
            return phrase[:at] + "CHEAT_TAC" + phrase[at + len(thm.answer):]
    return phrase


def bench_inputs(args, hol: Path, s2n: Path, files: list[str], ids: list[str],
                 corpus: Path) -> Path:
    """WORK/bench as the bench's setup.sh and collect-problems.py leave its
    checkout: its scripts, ml_files/arm/<file>.ml templates, problems.json,
    hol-light and objfiles/arm (the exe runs there: it reads arm/... .o)."""
    bench = args.work / "bench"
    shutil.rmtree(bench, ignore_errors=True)
    (bench / "ml_files/arm").mkdir(parents=True)
    (bench / "objfiles").mkdir()
    for name in BENCH_FILES:
        text = subprocess.run(["git", "-C", args.bench_repo, "show", f"HEAD:{name}"],
                              check=True, capture_output=True, text=True).stdout
        if name == "run-answers.sh":
            # The bench's opam switch has OCaml 5 and zarith; under Debian's OCaml
            # 4.13 HOL Light's Makefile builds bignum.ml from bignum_num.ml, so
            # hol_lib.cmxa refers to Num and the link needs it: its one change.
            text = text.replace("-package zarith,unix ", "-package zarith,unix,num ")
        (bench / name).write_text(text)
    (bench / "hol-light").symlink_to(hol)
    # A real folder: the program writes its verdict to ../EVAL/<id>.judge.txt.
    (bench / "objfiles/arm").symlink_to(s2n / "arm")
    inliner = Inliner(dir_source(s2n), dir_source(hol))
    problems = {}
    for stem in files:
        pf = read_proof_file(inliner, stem)
        rel = f"ml_files/arm/{stem}.ml"
        text = OPENS + f"(* arm/proofs/{stem}.ml *)\n" + "".join(map(cheat, split_phrases(pf.head)))
        line_of = {}
        for i, phrase in enumerate(pf.body):
            if not text.endswith("\n"):
                text += "\n"
            line_of[i] = text.count("\n")      # lines[:L] are the problem's setup
            text += cheat(phrase)
        (bench / rel).write_text(text)
        for pid in ids:
            if pid.split(".")[1] == stem:
                name = pid.split(".")[2]
                problems[pid] = {
                    "query": (corpus / pid / "query.txt").read_text().strip(),
                    # Used by the bench for ordering and a fallback limit only: every
                    # problem here has its limit in timeout-map.json.
                    "category": "functional_correctness_arm" if "_CORRECT" in name else "generic",
                    "inlined_locations": [[rel, line_of[pf.cut_of(pid)]]]}
    missing = set(ids) - set(problems)
    if missing:
        raise SystemExit(f"not cut: {sorted(missing)}")
    (bench / "problems.json").write_text(json.dumps(problems, indent=1))
    return bench


# -- running a flow ------------------------------------------------------------------------

class FlowCpu:
    """CPU seconds of every process a flow starts: a cpuacct cgroup when this
    host lets us make one, else our reaped children's rusage."""

    def __init__(self, name: str):
        self.group = CGROUP / f"proofbatch-vs-{os.getpid()}-{name}"
        try:
            self.group.mkdir()
        except OSError:
            self.group = None
        self.ru0 = self._rusage()

    @staticmethod
    def _rusage() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    def wrap(self, argv: list) -> list:
        if self.group is None:
            return argv
        return ["sh", "-c", f'echo $$ > {self.group}/cgroup.procs && exec "$@"', "sh", *argv]

    def stop(self) -> tuple[float, str]:
        if self.group is None:
            return self._rusage() - self.ru0, "rusage"
        secs = int((self.group / "cpuacct.usage").read_text()) / 1e9
        try:
            self.group.rmdir()
        except OSError as e:     # a process the flow left behind
            log(f"cgroup {self.group} not removed: {e}")
        return secs, "cgroup"


def run_bench(args, bench: Path, answers: dict[str, str], tag: str,
              setting: runtime.Runtime = runtime.DEFAULT) -> dict:
    env, said = bench_environment(setting)
    adir = bench / f"answers-{tag}"
    for pid, answer in answers.items():
        (adir / pid).mkdir(parents=True)
        (adir / pid / "answer.txt").write_text(answer + "\n")
    (bench / "template-cache.json").unlink(missing_ok=True)
    cpu = FlowCpu(f"bench-{tag}")
    with LoadSampler() as load:
        t0 = time.monotonic()
        r = subprocess.run(cpu.wrap(["python3", "combine-answer-and-setup.py", adir.name,
                                     str(args.workers)]), cwd=bench, capture_output=True, text=True,
                           env=env)
        (bench / f"combine-{tag}.log").write_text(r.stdout + r.stderr)
        if r.returncode != 0:
            raise SystemExit(f"combine-answer-and-setup.py failed: see {bench}/combine-{tag}.log")
        evaldir = r.stdout.strip().splitlines()[-1]
        t1 = time.monotonic()
        with open(bench / f"run-answers-{tag}.log", "w") as logf:
            subprocess.run(cpu.wrap(["bash", "run-answers.sh", evaldir, str(args.workers)]),
                           cwd=bench, stdout=logf, stderr=subprocess.STDOUT, check=True, env=env)
        t2 = time.monotonic()
    cpu_s, how = cpu.stop()
    ev = bench / evaldir
    profile = {}
    for out in ev.glob("*.run.outlog"):
        for m in PROFILE.finditer(out.read_text(errors="replace")):
            profile[m.group(1)] = (float(m.group(2)), m.group(3))
    verdicts = {pid: (ev / f"{pid}.judge.txt").read_text().strip()
                if (ev / f"{pid}.judge.txt").is_file() else "-" for pid in answers}
    runlog = (bench / f"run-answers-{tag}.log").read_text(errors="replace")
    return {"verdicts": verdicts, "profile": profile, "combine_s": t1 - t0, "run_s": t2 - t1,
            "wall_s": t2 - t0, "cpu_s": cpu_s, "cpu_how": how, "load": load.text(),
            "programs": len(list(ev.glob("*.ml"))),
            "bytecode_fallbacks": runlog.count("falling back to bytecode"), "evaldir": str(ev),
            "runtime": said}


def run_proofbatch(args, corpus: Path, chosen: Path, answers_csv: Path, hol: Path, s2n: Path,
                   extract_s: float, tag: str, setting: str | None = None) -> dict:
    """``setting``: its --runtime (None: proofbatch's default)."""
    out = args.work / f"out-{tag}"
    shutil.rmtree(out, ignore_errors=True)
    cpu = FlowCpu(f"pb-{tag}")
    argv = PROOFBATCH + ["run", corpus, "--problems", f"@{chosen}", "--answers", answers_csv,
                         "--out", out, "--workers", str(args.workers), "--hol-light", hol,
                         "--context-root", s2n, "--context-proofs", "trust", "--mode", "native",
                         "--no-fallback", "--timeout-map", args.bench_map, "--map-mode", "native",
                         *(["--runtime", setting] if setting else [])]
    with LoadSampler() as load:
        run_s = step(cpu.wrap(argv), cwd=ROOT)
    cpu_s, how = cpu.stop()
    rows = read_rows(out)
    # run resolves --nice auto (the checks' priority) once and records it.
    manifest = json.loads((out / "sweep.json").read_text())
    nice = manifest.get("nice")
    return {"rows": rows, "verdicts": {p: r["verdict"] for p, r in rows.items()}, "nice": nice,
            "runtime": manifest.get("runtime"),     # the key its checks ran under
            "extract_s": extract_s, "run_s": run_s, "wall_s": extract_s + run_s, "cpu_s": cpu_s,
            "cpu_how": how, "load": load.text(), "out": str(out)}


def bench_arguments(parser) -> None:
    """The trees and the bench's repository and map: the options this script
    shares with paired_proof.py."""
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--hol-light", type=Path, required=True,
                        help="the bench's checkout 5e62421, built native (has hol_lib.cmxa)")
    parser.add_argument("--s2n-bignum", type=Path, required=True,
                        help="s2n-bignum 51147aa with make -C arm and make -C arm unopt done")
    parser.add_argument("--bench-repo", type=Path, required=True,
                        help="the bench's git repository (a clone or bare mirror)")
    parser.add_argument("--bench-map", type=Path, required=True, help="the bench's timeout-map.json")


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    bench_arguments(parser)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 10000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--problems", type=int, default=24)
    parser.add_argument("--max-file-secs", type=float, default=20.0,
                        help="skip files whose problems the map lists at more prove_secs in all")
    parser.add_argument("--wrong", type=int, default=3, help="problems given a wrong answer")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1, help="each flow this many times, ABBA")
    parser.add_argument("--resume", action="store_true",
                        help="read a flow kept in --work instead of running it again, when its "
                        "record has this run's commit, host, draw, builds, bench and --min-secs")
    parser.add_argument("--min-secs", type=float, default=0.5,
                        help="ratios over proofs of at least this long (shorter: the clock's noise)")
    parser.add_argument("--only", metavar="IDS", default=None,
                        help="check these arm problems of the map (comma-separated ids, or @FILE "
                        "of one per line) instead of drawing files: e.g. heavy proofs; the bench's "
                        "programs cheat every other proof of their files, and --files, --problems "
                        "and --max-file-secs are not used")
    parser.add_argument("--runtime", metavar="SETTING", default=None,
                        help="proofbatch's checks run under this OCaml runtime setting (`run "
                        "--runtime`; default: proofbatch's native default); one other than "
                        "OCaml's defaults adds per round the bench's program under its "
                        "OCAMLRUNPARAM and proofbatch under --runtime default")
    args = parser.parse_args()
    for name in ("work", "hol_light", "s2n_bignum", "bench_repo", "bench_map"):
        setattr(args, name, getattr(args, name).resolve())
    hol, s2n = args.hol_light, args.s2n_bignum
    bench_map = json.loads(args.bench_map.read_text())
    listed = {e["problem_id"]: e for e in bench_map}
    try:
        # proofbatch's flow runs natively: without --runtime, under native's default.
        tuned = runtime.parse(args.runtime) if args.runtime else runtime.default_for("native")
        only = chosen_ids(args.only, listed, s2n) if args.only else None
    except InputError as exc:       # one line, exit 2, nothing run
        print(f"vs_bench_harness.py: error: {exc}", file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)

    files = sorted({pid.split(".")[1] for pid in only}) if only else draw_files(bench_map, s2n, args)
    log(f"seed {args.seed}: {', '.join(files)}")
    corpus = args.work / "corpus"
    shutil.rmtree(corpus, ignore_errors=True)
    extract_s = step(PROOFBATCH + ["extract", *[s2n / "arm/proofs" / f"{f}.ml" for f in files],
                                   "--out", corpus, "--prefix", "arm", "--hol-light", hol], cwd=ROOT)
    ids = sorted(p.name for p in corpus.iterdir() if p.name in listed and (p / "setup.ml").is_file()
                 and (only is None or p.name in only))
    chosen = args.work / "problems.txt"
    chosen.write_text("".join(f"{i}\n" for i in ids))
    wrong = set(random.Random(args.seed).sample(ids, min(args.wrong, len(ids))))
    answers = {pid: WRONG[sorted(wrong).index(pid) % len(WRONG)] if pid in wrong
               else (corpus / pid / "answer.txt").read_text().strip() for pid in ids}
    answers_csv = args.work / "answers.csv"
    with open(answers_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["problem_id", "answer"])
        w.writerows(sorted(answers.items()))
    bench = bench_inputs(args, hol, s2n, files, ids, corpus)

    draw = {"seed": args.seed, "ids": ids, "answers": answers, "workers": args.workers}
    inputs = {**settings(args, draw), "runtime": tuned.key}
    for name, value in inputs.items():
        record.current().input(name, value)
    # Beside a setting other than OCaml's defaults: the bench's program under
    # its OCAMLRUNPARAM, and proofbatch under the defaults.
    flows = ("bench", "pb") + (("bench-tuned", "pb-default") if tuned != runtime.DEFAULT else ())
    rounds, extra = [], []
    for r in range(args.rounds):
        order = flows if r % 2 == 0 else flows[::-1]
        got = {}
        for flow in order:
            tag = f"{args.seed}-{r + 1}"
            kept = args.work / f"flow-{tag}-{flow}.json"
            if args.resume:
                figures, why = kept_flow(kept, inputs, r + 1, flow)
                if figures is not None:
                    got[flow] = figures
                    record.current().reused(f"round {r + 1} {flow} flow", why, kept=str(kept),
                                            ended=figures.get("ended"))
                    log(f"round {r + 1}: {flow}, kept from {figures.get('ended')} ({kept}; {why})")
                    continue
                log(f"round {r + 1}: {flow}: not reusing the kept flow ({why}): running it")
            log(f"round {r + 1}: {flow}")
            ftag = tag if flow in ("bench", "pb") else f"{tag}-{flow.split('-')[1]}"
            if flow.startswith("bench"):
                shutil.rmtree(bench / f"answers-{ftag}", ignore_errors=True)
                got[flow] = run_bench(args, bench, answers, ftag,
                                      tuned if flow == "bench-tuned" else runtime.DEFAULT)
            else:
                got[flow] = run_proofbatch(args, corpus, chosen, answers_csv, hol, s2n, extract_s,
                                           ftag, "default" if flow == "pb-default" else args.runtime)
            got[flow]["ended"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            keep(kept, draw, got[flow], inputs, r + 1, flow)
        rounds.append((got["bench"], got["pb"]))
        extra.append({flow: got[flow] for flow in flows[2:]})
    figures, lines, goals = report(args, files, ids, wrong, listed, rounds, extra, answers)
    (args.work / f"report-{args.seed}.json").write_text(json.dumps(figures, indent=1))
    return emit(args, "vs_bench_harness", figures, lines,
                "every verdict the same in every flow, proof time <= 1.05 and proof CPU <= 0.85 of "
                "the bench's PROFILE, end-to-end wall <= 1/3 of the bench's", True, goals)


if __name__ == "__main__":
    sys.exit(main())
