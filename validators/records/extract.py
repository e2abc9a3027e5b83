"""Pull benchmark numbers, raw samples and golden outputs out of validation reports.

serve-bench results carry bench_serving field names in their evidence. Shapes accepted
(any result, any group; the evidence decides):

- `evidence["metrics"]`: {name: number | [numbers]} for one measurement (a `concurrency` or
  `max_concurrency` key beside it says at which level);
- in the serve-bench group, a result whose evidence has `output_throughput` at the top level
  (validators/serve's single-stream: single_stream_decode_tok_s, median_tpot_ms, ...);
- `evidence["levels"]` (validators/serve's sweep) / `["points"]` / `["runs"]`: a list of bench_serving-like dicts, each with
  its `max_concurrency` (or `concurrency`) and numeric fields;
- raw per-request samples (`ttfts_ms`, `itls_ms`, `e2e_latencies_ms`, or bench_serving's
  `ttfts`/`itls` in seconds) beside them go to distributions, converted to ms;
- correctness checks' `golden_outputs` / `outputs` go to golden outputs.

Several reports (repeated runs) append: each run adds one sample per metric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from validators.records.metrics import metric_key
from validators.results import Report

BENCH_GROUP = "serve-bench"
_POINT_LISTS = ("points", "sweep", "runs", "levels", "results")
# bench_serving --output-details writes per-request samples in seconds.
_RAW_SECONDS = {"ttfts": "ttft_ms", "itls": "itl_ms", "e2e_latencies": "e2e_latency_ms"}
_RAW_MS = {
    "ttfts_ms": "ttft_ms",
    "itls_ms": "itl_ms",
    "e2e_latencies_ms": "e2e_latency_ms",
    "ttft_ms_samples": "ttft_ms",
    "itl_ms_samples": "itl_ms",
    "tpots_ms": "tpot_ms",
}
_GOLDEN_KEYS = ("golden_outputs", "outputs")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _numbers(value: Any) -> list[float] | None:
    single = _number(value)
    if single is not None:
        return [single]
    if isinstance(value, list) and value and all(_number(v) is not None for v in value):
        return [float(v) for v in value]
    return None


def _flatten_raw(value: Any) -> list[float]:
    """Per-request samples; ITLs come as one list per request in bench_serving."""
    out: list[float] = []
    if isinstance(value, list):
        for item in value:
            if isinstance(item, list):
                out.extend(_flatten_raw(item))
            elif (n := _number(item)) is not None:
                out.append(n)
    return out


def _concurrency(block: Mapping[str, Any]) -> int | None:
    for key in ("max_concurrency", "concurrency_level", "concurrency"):
        value = block.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


class RunMetrics:
    """Metrics of one run: {key: samples} and {key: raw per-request samples}."""

    def __init__(self) -> None:
        self.metrics: dict[str, list[float]] = {}
        self.distributions: dict[str, list[float]] = {}
        self.golden: dict[str, Any] = {}

    def _point(self, check: str, block: Mapping[str, Any], conc: int | None) -> None:
        for name, value in block.items():
            if name in _RAW_SECONDS:
                key = metric_key(_RAW_SECONDS[name], conc, check)
                self.distributions.setdefault(key, []).extend(
                    v * 1000.0 for v in _flatten_raw(value)
                )
            elif name in _RAW_MS:
                key = metric_key(_RAW_MS[name], conc, check)
                self.distributions.setdefault(key, []).extend(_flatten_raw(value))
            elif name in ("max_concurrency", "concurrency_level"):
                continue
            elif (nums := _numbers(value)) is not None:
                self.metrics.setdefault(metric_key(name, conc, check), []).extend(nums)

    def add_evidence(self, check: str, group: str, evidence: Mapping[str, Any]) -> None:
        conc = _concurrency(evidence)
        if group == BENCH_GROUP and "output_throughput" in evidence:
            # A benchmark result (single-stream): its numbers sit at the top of the evidence.
            # Other serve-bench results carry pids, HTTP codes and correctness scores there,
            # which the correctness check judges itself.
            top = {k: v for k, v in evidence.items() if _number(v) is not None}
            self._point(check, top, conc)
        metrics = evidence.get("metrics")
        if isinstance(metrics, Mapping):
            self._point(check, metrics, _concurrency(metrics) or conc)
        for list_key in _POINT_LISTS:
            points = evidence.get(list_key)
            if isinstance(points, list):
                for point in points:
                    if isinstance(point, Mapping):
                        inner = point.get("metrics")
                        block = inner if isinstance(inner, Mapping) else point
                        self._point(check, block, _concurrency(point) or _concurrency(block))
        for raw_key in (*_RAW_SECONDS, *_RAW_MS):
            if raw_key in evidence:
                self._point(check, {raw_key: evidence[raw_key]}, conc)
        for golden_key in _GOLDEN_KEYS:
            value = evidence.get(golden_key)
            if value:
                self.golden[check] = value
                break


def run_metrics(report: Report) -> RunMetrics:
    out = RunMetrics()
    for result in report.results:
        if result.evidence:
            out.add_evidence(result.check, result.group, result.evidence)
    return out


def merge_runs(
    runs: Iterable[RunMetrics],
) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, Any]]:
    """Per metric, one sample per run (a run that reports several repeats adds them all)."""
    metrics: dict[str, list[float]] = {}
    distributions: dict[str, list[float]] = {}
    golden: dict[str, Any] = {}
    for run in runs:
        for key, samples in run.metrics.items():
            metrics.setdefault(key, []).extend(samples)
        for key, samples in run.distributions.items():
            distributions.setdefault(key, []).extend(samples)
        for check, value in run.golden.items():
            golden.setdefault(check, value)
    return metrics, distributions, golden
