"""One value per validation run: the unit the gate's noise estimate and resampling work on.

Several samples of a metric within one run share its server start, warm-up and host state, so
counting them as runs understates the run-to-run noise: the gate averages a run's repeats into
one value and counts runs. Which run a sample came from: the record's `sample_runs`; for older
records, one sample per run when the counts agree, or equal contiguous blocks when every run
reported the same number; otherwise unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PerRun:
    """A metric's value per run (run index -> mean of that run's samples)."""

    values: dict[int, float]
    samples: int

    @property
    def n(self) -> int:
        return len(self.values)


def run_indices(samples: list[float], runs: int, recorded: list[int] | None) -> list[int] | None:
    """Each sample's run index, or None when it cannot be told."""
    if recorded is not None and len(recorded) == len(samples):
        return list(recorded)
    if len(samples) == runs or runs <= 1:
        return list(range(len(samples))) if len(samples) == runs else [0] * len(samples)
    if runs > 0 and len(samples) % runs == 0:
        block = len(samples) // runs
        return [i // block for i in range(len(samples))]
    return None


def per_run(samples: list[float], runs: int, recorded: list[int] | None) -> PerRun | None:
    """The metric's value per run; None when the samples cannot be attributed to runs."""
    idx = run_indices(samples, runs, recorded)
    if idx is None:
        return None
    grouped: dict[int, list[float]] = {}
    for i, v in zip(idx, samples, strict=True):
        grouped.setdefault(i, []).append(v)
    return PerRun({i: float(np.mean(v)) for i, v in sorted(grouped.items())}, len(samples))
