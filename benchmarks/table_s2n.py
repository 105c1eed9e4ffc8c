"""docs/s2n.md's tables of the side by side with the bench's harness
(vs_bench_harness.py's runs of its seed-1 draw: the first, 6 problems in one
round; the issue's size, 24 problems in two rounds; four rounds of it) and of
one proof paired in time (paired_proof.py's two runs), each row from the
newest record of its run's flags (table_registry.TABLES holds them).

Not here: s2n-heap-fix (its "before" runs need code before b61a2d8) and
s2n-rounds-before (the command of s2n-rounds at d9d118f on another machine):
no run of today's code gives them."""

from __future__ import annotations

import math
from typing import Callable

from table_cells import Cell, Row, Table

# vs_bench_harness.py's runs of seed 1, told apart by their flags (in a row,
# as each command gives them; none holds another's, nor the README's --seed 48).
FIRST = ("--seed", "1", "--files", "4", "--problems", "6", "--wrong", "2", "--workers", "2",
         "--rounds", "1")
ISSUE_SIZE = ("--seed", "1", "--files", "4", "--problems", "24", "--workers", "2", "--rounds", "2")
ROUNDS = ("--seed", "1", "--files", "4", "--problems", "24", "--workers", "2", "--rounds", "4")
# The first run's draw: 6 problems of 4 files, a row each.
FIRST_DRAWN = 6

# paired_proof.py's two runs, each with the phases it runs (in order, a row each).
PAIRED_RUNS = (
    ("--pairs", "4", "--phases", "bench,proofbatch"),
    ("--pairs", "4", "--phases", "proving,bench,none"),
)
OTHER_CORE: dict[str, Cell] = {
    "bench": "the bench's program", "proofbatch": "`proofbatch run`",
    "proving": lambda f: f"{f['attempts']} attempts proving", "none": "nothing"}


# -- pieces -------------------------------------------------------------------------------

def _num(x: float | None, fmt: str) -> str:
    """A figure, or "—" where the run measured none (None, NaN)."""
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _load(text: str) -> str:
    """A flow's load ("load 0.2-2.0") without its word."""
    return text.removeprefix("load ")


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _judged(f: dict, key: str) -> str:
    """Whether ``f[key]`` (a median over all rounds) met its goal, as the run
    judges it (none measured misses it)."""
    got = f[key]
    return _met(got is not None and not math.isnan(got) and got <= f["thresholds"][key])


def _goal(f: dict, key: str) -> str:
    """The goal on ``f[key]``, with its threshold as recorded."""
    return f"<= {f['thresholds'][key]:.3g}: {_judged(f, key)}"


def _flows(f: dict, r: int) -> tuple[dict, dict]:
    """Round ``r``'s (bench flow, proofbatch flow) figures."""
    flows = f["rounds"][r - 1]
    return flows["bench"], flows["proofbatch"]


def _verdicts(f: dict, r: int) -> str:
    """Round ``r``'s verdicts: whether both flows gave the same, and how many of each."""
    pb = [p["proofbatch"] for p in f["per_problem"] if p["round"] == r]
    counts = ", ".join(f"{pb.count(v)} {v}" for v in sorted(set(pb), key=lambda v: (-pb.count(v), v)))
    differ = sum(d.startswith(f"round {r} ") for d in f["differ"])
    if not differ:
        return f"the same in all {len(pb)} ({counts})"
    return f"{differ} of {len(pb)} differ (proofbatch: {counts})"


def _same(f: dict) -> str:
    return f"the same: {_met(not f['differ'])}"


def _ratios(f: dict, r: int) -> dict:
    """Round ``r``'s proof-time and proof-CPU medians and how many checks they are over."""
    return f["round_ratios"][r - 1]


def _in_round(r: int, cell: Callable[[dict, int], str]) -> Callable[[dict], str]:
    return lambda f: cell(f, r)


# -- the first run: 6 problems, one round -----------------------------------------------------

def _first_problem(i: int) -> Callable[[dict], dict]:
    """The ``i``-th problem of the first run's round (in the draw's order)."""
    def of(f: dict) -> dict:
        drawn = [p for p in f["per_problem"] if p["round"] == 1]
        if len(drawn) != FIRST_DRAWN:
            raise ValueError(f"the record's draw has {len(drawn)} problems, the table {FIRST_DRAWN} rows")
        return drawn[i]
    return of


def _first_problem_row(i: int) -> Row:
    of = _first_problem(i)

    def name(f: dict) -> str:
        pid = of(f)["problem"]
        text = f"`{pid.split('.', 2)[2]}`"
        if pid in f["wrong"]:
            answer = f["wrong_answers"][pid]
            if not answer:
                raise ValueError(f"{pid}: no wrong answer recorded")
            text += f" (`{answer}`)"
        return text

    def ratio(f: dict) -> str:
        p = of(f)
        defined = p["profile_s"] > 0 and not math.isnan(p["prove_secs"])   # NaN > 0 is false
        return f"{p['prove_secs'] / p['profile_s']:.2f}" if defined else ""

    return Row(f"p{i}", "vs_bench_harness", (
        name, lambda f: of(f)["bench"], lambda f: of(f)["proofbatch"],
        *(lambda f, k=k: _num(of(f)[k], ".2f") for k in ("map_s", "profile_s", "prove_secs",
                                                          "prove_cpu_secs")),
        ratio), args=FIRST)


def _first_measures() -> tuple[Row, ...]:
    def loads(f: dict) -> str:
        b, p = _flows(f, 1)
        return f"bench {b['load']}, proofbatch {p['load']}"

    def proofs(n: int) -> str:
        return f"{n} OK proof{'s' if n != 1 else ''}"

    def wall(f: dict) -> str:
        b, p = _flows(f, 1)
        return (f"bench {b['wall_s']:,.0f} s (combine {b['combine_s']:,.0f} s + run-answers "
                f"{b['run_s']:,.0f} s; {b['load']}), proofbatch {p['wall_s']:,.0f} s (extract "
                f"{p['extract_s']:,.0f} s + run {p['run_s']:,.0f} s; {p['load']}): "
                f"{_num(f['wall_ratio'], '.3f')} of the bench's, "
                f"{_num(f['wall_ratio_vs_run_answers'], '.3f')} of `run-answers.sh` alone")

    def cpu(f: dict) -> str:
        b, p = _flows(f, 1)
        how = "cgroups" if {b["cpu_how"], p["cpu_how"]} == {"cgroup"} else "children's rusage"
        return (f"bench {b['cpu_s'] / 3600:.4f} core-h, proofbatch {p['cpu_s'] / 3600:.4f} core-h "
                f"({how}; same loads)")

    rows = (
        ("verdicts", "verdicts", _in_round(1, _verdicts), _same),
        ("proof", "proof time, `prove_secs` / `PROFILE`",
         lambda f: f"median {_num(f['proof_ratio_median'], '.3f')} over the {proofs(f['ratio_checks'])} "
                   f"of {f['min_secs']:g} s or more ({loads(f)})",
         lambda f: _goal(f, "proof_ratio_median")),
        ("cpu-ratio", "proof CPU, `prove_cpu_secs` / `PROFILE`",
         lambda f: f"median {_num(f['proof_cpu_ratio_median'], '.3f')} (same loads)",
         lambda f: _goal(f, "proof_cpu_ratio_median")),
        ("wall", "end-to-end wall", wall, lambda f: _goal(f, "wall_ratio")),
        ("cpu", "CPU", cpu, "none"),
        ("host", "host factor, `PROFILE` / the map's `prove_secs`",
         lambda f: f"median {_num(f['host_factor'], '.2f')} over the {proofs(f['host_factor_checks'])} "
                   f"the map lists at {f['min_secs']:g} s or more (bench {_flows(f, 1)[0]['load']})",
         "stated"),
    )
    return tuple(Row(key, "vs_bench_harness", tuple(cells), args=FIRST) for key, *cells in rows)


# -- the issue's size: 24 problems, two rounds --------------------------------------------

ISSUE_ROUNDS = 2


def _issue_size() -> tuple[Row, ...]:
    def proof(f: dict, r: int) -> str:
        b, p = _flows(f, r)
        rr = _ratios(f, r)
        return (f"median {_num(rr['proof_ratio_median'], '.3f')} over {rr['ratio_checks']} "
                f"(bench {b['load']}, proofbatch {_load(p['load'])})")

    def wall(f: dict, r: int) -> str:
        b, p = _flows(f, r)
        return (f"bench {b['wall_s']:,.0f} s (combine {b['combine_s']:,.0f} + run-answers "
                f"{b['run_s']:,.0f}), proofbatch {p['wall_s']:,.0f} s: {p['wall_s'] / b['wall_s']:.3f}")

    def cpu(f: dict, r: int) -> str:
        b, p = _flows(f, r)
        return f"bench {b['cpu_s'] / 3600:.3f} core-h, proofbatch {p['cpu_s'] / 3600:.3f}"

    def over_all(key: str) -> Callable[[dict], str]:
        """The goal, and the median over all rounds it judges."""
        return lambda f: f"{_goal(f, key)} (all rounds: {_num(f[key], '.3f')})"

    def host(f: dict) -> str:
        return (f"median {_num(f['host_factor'], '.2f')} over the {f['host_factor_checks']} proofs of "
                f"all rounds the map lists at {f['min_secs']:g} s or more")

    def per_round(cell: Callable[[dict, int], str]) -> tuple[Cell, ...]:
        return tuple(_in_round(r, cell) for r in range(1, ISSUE_ROUNDS + 1))

    rows = (
        ("verdicts", "verdicts", per_round(_verdicts), _same),
        ("proof", lambda f: f"proof time, `prove_secs` / `PROFILE` (OK proofs of {f['min_secs']:g} s "
                            "or more)",
         per_round(proof), over_all("proof_ratio_median")),
        ("cpu-ratio", "proof CPU, `prove_cpu_secs` / `PROFILE`",
         per_round(lambda f, r: f"median {_num(_ratios(f, r)['proof_cpu_ratio_median'], '.3f')}"),
         over_all("proof_cpu_ratio_median")),
        ("wall", "end-to-end wall", per_round(wall), over_all("wall_ratio")),
        ("cpu", "CPU", per_round(cpu), "none"),
        ("host", "host factor, `PROFILE` / the map's `prove_secs`", (host, ""), "stated"),
    )
    return tuple(Row(key, "vs_bench_harness", (label, *cells, goal), args=ISSUE_SIZE)
                 for key, label, cells, goal in rows)


# -- four rounds ----------------------------------------------------------------------------

ROUNDS_RUN = 4


def _round_row(r: int) -> Row:
    def order(f: dict) -> str:
        b, p = _flows(f, r)
        # Which flow ran first, by when each ended (a flow kept by --resume keeps its time).
        return "bench, then proofbatch" if b["ended"] < p["ended"] else "proofbatch, then bench"

    def proof(f: dict) -> str:
        rr = _ratios(f, r)
        n = rr["ratio_checks"]
        return f"{_num(rr['proof_ratio_median'], '.3f')} ({n} proofs)" if r == 1 else \
            f"{_num(rr['proof_ratio_median'], '.3f')} ({n})"

    def wall(f: dict) -> str:
        b, p = _flows(f, r)
        return f"{b['wall_s']:,.0f} s / {p['wall_s']:,.0f} s: {p['wall_s'] / b['wall_s']:.3f}"

    def load(f: dict) -> str:
        b, p = _flows(f, r)
        return f"{_load(b['load'])}; {_load(p['load'])}"

    return Row(f"r{r}", "vs_bench_harness", (
        str(r), order, proof, lambda f: _num(_ratios(f, r)["proof_cpu_ratio_median"], ".3f"), wall, load),
        args=ROUNDS)


def _rounds_all() -> Row:
    def goal(f: dict, key: str) -> str:
        return f"goal {f['thresholds'][key]:.3g}: {_judged(f, key)}"

    return Row("all", "vs_bench_harness", (
        "all", "",
        lambda f: f"median {_num(f['proof_ratio_median'], '.3f')} over {f['ratio_checks']} "
                  f"({goal(f, 'proof_ratio_median')})",
        lambda f: f"{_num(f['proof_cpu_ratio_median'], '.3f')} ({goal(f, 'proof_cpu_ratio_median')})",
        lambda f: f"median {_num(f['wall_ratio'], '.3f')} ({goal(f, 'wall_ratio')})", ""), args=ROUNDS)


# -- paired in time ----------------------------------------------------------------------------

def _paired_row(run: int, phase: str) -> Row:
    def of(f: dict) -> dict:
        return f["phases"][phase]

    def times(key: str, fmt: str) -> Callable[[dict], str]:
        return lambda f: " ".join(format(x, fmt) for x in of(f)[key])

    return Row(f"{run + 1}-{phase}", "paired_proof", (
        OTHER_CORE[phase], lambda f: f"{of(f)['started'][11:16]}-{of(f)['ended'][11:16]}",
        times("bench", ".2f"), times("pb", ".2f"), times("ratios", ".3f"),
        lambda f: f"**{of(f)['ratio_median']:.3f}**", lambda f: _load(of(f)["load"])),
        args=PAIRED_RUNS[run])


def _paired() -> tuple[Row, ...]:
    return tuple(_paired_row(run, phase) for run, args in enumerate(PAIRED_RUNS)
                 for phase in args[args.index("--phases") + 1].split(","))


def s2n_tables() -> tuple[Table, ...]:
    return (
        Table("s2n-first-problems", "docs/s2n.md",
              ("problem", "bench", "proofbatch", "map s", "bench `PROFILE` s", "`prove_secs`",
               "`prove_cpu_secs`", "`prove_secs` / `PROFILE`"),
              tuple(_first_problem_row(i) for i in range(FIRST_DRAWN))),
        Table("s2n-first-measures", "docs/s2n.md", ("measure", "figure", "goal"), _first_measures()),
        Table("s2n-issue-size", "docs/s2n.md", ("measure", "round 1", "round 2", "goal"), _issue_size()),
        Table("s2n-rounds", "docs/s2n.md",
              ("round", "order", "proof time `prove_secs` / `PROFILE`", "proof CPU / `PROFILE`",
               "end-to-end wall (bench's flow / proofbatch)", "load (bench; proofbatch)"),
              tuple(_round_row(r) for r in range(1, ROUNDS_RUN + 1)) + (_rounds_all(),)),
        Table("s2n-paired", "docs/s2n.md",
              ("the other core runs", "when (UTC)", "bench `PROFILE` s", "proofbatch `prove_secs`",
               "pair ratios", "median", "load"), _paired()),
    )
