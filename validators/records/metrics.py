"""Metric names, the direction that is "better", and the concurrency they were measured at.

Records hold metrics as `{key: [samples...]}`, one sample per repeated run. A key is a
bench_serving field name (`output_throughput`, `mean_ttft_ms`, `p99_itl_ms`, ...), optionally
suffixed with the concurrency it was measured at: `output_throughput@c16`. Keeping the key a
plain string keeps records diffable in git and lets any benchmark add metrics without a
schema change. The check that measured it prefixes the name (`serve-bench.sweep/mean_ttft_ms@c4`)
so two checks reporting the same field name never mix their samples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Direction = Literal["higher", "lower", "none"]

_KEY_RE = re.compile(r"^(?:(?P<scope>[^/]+)/)?(?P<name>[^/@]+?)(?:@c(?P<conc>\d+))?$")

# bench_serving names its throughputs *_throughput and its latencies *_ms; single-stream decode
# is tok/s. Accuracy-like scores are better when higher.
_HIGHER_SUFFIXES = (
    "throughput",
    "tok_s",
    "_per_s",
    "accuracy",
    "exact_match",
    "score",
    "accept_length",
    "agreement",
)
_LOWER_SUFFIXES = ("_ms", "_us", "_s", "latency")
# Counters that describe the run rather than judge it.
_NEUTRAL = frozenset(
    {
        "completed",
        "duration",
        "total_input_tokens",
        "total_output_tokens",
        "concurrency",
        "max_concurrent_requests",
        "request_rate",
        "max_concurrency",
    }
)


@dataclass(frozen=True)
class MetricKey:
    name: str
    concurrency: int | None = None
    scope: str | None = None

    def __str__(self) -> str:
        text = self.name if self.scope is None else f"{self.scope}/{self.name}"
        return text if self.concurrency is None else f"{text}@c{self.concurrency}"

    @property
    def series(self) -> str:
        """The key without its concurrency: one line of a throughput-vs-concurrency plot."""
        return self.name if self.scope is None else f"{self.scope}/{self.name}"


def metric_key(name: str, concurrency: int | None = None, scope: str | None = None) -> str:
    return str(MetricKey(name, concurrency, scope))


def parse_metric_key(key: str) -> MetricKey:
    match = _KEY_RE.match(key)
    if match is None:
        return MetricKey(key)
    conc = match["conc"]
    return MetricKey(match["name"], int(conc) if conc is not None else None, match["scope"])


def direction(key: str) -> Direction:
    """Which way is better for this metric ('none': reported, never gated)."""
    return _name_direction(parse_metric_key(key).name)


def key_and_direction(name: str, concurrency: int | None, scope: str) -> tuple[str, Direction]:
    """The key a measurement is filed under and the direction the gate reads for it: one
    call per measurement (records/extract.py)."""
    return metric_key(name, concurrency, scope), _name_direction(name)


def _name_direction(field: str) -> Direction:
    name = field.lower()
    if name in _NEUTRAL or name.startswith("std_") or name.endswith("_tokens"):
        # A standard deviation is noise, not performance; token totals count work, not speed.
        return "none"
    if name.endswith(_HIGHER_SUFFIXES):
        return "higher"
    if name.endswith(_LOWER_SUFFIXES):
        return "lower"
    return "none"
