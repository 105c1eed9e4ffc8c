"""The README's marked tables and figures: its headline figures, its
s2n-bignum table and its limits paragraph, each formatted from the records
of the runs it quotes (table_registry.TABLES and FIGURES hold them)."""

from __future__ import annotations

from table_cells import Cell, Figure, Row, Table, fig
from table_limits import QUIET_HOST
from table_measured import ELASTIC_RUNS, sweep_gain, times
from table_planning import PREDICTIONS, predictions_headline


def planned_ratios(figures: dict) -> str:
    """Planning's worst planned/bound ratio per worker count, equal ones joined."""
    worst: dict[int, float] = {}
    for m in figures["makespan"]:
        worst[m["workers"]] = max(worst.get(m["workers"], 0.0), m["planned_ratio"])
    groups: dict[str, list[int]] = {}
    for workers in sorted(worst):
        groups.setdefault(f"{worst[workers]:.3f}", []).append(workers)
    parts = []
    for value, counts in groups.items():
        named = f"{', '.join(str(c) for c in counts[:-1])} and {counts[-1]}" if len(counts) > 1 \
            else str(counts[0])
        parts.append(f"{value} on {named} workers" if not parts else f"{value} on {named}")
    return ", ".join(parts)


def startup_figures(figures: dict) -> str:
    s = {name: figures[name]["median_s"] for name in ("--version", "--help", "status", "python -c pass")}
    return (f"`--version` {s['--version']:.2f} s, `--help` {s['--help']:.2f} s, "
            f"`status` {s['status']:.2f} s (bare Python {s['python -c pass']:.2f} s)")


def _shards_headline(figures: dict) -> str:
    """shards_scale.py's today's code on 1,000,000 rows in 200-row shards: CPU
    seconds, the goals' clock (its wall time measures the queue for a core)."""
    ops = figures["configurations"]["1000000x200"]["ops"]
    return ", ".join(f"{name} {ops[name]['new']['op_cpu_s']:.2f} s" for name in
                     ("scan", "status", "report", "merge") if name in ops) + " of CPU"


def _page(text: str, target: str) -> str:
    return f"[{text}]({target})"




def _headline() -> tuple[Row, ...]:
    checks = _page("checks", "docs/checks.md#measured")
    return (
        Row("overhead", "overhead", ("per-check overhead, warm image",
            "median {overhead_median_ms:.1f} ms (target ≤ 40 ms); a cold HOL Light start {cold_start_s:.1f} s",
            checks)),
        Row("throughput", "throughput", ("throughput, 2 workers vs 1",
            "{checks_per_s_2_workers:.1f} vs {checks_per_s_1_worker:.1f} checks/s: {speedup:.2f}×", checks)),
        Row("native", "native", ("native vs bytecode, heavy proofs",
            "{heavy_speedup:.2f}×; start-up {native_start_s:.1f} s vs {bytecode_start_s:.1f} s",
            _page("native", "docs/native.md#measured"))),
        Row("planning", "planning", ("planned makespan / lower bound, 2,622 bench-shaped problems",
            planned_ratios, _page("planning", "docs/planning.md#measured"))),
        Row("predictions", "predictions", (
            "`simulate` before real s2n-bignum sweeps, kept-out seeds 5 and 9",
            predictions_headline, _page("planning", "docs/planning.md#predictions-against-real-sweeps")),
            pool=PREDICTIONS),
        Row("passk", "passk", ("pass@k, 32 attempts on one loaded context vs loading it per attempt",
            "{speedup:.1f}×", _page("pass@k", "docs/pass-at-k.md#measured"))),
        Row("context_proofs", "context_proofs", (
            "`--context-proofs trust` vs replay, 150 contexts of `Library/card.ml`",
            "image builds {trust_speedup_build:.1f}×", _page("trust", "docs/trust.md#measured")),
            args=("--limit", "150")),
        Row("bench_prefix", "bench_prefix", (
            "the bench's library prefix, {problems} real s2n-bignum problems", _bench_prefix_headline,
            _page("images", "docs/images.md#measured")), args=("--modes", "native,bytecode")),
        Row("shards_scale", "shards_scale", ("1,000,000 result rows in 200-row shards", _shards_headline,
            _page("sweep directory", "docs/sweep-directory.md#compaction-and-status-at-scale")),
            args=("--rows", "1000000")),
        Row("slurm_elastic", "slurm_elastic", ("elastic Slurm, a task cancelled halfway",
            lambda f: f"{fig('scenarios/cancel/pulling/ratio', '.3f')(f)}× of the prediction "
                      f"{'natively' if f['hol_mode'] == 'native' else 'in bytecode'}",
            _page("Slurm", "docs/slurm.md#measured")), args=ELASTIC_RUNS[0][1]),
        Row("startup", "startup", ("start-up (`.venv/bin/python benchmarks/checks/startup.py`)",
            startup_figures, _page("running", "docs/running.md#start-up"))),
    )


def _bench_prefix_headline(f: dict) -> str:
    """bench_prefix.py's run in both modes: the library loaded once a session
    (after) against once a file (before), and each mode's sweep wall ratio."""
    s = f["sweeps"]
    return (f"loaded {times(s['native-after']['library_builds'])}, not "
            f"{times(s['native-before']['library_builds'])}: sweep {sweep_gain(s, 'native'):.2f}× "
            f"natively, {sweep_gain(s, 'bytecode'):.2f}× in bytecode")


# s2n_readme_path.py's runs the README's s2n-bignum row pools and docs/s2n.md
# gives one by one: 4 seeds of each tree, (tree, seed, the flags after --seed).
S2N_README_RUNS = (
    ("arm", 1, ("--files", "2", "--max-file-secs", "10")),
    ("arm", 2, ("--files", "2", "--max-file-secs", "10")),
    ("arm", 3, ("--files", "2", "--max-file-secs", "10")),
    ("arm", 4, ()),
    ("x86", 1, ("--files", "2", "--max-file-secs", "5")),
    ("x86", 2, ("--files", "2", "--max-file-secs", "10")),
    ("x86", 3, ("--files", "2", "--max-file-secs", "10")),
    ("x86", 4, ()),
)
README_PATH = tuple(("--arch", arch, "--seed", str(seed), *flags) for arch, seed, flags in S2N_README_RUNS)


def _span_of(walls: list[float]) -> str:
    return f"{min(walls):,.0f}-{max(walls):,.0f} s each"


def _readme_path_cells() -> tuple[Cell, ...]:
    """The README's s2n_readme_path row, from the runs of README_PATH."""
    def run(fs: list[dict]) -> str:
        arches = [f["arch"] for f in fs]
        modes = "native only" if not any("bytecode_wall_s" in f for f in fs) else "native and bytecode"
        return (f"`s2n_readme_path.py`, {arches.count('arm')} arm and {arches.count('x86')} x86 seeds "
                f"({modes})")

    def verdicts(fs: list[dict]) -> str:
        failed = sum(f["failures"] for f in fs)
        said = ("every one OK natively, none fell back" if failed == 0
                else f"{failed} not met (not OK, not swept or in another mode)")
        return said + (" (bytecode not run)" if not any("bytecode_wall_s" in f for f in fs) else "")

    def loads(fs: list[dict]) -> str:
        spans = [[float(x) for x in f["native_load"].split()[1].split("-")] for f in fs]
        return f"load {min(a for a, _ in spans):.1f}-{max(b for _, b in spans):.1f}"

    def against_map(fs: list[dict]) -> str:
        medians = [f["native_ratio_median"] for f in fs if "native_ratio_median" in f]
        return (f"`prove_secs` / map, each run's median {min(medians):.2f}-{max(medians):.2f} "
                f"({len(medians)} runs), at {loads(fs)}")

    return (run, lambda fs: f"{sum(f['problems'] for f in fs)} in the map", verdicts, "",
            lambda fs: _span_of([f["native_wall_s"] for f in fs]),
            against_map)


def vs_bench_cells() -> tuple[Cell, ...]:
    """vs_bench_harness.py's run as the README's s2n-bignum table gives it."""
    def walls(f: dict, side: str) -> str:
        secs = [r[side]["wall_s"] for r in f["rounds"]]
        return f"{min(secs):,.0f}-{max(secs):,.0f} s" if len(secs) > 1 else f"{secs[0]:,.0f} s"

    def run(f: dict) -> str:
        return (f"`vs_bench_harness.py --rounds {len(f['rounds'])}` seed {f['seed']} ({len(f['files'])} "
                f"arm files), proofbatch under `--runtime {f['runtimes']['proofbatch']}`")

    def verdicts(f: dict) -> str:
        first = [p["proofbatch"] for p in f["per_problem"] if p["round"] == 1]
        counts = ", ".join(f"{first.count(v)} {v}" for v in sorted(set(first), key=first.count, reverse=True))
        same = "the same in every flow" if not f["differ"] else f"{len(f['differ'])} differ"
        n = len(f["rounds"])
        return f"{same}, {n} round{'s' if n != 1 else ''}: {counts}"

    def proof(f: dict) -> str:
        text = (f"`prove_secs` / bench `PROFILE` median {f['proof_ratio_median']:.3f} over "
                f"{f['ratio_checks']} proofs, CPU {f['proof_cpu_ratio_median']:.3f}")
        if f.get("proof_cpu_ratio_default_median") is not None:
            text += (f"; under `--runtime default` CPU {f['proof_cpu_ratio_default_median']:.3f}; the "
                     f"bench's program under `{f['runtimes']['bench_tuned']}`: "
                     f"{f['bench_tuned_gain_median']:.3f} of its own `PROFILE`")
        return text

    return (run, lambda f: f"{f['problems']}, {len(f['wrong'])} wrong answers", verdicts, proof,
            lambda f: f"proofbatch {walls(f, 'proofbatch')} vs bench {walls(f, 'bench')}: median "
                      f"{f['wall_ratio']:.3f}",
            lambda f: f"bench `PROFILE` / map median {f['host_factor']:.2f}")


def _readme_path_run(arch: str, seed: int, flags: tuple[str, ...]) -> Row:
    """docs/s2n.md's row of one s2n_readme_path.py run."""
    def ratio(f: dict) -> str:
        if "native_ratio_median" not in f:
            return f"none of 0.5 s or more ({f['native_load']})"
        n = f["native_ratio_count"]
        median = "median " if n > 1 else ""
        return f"{median}{f['native_ratio_median']:.2f} ({n} of 0.5 s or more; {f['native_load']})"

    return Row(f"{arch}-{seed}", "s2n_readme_path", (
        arch, f"{seed} (`{' '.join(flags)}`)" if flags else f"{seed} (defaults)",
        lambda f: ", ".join(f"`{name}`" for name in f["files"]), "{problems}",
        lambda f: f"{f['problems']} OK, none fell back" if f["failures"] == 0
        else f"{f['failures']} not met (not OK, not swept or in another mode)",
        lambda f: f"{f['native_wall_s']:,.0f} s", ratio),
        args=("--arch", arch, "--seed", str(seed), *flags))


def readme_tables() -> tuple[Table, ...]:
    return (
        Table("headline", "README.md", ("what", "figure", "page"), _headline()),
        Table("readme-s2n", "README.md", ("run", "problems", "verdicts", "proof time",
                                          "end-to-end wall", "host vs map"),
              # The light draw of seed 48 (a run on given problems, --only, is docs/native.md's).
              (Row("vs_bench_harness", "vs_bench_harness", vs_bench_cells(), args=("--seed", "48")),
               Row("s2n_readme_path", "s2n_readme_path", _readme_path_cells(), pool=README_PATH))),
        Table("s2n-readme-path", "docs/s2n.md",
              ("tree", "seed", "files", "problems in the map", "verdicts", "wall",
               "`prove_secs` / map (load)"),
              tuple(_readme_path_run(*run) for run in S2N_README_RUNS)),
    )


def _passed(f: dict) -> str:
    ok = f["runs"]["cpu"]["verdicts"].get("OK", 0)
    return f"all {ok}" if ok == f["problems"] else f"{ok} of {f['problems']}"


def readme_figures() -> tuple[Figure, ...]:
    """The limits paragraph: loaded_host.py's quiet-host run (QUIET_HOST)."""
    return (
        Figure("limits-factor", "README.md", "loaded_host", lambda f: f"{f['cpu_host_factor']:.2f}x",
               args=QUIET_HOST),
        Figure("limits-wall-cut", "README.md", "loaded_host",
               lambda f: f"{f['wall_false_timeouts']} of {f['problems']}", args=QUIET_HOST),
        Figure("limits-cpu-passed", "README.md", "loaded_host", _passed, args=QUIET_HOST),
        Figure("limits-cpu-ratio", "README.md", "loaded_host", lambda f: f"{f['cpu_drift_median']:.2f}x",
               args=QUIET_HOST),
    )
