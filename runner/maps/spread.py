"""Run-to-run spread, pooled across problems, for margins that meet a target
probability of a false timeout.

Three runs of one problem say little about that problem's spread: the chance
that a fourth run exceeds 2 x the largest of three is unknowable from three
numbers. But the noise of a proof's run time (scheduling, garbage collection,
memory pressure) is largely relative and shared by problems of similar cost.
So we pool it:

- A problem's log run times are modelled as its own mean plus noise with a
  standard deviation sigma shared by every problem in its runtime *band*
  (the bands of ../shared/notes/workload-and-anchors.md: under 1 s, 1-10 s,
  10-60 s, 1-10 min, 10-60 min, over an hour).
- sigma is the pooled within-problem estimate: the sum of squared deviations
  from each problem's mean, over the sum of (runs - 1). A band with too few
  degrees of freedom borrows the pooled sigma of all problems of a second or
  more ("all").
- The next run of a problem then lies below ``mean + t(df, 1-p) * sigma *
  sqrt(1 + 1/n)`` with probability 1 - p: the Student t prediction bound.

Each band also keeps its empirical max/min ratios, so that a reader of the
sidecar can see whether the model fits what was measured.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from .profile_data import ProblemRuns

# Upper edges of the runtime bands, in seconds of median prove time.
BAND_EDGES = (1.0, 10.0, 60.0, 600.0, 3600.0)
BAND_NAMES = ("<1s", "1-10s", "10-60s", "1-10min", "10-60min", ">1h")


def band_index(median_s: np.ndarray) -> np.ndarray:
    return np.searchsorted(BAND_EDGES, median_s, side="right")


@dataclass(frozen=True)
class RunStats:
    """Per-problem summaries of the runs, as flat arrays (one pass in Python,
    the rest vectorised: 100,000 problems take well under a second)."""

    n: np.ndarray            # runs
    mean_log: np.ndarray     # mean of log run time
    ss_log: np.ndarray       # sum of squared deviations of log run time
    median: np.ndarray
    ratio: np.ndarray        # max / min

    @classmethod
    def of(cls, runs: Sequence[ProblemRuns], resolution_s: float) -> "RunStats":
        n, mean, ss, med, ratio = [], [], [], [], []
        log, floor = math.log, resolution_s
        for r in runs:
            times = r.prove_secs
            logs = [log(t if t > floor else floor) for t in times]
            m = sum(logs) / len(logs)
            n.append(len(logs))
            mean.append(m)
            ss.append(sum((x - m) ** 2 for x in logs))
            med.append(statistics.median(times))
            ratio.append(max(times) / max(min(times), floor))
        return cls(np.array(n, float), np.array(mean), np.array(ss), np.array(med), np.array(ratio))


@dataclass(frozen=True)
class Band:
    name: str
    problems: int
    df: int                      # pooled degrees of freedom: sum of (runs - 1)
    sigma: float | None          # pooled sd of log run time; None without df
    sigma_from: str              # the band itself, or "all" when it borrowed
    ratio_quantiles: dict        # empirical max/min over the band's problems

    def as_dict(self) -> dict:
        return {"name": self.name, "problems": self.problems, "df": self.df, "sigma": self.sigma,
                "sigma_from": self.sigma_from, "max_over_min": self.ratio_quantiles}


@dataclass(frozen=True)
class SpreadModel:
    """Pooled spread by band, applied to the problems it was fitted on."""

    bands: dict[str, Band]
    stats: RunStats

    def _params(self):
        used = [self.bands[name] for name in BAND_NAMES]
        sigma = np.array([b.sigma if b.sigma is not None else np.nan for b in used])
        df = np.array([b.df if b.sigma_from != "all" else self.bands["all"].df for b in used], float)
        i = band_index(self.stats.median)
        return self.stats.mean_log, sigma[i] * np.sqrt(1.0 + 1.0 / self.stats.n), np.maximum(df[i], 1)

    def predict(self, p: float) -> np.ndarray:
        """Per problem, the time that a correct run exceeds with probability
        ``p`` (NaN where the model has no spread)."""
        mean, scale, df = self._params()
        with np.errstate(invalid="ignore"):
            return np.exp(mean + stats.t.isf(p, df) * scale)

    def exceedance(self, limits: Sequence[float]) -> np.ndarray:
        """Per problem, the probability that a correct run exceeds its limit."""
        mean, scale, df = self._params()
        with np.errstate(invalid="ignore", divide="ignore"):
            return stats.t.sf((np.log(np.asarray(limits, float)) - mean) / scale, df)


def fit(runs: Sequence[ProblemRuns], *, resolution_s: float, min_df: int,
        meaningful_s: float) -> SpreadModel:
    """Pool the spread of ``runs`` by band; bands under ``min_df`` borrow the
    pooled spread of all problems whose median reaches ``meaningful_s``, with
    its own (few) degrees of freedom, so the t quantile widens as it should:
    a proof of 2 ms that once took 4 ms shows the clock's resolution, not a
    proof's spread. Only when no such problem has two runs do all lend."""
    st = RunStats.of(runs, resolution_s)
    band = band_index(st.median)

    def pooled(mask: np.ndarray) -> tuple[int, float | None]:
        df = int((st.n[mask] - 1).sum())
        return df, (math.sqrt(float(st.ss_log[mask].sum()) / df) if df else None)

    def ratios(mask: np.ndarray) -> dict:
        r = st.ratio[mask & (st.n > 1)]
        if not len(r):
            return {}
        q = np.quantile(r, [0.5, 0.9, 0.99])
        return {"p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2]), "max": float(r.max())}

    lenders = st.median >= meaningful_s
    all_df, all_sigma = pooled(lenders)
    if all_df == 0:
        lenders = np.ones(len(st.n), bool)
        all_df, all_sigma = pooled(lenders)
    bands = {"all": Band("all", int(lenders.sum()), all_df, all_sigma, "all", ratios(lenders))}
    for i, name in enumerate(BAND_NAMES):
        mask = band == i
        df, sigma = pooled(mask)
        own = df >= min_df
        bands[name] = Band(name, int(mask.sum()), df, sigma if own else all_sigma,
                           name if own else "all", ratios(mask))
    return SpreadModel(bands, st)
