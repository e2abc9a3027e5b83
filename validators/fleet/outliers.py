"""Lemons: nodes of one host class whose numbers sit outside their peers' beyond the noise.

Per metric, over the nodes of one class (each node's value is the mean of its runs):
- centre  = median of the node values;
- spread  = 1.4826 x MAD relative to the centre (robust: up to half the class cannot widen it);
- within  = median over nodes of (run-to-run CV / sqrt(runs)): one node's noise, this run;
- a node is a lemon on the metric when it is worse than the centre by more than
  max(Z x max(spread, within), MIN_EFFECT).

Z = 4 because a fleet run judges thousands of node-metrics at once (a one-sided 4-sigma tail
flags about one healthy node in ten runs); MIN_EFFECT = 1% so that on a very quiet metric a
node slower by less is not worth pulling (benchmarks/fleet/fleet_lemons.py measures both).
"""

from __future__ import annotations

import fnmatch
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from validators.records.metrics import direction

DEFAULT_Z = 4.0
MIN_EFFECT = 0.01
MIN_PEERS = 5
MAD_TO_SD = 1.4826
# The numbers a sick node shows first: decode speed (clocks, thermals, PCIe width), serving
# throughput, and the NCCL all-reduce latency of the decode-sized message (a bad link).
LEMON_METRICS = ("*decode_tok_s*", "*output_throughput*", "*allreduce*_us*")


@dataclass(frozen=True)
class Outlier:
    node: str
    metric: str
    value: float
    centre: float
    worse_by: float  # relative: 0.05 = 5% worse than the class centre
    threshold: float


@dataclass(frozen=True)
class MetricNoise:
    metric: str
    nodes: int
    centre: float
    spread: float
    within: float
    threshold: float


def lemon_metric(key: str, patterns: Sequence[str] = LEMON_METRICS) -> bool:
    return direction(key) != "none" and any(fnmatch.fnmatch(key, p) for p in patterns)


def _cv_of_mean(s: Sequence[float]) -> float | None:
    """Run-to-run CV over sqrt(runs); floats, not statistics.stdev's exact fractions (which
    are slow at a large fleet's size)."""
    if len(s) < 2:
        return None
    mean = math.fsum(s) / len(s)
    if mean == 0:
        return None
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in s) / (len(s) - 1))
    return sd / abs(mean) / math.sqrt(len(s))


def _within(series: Sequence[Sequence[float]]) -> float:
    noise = [cv for cv in map(_cv_of_mean, series) if cv is not None]
    return statistics.median(noise) if noise else 0.0


def judge_metric(
    metric: str,
    samples: Mapping[str, Sequence[float]],
    *,
    z: float = DEFAULT_Z,
    min_effect: float = MIN_EFFECT,
) -> tuple[MetricNoise, list[Outlier]]:
    """One metric over one class: its noise and the nodes beyond it (worst first)."""
    values = {node: statistics.fmean(s) for node, s in samples.items() if s}
    centre = statistics.median(values.values())
    if centre == 0:
        return MetricNoise(metric, len(values), centre, 0.0, 0.0, math.inf), []
    relative = {node: v / centre - 1.0 for node, v in values.items()}
    mid = statistics.median(relative.values())
    spread = MAD_TO_SD * statistics.median(abs(r - mid) for r in relative.values())
    within = _within([s for s in samples.values() if s])
    threshold = max(z * max(spread, within), min_effect)
    sign = -1.0 if direction(metric) == "higher" else 1.0
    found = [
        Outlier(node, metric, values[node], centre, sign * r, threshold)
        for node, r in relative.items()
        if sign * r > threshold
    ]
    found.sort(key=lambda o: -o.worse_by)
    return MetricNoise(metric, len(values), centre, spread, within, threshold), found


def find_lemons(
    nodes: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    patterns: Sequence[str] = LEMON_METRICS,
    z: float = DEFAULT_Z,
    min_effect: float = MIN_EFFECT,
    min_peers: int = MIN_PEERS,
) -> tuple[list[MetricNoise], list[Outlier]]:
    """Every lemon metric of one class ({node: {metric: run samples}}); too few peers: none."""
    keys = {m for per in nodes.values() for m in per}  # each name matched once, not per node
    metrics = sorted(m for m in keys if lemon_metric(m, patterns))
    noise: list[MetricNoise] = []
    outliers: list[Outlier] = []
    for metric in metrics:
        samples = {n: per[metric] for n, per in nodes.items() if per.get(metric)}
        if len(samples) < min_peers:
            continue
        judged, found = judge_metric(metric, samples, z=z, min_effect=min_effect)
        noise.append(judged)
        outliers.extend(found)
    return noise, outliers
