"""Where a sweep's time went, read from its directory alone: the shards
(runner.shards.read_results), the image builds (``OUT/images/*.json``), the
manifest (``OUT/sweep.json``) and the plan (``OUT/plan.json``).

Core-hours are what was paid: every worker of a run, from the boot of its
session to its last verdict. They split into:

- proof: time inside ``prove``;
- image builds: loading contexts, the boot included;
- waiting: workers waiting to start a check, for an image another worker is
  building or for memory (each row's ``wait_secs``, dispatch to the check's
  start, less the builds it did itself);
- dispatch overhead: the rest of each check's span (fork, reading and
  typing the answer, the jail, reaping the verdict);
- TIMEOUT and MEMOUT: the checking time of those checks, none of which
  bought a verdict about the proof;
- idle: paid time no worker spent on any of these (between checks, and the
  other workers during the boot).

A worker's utilization is on the same span: the share of its run, boot
included, that it spent checking, building or waiting.

``runner.report_html`` and ``proofbatch report`` render a ``SweepReport``;
``compare`` sets two sweeps of one corpus side by side.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from . import shards
from .errors import InputError
from .planner import PLAN_FILE
from .verdicts import Verdict

WASTED = ("TIMEOUT", "MEMOUT")
PARTS = ("proof", "image builds", "waiting", "dispatch overhead", "TIMEOUT", "MEMOUT", "idle")


@dataclass(frozen=True)
class Run:
    run_id: str
    workers: int
    boot_s: float            # base-image boots recorded by this run (its session's start)
    start: float             # epoch seconds of its first dispatch
    end: float               # epoch seconds of its last verdict

    @property
    def makespan_s(self) -> float:
        return self.boot_s + max(0.0, self.end - self.start)


@dataclass(frozen=True)
class SweepReport:
    out: Path
    manifest: dict
    rows: list[dict]
    runs: list[Run]
    builds: list[dict]                   # every image build: key, parent, secs, run_id, host
    seconds: dict[str, float]            # PARTS -> worker seconds
    plan: dict | None = None

    @property
    def makespan_s(self) -> float:
        return sum(r.makespan_s for r in self.runs)

    @property
    def core_hours(self) -> float:
        return sum(self.seconds.values()) / 3600.0

    def verdicts(self) -> Counter:
        return Counter(r["verdict"] for r in self.rows)

    def by_category(self) -> dict[str, Counter]:
        out: dict[str, Counter] = defaultdict(Counter)
        for r in self.rows:
            out[r["category"]][r["verdict"]] += 1
        return dict(sorted(out.items()))

    def slowest(self, n: int = 10) -> list[dict]:
        """The ``n`` longest checks, by wall time (dispatch to verdict, image loads excluded)."""
        return sorted(self.rows, key=lambda r: -r["wall_secs"])[:n]

    @property
    def begun(self) -> float:
        """Epoch seconds when the sweep's first run began booting its prover."""
        return min((r.start - r.boot_s for r in self.runs), default=0.0)

    def throughput(self) -> list[tuple[float, int]]:
        """(seconds since the sweep began, boot included; verdicts recorded by then)."""
        if not self.rows:
            return []
        ends = sorted(_ts(r["finished_at"]) - self.begun for r in self.rows)
        return [(t, i + 1) for i, t in enumerate(ends)]

    def timeline(self) -> list[tuple[str, float, float]]:
        """(what, start, end) in seconds since the sweep began: each run's boot
        and every image build that recorded when it finished."""
        spans = [("boot", r.start - r.boot_s - self.begun, r.start - self.begun)
                 for r in self.runs if r.boot_s]
        spans += [("image build", b["finished_at"] - b["secs"] - self.begun,
                   b["finished_at"] - self.begun)
                  for b in self.builds if b.get("parent") is not None and b.get("finished_at")]
        return spans

    def utilization(self) -> dict[str, float]:
        """Per worker: the share of its run's span, the boot included, that it
        spent checking (image builds and waits inside its checks count)."""
        span = {r.run_id: max(1e-9, r.makespan_s) for r in self.runs}
        busy: dict[tuple[str, str], float] = defaultdict(float)
        for r in self.rows:
            busy[(r["run_id"], r["worker"])] += _span(r)
        number = {r.run_id: i + 1 for i, r in enumerate(self.runs)}
        many = len(self.runs) > 1
        # A resumed sweep's runs reuse worker names: say which run each is.
        return {(f"run {number[run]} {w.rsplit('/', 1)[-1]}" if many else w): b / span[run]
                for (run, w), b in sorted(busy.items(), key=lambda x: (number[x[0][0]], x[0][1]))}

    def image_counts(self) -> dict:
        """The image builds: how many, of how many distinct images, and the
        rebuilds among them (a build of an image its own session had built
        before and evicted) with their seconds; and what the plan of the
        last run predicted for image builds (None without a prediction). A
        later run's session starts empty, so building an image again there
        is no rebuild."""
        seen: set[tuple] = set()
        rebuilds, rebuild_s = 0, 0.0
        for b in self.builds:
            session = (b["run_id"], b.get("host"), b["key"])
            if session in seen:
                rebuilds += 1
                rebuild_s += b["secs"]
            seen.add(session)
        predicted = ((self.plan or {}).get("predicted") or {}).get("image_build_core_hours")
        return {"builds": len(self.builds), "images": len({b["key"] for b in self.builds}),
                "build_s": sum(b["secs"] for b in self.builds), "rebuilds": rebuilds,
                "rebuild_s": rebuild_s,
                "predicted_build_s": None if predicted is None else predicted * 3600.0}

    def prediction(self) -> dict | None:
        """The plan's prediction for the run it was made for, against that run."""
        if not self.plan or not self.plan.get("predicted"):
            return None
        run = next((r for r in self.runs if r.run_id == self.plan.get("run_id")), None)
        if run is None:
            return None
        planned = {(c["problem_id"], c["attempt"]): c for c in self.plan["checks"]}
        pairs = [(planned[(r["problem_id"], r["attempt"])]["expected_s"], r["prove_secs"],
                  planned[(r["problem_id"], r["attempt"])]["source"], r["verdict"])
                 for r in self.rows if r["run_id"] == run.run_id
                 and (r["problem_id"], r["attempt"]) in planned and r["prove_secs"] is not None]
        predicted = self.plan["predicted"]
        return {"run_id": run.run_id, "predicted_makespan_s": predicted["makespan_s"],
                "actual_makespan_s": run.makespan_s, "lower_bound_s": predicted["lower_bound_s"],
                "predicted_core_hours": predicted["core_hours"],
                "actual_core_hours": run.workers * run.makespan_s / 3600.0,
                "sources": self.plan.get("sources", {}), "checks": pairs}


def _ts(value) -> float:
    return value.timestamp()


def _span(row: dict) -> float:
    return max(0.0, _ts(row["finished_at"]) - _ts(row["started_at"]))


def read_builds(out: Path) -> list[dict]:
    builds = []
    for path in sorted((Path(out) / "images").glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue                         # being published right now
        builds += [dict(b, run_id=data.get("run_id", path.stem), host=data.get("host"))
                   for b in data.get("builds", [])]
    return builds


def load(out: Path) -> SweepReport:
    """Read a sweep directory; InputError if it is not one."""
    out = Path(out)
    manifest_path = out / "sweep.json"
    if not manifest_path.is_file():
        raise InputError(out, "not a sweep directory (no sweep.json)",
                         "pass the --out directory of a `proofbatch run`")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(manifest_path, f"unreadable sweep manifest ({exc})",
                         "restore it from a backup or run the sweep again") from None
    rows = shards.read_results(out).to_pylist()
    builds = read_builds(out)
    plan = None
    if (out / PLAN_FILE).is_file():
        try:
            plan = json.loads((out / PLAN_FILE).read_text())
        except (OSError, json.JSONDecodeError):
            plan = None                      # a report without the prediction beats none
    runs = _runs(rows, builds, manifest)
    return SweepReport(out, manifest, rows, runs, builds, _split(rows, builds, runs), plan)


def _runs(rows: list[dict], builds: list[dict], manifest: dict) -> list[Run]:
    by_run: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_run[r["run_id"]].append(r)
    configured = int((manifest.get("config") or {}).get("workers") or 1)
    runs = []
    for run_id, rs in by_run.items():
        boot = sum(b["secs"] for b in builds if b["run_id"] == run_id and b.get("parent") is None)
        workers = max(configured, len({r["worker"] for r in rs}))
        runs.append(Run(run_id, workers, boot, min(_ts(r["started_at"]) for r in rs),
                        max(_ts(r["finished_at"]) for r in rs)))
    return sorted(runs, key=lambda r: r.start)


def _split(rows: list[dict], builds: list[dict], runs: list[Run]) -> dict[str, float]:
    seconds = dict.fromkeys(PARTS, 0.0)
    overhead = waited = 0.0
    for r in rows:
        # Rows written before wait_secs was recorded count their waits as overhead.
        wait = min(r.get("wait_secs") or 0.0, _span(r))
        waited += wait
        if r["verdict"] in WASTED:
            seconds[r["verdict"]] += _span(r) - wait
        else:
            proof = r["prove_secs"] or 0.0
            seconds["proof"] += proof
            overhead += max(0.0, _span(r) - wait - proof)
    seconds["image builds"] = sum(b["secs"] for b in builds)
    # Images other than the base are built inside the wait of the check that
    # needed them; what is left of the waits is waiting for others' builds
    # or for memory.
    inside = sum(b["secs"] for b in builds if b.get("parent") is not None)
    seconds["waiting"] = max(0.0, waited - inside)
    seconds["dispatch overhead"] = max(0.0, overhead - max(0.0, inside - waited))
    paid = sum(r.workers * r.makespan_s for r in runs)
    seconds["idle"] = max(0.0, paid - sum(seconds.values()))
    return seconds


# -- two sweeps ------------------------------------------------------------------

@dataclass(frozen=True)
class Comparison:
    a: SweepReport
    b: SweepReport
    solved_only_a: list[str]
    solved_only_b: list[str]
    changes: list[tuple[str, int, str, str]]          # problem, attempt, verdict in a, in b
    only_in_a: int = 0                                # checks one sweep has and the other lacks
    only_in_b: int = 0
    transitions: Counter = field(default_factory=Counter)


def compare(a: SweepReport, b: SweepReport) -> Comparison:
    """Two sweeps of one corpus: who solved what, which verdicts changed, what each cost."""
    fa, fb = a.manifest.get("corpus_fingerprint"), b.manifest.get("corpus_fingerprint")
    if fa != fb:
        raise InputError(b.out / "sweep.json", f"a sweep of another corpus than {a.out} "
                         "(corpus fingerprints differ)", "compare two sweeps of the same corpus")
    va = {(r["problem_id"], r["attempt"]): r["verdict"] for r in a.rows}
    vb = {(r["problem_id"], r["attempt"]): r["verdict"] for r in b.rows}
    solved_a = {p for (p, _), v in va.items() if v == Verdict.OK.value}
    solved_b = {p for (p, _), v in vb.items() if v == Verdict.OK.value}
    changes = sorted((p, k, va[(p, k)], vb[(p, k)]) for (p, k) in va.keys() & vb.keys()
                     if va[(p, k)] != vb[(p, k)])
    return Comparison(a, b, sorted(solved_a - solved_b), sorted(solved_b - solved_a), changes,
                      len(va.keys() - vb.keys()), len(vb.keys() - va.keys()),
                      Counter((x, y) for _, _, x, y in changes))
