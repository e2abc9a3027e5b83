"""The gate's decision rule and its defaults, chosen from the simulation, not from taste.

`benchmarks/gate_power.py` simulates the gate at the run-to-run noise measured on real
serving runs and prints power (a 3% regression caught) and false-alarm rate (an equal
candidate refused) for every (repeats, tolerance, confidence). Its results
(`benchmarks/results/gate_power.md`) are where these numbers come from; rerun it and change
them together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from validators.records.metrics import parse_metric_key

# From benchmarks/results/gate_power.md (see there for the table and the noise it assumes).
DEFAULT_TOLERANCE = 0.01
DEFAULT_CONFIDENCE = 0.95
DEFAULT_REPEATS = 8
# Tail latencies (p99) are several times noisier run to run than means and medians; a p99
# judged at the mean's tolerance would refuse equal candidates. They get their own.
DEFAULT_TAIL_TOLERANCE = 0.05

# The regression the gate is sized to catch (issue 7: a 3% regression, >= 95% of the time).
TARGET_REGRESSION = 0.03

_Z = {0.90: 1.2816, 0.95: 1.6449, 0.975: 1.96, 0.99: 2.3263}


@dataclass(frozen=True)
class GatePolicy:
    tolerance: float = DEFAULT_TOLERANCE
    tail_tolerance: float = DEFAULT_TAIL_TOLERANCE
    confidence: float = DEFAULT_CONFIDENCE
    min_repeats: int = DEFAULT_REPEATS
    resamples: int = 4000
    overrides: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 <= self.tolerance < 1 or not 0 <= self.tail_tolerance < 1:
            raise ValueError("tolerances are fractions in [0, 1)")
        if not 0.5 < self.confidence < 1:
            raise ValueError("confidence must be in (0.5, 1)")
        if self.min_repeats < 2:
            raise ValueError("a noise-aware comparison needs at least 2 runs per side")

    def tolerance_for(self, key: str) -> float:
        name = parse_metric_key(key).name
        if key in self.overrides:
            return self.overrides[key]
        if name in self.overrides:
            return self.overrides[name]
        if name.startswith(("p99_", "p95_", "p90_", "max_")):
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
) -> float | None:
    """Smallest regression (fraction) caught with `power` at this noise (normal approximation).

    Shown beside each metric so a gate that cannot see a 3% regression says so instead of
    passing quietly. None when the noise is unknown (fewer than two runs on a side).
    """
    if cv_baseline is None and cv_candidate is None:
        return None
    cv_b = cv_baseline if cv_baseline is not None else cv_candidate
    cv_c = cv_candidate if cv_candidate is not None else cv_baseline
    assert cv_b is not None and cv_c is not None
    se = math.sqrt(cv_b**2 / n_baseline + cv_c**2 / n_candidate)
    z_conf = _Z.get(round(confidence, 3), 1.6449)
    z_power = _Z.get(round(power, 3), 1.6449)
    return tolerance + (z_conf + z_power) * se
