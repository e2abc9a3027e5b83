"""The family-wise test over the gated metrics: studentized log ratios, max-T over a joint
relabelling of runs (Westfall-Young), power at the measured noise.

Per gated metric k, on the log scale oriented so that positive is worse:
    worse_k = mean log(baseline) - mean log(candidate)   (higher-is-better metrics)
    margin_k = -log(1 - tolerance_k)
    t_k = (worse_k - margin_k) / se_k
Paired runs (interleaved: run j of each side back to back) use the within-pair log ratios
(paired t); unpaired runs use Welch's standard error.

The threshold comes from max_k t_k under joint relabelling with each metric at its margin:
paired runs flip the sign of each pair's differences, unpaired runs permute labels between the
sides. Relabelling whole runs keeps the metrics' correlation (cheaper than Bonferroni) and keeps
the level exact at small n, where the percentile bootstrap over-refuses.

adjusted p_k = P(max relabelled t >= observed t_k): the family false-alarm probability of
refusing on this evidence. A metric is a REGRESSION when it is at most 1 - confidence. With n
runs the smallest reachable p is 1/2^n: below the goal no refusal is possible, and the gate says
how many runs would be.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

# All relabellings are enumerated up to this many; beyond, a seeded random sample of them.
MAX_EXACT = 4096
RANDOM_RELABELLINGS = 4000


@dataclass(frozen=True)
class FamilyInput:
    """The gated metrics' per-run log values, oriented so that larger is better.

    paired: rows of `baseline` and `candidate` are the same pairs (same shape). Unpaired: rows
    are runs of each side. Columns are metrics; margins are -log(1 - tolerance) per column.
    """

    baseline: NDArray[np.float64]
    candidate: NDArray[np.float64]
    margins: NDArray[np.float64]
    paired: bool


@dataclass(frozen=True)
class MetricTest:
    worse: float  # log-scale regression estimate (positive: candidate worse)
    se: float
    df: float
    t: float
    p_family: float  # Westfall-Young adjusted p
    p_single: float  # the same metric alone (its own relabelling distribution)


@dataclass(frozen=True)
class FamilyResult:
    tests: list[MetricTest]
    critical: float  # the (confidence) quantile of the max statistic; inf when unreachable
    relabellings: int
    exact: bool
    paired: bool
    min_p: float  # smallest adjusted p these runs can produce


def _se_paired(diffs: NDArray[np.float64]) -> NDArray[np.float64]:
    """(..., n, k) -> (..., k) standard errors of the mean over axis -2."""
    n = diffs.shape[-2]
    sd = diffs.std(axis=-2, ddof=1)
    se: NDArray[np.float64] = sd / math.sqrt(n)
    return se


def _floor(se: NDArray[np.float64], scale: NDArray[np.float64]) -> NDArray[np.float64]:
    """Identical runs give se 0; a floor relative to the values keeps t finite and ordered."""
    out: NDArray[np.float64] = np.maximum(se, 1e-12 * np.maximum(scale, 1.0))
    return out


def _sign_patterns(n: int, rng: np.random.Generator) -> tuple[NDArray[np.float64], bool]:
    if 2**n <= MAX_EXACT:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)), dtype=np.float64)
        return signs, True
    signs = rng.choice((1.0, -1.0), size=(RANDOM_RELABELLINGS, n))
    signs[0] = 1.0  # the observed labelling is one of them
    return signs, False


def _paired(
    data: FamilyInput, rng: np.random.Generator
) -> tuple[
    NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], bool
]:
    """Observed (worse, se, t) and the relabelled t's (R, k) for paired runs."""
    excess = (data.baseline - data.candidate) - data.margins  # (n, k): worse beyond margin
    n = excess.shape[0]
    worse = (data.baseline - data.candidate).mean(axis=0)
    scale = np.abs(excess).max(axis=0)
    se = _floor(_se_paired(excess), scale)
    t = (worse - data.margins) / se
    signs, exact = _sign_patterns(n, rng)
    flipped = signs[:, :, None] * excess[None, :, :]  # (R, n, k)
    t_star = flipped.mean(axis=1) / _floor(_se_paired(flipped), scale)
    return worse, se, t, t_star, exact


def _welch_se(base: NDArray[np.float64], cand: NDArray[np.float64]) -> NDArray[np.float64]:
    nb, nc = base.shape[-2], cand.shape[-2]
    var: NDArray[np.float64] = base.var(axis=-2, ddof=1) / nb + cand.var(axis=-2, ddof=1) / nc
    se: NDArray[np.float64] = np.sqrt(var)
    return se


def _label_sets(nb: int, nc: int, rng: np.random.Generator) -> tuple[NDArray[np.int64], bool]:
    """Rows: which of the pooled runs go to the baseline side."""
    total = nb + nc
    if math.comb(total, nb) <= MAX_EXACT:
        sets = np.array(list(itertools.combinations(range(total), nb)), dtype=np.int64)
        return sets, True
    sets = np.array(
        [np.sort(rng.permutation(total)[:nb]) for _ in range(RANDOM_RELABELLINGS)], dtype=np.int64
    )
    sets[0] = np.arange(nb)
    return sets, False


def _unpaired(
    data: FamilyInput, rng: np.random.Generator
) -> tuple[
    NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], bool
]:
    base, cand = data.baseline, data.candidate
    nb, nc = base.shape[0], cand.shape[0]
    worse = base.mean(axis=0) - cand.mean(axis=0)
    scale = np.abs(np.concatenate([base, cand])).max(axis=0)
    se = _floor(_welch_se(base, cand), scale)
    t = (worse - data.margins) / se
    # At the null boundary the candidate, lifted by its margin, is the baseline's equal.
    pooled = np.concatenate([base, cand + data.margins])  # (nb + nc, k)
    sets, exact = _label_sets(nb, nc, rng)
    mask = np.zeros((sets.shape[0], nb + nc), dtype=bool)
    np.put_along_axis(mask, sets, True, axis=1)
    b_idx = np.nonzero(mask)[1].reshape(sets.shape[0], nb)
    c_idx = np.nonzero(~mask)[1].reshape(sets.shape[0], nc)
    b_star, c_star = pooled[b_idx], pooled[c_idx]  # (R, nb, k), (R, nc, k)
    diff = b_star.mean(axis=1) - c_star.mean(axis=1)
    t_star = diff / _floor(_welch_se(b_star, c_star), scale)
    return worse, se, t, t_star, exact


def _welch_df(base: NDArray[np.float64], cand: NDArray[np.float64]) -> NDArray[np.float64]:
    vb = base.var(axis=0, ddof=1) / base.shape[0]
    vc = cand.var(axis=0, ddof=1) / cand.shape[0]
    num = (vb + vc) ** 2
    den = vb**2 / (base.shape[0] - 1) + vc**2 / (cand.shape[0] - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(den > 0, num / np.where(den > 0, den, 1.0), base.shape[0] + cand.shape[0] - 2)
    out: NDArray[np.float64] = np.asarray(df, dtype=np.float64)
    return out


def family_test(data: FamilyInput, confidence: float, rng: np.random.Generator) -> FamilyResult:
    """Westfall-Young single-step max-T over the gated metrics (columns)."""
    if data.paired:
        worse, se, t, t_star, exact = _paired(data, rng)
        df = np.full(t.shape, data.baseline.shape[0] - 1, dtype=np.float64)
    else:
        worse, se, t, t_star, exact = _unpaired(data, rng)
        df = _welch_df(data.baseline, data.candidate)
    max_star = t_star.max(axis=1)  # (R,)
    count = int(max_star.shape[0])

    # Exact enumeration: p = #{max* >= t} / R (the identity is among them). Random: (1 + #)/(1 + R).
    def p_of(stat: float, dist: NDArray[np.float64]) -> float:
        hits = int(np.count_nonzero(dist >= stat - 1e-12))
        return float(hits / count if exact else (1 + hits) / (1 + count))

    tests = [
        MetricTest(
            worse=float(worse[k]),
            se=float(se[k]),
            df=float(df[k]),
            t=float(t[k]),
            p_family=p_of(float(t[k]), max_star),
            p_single=p_of(float(t[k]), t_star[:, k]),
        )
        for k in range(t.shape[0])
    ]
    alpha = 1 - confidence
    min_p = 1 / count if exact else 1 / (1 + count)
    critical = float(np.quantile(max_star, confidence)) if min_p <= alpha else math.inf
    return FamilyResult(tests, critical, count, exact, data.paired, min_p)


def detectable(se: float, margin: float, critical: float, power: float = 0.95) -> float:
    """Smallest regression (fraction) refused with `power` at this noise: the margin plus
    (critical + z_power) standard errors, on the log scale, as a fraction. inf when the runs
    cannot reach the goal at all."""
    if not math.isfinite(critical):
        return math.inf
    log_worse = margin + (critical + NormalDist().inv_cdf(power)) * se
    return 1 - math.exp(-log_worse)


def runs_to_decide(test: MetricTest, n: int, margin: float, critical_z: float) -> int | None:
    """About how many runs a side would make this metric's evidence decisive at the family
    goal, at the same effect and noise (t grows with sqrt(n)); None when the effect is within
    the margin (more runs would make it SAME, not REGRESSION)."""
    excess = test.worse - margin
    if excess <= 0 or test.se <= 0:
        return None
    sd_one = test.se * math.sqrt(n)
    return max(n + 1, math.ceil((critical_z * sd_one / excess) ** 2))


def normal_family_critical(confidence: float, metrics: int) -> float:
    """The one-sided critical z of `metrics` independent tests at family level 1 - confidence
    (Sidak): the worst case of the max statistic, used only to size runs to come."""
    per_metric = 1 - confidence ** (1 / max(metrics, 1))
    return NormalDist().inv_cdf(1 - per_metric)


def low_noise_bound(se: float, df: float, level: float = 0.90) -> float:
    """The standard error at the lower `level` confidence bound of the noise: a CV from 8 runs
    is itself uncertain (about +-25%). UNDERPOWERED is said when even this bound cannot see the
    target regression, so a healthy gate at its design noise does not cry blind by chance."""
    if df < 1:
        return se
    z = NormalDist().inv_cdf(level)
    chi2 = df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3  # Wilson-Hilferty
    return se * math.sqrt(df / chi2)
