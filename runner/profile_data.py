"""What a profile measured about one problem: the data that timeout maps,
memory needs and plans are derived from.

A profile (``proofbatch profile``) runs each ground-truth proof several times;
``runner.profile.load_profile`` reads one back as a list of ProblemRuns. The
derivations take this type only, so they are tested on synthetic profiles.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProblemRuns:
    problem_id: str
    category: str
    prove_secs: tuple[float, ...]       # one per run, measured inside the prover
    peak_rss_mb: tuple[float, ...] = ()  # one per run where it was measured
    wall_secs: tuple[float, ...] = ()    # dispatch to verdict, one per run
    image_key: str = ""                  # the loaded context the check forked from

    def __post_init__(self):
        if not self.prove_secs:
            raise ValueError(f"{self.problem_id}: a profiled problem needs at least one run")
