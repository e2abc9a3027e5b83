"""Pull benchmark numbers, raw samples and golden outputs out of validation reports.

A result's typed `measurements` (validators.core.results.Measurement) make a record: each is
filed under `<check>/<name>[@c<level>]` (records/metrics.py), a value as one sample, samples as
a distribution. A declaration the gate would read the other way (records.metrics.direction) is
refused here, so no metric is gated backwards.

Reports written before results carried measurements are read by their evidence:
- `evidence["metrics"]`: {name: number | [numbers]}, at the level of a `concurrency` or
  `max_concurrency` key beside it;
- in the serve-bench group, evidence with `output_throughput` at the top level (single-stream);
- `evidence["levels"]` / `["points"]` / `["runs"]`: bench_serving-like dicts, each with its
  `max_concurrency` (or `concurrency`);
- raw per-request samples (`ttfts_ms`, `itls_ms`, `e2e_latencies_ms`, or bench_serving's
  `ttfts`/`itls` in seconds) go to distributions, in ms.
Correctness checks' `golden_outputs` / `outputs` go to golden outputs. Several reports (repeated
runs) append one sample per metric each.

A sample must be a finite, non-negative number: what is not is collected in `RunMetrics.invalid`
and refused by the reader, since a NaN compares false with every threshold and would pass any
gate. A gated metric given as a string, a boolean, an empty or mixed list is invalid too; `null`
means "not measured" and is left out (the gate calls it MISSING). A non-finite neutral field
(bench_serving's `request_rate: inf`) describes the run and is left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from stackgate.errors import BadInput
from validators.core.results import Measurement, Report
from validators.records.metrics import direction, key_and_direction, metric_key

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


def _is_sample(value: float) -> bool:
    return math.isfinite(value) and value >= 0


def _flatten_raw(value: Any) -> list[Any]:
    """Per-request samples; ITLs come as one list per request in bench_serving.

    Numbers come back as floats; anything else comes back as it is, for the caller to refuse.
    """
    out: list[Any] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            pending.extend(reversed(item))
        elif (n := _number(item)) is not None:
            out.append(n)
        elif item is not value:
            out.append(item)
    return out


def _concurrency(block: Mapping[str, Any]) -> int | None:
    for key in ("max_concurrency", "concurrency_level", "concurrency"):
        value = block.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _level_problem(point: Mapping[str, Any], block: Mapping[str, Any]) -> str | None:
    """Why a sweep level's concurrency is unusable (None when it is a count >= 1 or absent).

    `concurrency` alone may be bench_serving's measured average (a float): not judged here.
    """
    for where in (point, block):
        for key in ("max_concurrency", "concurrency_level"):
            value = where.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                return f"{key} is {value!r}, not a count of streams"
            return None
    return None


class RunMetrics:
    """Metrics of one run: {key: samples} and {key: raw per-request samples}."""

    def __init__(self) -> None:
        self.metrics: dict[str, list[float]] = {}
        self.distributions: dict[str, list[float]] = {}
        self.golden: dict[str, Any] = {}
        self.invalid: list[str] = []

    def _refuse(self, key: str, value: Any) -> None:
        self.invalid.append(f"{key} = {value!r}")

    def _raw(self, key: str, value: Any, scale: float) -> None:
        samples = self.distributions.setdefault(key, [])
        for item in _flatten_raw(value):
            if isinstance(item, float) and _is_sample(item):
                samples.append(item * scale)
            else:
                self._refuse(key, item)

    def _metric(self, key: str, value: Any) -> None:
        gated = direction(key) != "none"
        if value is None:
            return  # not measured
        nums = _numbers(value)
        if nums is None:
            if gated:  # a string, a boolean, a list of anything else, an object: all refused
                self._refuse(key, value)
            return
        bad = [v for v in nums if not _is_sample(v)]
        if not bad:
            self.metrics.setdefault(key, []).extend(nums)
        elif gated or any(v < 0 for v in bad):
            self._refuse(key, bad[0])
        # else: a neutral field that is not finite (request_rate: inf) is left out

    def _point(self, check: str, block: Mapping[str, Any], conc: int | None) -> None:
        for name, value in block.items():
            if name in _RAW_SECONDS:
                self._raw(metric_key(_RAW_SECONDS[name], conc, check), value, 1000.0)
            elif name in _RAW_MS:
                self._raw(metric_key(_RAW_MS[name], conc, check), value, 1.0)
            elif name in ("max_concurrency", "concurrency_level"):
                continue
            else:
                self._metric(metric_key(name, conc, check), value)

    def add_evidence(self, check: str, group: str, evidence: Mapping[str, Any]) -> None:
        conc = _concurrency(evidence)
        if group == BENCH_GROUP and "output_throughput" in evidence:
            # A benchmark result (single-stream): its numbers sit at the top of the evidence.
            # Other serve-bench results carry pids, HTTP codes and correctness scores there,
            # which the correctness check judges itself.
            top = {
                k: v
                for k, v in evidence.items()
                if _number(v) is not None or direction(k) != "none"
            }
            self._point(check, top, conc)
        metrics = evidence.get("metrics")
        if isinstance(metrics, Mapping):
            self._point(check, metrics, _concurrency(metrics) or conc)
        strict = group == BENCH_GROUP
        for list_key in _POINT_LISTS:
            if list_key not in evidence:
                continue
            points = evidence[list_key]
            if not isinstance(points, list):
                if strict:
                    self.invalid.append(f"{check}/{list_key} = {_short(points)}, not a list")
                continue
            for i, point in enumerate(points):
                if not isinstance(point, Mapping):
                    if strict:
                        self.invalid.append(
                            f"{check}/{list_key}[{i}] = {_short(point)}, not a level"
                        )
                    continue
                inner = point.get("metrics")
                block = inner if isinstance(inner, Mapping) else point
                level = _concurrency(point) or _concurrency(block)
                problem = _level_problem(point, block)
                if problem is None and level is None and len(points) > 1:
                    problem = "no max_concurrency (the levels would be filed as one)"
                if strict and problem:
                    # Its numbers would be filed under another key (or as repeats of one
                    # level), and the gate would call the run TOO_FEW instead of naming this.
                    self.invalid.append(f"{check}/{list_key}[{i}]: {problem}")
                    continue
                self._point(check, block, level)
        for raw_key in (*_RAW_SECONDS, *_RAW_MS):
            if raw_key in evidence:
                self._point(check, {raw_key: evidence[raw_key]}, conc)
        self.add_golden(check, evidence)

    def add_golden(self, check: str, evidence: Mapping[str, Any]) -> None:
        for golden_key in _GOLDEN_KEYS:
            value = evidence.get(golden_key)
            if value:
                self.golden[check] = value
                break

    def add_measurements(self, check: str, measured: Iterable[Measurement]) -> None:
        """A result's typed measurements: no guessing of shapes, names or units."""
        for m in measured:
            key, gate_reads = key_and_direction(m.name, m.concurrency, check)
            if m.samples is not None:
                self.distributions.setdefault(key, []).extend(m.samples)
                continue
            if gate_reads != m.better:
                self.invalid.append(
                    f"{key}: measured as better={m.better}, but the gate reads "
                    f"better={gate_reads} for this name (records/metrics.py)"
                )
                continue
            if m.value is not None:
                self.metrics.setdefault(key, []).append(m.value)


def run_metrics(report: Report) -> RunMetrics:
    out = RunMetrics()
    for result in report.results:
        if result.measurements:
            out.add_measurements(result.check, result.measurements)
            out.add_golden(result.check, result.evidence)
        elif result.evidence:  # a report written before measurements
            out.add_evidence(result.check, result.group, result.evidence)
    return out


def refuse_invalid(runs: Iterable[RunMetrics], *, where: Iterable[str]) -> None:
    """BadInput naming each run (`where`, e.g. the report file) and each invalid sample."""
    problems = [f"{w}: {item}" for run, w in zip(runs, where, strict=False) for item in run.invalid]
    if problems:
        raise BadInput(
            f"{len(problems)} metric sample(s), sweep level(s) or measurement(s) are malformed: "
            "a sample must be a finite non-negative number (a NaN or a string cannot be "
            "compared), a level a mapping with its max_concurrency, a measurement better the "
            "way the gate reads its name",
            details=problems[:20],
        )


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


def sample_runs(runs: Sequence[RunMetrics]) -> dict[str, list[int]]:
    """Per metric, the run (0-based) each of merge_runs' samples came from; {} when every
    metric has exactly one sample per run (the index then says nothing the order does not)."""
    index: dict[str, list[int]] = {}
    for i, run in enumerate(runs):
        for key, samples in run.metrics.items():
            index.setdefault(key, []).extend([i] * len(samples))
    plain = list(range(len(runs)))
    if all(v == plain for v in index.values()):
        return {}
    return index
