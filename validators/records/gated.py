"""Which metrics a gate judges, declared per serving profile, and how; a record stores the
answer for each of its metrics when it is written (`MetricFacts`).

A serving benchmark reports dozens of numbers per level, most fixed multiples of each other
(request, input, output and total throughput; mean TPOT and mean ITL); counting each as
evidence multiplies the chances that noise refuses an equal candidate. So the gate judges a
short declared list, each entry with its direction and tolerance class written down (never read
off the name), and reports every other metric as ungated.

Tolerance classes:
- "main": throughput, medians, single-stream decode; judged at the main tolerance and required
  to see the policy's target regression (else UNDERPOWERED instead of PASS).
- "tail": p99 latencies, several times noisier; judged at the tail tolerance, which catches
  gross tail regressions but is not sized for the target regression.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from stackgate.model import StrictModel
from validators.records.metrics import Direction, direction

ToleranceClass = Literal["main", "tail"]


@dataclass(frozen=True)
class GatedMetric:
    """One declared gated metric: a key pattern (fnmatch, `*` for the concurrency level)."""

    pattern: str
    direction: Literal["higher", "lower"]
    tolerance_class: ToleranceClass

    def matches(self, key: str) -> bool:
        return fnmatchcase(key, self.pattern)


# The serving profile: per level output throughput (the GPU's work rate) and median TPOT (decode
# step time), single-stream decode, and median and p99 TTFT (queueing; a scheduler knob shows
# there first) as tail-class guards: TTFT depends on how a level's burst splits into prefill
# batches, too noisy for the main tolerance (benchmarks/gate/results).
SERVING_PROFILE: tuple[GatedMetric, ...] = (
    GatedMetric("serve-bench.sweep/output_throughput@c*", "higher", "main"),
    GatedMetric("serve-bench.sweep/median_ttft_ms@c*", "lower", "tail"),
    GatedMetric("serve-bench.sweep/median_tpot_ms@c*", "lower", "main"),
    GatedMetric("serve-bench.sweep/p99_ttft_ms@c*", "lower", "tail"),
    GatedMetric("serve-bench.single_stream/single_stream_decode_tok_s", "higher", "main"),
)


def declared(key: str, profile: tuple[GatedMetric, ...]) -> GatedMetric | None:
    """The profile's entry for `key` (the first that matches), None when the key is ungated."""
    for entry in profile:
        if entry.matches(key):
            return entry
    return None


class MetricFacts(StrictModel):
    """Which way is better for a metric, and its tolerance class (None: ungated, shown only)."""

    direction: Direction
    tolerance_class: ToleranceClass | None = None


def facts_for(key: str, profile: tuple[GatedMetric, ...] = SERVING_PROFILE) -> MetricFacts:
    """The one place a metric's facts are derived (records store them when written): a gated
    metric's from its declaration, an ungated one's direction from its name."""
    entry = declared(key, profile)
    if entry is None:
        return MetricFacts(direction=direction(key))
    return MetricFacts(direction=entry.direction, tolerance_class=entry.tolerance_class)
