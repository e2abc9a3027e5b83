"""The gate's decision rule and its defaults, chosen from the simulation, not from taste.

`benchmarks/gate/gate_power.py` simulates the gate at the run-to-run noise measured on real
serving runs and prints power (a 3% regression caught) and false-alarm rate (an equal
candidate refused) for every (repeats, tolerance, confidence). Its results
(`benchmarks/gate/results/gate_power.md`) are where these numbers come from; rerun it and change
them together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist

from validators.records.gated import SERVING_PROFILE, GatedMetric, MetricFacts, declared, facts_for
from validators.records.metrics import parse_metric_key

# family.py's rule: an equal candidate is refused with probability <= 1 - confidence over all
# gated metrics together; the tolerance is a margin below which a change is not worth refusing
# (benchmarks/gate/gate_family_sim.py measures false alarms and power with the gate's code).
DEFAULT_TOLERANCE = 0.005
DEFAULT_CONFIDENCE = 0.99
DEFAULT_REPEATS = 8
# Tail latencies (p99) are several times noisier run to run than means and medians: the tail
# class is judged beyond an 8% margin (a gross tail regression, e.g. a queueing knob), not
# sized for the target regression.
DEFAULT_TAIL_TOLERANCE = 0.08

# The regression every main-class gated metric must see with 95% power at the measured noise,
# else UNDERPOWERED instead of PASSED; a wider margin adds to it (GatePolicy.target_for), since
# no number of runs sees a regression inside the margin.
TARGET_REGRESSION = 0.03


@dataclass(frozen=True)
class GatePolicy:
    tolerance: float = DEFAULT_TOLERANCE
    tail_tolerance: float = DEFAULT_TAIL_TOLERANCE
    confidence: float = DEFAULT_CONFIDENCE
    min_repeats: int = DEFAULT_REPEATS
    resamples: int = 4000
    overrides: dict[str, float] = field(default_factory=dict)
    profile: tuple[GatedMetric, ...] = SERVING_PROFILE
    target: float = TARGET_REGRESSION

    def __post_init__(self) -> None:
        if not 0 <= self.tolerance < 1 or not 0 <= self.tail_tolerance < 1:
            raise ValueError("tolerances are fractions in [0, 1)")
        if not 0.5 < self.confidence < 1:
            raise ValueError("confidence must be in (0.5, 1)")
        if self.min_repeats < 2:
            raise ValueError("a noise-aware comparison needs at least 2 runs per side")

    @property
    def family_alpha(self) -> float:
        """The family false-alarm goal: P(an equal candidate is refused) over all gated metrics."""
        return 1 - self.confidence

    def target_for(self, tolerance: float) -> float:
        """The regression a metric judged beyond `tolerance` must catch with 95% power: the
        target at the default margin or tighter; beyond a wider margin (a stack on a noisy host
        declaring 10%), the target moved out by as much (12.5%), so the requirement is on the
        noise, (z_family + z_power) x se <= target - default margin, not on the margin."""
        return self.target + max(0.0, tolerance - DEFAULT_TOLERANCE)

    def gated(self, key: str) -> GatedMetric | None:
        return declared(key, self.profile)

    def tolerance_for(self, key: str, facts: MetricFacts | None = None) -> float:
        """An override by key or name, else the class's tolerance (the record's facts, else the
        profile's; an ungated key: the main one, shown only). Never read off the name:
        `max_output_tokens_per_s` is a throughput, not a tail."""
        name = parse_metric_key(key).name
        if key in self.overrides:
            return self.overrides[key]
        if name in self.overrides:
            return self.overrides[name]
        if (facts or facts_for(key, self.profile)).tolerance_class == "tail":
            return self.tail_tolerance
        return self.tolerance


def detectable_regression(
    cv_baseline: float | None,
    cv_candidate: float | None,
    n_baseline: int,
    n_candidate: int,
    tolerance: float,
    confidence: float,
    power: float = 0.95,
    *,
    sure: bool = False,
) -> float | None:
    """Smallest regression (fraction) caught with `power` at this noise (normal approximation).

    Shown beside each metric so a gate that cannot see the target regression says so instead of
    passing quietly; None when the noise is unknown (fewer than two runs on a side). The noise is
    the pooled CV of both sides; a CV from few runs is itself uncertain, so `sure=True` uses its
    lower 90% confidence bound, so the warning never fires on a healthy gate at its design noise.
    """
    known = [(cv, n) for cv, n in ((cv_baseline, n_baseline), (cv_candidate, n_candidate))
             if cv is not None and n >= 2]  # fmt: skip
    if not known:
        return None
    dof = sum(n - 1 for _, n in known)
    pooled = math.sqrt(sum(cv**2 * (n - 1) for cv, n in known) / dof)
    if sure:
        pooled *= math.sqrt(dof / _chi2_quantile(0.90, dof))
    # The percentile bootstrap sees the plug-in variance, (n-1)/n of the unbiased one.
    se = pooled * math.sqrt((n_baseline - 1) / n_baseline**2 + (n_candidate - 1) / n_candidate**2)
    z_conf = _z(confidence)
    z_power = _z(power)
    return tolerance + (z_conf + z_power) * se


def _chi2_quantile(p: float, dof: int) -> float:
    """Wilson-Hilferty approximation of the chi-square quantile (no scipy for one number)."""
    z = _z(p)
    k = float(dof)
    return k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3


def _z(p: float) -> float:
    """The standard normal quantile at p, for every confidence GatePolicy accepts (not a table
    of a few: one answers 1.6449, the 95% value, for 0.8 or 0.97 alike)."""
    return NormalDist().inv_cdf(p)
