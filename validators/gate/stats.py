"""Ratio orientation, CV, and the percentile bootstrap of a candidate/baseline ratio of means.

The gate's verdicts come from family.py; the HTML report's charts (reporting.svg.mean_interval)
and the per-metric rule benchmarks/gate/gate_family_sim.py compares against use this.

The ratio is oriented so that < 1 is worse: mean(candidate)/mean(baseline) for higher-is-better
metrics, the inverse otherwise. The interval resamples the two sides' runs independently; the
one-sided bound for a verdict is the `confidence` quantile. With few runs a percentile bootstrap
under-covers (plug-in variance, no t tails): benchmarks/gate/gate_power.py measures the
false-alarm rate at the measured noise and the tolerance is chosen from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from validators.records.metrics import Direction

DEFAULT_RESAMPLES = 4000


@dataclass(frozen=True)
class RatioInterval:
    ratio: float
    low: float
    high: float
    confidence: float
    n_candidate: int
    n_baseline: int


def oriented_ratio(candidate_mean: float, baseline_mean: float, direction: Direction) -> float:
    if direction == "lower":
        return baseline_mean / candidate_mean
    return candidate_mean / baseline_mean


def bootstrap_ratio(
    candidate: NDArray[np.float64] | list[float],
    baseline: NDArray[np.float64] | list[float],
    *,
    direction: Direction,
    confidence: float,
    resamples: int = DEFAULT_RESAMPLES,
    rng: np.random.Generator,
) -> RatioInterval:
    """Ratio of means with a two-sided interval whose each bound is a `confidence` quantile.

    `low` is the (1-confidence) quantile and `high` the confidence quantile, so
    "high < 1 - tolerance" is a one-sided test at level 1 - confidence.
    """
    cand = np.asarray(candidate, dtype=np.float64)
    base = np.asarray(baseline, dtype=np.float64)
    if cand.size == 0 or base.size == 0:
        raise ValueError("both sides need at least one sample")
    if np.any(cand <= 0) or np.any(base <= 0):
        raise ValueError("ratio needs positive samples")
    low, high = batch_bootstrap_bounds(
        cand[None, :],
        base[None, :],
        direction=direction,
        confidence=confidence,
        resamples=resamples,
        rng=rng,
    )
    return RatioInterval(
        ratio=oriented_ratio(float(cand.mean()), float(base.mean()), direction),
        low=float(low[0]),
        high=float(high[0]),
        confidence=confidence,
        n_candidate=int(cand.size),
        n_baseline=int(base.size),
    )


def batch_bootstrap_bounds(
    candidate: NDArray[np.float64],
    baseline: NDArray[np.float64],
    *,
    direction: Direction,
    confidence: float,
    resamples: int,
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Bounds for many comparisons at once: rows are independent (trials, n) arrays.

    Vectorised so the simulation can run thousands of gates; the gate itself calls it with
    one row. Memory is rows x resamples x n doubles per side.
    """
    ratios = resampled_ratios(
        candidate, baseline, direction=direction, resamples=resamples, rng=rng
    )
    low = np.quantile(ratios, 1.0 - confidence, axis=1)
    high = np.quantile(ratios, confidence, axis=1)
    return low, high


def resampled_ratios(
    candidate: NDArray[np.float64],
    baseline: NDArray[np.float64],
    *,
    direction: Direction,
    resamples: int,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """(rows, resamples) oriented ratios of bootstrap means; the one resampling both the gate
    and the simulation use."""
    mean_c = resampled_means(candidate, resamples=resamples, rng=rng)
    mean_b = resampled_means(baseline, resamples=resamples, rng=rng)
    ratios: NDArray[np.float64] = mean_b / mean_c if direction == "lower" else mean_c / mean_b
    return ratios


def resampled_means(
    samples: NDArray[np.float64], *, resamples: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """(rows, resamples) means of bootstrap resamples of each row of a (rows, n) array: the
    gate's resampling, also behind the HTML report's intervals (reporting.svg.mean_interval)."""
    rows, n = samples.shape
    idx = rng.integers(0, n, size=(rows, resamples, n))
    means: NDArray[np.float64] = np.take_along_axis(samples[:, None, :], idx, axis=2).mean(axis=2)
    return means


def coefficient_of_variation(samples: list[float]) -> float | None:
    """Sample CV (ddof=1) of one side's repeated runs; None below two samples."""
    arr = np.asarray(samples, dtype=np.float64)
    if arr.size < 2 or arr.mean() == 0:
        return None
    return float(arr.std(ddof=1) / abs(arr.mean()))
