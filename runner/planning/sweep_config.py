"""A sweep's settings, and what preparing a sweep resolved from them.

``SweepConfig`` is what `proofbatch run` is asked: every field carries its
help and, when `run` sets it, its flag (runner.settings.setting), from which
run's flags, the config it builds and the command that resumes a sweep
(runner.sweep_dir.resume_command) are made. ``PreparedSweep`` is the sweep resolved
from it, validated and planned (runner.sweep.prepare), which the sweep
directory's checks (runner.sweep_dir) and the run (runner.sweep.run_sweep)
both read. Here, below the drivers, so that a prover's command can name a
setting's help without importing the sweep that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import psutil

from ..checks.context_proofs import ContextProofs
from ..checks.priority import niceness
from ..checks.tasks import CheckTask
from ..corpus import Problem, problem_patterns
from ..prover import BACKSTOP_EXTRA_S, BACKSTOP_FACTOR, LimitClock, ProverBackend
from ..settings import memory_size, setting as _help


def _verdicts(text: str) -> tuple[str, ...]:
    """--recheck's type: its refusal is one line naming the verdicts there are."""
    import argparse

    from ..results.done import verdict_names

    try:
        return verdict_names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _prover_names() -> tuple[str, ...]:
    """--prover's choices: the registered provers, asked when run's flags are made."""
    from .. import prover_registry as provers

    return provers.names()


@dataclass(frozen=True, kw_only=True)
class SweepConfig:
    # Fields in the order of `run --help` and of a resume command; keyword
    # only, so that the order is free of where defaults begin.
    corpus: Path = _help("CORPUS/<problem-id>/{setup.ml,query.txt[,category.txt,answer.txt]}",
                         flag="corpus", type=Path)
    answers: Path | None = _help("answers DIR/<id>/answer.txt or FILE.csv (problem_id,answer); default: "
                                 "answer.txt in each problem folder. Several attempts: "
                                 "DIR/<id>/answer_<k>.txt or answers.jsonl, or an attempt column",
                                 default=None, flag="--answers", type=Path)
    out: Path = _help("sweep directory: shards, results.parquet, results.csv, verdicts.csv; rerun "
                      "to resume", flag="--out", type=Path, required=True)
    workers: int = _help("checks run at once on this machine", default=1,
                         flag="--workers", type=int)
    timeout_map: Path | None = _help("s2n-bignum-bench timeout-map.json: per-problem limits",
                                     default=None, flag="--timeout-map", type=Path)
    map_mode: str | None = _help("the mode a timeout map without a sidecar was measured in: native "
                                 "or bytecode (required for HOL Light: s2n-bignum-bench's map is "
                                 "native); limits of another mode than a check runs in are "
                                 "converted, with a warning (docs/running.md)", default=None,
                                 flag="--map-mode", choices=("native", "bytecode"))
    map_build: str | None = _help("the HOL Light build a timeout map without a sidecar was measured "
                                  "with (warned about when it is not this sweep's)", default=None,
                                  flag="--map-build", metavar="B")
    category_timeouts: Path | None = _help("s2n-bignum-bench timeouts.json: per-category limits",
                                           default=None, flag="--category-timeouts", type=Path)
    default_timeout: float = _help("limit for problems in neither file, in seconds", default=120.0,
                                   flag="--default-timeout", type=float)
    mem_limit: int | None = _help("memory limit per check, e.g. 4G (a plain number is MiB); "
                                  "default: 8G or an even share of 80% of RAM per worker, whichever is smaller "
                                  "(docs/running.md)", default=None,
                                  flag="--mem-limit", type=memory_size)
    hol_light: Path | None = _help("a HOL Light checkout built with make (has hol.sh); default: "
                                   "Debian's package", default=None, flag="--hol-light", type=Path)
    prover: str | None = _help("hol-light or isabelle; default: from the corpus layout "
                               "(isabelle.toml means Isabelle; docs/provers.md)", default=None,
                               flag="--prover", choices=_prover_names)
    isabelle: Path | None = _help("an Isabelle installation (ISABELLE_HOME); default: "
                                  "$ISABELLE_HOME, or isabelle on PATH", default=None,
                                  flag="--isabelle", type=Path, metavar="DIR")
    context_root: Path | None = _help("where needs/loadt in setup.ml resolve; default: the current "
                                      "directory", default=None, flag="--context-root", type=Path)
    grace: float = _help("seconds past the limit before the outside kill", default=2.0,
                         flag="--grace", type=float)
    limit_clock: str = _help("what a check's time limit counts: cpu (the CPU time of its own "
                             "processes: a loaded or slower host does not turn a correct proof into "
                             "a TIMEOUT) or wall (elapsed time, as s2n-bignum-bench's harness; "
                             "with --limit-slack 30 exactly as it); recorded in sweep.json and "
                             "every row; a resume must keep it (docs/limits.md)",
                             default=str(LimitClock.CPU),
                             flag="--limit-clock", choices=[str(c) for c in LimitClock])
    limit_slack: float = _help("seconds added to every check's time limit: s2n-bignum-bench's "
                               "harness arms its alarm at the limit + 30 s, so --limit-clock wall "
                               "--limit-slack 30 checks exactly as it does; rows record the limit "
                               "with the slack (docs/limits.md)", default=0.0,
                               flag="--limit-slack", type=float, metavar="SECS")
    backstop_factor: float = _help("under --limit-clock cpu, a check still running after "
                                   "max(F x its limit, its limit + --backstop-extra) seconds of "
                                   "wall time is starved or blocked: it is ended and run again, "
                                   "never a TIMEOUT", default=BACKSTOP_FACTOR,
                                   flag="--backstop-factor", type=float, metavar="F")
    backstop_extra: float = _help("seconds of the wall-clock backstop beyond the limit, at least",
                                  default=BACKSTOP_EXTRA_S,
                                  flag="--backstop-extra", type=float, metavar="SECS")
    nice: int | None = _help("niceness of every check's processes, -20 to 19, or auto (the "
                             "default): on a host shared with other busy work, a check sharing "
                             "its core needs about 1.2x its quiet CPU time; at -10 it keeps its "
                             "core nearly to itself and its CPU time near quiet. auto is -10 "
                             "under --limit-clock cpu where this process may raise priority "
                             "(root or CAP_SYS_NICE), else 0; recorded in sweep.json "
                             "(docs/limits.md)", default=None,
                             flag="--nice", type=niceness, metavar="auto|N")
    host_factor: str | None = _help("how much slower this host proves than the one the timeout "
                                    "map was measured on: a number, or auto (the factor `proofbatch "
                                    "calibrate` measured for this map, mode and host; on --cluster "
                                    "slurm/dask/dask-slurm each node's own); the map's limits are "
                                    "multiplied by max(1, factor) and its times by the factor "
                                    "(plan, ETA); recorded in sweep.json. Default: auto for a map "
                                    "measured on another machine (no sidecar, as the bench's own, "
                                    "or a sidecar naming other hosts), else 1; --host-factor 1 "
                                    "uses the map as it is (docs/limits.md)",
                                    default=None, flag="--host-factor", metavar="auto|X")
    calibration_budget: float = _help("--cluster slurm/dask/dask-slurm with --host-factor auto: "
                                      "each node takes its cached calibration (host and CPU "
                                      "model), else the first node of each CPU model measures "
                                      "one on a sample of the sweep's ground truths whose "
                                      "expected times add up to at most this share of the "
                                      "sweep's expected core-hours (docs/limits.md)",
                                      default=0.02, flag="--calibration-budget", type=float,
                                      metavar="SHARE")
    calibration_corpus: Path | None = _help("with --calibration-budget: draw each node's sample and "
                                            "its canary from the ground truths (answer.txt) of this "
                                            "corpus, in the sweep's layout and with times in its "
                                            "timeout map, instead of the sweep's own (which --answers "
                                            "or missing answer.txt leave none of); each checked under "
                                            "the limit the sweep would give it (docs/limits.md)",
                                            default=None, flag="--calibration-corpus", type=Path,
                                            metavar="DIR")
    # Kept live (issue 47): a node's speed moves within a sweep (thermal
    # throttling, a noisy neighbour). Every 100 checks or 10 minutes, whichever
    # comes first: a throttled node is seen within minutes, and a canary of a
    # few seconds (runner/maps/canary.py picks one near 2 s) every 10 minutes
    # costs under 1% of one core per node. The drift that counts is 0.25:
    # above the 1.17-1.22x CPU time a proof needs on a core shared with busy
    # processes and the 0.93-1.09 a quiet host drifts by itself (docs/limits.md,
    # "Why a shared core costs CPU time"), so load alone names no node.
    canary_checks: int = _help("--cluster slurm/dask/dask-slurm with --host-factor auto: each node "
                               "checks a canary ground truth of the sweep after every N checks "
                               "(and every --canary-minutes), to keep its factor current; 0: not "
                               "by count (docs/limits.md)", default=100, flag="--canary-checks",
                               type=int, metavar="N")
    canary_minutes: float = _help("each node checks its canary ground truth every M minutes of "
                                  "checking; 0: not by time; both 0: no canary (docs/limits.md)",
                                  default=10.0, flag="--canary-minutes", type=float, metavar="M")
    canary_drift: float = _help("a node whose canary takes more than 1 + SHARE (or less than 1 - "
                                "SHARE) times its first is drifting: the report names it, its rows "
                                "say so (node_drift), and its TIMEOUTs within the drift of their "
                                "limit are checked again at the end of the sweep on another node, "
                                "or on the same once its canary is back (docs/limits.md)",
                                default=0.25, flag="--canary-drift", type=float, metavar="SHARE")
    policy: str = _help("dispatch order: planned (longest first, context affinity), naive "
                        "(corpus order) or shuffle (seeded random)", default="planned",
                        flag="--policy", choices=("planned", "naive", "shuffle"))
    seed: int = _help("seed of the shuffle policy and of tie-breaking", default=0,
                      flag="--seed", type=int)
    sandbox: str = _help("the box checks run in: auto (bwrap when installed and root, else "
                         "rlimits), bwrap, rlimits or none; see docs/sandbox.md", default="auto",
                         flag="--sandbox", choices=("auto", "bwrap", "rlimits", "none"))
    mode: str = _help("HOL Light execution: bytecode (the toplevel fork server), native (compiled "
                      "with `proofbatch build-native`), or auto (native for checks expected above "
                      "0.35 s of bytecode time); see docs/native.md", default="bytecode",
                      flag="--mode", choices=("bytecode", "native", "auto"))
    context_proofs: str = _help("HOL Light: replay (a context runs its proofs as written) or trust "
                                "(while a context loads, its top-level prove returns the stated "
                                "theorem unproved; answers still prove for real); part of every image "
                                "key, recorded in rows and sweep.json; see docs/trust.md",
                                default=str(ContextProofs.REPLAY),
                                flag="--context-proofs", choices=("replay", "trust"))
    runtime: str | None = _help("HOL Light: the OCaml runtime setting checks run under: default "
                         "(OCaml's, as the bench's program runs), or e.g. s=4M,o=120,settle=compact "
                         "(OCAMLRUNPARAM's minor heap s, space_overhead o and major increment i, and "
                         "whether an image collects, compacts or neither before it serves); recorded "
                         "in rows, sweep.json and maps, and a resume must keep it (default: "
                         "the setting measured best in the mode: s=16M,o=200 with --mode native or "
                         "auto, s=4M,o=200 in bytecode); see docs/native.md", default=None, flag="--runtime",
                         metavar="SETTING")
    no_fallback: bool = _help("with --mode native or auto: a check whose context cannot be "
                              "compiled natively (a toplevel directive, a computed load, a compile "
                              "error) is ERROR with the reason, instead of running in bytecode 4-7x "
                              "slower under a converted limit; the other checks still run. Recorded "
                              "in sweep.json; a resume must keep it when such checks exist",
                              default=False, flag="--no-fallback", action="store_true")
    stop_on_first_ok: bool = _help("skip a problem's remaining attempts once one is OK; skipped "
                                   "attempts get no result row and are listed in skipped.csv",
                                   default=False, flag="--stop-on-first-ok", action="store_true")
    allow_missing_answers: bool = _help("on resume, accept that answers recorded before are gone "
                                        "(--answers dropped, an answer.txt deleted): those problems "
                                        "are checked again as given now, ERROR 'no answer given' "
                                        "when they have none; refused otherwise", default=False,
                                        flag="--allow-missing-answers", action="store_true")
    recheck: tuple[str, ...] | None = _help(
        "check again the recorded checks of the selected problems whose verdict is one of these "
        "(e.g. ERROR after fixing the environment: a missing object file built); their old rows "
        "stay in the shards as history; not repeated by a later resume", default=None,
        flag="--recheck", type=lambda text: _verdicts(text), metavar="VERDICT[,VERDICT]")
    problems: tuple[str, ...] | None = _help(
        "check only the problems matching these: ids, shell-style globs (arith.*) or @FILE (one id "
        "or glob a line, # comments), separated by commas, the flag repeatable; a pattern matching "
        "none is refused; a resume may select others (docs/running.md); default: all", default=None,
        flag="--problems", type=problem_patterns, action="extend", metavar="ID,GLOB,@FILE")
    costs_from: tuple[str, ...] | None = _help(
        "sweep directories (run --out) whose measured image builds (OUT/images/*.json) price this "
        "sweep's plan and ETA: builds of its very images only (an image key holds the build, mode, "
        "context root and driver); not part of what a resume must keep", default=None,
        flag="--costs-from", nargs="+", metavar="OUT")
    # Set by library callers (tests, benchmarks, `serve`), not by `run`.
    expected_mem: int = _help("memory a check is expected to need before it may start",
                              default=512 * 2**20)
    max_images: int = _help("loaded contexts kept alive at once on a host", default=8)
    only: tuple[str, ...] | None = _help("check only these problem ids (all when None)", default=None)
    command: tuple[str, ...] | None = _help("the command that made this sweep when it is not `run` "
                                            "(`calibrate`), as its arguments; recorded in sweep.json, "
                                            "it is the command that resumes the sweep", default=None)


def mem_share(node_bytes: float, workers: int) -> int:
    """A check's default memory limit on a node whose checks may use
    ``node_bytes`` together: 8 GiB, or an even share of it if smaller."""
    return int(min(8 * 2**30, node_bytes / max(1, workers)))


def default_mem_limit(workers: int) -> int:
    """8 GiB, or an even share of 80% of this machine's memory if smaller."""
    return mem_share(0.8 * psutil.virtual_memory().total, workers)


def resolved_mem_limit(config: SweepConfig) -> int:
    """The memory limit per check a sweep of ``config`` runs under."""
    return config.mem_limit or default_mem_limit(config.workers)


@dataclass(frozen=True)
class PreparedSweep:
    config: SweepConfig
    problems: list[Problem]
    tasks: list[CheckTask]          # every problem, planned order
    backend: ProverBackend
    warnings: tuple[str, ...] = ()  # said before the sweep starts, e.g. a map of another mode
    plan: object = None             # runner.planning.planner.Plan of the tasks; None: dispatch in task order
    corpus_fingerprint: str | None = None   # of the corpus --problems selected from; None: of problems
    corpus_size: int | None = None          # problems of that corpus, for status (--problems)
    # Problem id -> why its checks cannot run in the mode asked for (ProverBackend.classify).
    not_native: Mapping[str, str] = field(default_factory=dict)
    host_factor: float | None = None    # the map's scaling for this host; None: no map
    nice: int = 0                       # the checks' niceness, --nice resolved (checks.priority.resolve_nice)
    # runner.maps.node_factor.NodeFactorSpec: each node resolves --host-factor
    # auto for itself (a cluster sweep); None: the sweep's one factor applies.
    node_factor: object = None
