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
  degrees of freedom borrows the pooled sigma of all problems ("all").
- The next run of a problem then lies below ``mean + t(df, 1-p) * sigma *
  sqrt(1 + 1/n)`` with probability 1 - p: the Student t prediction bound.

Each band also keeps its empirical max/min ratios, so that a reader of the
sidecar can see whether the model fits what was measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from .profile_data import ProblemRuns

# Upper edges of the runtime bands, in seconds of median prove time.
BAND_EDGES = (1.0, 10.0, 60.0, 600.0, 3600.0)
BAND_NAMES = ("<1s", "1-10s", "10-60s", "1-10min", "10-60min", ">1h")


def band_of(median_s: float) -> str:
    return BAND_NAMES[int(np.searchsorted(BAND_EDGES, median_s, side="right"))]


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
    """Pooled spread by band. ``predict`` and ``exceedance`` are vectorised."""

    bands: dict[str, Band]
    resolution_s: float

    def _params(self, runs: Sequence[ProblemRuns]):
        logs = [np.log(np.maximum(np.asarray(r.prove_secs, float), self.resolution_s)) for r in runs]
        mean = np.array([x.mean() for x in logs])
        n = np.array([len(x) for x in logs], float)
        band = [self.bands[band_of(float(np.median(r.prove_secs)))] for r in runs]
        sigma = np.array([b.sigma if b.sigma is not None else np.nan for b in band])
        df = np.array([b.df if b.sigma_from != "all" else self.bands["all"].df for b in band], float)
        scale = sigma * np.sqrt(1.0 + 1.0 / n)
        return mean, scale, df

    def predict(self, runs: Sequence[ProblemRuns], p: float) -> np.ndarray:
        """Per problem, the time that a correct run exceeds with probability
        ``p`` (NaN where the model has no spread)."""
        mean, scale, df = self._params(runs)
        with np.errstate(invalid="ignore"):
            return np.exp(mean + stats.t.isf(p, np.maximum(df, 1)) * scale)

    def exceedance(self, runs: Sequence[ProblemRuns], limits: Sequence[float]) -> np.ndarray:
        """Per problem, the probability that a correct run exceeds its limit."""
        mean, scale, df = self._params(runs)
        with np.errstate(invalid="ignore", divide="ignore"):
            z = (np.log(np.asarray(limits, float)) - mean) / scale
            return stats.t.sf(z, np.maximum(df, 1))


def fit(runs: Sequence[ProblemRuns], *, resolution_s: float, min_df: int,
        meaningful_s: float) -> SpreadModel:
    """Pool the spread of ``runs`` by band; bands under ``min_df`` borrow the
    pooled spread of all problems whose median reaches ``meaningful_s`` (if
    those have ``min_df``; else of all problems): a proof of 2 ms that once
    took 4 ms shows the clock's resolution, not a proof's spread."""
    groups: dict[str, list[ProblemRuns]] = {name: [] for name in BAND_NAMES}
    for r in runs:
        groups[band_of(float(np.median(r.prove_secs)))].append(r)

    def pooled(members: Sequence[ProblemRuns]) -> tuple[int, float | None]:
        ss, df = 0.0, 0
        for r in members:
            x = np.log(np.maximum(np.asarray(r.prove_secs, float), resolution_s))
            ss += float(((x - x.mean()) ** 2).sum())
            df += len(x) - 1
        return df, (math.sqrt(ss / df) if df else None)

    def ratios(members: Sequence[ProblemRuns]) -> dict:
        r = np.array([max(m.prove_secs) / max(min(m.prove_secs), resolution_s)
                      for m in members if len(m.prove_secs) > 1])
        if not len(r):
            return {}
        return {"p50": float(np.quantile(r, 0.5)), "p90": float(np.quantile(r, 0.9)),
                "p99": float(np.quantile(r, 0.99)), "max": float(r.max())}

    lenders = [r for r in runs if float(np.median(r.prove_secs)) >= meaningful_s]
    all_df, all_sigma = pooled(lenders)
    if all_df < min_df:
        lenders = list(runs)
        all_df, all_sigma = pooled(lenders)
    bands = {"all": Band("all", len(lenders), all_df, all_sigma, "all", ratios(lenders))}
    for name, members in groups.items():
        df, sigma = pooled(members)
        if df >= min_df:
            bands[name] = Band(name, len(members), df, sigma, name, ratios(members))
        else:
            bands[name] = Band(name, len(members), df, all_sigma, "all", ratios(members))
    return SpreadModel(bands, resolution_s)
