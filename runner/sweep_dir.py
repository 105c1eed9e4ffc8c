"""What a sweep directory promises, and what a resume of one refuses.

``OUT/sweep.json`` (the manifest) records what decides a sweep's verdicts:
the prover build, mode, sandbox, memory limit, context proofs, fallback,
the corpus and the time limit of every recorded check. A resume that
changes any of them is refused with one line before anything is written,
as is an ``--out`` that is not a sweep, a sweep of another corpus, and an
answer source that lost answers the rows checked (docs/sweep-directory.md).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
import shlex
import socket
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from .checks import attempts
from .results import lock as sweep_lock
from .results.done import SHARDS_DIR, Done
from .results.preparing import PREPARING_FILE
from .results.publish import publish_json
from .results.sweep_manifest import NAME as MANIFEST, read_sweep_manifest
from .checks.context_proofs import ContextProofs
from .corpus import corpus_fingerprint, problem_patterns
from .errors import InputError
from .planning.sweep_config import (PreparedSweep, SweepConfig, default_mem_limit,
                                    resolved_mem_limit)
from . import prover_registry
from .prover import Mode
from .settings import flags, format_size, memory_size, size_flag



# Settings of a sweep that decide nothing of its verdicts, only how its plan
# is priced: a resume neither keeps nor restates them.
NOT_KEPT = frozenset({"costs_from", "recheck"})   # recheck: once, when asked
# What a run leaves in --out before it writes sweep.json (the lock, the logs
# folder a backend makes, and the record of its preparation a killed run
# leaves): a run stopped there left a sweep directory.
# Anything else without sweep.json is someone's files, results.csv included.
SWEEP_NAMES = frozenset({"logs", sweep_lock.LOCK_FILE, sweep_lock.HOLDER_FILE, PREPARING_FILE})


def read_manifest(out: Path) -> dict | None:
    """OUT/sweep.json, or None when there is none or it cannot be read as
    one (``check_manifest`` refuses such a sweep, naming why)."""
    try:
        return read_sweep_manifest(out)
    except InputError:
        return None


def _recorded_mem_limit(old: dict) -> int | None:
    """The memory limit per check the sweep of manifest ``old`` ran under:
    manifests before this one recorded None for the default."""
    if old.get("mem_limit") is not None:
        return int(old["mem_limit"])
    workers = (old.get("config") or {}).get("workers") or 1
    return default_mem_limit(int(workers))


def _mode_refusal(path: Path, was, now) -> InputError:
    return InputError(path, f"this sweep was run with --mode {was}, not {now}; mixing them would "
                      "make results incomparable", f"use a new --out, or pass --mode {was}")


def _mem_refusal(path: Path, was: int, now: int) -> InputError:
    return InputError(path, f"this sweep was run with --mem-limit {format_size(was)}, not "
                      f"{format_size(now)}; its verdicts would mix both",
                      f"use a new --out, or pass --mem-limit {size_flag(was)}")


def _limits_refusal(path: Path, changed: str, old: dict, manifest: dict, cfg) -> InputError:
    """A resume whose limits differ from the recorded rows': named by the
    flag that moved them, with the value the sweep ran with (--limit-slack,
    then --host-factor), else by the flags that set limits."""
    from .maps.host_factor import given

    slack = (old.get("config") or {}).get("limit_slack") or 0.0
    was, now = old.get("host_factor"), manifest.get("host_factor")
    if float(slack) != float(cfg.limit_slack):
        flag, before, after = "--limit-slack", f"{float(slack):g}", f"{float(cfg.limit_slack):g}"
    elif isinstance(was, (int, float)) and isinstance(now, (int, float)) and was != now:
        flag, before, after = "--host-factor", given(float(was)), given(float(now))
    else:
        return InputError(path, f"{changed}; its verdicts would mix both",
                          "use a new --out, or the limits it was run with "
                          "(--timeout-map, --category-timeouts, --default-timeout)")
    return InputError(path, f"this sweep was run with {flag} {before}, not {after}: {changed}; its "
                      "verdicts would mix both", f"use a new --out, or pass {flag} {before}")


def recorded_host_factor(out: Path) -> float | None:
    """The host factor the sweep in ``out`` ran its map with, if it did."""
    factor = (read_manifest(out) or {}).get("host_factor")
    return float(factor) if isinstance(factor, (int, float)) and not isinstance(factor, bool) else None


def _runtime_refusal(path: Path, was: str, now: str) -> InputError:
    return InputError(path, f"this sweep was run with --runtime {was or 'none'}, not {now}; proof "
                      "times differ between them, so results would mix",
                      f"use a new --out, or pass --runtime {was}")


def check_resume_settings(config: SweepConfig) -> None:
    """A resume under another --mode, memory limit, limit clock or runtime
    setting than its sweep ran with is refused here, from the config alone,
    before any work: values are compared resolved (the default --mem-limit
    is a size too)."""
    old = read_manifest(config.out)
    if old is None:
        return
    path = Path(config.out) / MANIFEST
    # Sweeps written before the clock was chosen counted wall time.
    was_clock = old.get("limit_clock") or "wall"
    if str(was_clock) != str(config.limit_clock):
        raise InputError(path, f"this sweep was run with --limit-clock {was_clock}, not "
                         f"{config.limit_clock}; a limit on another clock ends other checks, so "
                         "its verdicts would mix both", f"use a new --out, or pass --limit-clock {was_clock}")
    was = Mode.of(old.get("mode"))
    # Only a mode --mode names can disagree: another prover records its own (Isabelle's build-session).
    if was in (Mode.BYTECODE, Mode.NATIVE, Mode.AUTO) and str(was) != str(config.mode):
        raise _mode_refusal(path, was, config.mode)
    if "mem_limit" in old:      # manifests written before it was recorded say nothing
        before, now = _recorded_mem_limit(old), resolved_mem_limit(config)
        if before != now:
            raise _mem_refusal(path, before, now)
    # The runtime setting from the flags alone: a native backend compiles
    # every context before the manifests are compared (minutes on a tree).
    known = {d.name: d for d in prover_registry.descriptors()}
    runtime_of = getattr(known.get(old.get("prover")), "runtime_of", None)
    if runtime_of is not None and "runtime" in old and old["runtime"] != runtime_of(config):
        raise _runtime_refusal(path, old["runtime"], runtime_of(config))


def check_out_dir(config: SweepConfig) -> None:
    """--out must be a directory we can write, holding nothing that is not
    a sweep's (whether it is another corpus's: ``check_corpus``)."""
    out = Path(config.out)
    existing = next(p for p in [out, *out.parents] if p.exists())
    if not existing.is_dir():
        raise InputError(existing, "is not a directory, so --out cannot be made there",
                         "pass a directory path for --out")
    corpus = Path(config.corpus).resolve()
    if out.resolve() == corpus or corpus in out.resolve().parents:
        raise InputError(out, f"is inside the corpus {corpus}, where every folder is read as "
                         "a problem", "pass an --out outside the corpus folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(existing, "is not writable (read-only file system or permissions)",
                         "pass an --out on a writable disk")
    if out.is_dir() and not (out / MANIFEST).exists():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in SWEEP_NAMES
                         and not (p.name.startswith(".") and p.name.endswith(".tmp")))
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise InputError(out, f"is not a proofbatch sweep directory: it holds {shown} and no "
                             f"{MANIFEST}", "pass a new or empty --out (results would mix with "
                             "these files), or the folder of an earlier sweep to resume it")


def check_profile_out(out: Path, corpus: Path) -> None:
    """A profile's --out, refused as `run` refuses its own: a sweep directory,
    a folder holding other files, or a folder inside the corpus."""
    out, corpus = Path(out), Path(corpus).resolve()
    if out.resolve() == corpus or corpus in out.resolve().parents:
        raise InputError(out, f"is inside the corpus {corpus}, where every folder is read as a "
                         "problem", "pass an --out outside the corpus folder")
    if out.exists() and not out.is_dir():
        raise InputError(out, "is not a directory", "pass a directory path for --out")
    if (out / MANIFEST).exists() or (out / SHARDS_DIR).is_dir():
        raise InputError(out, "is a proofbatch sweep directory (run --out), not a profile",
                         "pass a new or empty --out, or a profile's folder to resume it")
    if out.is_dir() and not (out / "profile.json").exists() and (
            foreign := sorted(p.name for p in out.iterdir() if not p.name.endswith(".tmp"))):
        raise InputError(out, f"is not a profile: it holds {', '.join(foreign[:3])}"
                         f"{', ...' if len(foreign) > 3 else ''} and no profile.json",
                         "pass a new or empty --out, or a profile's folder to resume it")


def check_corpus(config: SweepConfig, fingerprint: str) -> tuple[str, ...]:
    """A resume given the corpus at another path than its sweep ran on: the
    same corpus (its fingerprint: every problem's setup, query and category)
    moved or copied is fine, and said; another corpus is refused. Returns
    what to say."""
    old = read_manifest(config.out)
    was = (old or {}).get("corpus")
    now = str(Path(config.corpus).resolve())
    if was is None or was == now:
        return ()
    if old.get("corpus_fingerprint") == fingerprint:
        return (f"the corpus moved from {was} to {now}: the same problems, so the sweep resumes",)
    raise InputError(config.out, f"holds the results of another corpus ({was}), not of the "
                     f"problems at {now}", "use a new --out for this corpus, or pass the corpus it "
                     "was run on")


def run_counts(prepared: PreparedSweep) -> dict:
    """The manifest's account of what a run plans: ``checks``, ``problems``
    of ``corpus_problems``, ``attempts`` (problem -> attempt count, for
    problems with more than one) and ``stop_on_first_ok``."""
    per_problem = Counter(t.problem.problem_id for t in prepared.tasks)
    # Of how many: `status` says how many problems --problems left unchecked.
    size = {"problems": len(prepared.problems), "corpus_problems": prepared.corpus_size} \
        if prepared.corpus_size is not None else {}
    return {"checks": len(prepared.tasks), **size,
            "attempts": {pid: n for pid, n in sorted(per_problem.items()) if n > 1},
            "stop_on_first_ok": prepared.config.stop_on_first_ok}


def changed_limits(prepared: PreparedSweep, done: Done | None) -> str | None:
    """How the time limits of this run differ from those its recorded rows
    were checked under, or None: a verdict depends on its limit, so a sweep
    never mixes rows of two limits for one problem. Joined in Arrow: a
    resume of a million rows pays no pass over them in Python."""
    if done is None or done.table.num_rows == 0:
        return None
    tasks = pa.table({"problem_id": [t.problem.problem_id for t in prepared.tasks],
                      "attempt": pa.array([t.attempt for t in prepared.tasks], pa.int32()),
                      "limit_s": [float(t.limits.time_s) for t in prepared.tasks],
                      "limit_source": [t.limits.time_source for t in prepared.tasks]})
    recorded, tolerance = done.table.select(["problem_id", "attempt", "timeout_s"]), 1e-6
    if prepared.node_factor is not None:
        # Each node scaled its map limits by its own factor, to the millisecond.
        from .maps.node_factor import unscaled_limits

        recorded, tolerance = unscaled_limits(prepared.config.out, prepared.config.limit_slack), 2e-3
    both = tasks.join(recorded, ["problem_id", "attempt"], join_type="inner")
    changed = both.filter(pc.greater(pc.abs(pc.subtract(both["limit_s"], both["timeout_s"])),
                                     tolerance))
    if changed.num_rows == 0:
        return None
    first = changed.slice(0, 1).to_pylist()[0]
    return (f"{changed.num_rows} recorded checks ran under other time limits than this run gives "
            f"them (e.g. {first['problem_id']}: {first['timeout_s']:g} s, now {first['limit_s']:g} s "
            f"from {first['limit_source']})")


def check_manifest(prepared: PreparedSweep, done: Done | None = None, *,
                   write: bool = True) -> dict:
    """Write OUT/sweep.json, or check that a resumed sweep matches it: the
    prover build, mode, sandbox, memory limit and the time limits of every
    recorded check (``done``: the rows on disk) decide verdicts, and must
    not change on resume; answers recorded must not be gone unless
    ``allow_missing_answers``. Raises InputError before anything is
    written; with ``write`` False, only checks."""
    cfg, info = prepared.config, prepared.backend.info
    path = cfg.out / MANIFEST
    manifest = {
        "prover": info.prover, "prover_build": info.build, "mode": str(info.mode),
        "sandbox": info.sandbox,
        "mem_limit": resolved_mem_limit(cfg),      # resolved: resumes compare sizes, not flags
        "context_proofs": info.context_proofs,
        "runtime": info.runtime,        # HOL Light's OCaml runtime setting: proof times differ
        # Decides the verdicts of checks whose context cannot run natively.
        "no_fallback": cfg.no_fallback,
        # What a check's limit counted (runner.prover.LimitClock), and the
        # factor the map's limits were scaled by for this host.
        "limit_clock": str(cfg.limit_clock),
        "host_factor": prepared.host_factor,
        "nice": prepared.nice,      # --nice resolved: auto is -10 or 0 by privilege and clock
        "corpus": str(cfg.corpus.resolve()),
        "corpus_fingerprint": prepared.corpus_fingerprint or corpus_fingerprint(prepared.problems),
        "context_root": str(prepared.backend.context_root),
        # What this run plans, for `proofbatch status` (runner/reporting/status.py): its
        # checks, the problems with several attempts, and whether it stops early.
        **run_counts(prepared),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "python": platform.python_version(),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        "cwd": os.getcwd(),      # what relative paths in config are relative to (status's resume)
    }
    if path.exists():
        old = read_sweep_manifest(cfg.out)
        # Manifests written before today's names say hol_build, and
        # bytecode-fork or native-fork (runner.prover.Mode reads them).
        old = {**old, "prover_build": old.get("prover_build", old.get("hol_build")),
               "mode": Mode.of(old.get("mode"))}
        _refuse_changes(path, old, manifest, prepared, done)
        if not cfg.allow_missing_answers:
            missing_answers(prepared, old, done)
        if not write:
            return old
        # The corpus may have moved (check_corpus found it the same).
        counts = {**run_counts(prepared), "config": json.loads(json.dumps(manifest["config"])),
                  "cwd": manifest["cwd"], "corpus": manifest["corpus"], "nice": manifest["nice"]}
        if any(old.get(k) != v for k, v in counts.items()):
            # A resumed run may select other problems (--problems) or stop
            # early: the manifest, and the resume command `proofbatch status`
            # prints from it, describe the sweep as last started.
            old.update(counts)
            publish_json(path, old, indent=2)
        return old
    if not write:
        return manifest
    cfg.out.mkdir(parents=True, exist_ok=True)
    publish_json(path, manifest, indent=2)
    return manifest


def _refuse_changes(path: Path, old: dict, manifest: dict, prepared: PreparedSweep,
                    done: Done | None) -> None:
    """Refuse a resume whose settings would change the verdicts of checks
    already recorded (``old``: the sweep.json on disk; ``manifest``: this
    run's), one InputError naming the flag to pass."""
    cfg = prepared.config
    if old.get("mode") != manifest["mode"]:
        raise _mode_refusal(path, old.get("mode"), manifest["mode"])
    if old.get("prover_build") != manifest["prover_build"]:
        raise InputError(path, f"this sweep was run with prover_build '{old.get('prover_build')}', "
                         f"not '{manifest['prover_build']}'; mixing them would make results "
                         "incomparable", "use a new --out, or the same HOL Light")
    # Manifests written before these were recorded say nothing of them.
    if "sandbox" in old and old["sandbox"] != manifest["sandbox"]:
        raise InputError(path, f"this sweep was run with --sandbox {old['sandbox']}, not "
                         f"{manifest['sandbox']}; its verdicts would mix both",
                         f"use a new --out, or pass --sandbox {old['sandbox']}")
    if "mem_limit" in old and _recorded_mem_limit(old) != manifest["mem_limit"]:
        raise _mem_refusal(path, _recorded_mem_limit(old), manifest["mem_limit"])
    if changed := changed_limits(prepared, done):
        raise _limits_refusal(path, changed, old, manifest, cfg)
    # A manifest from before the choice existed was a replay sweep, of a
    # prover that has the choice (its backend records one; others record "").
    was = old.get("context_proofs", str(ContextProofs.REPLAY) if manifest["context_proofs"] else "")
    if was != manifest["context_proofs"]:
        raise InputError(path, f"this sweep was run with --context-proofs {was or 'none'}, not "
                         f"{manifest['context_proofs']}; its contexts loaded otherwise, so results "
                         "would mix", f"use a new --out, or pass --context-proofs {was}")
    # A manifest from before the setting existed ran under OCaml's defaults.
    was = old.get("runtime", "default" if manifest["runtime"] else "")
    if was != manifest["runtime"]:
        raise _runtime_refusal(path, was, manifest["runtime"])
    # Before the flag existed, checks fell back. It changes verdicts only
    # of checks whose context cannot run natively.
    if bool(old.get("no_fallback", False)) != cfg.no_fallback \
            and prepared.not_native:
        flag = "pass --no-fallback" if old.get("no_fallback") else "drop --no-fallback"
        raise InputError(path, f"this sweep was run {'with' if old.get('no_fallback') else 'without'} "
                         f"--no-fallback, and {len(prepared.not_native)} problems' contexts "
                         "cannot run natively: their verdicts would mix both",
                         f"use a new --out, or {flag}")


def _answers_flag(answers) -> str:
    return f"--answers {answers}" if answers else "the answer files in the problem folders"


def missing_answers(prepared: PreparedSweep, old: dict, done: Done | None) -> None:
    """Refuse a resume whose answers lost some the recorded rows checked
    (--answers dropped, an answer.txt deleted, fewer attempts): resumed, the
    sweep would keep verdicts of answers nobody gives any more."""
    ids = {p.problem_id for p in prepared.problems}
    gone = attempts.compare(prepared.tasks, done, ids).gone if done is not None else []
    if not gone:
        return
    pid, k = gone[0]
    was = (old.get("config") or {}).get("answers")
    now = prepared.config.answers
    differ = str(was or "") != str(now or "")
    source = (f"; this run reads {_answers_flag(now)}, the sweep was run with {_answers_flag(was)}"
              if differ else f" in {_answers_flag(now)}")
    raise InputError(prepared.config.out / MANIFEST,
                     f"{len(gone)} answers its rows checked are gone (e.g. {pid} attempt {k}"
                     f"{source.replace('; ', ': ')})",
                     f"pass the answers it was run with ({_answers_flag(was)}), or "
                     "--allow-missing-answers to check those problems as given now (ERROR "
                     "'no answer given' where there is none)")


def resume_command(manifest: dict, out: Path, settings=SweepConfig) -> str:
    """The `proofbatch run` that resumes the sweep of ``manifest`` (its sweep.json),
    or the command its config records (``command``) when another made it.

    Every setting of the sweep's config that has a flag (``settings``'s
    declaration, from which `run` makes its flags: runner.settings.flags) is
    given as sweep.json records it, unless it has its default: a resume must
    use the same HOL Light, mode, map declaration, context proofs, limits and
    answers, and the same problems. Paths are made absolute against the
    directory the sweep was started in (``cwd``), so the command works from
    anywhere; so are the settings the prover's descriptor says default to it
    (its ``corpus_defaults``, e.g. HOL Light's context root). The
    executor's options (--cluster ...) and --server are not recorded.
    """
    cfg = manifest.get("config") or {}
    if cfg.get("command"):          # another command made the sweep (calibrate): it resumes it
        return shlex.join(cfg["command"])
    cwd = manifest.get("cwd")

    def absolute(path: str) -> str:
        return str(Path(cwd, path)) if cwd and not Path(path).is_absolute() else path

    parts = ["proofbatch", "run", absolute(str(manifest.get("corpus") or cfg.get("corpus"))),
             "--out", str(Path(out).resolve())]
    corpus_defaults = prover_registry.corpus_defaults(manifest.get("prover"))
    for f, flag in flags(settings):
        name = f.name
        if flag.positional or name == "out" or name not in cfg or name in NOT_KEPT:
            continue
        value, kind = cfg[name], flag.kw.get("type")
        if value is None and name in corpus_defaults and manifest.get(name):
            value = manifest[name]        # the directory it defaulted to
        if flag.store_true:
            parts += [flag.name] if value else []
            continue
        if value is None or value == [] or _same(value, f.default):
            continue
        if kind is problem_patterns:
            parts += [flag.name, ",".join("@" + absolute(v[1:]) if v.startswith("@") else v
                                          for v in value)]
        elif kind is Path:
            parts += [flag.name, absolute(str(value))]
        elif kind is memory_size:
            parts += [flag.name, f"{int(value)}B"]      # bytes: a plain number would read as MiB
        else:
            parts += [flag.name, f"{value:g}" if isinstance(value, float)
                      and float(f"{value:g}") == value else str(value)]
    return shlex.join(parts)


def _same(value, default) -> bool:
    if default is None or default is dataclasses.MISSING:
        return False
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        try:
            return float(value) == float(default)
        except (TypeError, ValueError):
            return False
    return str(value) == str(default)
