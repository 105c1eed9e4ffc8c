"""The shared library prefix of real s2n-bignum-bench problems, swept by the
real runner before and after comment-insensitive image keys (issue 14).

Needs a module-built HOL Light checkout at the bench's pin
(``scripts/build-hol-light-checkout.sh SRC 5e62421 DIR native`` then
``proofbatch build-native --hol-light DIR``), given by --hol-light or
PROOFBATCH_BENCH_HOL_LIGHT, and an s2n-bignum checkout at the bench's pin
51147aa with its arm objects built (``make -C arm && make -C arm unopt``),
given by --s2n-bignum or PROOFBATCH_BENCH_S2N_BIGNUM; it is the context
root. Without them the script stops and says what to set.

**Problems.** The first theorems (in file order) of a few arm proof files,
cut by ``s2n_cut.py`` as the bench cuts them: ``setup.ml`` is the file with
its needs/loadt/loads inlined once (base.ml's 35,000-line library first),
then its own phrases before the theorem; ``query.txt`` the goal and
``answer.txt`` the proof as written (the ground truth: every verdict must be
OK). Each setup opens as the bench's do (HOL Light's inline_load.ml):
``open Hol_lib;;``, ``open Hol_loader;;``, then a comment naming its own
proof file on line 3. The default files are ones whose first theorems the
bench's timeout map prices under 0.6 s each natively, so that the run
measures contexts, not proofs.

**After** (today): those setups as they are. Image keys ignore comments, so
every file's setups share one image of the library prefix.
**Before** (the baseline): the previous code keyed images on the raw text,
so the bench's setups parted at line 3-4, the comment naming the file: no
two files shared any image but the base. That is reproduced with today's
keys by putting a distinct phrase, ``let proofbatch_bench_file_<i> = <i>;;``,
before each file's setups (costing nothing to run), so each file's setups
again share nothing with another file's and each file loads the library
itself. The script checks that this is the old keying's shape: it builds
the context tree of the "after" setups with the raw-text keys of commit
ac9f4b5 (``context_keys.baseline_module``) and compares its image count and
text loaded with today's tree of the "before" setups.

**Runs.** For each mode (native, then bytecode) the two sweeps, ordered
native after, native before, bytecode before, bytecode after (ABBA, so
drift in the host's load favours neither), each with ``runner.sweep`` on
``cluster.local.LocalExecutor(workers=2)`` and a fresh session (booted
inside the timed span) into a fresh OUT. Per sweep: wall time (session
start to verdicts merged) and the CPU seconds of this process tree
(sampled every second: the prover's server forks images and checks and
nobody reaps them into our children's times); image builds from OUT/images/*.json (count, distinct keys, rebuilds as ``proofbatch
report`` counts them, and their seconds: each build's span, parsing,
compiling-in and running the segment's phrases); native: the seconds spent
compiling contexts and answers (not in the image records); every verdict.

**Targets** (issue 14), checked on the "after" sweeps from their records:
(1) the library prefix (the deepest image on the chain of every check, read
from the rows' image_key and the builds' parent links) is built once per
session; (2) no image is built twice in a session (every check is announced
to the session before its first build, so an image built again was evicted
while a check that needed it was pending).

    .venv/bin/python benchmarks/images/bench_prefix.py --hol-light DIR --s2n-bignum DIR \\
        [--files a,b,c] [--problems 30] [--modes native,bytecode] [--json]
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

# common first: it puts the checkout on sys.path for the imports below.
import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
from common import TreeCpu, arg_parser, cpu_busy, emit, log, loadavg, temp_dir
from context_keys import baseline_module, baseline_source
from s2n_cut import Inliner, ProofFile, dir_source, read_proof_file
from cluster.local import LocalExecutor
from runner.reporting import report as sweep_report
from runner.errors import InputError
from runner.provers.hol_light import contexts
from runner.provers.hol_light.extract.extract_scan import Theorem, scan_phrase
from runner.planning.sweep_config import SweepConfig
from runner.sweep import prepare, run_sweep

# Files whose first ten theorems are light (the bench's map prices those it
# lists at 0.01-0.12 s natively) and whose heads add little to base.ml's
# library (0, 689 and 4,074 lines), so that the run measures the library.
DEFAULT_FILES = ("bignum_mul_p25519", "word_divstep59", "aes_xts_encrypt")
# What every bench setup starts with (inline_load.ml), then the comment that
# named each file in the old raw-text keys.
OPENS = "open Hol_lib;;\nopen Hol_loader;;\n"
NAMED = "(* {path} *)\n"
BASELINE_PHRASE = "let proofbatch_bench_file_{i} = {i};;\n"
VARIANTS = ("after", "before")
# The library every arm proof file starts from.
LIBRARY = 'needs "arm/proofs/base.ml";;\n'


# -- the corpus ----------------------------------------------------------------------------

def checkouts(args) -> tuple[Path, Path]:
    hol = args.hol_light or os.environ.get("PROOFBATCH_BENCH_HOL_LIGHT")
    s2n = args.s2n_bignum or os.environ.get("PROOFBATCH_BENCH_S2N_BIGNUM")
    if not hol or not s2n:
        raise SystemExit(
            "bench_prefix.py needs the bench's checkouts: set PROOFBATCH_BENCH_HOL_LIGHT (or pass "
            "--hol-light) to a HOL Light checkout built with scripts/build-hol-light-checkout.sh "
            "SRC 5e62421 DIR native and `proofbatch build-native --hol-light DIR`, and "
            "PROOFBATCH_BENCH_S2N_BIGNUM (or --s2n-bignum) to an s2n-bignum checkout at 51147aa "
            "with `make -C arm && make -C arm unopt` run")
    hol_dir, s2n_dir = Path(hol), Path(s2n)
    for path, what in ((hol_dir / "hol.sh", "hol.sh (build HOL Light first)"),
                       (hol_dir / "hol_lib.cmxa", "hol_lib.cmxa (a `native` module build)"),
                       (s2n_dir / "arm/proofs/base.ml", "arm/proofs/base.ml (not s2n-bignum?)"),
                       (s2n_dir / "arm/generic/bignum_add.o", "arm objects (make -C arm)")):
        if not path.exists():
            raise SystemExit(f"bench_prefix.py: {path} is missing: {what}")
    return hol_dir, s2n_dir


def problem_ids(pf: ProofFile, count: int) -> list[tuple[str, int, Theorem]]:
    """The file's first ``count`` theorems: (bench id, body index, theorem).
    Ids as collect-problems.py gives them: ``arm.<file>.<THM>``, with
    ``.N`` on every occurrence of a name the file proves more than once."""
    found = sorted((i, name, k) for (name, k), i in pf.cuts.items())
    repeated = Counter(name for _, name, _ in found)
    out = []
    for i, name, k in found:
        thm = scan_phrase(pf.body[i])
        if not isinstance(thm, Theorem):
            continue
        pid = f"arm.{pf.stem}.{name}" + (f".{k}" if repeated[name] > 1 else "")
        out.append((pid, i, thm))
        if len(out) == count:
            break
    return out


def write_corpora(hol_dir: Path, s2n_dir: Path, files: list[str], problems: int,
                  root: Path) -> tuple[dict[str, Path], dict[str, dict[str, str]], int, int]:
    """CORPUS/<id>/{setup.ml,query.txt,answer.txt} for "after" and "before";
    returns the corpora, their setups, the longest head and the library
    (base.ml inlined) in lines."""
    inliner = Inliner(dir_source(s2n_dir), dir_source(hol_dir))
    library_lines = inliner.inline(LIBRARY, set()).count("\n")
    corpora = {v: root / v for v in VARIANTS}
    setups: dict[str, dict[str, str]] = {v: {} for v in VARIANTS}
    head_lines = 0
    for f, stem in enumerate(files):
        pf = read_proof_file(inliner, stem)
        if pf is None:
            raise SystemExit(f"bench_prefix.py: no arm/proofs/{stem}.ml in {s2n_dir}")
        head_lines = max(head_lines, pf.head.count("\n"))
        share = problems // len(files) + (f < problems % len(files))
        cut = problem_ids(pf, share)
        if len(cut) < share:
            raise SystemExit(f"bench_prefix.py: {stem}.ml has {len(cut)} theorems, not {share}")
        named = NAMED.format(path=f"arm/proofs/{stem}.ml")
        for pid, index, thm in cut:
            after = OPENS + named + pf.setup(index)
            before = OPENS + BASELINE_PHRASE.format(i=f) + named + pf.setup(index)
            for variant, text in (("after", after), ("before", before)):
                d = corpora[variant] / pid
                d.mkdir(parents=True)
                (d / "setup.ml").write_text(text, encoding="utf-8")
                (d / "query.txt").write_text(thm.query + "\n", encoding="utf-8")
                (d / "answer.txt").write_text(thm.answer + "\n", encoding="utf-8")
                (d / "category.txt").write_text("s2n-bignum\n", encoding="utf-8")
                setups[variant][pid] = text
    return corpora, setups, head_lines, library_lines


def baseline_shape(setups: dict[str, dict[str, str]]) -> dict:
    """The old raw-text keys on the "after" setups against today's keys on
    the "before" setups: images and MB of text the images load."""
    def shape(tree) -> dict:
        return {"images": len(tree.nodes),
                "loaded_mb": round(sum(len(n.segment) for n in tree.nodes.values()) / 1e6, 2)}
    old = shape(baseline_module(baseline_source()).build_context_tree(setups["after"], "salt"))
    ours = shape(contexts.build_context_tree(setups["before"], "salt"))
    today = shape(contexts.build_context_tree(setups["after"], "salt"))
    return {"raw_text_keys_on_after": old, "todays_keys_on_before": ours,
            "todays_keys_on_after": today, "same": old == ours}


# -- one sweep ------------------------------------------------------------------------------

def sweep(corpus: Path, out: Path, hol_dir: Path, s2n_dir: Path, mode: str, timeout: float) -> dict:
    config = SweepConfig(corpus=corpus, out=out, workers=2, hol_light=hol_dir, context_root=s2n_dir,
                         mode=mode, default_timeout=timeout)
    prepared = prepare(config)
    load0, (host0, _) = loadavg(), cpu_busy()
    started = time.monotonic()
    sampler = TreeCpu()
    session = prepared.backend.start(temp_dir(f"session-{mode}"))
    try:
        t = time.monotonic()
        summary = run_sweep(prepared, LocalExecutor(workers=2, session=session))
        sweep_s = time.monotonic() - t
        # --mode native runs a ModeSession around the NativeSession (and its
        # bytecode fallback); the tree and the compile seconds are the latter's.
        inner = getattr(session, "_native", None) or session
        segments = {k: n.segment.count("\n") for k, n in inner._nodes.items()}
        base_key = inner.base_key
        boot_s = inner.image_build_secs[base_key]
        compile_s = getattr(inner, "compile_secs", None)
    finally:
        session.close()
        ours = sampler.stop()
    wall_s = time.monotonic() - started
    host1, _ = cpu_busy()
    rows = summary.table.to_pylist()
    rep = sweep_report.load(out)
    return {"mode": mode, "wall_s": wall_s, "boot_s": boot_s, "sweep_s": sweep_s,
            "cpu_s": ours, "others_cpu_s": (host1 - host0) - ours,
            "load": [load0, loadavg()], "compile_s": compile_s,
            "rows": rows, "builds": sweep_report.read_builds(out), "counts": rep.image_counts(),
            "base_key": base_key, "segment_lines": segments}


def chain(key: str, parents: dict[str, str | None]) -> list[str]:
    keys = []
    while key is not None:
        keys.append(key)
        key = parents.get(key)
    return keys[::-1]


def targets(result: dict, library_lines: int) -> dict:
    """The two targets, from the sweep's rows and OUT/images records only."""
    builds, rows = result["builds"], result["rows"]
    parents = {b["key"]: b["parent"] for b in builds}
    chains = [chain(r["image_key"], parents) for r in rows]
    prefix = None          # the deepest image on every check's chain
    for keys in zip(*chains):
        if len(set(keys)) > 1:
            break
        prefix = keys[0]
    per_session: dict[str, Counter] = {}
    for b in builds:
        per_session.setdefault(b["run_id"], Counter())[b["key"]] += 1
    prefix_builds = [c[prefix] for c in per_session.values()] if prefix else []
    rebuilt = sorted({k for c in per_session.values() for k, n in c.items() if n > 1})
    # A rebuilt image's checks still to come when it was built again.
    waiting = {}
    for k in rebuilt:
        again = sorted(b["finished_at"] - b["secs"] for b in builds if b["key"] == k)[1:]
        waiting[k] = sum(1 for r, keys in zip(rows, chains) if k in keys
                         and r["finished_at"].timestamp() >= again[0])
    # Builds that loaded the whole library: their segment is at least its size.
    library = [b for b in builds if result["segment_lines"].get(b["key"], 0) >= library_lines]
    return {"prefix_key": prefix, "prefix_is_base": prefix == result["base_key"],
            "prefix_lines": result["segment_lines"].get(prefix),
            "prefix_builds_per_session": prefix_builds, "rebuilt_images": rebuilt,
            "checks_waiting_on_rebuilt": waiting,
            "library_builds": len(library), "library_build_s": sum(b["secs"] for b in library)}


def summary_of(result: dict, library_lines: int) -> dict:
    rows, c = result["rows"], result["counts"]
    return {"wall_s": round(result["wall_s"], 1), "boot_s": round(result["boot_s"], 1),
            "sweep_s": round(result["sweep_s"], 1), "cpu_s": round(result["cpu_s"], 1),
            "others_cpu_s": round(result["others_cpu_s"], 1), "load": result["load"],
            "image_builds": c["builds"], "distinct_images": c["images"], "rebuilds": c["rebuilds"],
            "image_build_s": round(c["build_s"], 1), "rebuild_s": round(c["rebuild_s"], 1),
            "compile_s": None if result["compile_s"] is None else round(result["compile_s"], 1),
            "verdicts": dict(Counter(r["verdict"] for r in rows)),
            "modes": dict(Counter(r["mode"] for r in rows)),
            "prove_s": round(sum(r["prove_secs"] or 0.0 for r in rows), 1),
            **targets(result, library_lines)}


# -- the report -------------------------------------------------------------------------------

def parse_args():
    """The command line's flags."""
    p = arg_parser(__doc__.split("\n\n")[0])
    p.add_argument("--hol-light", help="module-built HOL Light checkout (PROOFBATCH_BENCH_HOL_LIGHT)")
    p.add_argument("--s2n-bignum", help="s2n-bignum checkout, the context root "
                                        "(PROOFBATCH_BENCH_S2N_BIGNUM)")
    p.add_argument("--files", default=",".join(DEFAULT_FILES), help="arm proof file stems")
    p.add_argument("--problems", type=int, default=30, help="problems in all, spread over the files")
    p.add_argument("--modes", default="native,bytecode")
    p.add_argument("--timeout", type=float, default=600.0, help="limit per check, seconds")
    p.add_argument("--out", help="keep the corpora and sweep directories here (default: a temp "
                                 "directory, removed at exit)")
    return p.parse_args()


def prepare_inputs(args) -> tuple[Path, Path, list[str], list[str], Path]:
    """The two checkouts, the files and modes asked for, and the (empty)
    folder that will hold the corpora and the sweeps."""
    hol_dir, s2n_dir = checkouts(args)
    files = [f for f in args.files.split(",") if f]
    modes = [m for m in args.modes.split(",") if m]
    if len(files) < 2 or args.problems < len(files):
        raise SystemExit("bench_prefix.py: pass two or more --files and at least one problem each")
    root = Path(args.out) if args.out else temp_dir("prefix")
    if args.out and root.exists() and any(root.iterdir()):
        raise SystemExit(f"bench_prefix.py: --out {root} is not empty")
    return hol_dir, s2n_dir, files, modes, root


def run_sweeps(args, modes: list[str], corpora: dict[str, Path], root: Path, hol_dir: Path,
               s2n_dir: Path, library_lines: int) -> dict[str, dict[str, dict]]:
    """Every sweep, ABBA over the modes: {mode: {variant: sweep's result}};
    each one's summary is also written to ROOT/<mode>-<variant>.json."""
    results: dict[str, dict[str, dict]] = {}
    order = [(m, v) for i, m in enumerate(modes) for v in (VARIANTS if i % 2 == 0 else VARIANTS[::-1])]
    for mode, variant in order:
        log(f"sweep {mode} {variant} (load {loadavg()})")
        try:
            r = sweep(corpora[variant], root / f"out-{mode}-{variant}", hol_dir, s2n_dir, mode,
                      args.timeout)
        except InputError as exc:
            raise SystemExit(f"bench_prefix.py: {exc}") from None
        results.setdefault(mode, {})[variant] = r
        s = summary_of(r, library_lines)
        (root / f"{mode}-{variant}.json").write_text(json.dumps(s, indent=1, default=str) + "\n")
        log(f"  {mode} {variant}: wall {s['wall_s']} s, builds {s['image_builds']} "
            f"({s['image_build_s']} s), verdicts {s['verdicts']}")
    return results


def header(args, files: list[str], head_lines: int, library_lines: int, shape: dict) -> list[str]:
    """The report's first lines: the problems, and the baseline's shape."""
    return [f"{args.problems} problems, first theorems of {', '.join(files)}; longest inlined "
            f"head {head_lines:,} lines, the library (base.ml) {library_lines:,}; 2 workers; "
            f"limit {args.timeout:.0f} s",
            f"baseline shape: raw-text keys (ac9f4b5) on the after setups "
            f"{shape['raw_text_keys_on_after']}, today's keys on the before setups "
            f"{shape['todays_keys_on_before']}, today's on the after setups "
            f"{shape['todays_keys_on_after']}: {'same' if shape['same'] else 'DIFFERENT'}"]


def sweep_line(mode: str, variant: str, s: dict) -> str:
    """One sweep's line of the report, from its summary."""
    compile_s = "" if s["compile_s"] is None else f", compiling {s['compile_s']} s"
    prefix = "= base" if s["prefix_is_base"] else f"of {s['prefix_lines'] or 0:,} lines"
    return (f"{mode:8} {variant:6}: wall {s['wall_s']} s (boot {s['boot_s']}, sweep "
            f"{s['sweep_s']}); image builds {s['image_builds']} of {s['distinct_images']} "
            f"images, {s['image_build_s']} s, rebuilds {s['rebuilds']} ({s['rebuild_s']} s)"
            f"{compile_s}; library loaded {s['library_builds']}x "
            f"({s['library_build_s']:.1f} s); prefix image {prefix} built "
            f"{s['prefix_builds_per_session']}x; our CPU {s['cpu_s']} s, others' "
            f"{s['others_cpu_s']} s; load {s['load'][0]}-{s['load'][1]}; verdicts "
            f"{s['verdicts']} modes {s['modes']}; prove {s['prove_s']} s")


def judge(args, results: dict[str, dict[str, dict]], library_lines: int) -> tuple[list[str], dict]:
    """Each sweep's line, each mode's before/after ratios, the problems not
    OK and the targets' line; and the figures: each sweep's summary, each
    problem's verdicts and the three targets (ok_all, prefix_once, no_rebuild)."""
    lines: list[str] = []
    sweeps: dict[str, dict] = {}
    verdicts: dict[str, dict[str, str]] = {}
    ok_all, prefix_once, no_rebuild = True, True, True
    for mode, pair in results.items():
        for variant, r in pair.items():
            s = summary_of(r, library_lines)
            sweeps[f"{mode}-{variant}"] = s
            for row in r["rows"]:
                verdicts.setdefault(row["problem_id"], {})[f"{mode}-{variant}"] = \
                    row["verdict"] if row["verdict"] == "OK" else f"{row['verdict']}: {row['reason']}"
            ok_all &= s["verdicts"] == {"OK": args.problems}
            if variant == "after":
                prefix_once &= ((s["prefix_lines"] or 0) >= library_lines
                                and s["prefix_builds_per_session"] == [1])
                no_rebuild &= s["rebuilds"] == 0 and not s["rebuilt_images"]
            lines.append(sweep_line(mode, variant, s))
        if len(pair) == 2:
            a, b = summary_of(pair["after"], library_lines), summary_of(pair["before"], library_lines)
            lines.append(f"{mode:8} before/after: wall {b['wall_s'] / a['wall_s']:.2f}x, image "
                         f"build s {b['image_build_s'] / max(a['image_build_s'], 1e-9):.2f}x, "
                         f"CPU {b['cpu_s'] / max(a['cpu_s'], 1e-9):.2f}x")
    bad = {pid: v for pid, v in verdicts.items()
           if any(x != "OK" for x in v.values())}
    for pid, v in sorted(bad.items()):
        lines.append(f"NOT OK {pid}: {v}")
    lines.append(f"every ground truth OK: {ok_all}; library prefix built once per session "
                 f"(after): {prefix_once}; no image rebuilt (after): {no_rebuild}")
    return lines, {"sweeps": sweeps, "verdicts": verdicts,
                   "ok_all": ok_all, "prefix_once": prefix_once, "no_rebuild": no_rebuild}


def main() -> int:
    args = parse_args()
    hol_dir, s2n_dir, files, modes, root = prepare_inputs(args)
    corpora, setups, head_lines, library_lines = write_corpora(hol_dir, s2n_dir, files, args.problems, root)
    log(f"{args.problems} problems from {len(files)} files; longest head {head_lines:,} lines, "
        f"library {library_lines:,}")
    t = time.monotonic()
    shape = baseline_shape(setups)
    log(f"baseline shape checked in {time.monotonic() - t:.0f} s: {shape}")
    results = run_sweeps(args, modes, corpora, root, hol_dir, s2n_dir, library_lines)
    judged_lines, judged = judge(args, results, library_lines)
    lines = header(args, files, head_lines, library_lines, shape) + judged_lines
    figures = {"problems": args.problems, "files": files, "head_lines": head_lines,
               "library_lines": library_lines, "baseline_shape": shape, **judged}
    target = "library prefix built once per session, no image rebuilt while checks need it"
    return emit(args, "bench_prefix", figures, lines, target,
                judged["ok_all"] and judged["prefix_once"] and judged["no_rebuild"]
                and "after" in next(iter(results.values())))


if __name__ == "__main__":
    sys.exit(main())
