"""Where a sweep's time went, read from its directory alone: the shards
(runner.results.shards.scan, only the columns a report shows), the image builds
(``OUT/images/*.json``), the manifest (``OUT/sweep.json``) and the plan
(``OUT/plan.json``).

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

A sweep can hold a million rows (issue 16): every figure is computed in
Arrow compute over the columns, and only small results (counts per verdict
or category, per-worker sums, the slowest checks, the throughput curve at
the resolution of its plot) become Python objects.

``runner.reporting.html`` and ``proofbatch report`` render a ``SweepReport``;
``runner.reporting.compare`` sets two sweeps of one corpus side by side.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..results import shards
from ..results.done import Done
from ..results.sweep_manifest import read_sweep_manifest
from ..errors import InputError
from ..planning.planner import PLAN_FILE
from ..prover import COMPILE_KEY
from . import heavy, limits

WASTED = ("TIMEOUT", "MEMOUT")
PARTS = ("proof", "image builds", "waiting", "dispatch overhead", "TIMEOUT", "MEMOUT", "idle")
# What a report reads of each row: its figures, the slowest checks' table
# and what its Limits section (runner/reporting/limits.py) counts. Hashes,
# images and hosts, the bulk of a row, stay on disk.
COLUMNS = tuple(dict.fromkeys((
    "problem_id", "attempt", "category", "verdict", "reason", "prove_secs", "wall_secs",
    "timeout_s", "worker", "started_at", "finished_at", "run_id", "wait_secs", *limits.COLUMNS,
    *heavy.COLUMNS)))
# The throughput plot is 1200 px wide: a curve of more points than this
# draws the same line, so a longer one keeps the last verdict of each of
# this many equal spans of time.
THROUGHPUT_POINTS = 4000


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
    table: pa.Table                      # one row per check (COLUMNS), sorted by key
    runs: list[Run]
    builds: list[dict]                   # every image build: key, parent, secs, run_id, host
    seconds: dict[str, float]            # PARTS -> worker seconds
    plan: dict | None = None

    @property
    def checks(self) -> int:
        return self.table.num_rows

    @property
    def makespan_s(self) -> float:
        return sum(r.makespan_s for r in self.runs)

    @property
    def core_hours(self) -> float:
        return sum(self.seconds.values()) / 3600.0

    def verdicts(self) -> Counter:
        return Done(self.table).verdict_counts()

    def by_category(self) -> dict[str, Counter]:
        counts = self.table.group_by(["category", "verdict"]).aggregate([([], "count_all")])
        out: dict[str, Counter] = defaultdict(Counter)
        for category, verdict, n in zip(*(counts[c].to_pylist()
                                          for c in ("category", "verdict", "count_all"))):
            out[category][verdict] = n
        return dict(sorted(out.items()))

    def slowest(self, n: int = 10) -> list[dict]:
        """The ``n`` longest checks, by wall time (dispatch to verdict, image
        loads excluded); equal times in key order."""
        if n <= 0 or not self.checks:
            return []
        top = pc.select_k_unstable(self.table, k=min(n, self.checks), sort_keys=[
            ("wall_secs", "descending"), ("problem_id", "ascending"), ("attempt", "ascending")])
        return self.table.take(top).to_pylist()

    @property
    def begun(self) -> float:
        """Epoch seconds when the sweep's first run began booting its prover."""
        return min((r.start - r.boot_s for r in self.runs), default=0.0)

    def throughput(self) -> list[tuple[float, int]]:
        """(seconds since the sweep began, boot included; verdicts recorded by
        then): every verdict, or the last of each of THROUGHPUT_POINTS equal
        spans when there are more, the first and the last verdict always."""
        if not self.checks:
            return []
        ends = np.sort(epoch_secs(self.table["finished_at"]).to_numpy() - self.begun)
        counts = np.arange(1, len(ends) + 1)
        if len(ends) > THROUGHPUT_POINTS:
            bins = np.floor((ends - ends[0]) / ((ends[-1] - ends[0]) or 1.0) * THROUGHPUT_POINTS)
            keep = np.append(bins[1:] != bins[:-1], True)
            keep[0] = True
            ends, counts = ends[keep], counts[keep]
        return list(zip(ends.tolist(), counts.tolist()))

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
        sums = pa.table({"run_id": self.table["run_id"], "worker": self.table["worker"],
                         "span": _spans(self.table)}).group_by(["run_id", "worker"]).aggregate(
            [("span", "sum")])
        busy = dict(zip(zip(sums["run_id"].to_pylist(), sums["worker"].to_pylist()),
                        sums["span_sum"].to_pylist()))
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
        # Native compiles are recorded as builds (runner.prover.COMPILE_KEY):
        # counted in the time split, said apart here.
        compiles = [b for b in self.builds if b["key"].startswith(COMPILE_KEY)]
        builds = [b for b in self.builds if not b["key"].startswith(COMPILE_KEY)]
        for b in builds:
            session = (b["run_id"], b.get("host"), b["key"])
            if session in seen:
                rebuilds += 1
                rebuild_s += b["secs"]
            seen.add(session)
        predicted = ((self.plan or {}).get("predicted") or {}).get("image_build_core_hours")
        return {"builds": len(builds), "images": len({b["key"] for b in builds}),
                "build_s": sum(b["secs"] for b in builds), "rebuilds": rebuilds,
                "compiles": len(compiles), "compile_s": sum(b["secs"] for b in compiles),
                "rebuild_s": rebuild_s,
                "predicted_build_s": None if predicted is None else predicted * 3600.0}

    def prediction(self) -> dict | None:
        """The plan's prediction for the run it was made for, against that
        run; ``checks`` is a table of that run's checks with a measured
        prove time: expected_s, prove_secs, source and verdict, in key order."""
        if not self.plan or not self.plan.get("predicted"):
            return None
        run = next((r for r in self.runs if r.run_id == self.plan.get("run_id")), None)
        if run is None:
            return None
        planned = pa.Table.from_struct_array(pa.array(self.plan["checks"], PLANNED))
        rows = self.table.filter(pc.and_(pc.equal(self.table["run_id"], run.run_id),
                                         pc.is_valid(self.table["prove_secs"])))
        pairs = rows.select(["problem_id", "attempt", "prove_secs", "verdict"]).join(
            planned, keys=["problem_id", "attempt"], join_type="inner")
        pairs = pairs.sort_by([("problem_id", "ascending"), ("attempt", "ascending")])
        predicted = self.plan["predicted"]
        return {"run_id": run.run_id, "predicted_makespan_s": predicted["makespan_s"],
                "actual_makespan_s": run.makespan_s, "lower_bound_s": predicted["lower_bound_s"],
                "predicted_core_hours": predicted["core_hours"],
                "actual_core_hours": run.workers * run.makespan_s / 3600.0,
                "sources": self.plan.get("sources", {}),
                "checks": pairs.select(["expected_s", "prove_secs", "source", "verdict"])}


    def predicted_costs(self) -> dict | None:
        """The plan's predicted image-build and proof core-hours beside the
        measured ones, for the run it was made for, and per image class
        (``image_class``): each image the run built, its planned build
        against its measured one (the median of its builds there, plus,
        natively, the median compiles of its context and its answers). None
        without a prediction or its run."""
        if not self.plan or not self.plan.get("predicted"):
            return None
        run_id = self.plan.get("run_id")
        if not any(r.run_id == run_id for r in self.runs):
            return None
        predicted = self.plan["predicted"]
        builds = [b for b in self.builds if b["run_id"] == run_id]
        rows = self.table.filter(pc.equal(self.table["run_id"], run_id))
        measured_proof_s = _total(pc.fill_null(rows["prove_secs"], 0.0))
        # CPU beside wall: on a loaded host a proof waits for its core, and
        # wall time over the plan is that waiting, not a wrong prediction.
        measured_cpu_s = _total(pc.fill_null(heavy.proof_s(rows), 0.0))
        planned = {i["key"]: i for i in self.plan.get("images", [])}
        classes = image_classes(planned)
        secs: dict[str, list[float]] = defaultdict(list)
        for b in builds:
            secs[b["key"]].append(float(b["secs"]))
        per: dict[str, dict] = {}
        for key in planned.keys() & secs.keys():
            c = per.setdefault(classes[key], {"images": 0, "builds": 0, "predicted_s": 0.0,
                                              "measured_s": 0.0})
            c["images"] += 1
            c["builds"] += len(secs[key])
            c["predicted_s"] += float(planned[key]["build_s"])
            # A native image's plan prices what it needs before its checks
            # run: its context's compile and its answers' besides its load.
            c["measured_s"] += sum(float(np.median(secs[k])) for k in (
                key, f"{COMPILE_KEY}{key}", f"{COMPILE_KEY}answers:{key}") if k in secs)
        for c in per.values():
            c["error"] = ((c["predicted_s"] - c["measured_s"]) / c["measured_s"]
                          if c["measured_s"] > 0 else None)
        image_h = predicted["image_build_core_hours"]
        return {"run_id": run_id,
                "predicted_image_core_hours": image_h,
                "measured_image_core_hours": sum(b["secs"] for b in builds) / 3600.0,
                "predicted_rebuild_core_hours": predicted.get("image_rebuild_core_hours"),
                "predicted_proof_core_hours": predicted["busy_core_hours"] - image_h,
                "measured_proof_core_hours": measured_proof_s / 3600.0,
                "measured_proof_cpu_core_hours": measured_cpu_s / 3600.0,
                "unplanned_builds": sum(1 for b in builds if b["key"] not in planned),
                "by_class": {k: per[k] for k in IMAGE_CLASSES if k in per}}


IMAGE_CLASSES = ("boot", "library prefix", "file head", "chain image")


def image_classes(images: dict[str, dict]) -> dict[str, str]:
    """Each image of a plan (key -> {"parent": ...}) by its role in the
    tree: the ``boot`` (the root); a ``library prefix`` (shared: more than
    one branch of the tree passes through it); a ``file head`` (the first
    image of a single branch, below a shared one or the root: a proof
    file's own setup); a ``chain image`` (further down a branch: a proof
    file cut theorem by theorem, each context the last plus a theorem)."""
    children: dict[str, list[str]] = defaultdict(list)
    for key, i in images.items():
        if i.get("parent") is not None:
            children[i["parent"]].append(key)
    leaves: dict[str, int] = {}
    order, todo = [], [k for k, i in images.items() if i.get("parent") is None]
    while todo:
        k = todo.pop()
        order.append(k)
        todo.extend(children[k])
    for k in reversed(order):
        leaves[k] = sum(leaves[c] for c in children[k]) or 1
    out = {}
    for key, i in images.items():
        parent = i.get("parent")
        if parent is None:
            out[key] = "boot"
        elif leaves.get(key, 1) > 1:
            out[key] = "library prefix"
        elif images.get(parent, {}).get("parent") is None or leaves.get(parent, 1) > 1:
            out[key] = "file head"
        else:
            out[key] = "chain image"
    return out


# A plan's check, as OUT/plan.json lists it (runner/planning/planner.py), as far as
# the report reads it.
PLANNED = pa.struct([("problem_id", pa.string()), ("attempt", pa.int32()),
                     ("expected_s", pa.float64()), ("source", pa.string())])


def epoch_secs(column) -> pa.ChunkedArray:
    """A timestamp column as epoch seconds, the float datetime.timestamp()
    gives: microseconds (exact in a double) divided by 10**6."""
    return pc.divide(pc.cast(column, pa.int64()), 1e6)


def _spans(table: pa.Table) -> pa.ChunkedArray:
    """Each check's span, dispatch to verdict, in seconds (never negative)."""
    return pc.max_element_wise(pc.subtract(epoch_secs(table["finished_at"]),
                                           epoch_secs(table["started_at"])), 0.0)


def _total(values) -> float:
    return pc.sum(values).as_py() or 0.0


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
    manifest = read_sweep_manifest(out)
    scan = shards.scan(out, repair=False, columns=COLUMNS)
    # A shard cut short (a crash without fsync, a full disk, a bad copy)
    # holds checks the report would silently lack: name it.
    if bad := [p for p in scan.unreadable if p.exists()]:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise InputError(bad[0], f"is truncated or not Parquet{more}, so its checks would be "
                         "missing from the report", "rerun the sweep's `proofbatch run` command (same "
                         "--out): it moves unreadable shards to shards/quarantine/ and checks "
                         "them again; or restore the shard from a copy")
    table = scan.done.table.select(list(COLUMNS))
    builds = read_builds(out)
    plan = None
    if (out / PLAN_FILE).is_file():
        try:
            plan = json.loads((out / PLAN_FILE).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            plan = None                      # a report without the prediction beats none
        if not isinstance(plan, dict) or not isinstance(plan.get("checks", []), list):
            plan = None
    runs = _runs(table, builds, manifest)
    return SweepReport(out, manifest, table, runs, builds, _split(table, builds, runs), plan)


def _runs(table: pa.Table, builds: list[dict], manifest: dict) -> list[Run]:
    # In order of each run's first row, as the runs are sorted stably by start.
    per_run = table.group_by("run_id", use_threads=False).aggregate([
        ("started_at", "min"), ("finished_at", "max"),
        ("worker", "count_distinct", pc.CountOptions(mode="all"))])
    configured = int((manifest.get("config") or {}).get("workers") or 1)
    runs = []
    for run_id, start, end, workers in zip(*(per_run[c].to_pylist() for c in (
            "run_id", "started_at_min", "finished_at_max", "worker_count_distinct"))):
        boot = sum(b["secs"] for b in builds if b["run_id"] == run_id and b.get("parent") is None)
        runs.append(Run(run_id, max(configured, workers), boot, start.timestamp(), end.timestamp()))
    return sorted(runs, key=lambda r: r.start)


def _split(table: pa.Table, builds: list[dict], runs: list[Run]) -> dict[str, float]:
    seconds = dict.fromkeys(PARTS, 0.0)
    span = _spans(table)
    # Rows written before wait_secs was recorded count their waits as overhead.
    wait = pc.min_element_wise(pc.fill_null(table["wait_secs"], 0.0), span)
    waited = _total(wait)
    checking = pc.subtract(span, wait)
    for verdict in WASTED:
        seconds[verdict] = _total(checking.filter(pc.equal(table["verdict"], verdict)))
    useful = pc.invert(pc.is_in(table["verdict"], pa.array(WASTED)))
    proof = pc.fill_null(table["prove_secs"], 0.0).filter(useful)
    seconds["proof"] = _total(proof)
    overhead = _total(pc.max_element_wise(pc.subtract(checking.filter(useful), proof), 0.0))
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
