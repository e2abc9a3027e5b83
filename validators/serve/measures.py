"""What each serve-bench number is (its unit and which way is better), declared beside the code
that measures it (bench_client.compute_metrics / run_level), and the typed Measurements a result
carries (validators.core.results.Measurement).

Records file them under string keys (`serve-bench.sweep/mean_ttft_ms@c4`, records/metrics.py);
a declaration the gate would read the other way is refused where the record is made
(records/extract.py). Every field run_level writes must be declared: an undeclared one is a
ValueError here, caught by tests/serve/test_measures.py before any GPU run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from validators.core.results import Better, Measurement

_LATENCY_STATS = {
    "e2e_latency": (90, 99),
    "ttft": (90, 99),
    "tpot": (90, 99),
    "itl": (90, 95, 99),
}


def _latencies() -> dict[str, tuple[str, Better]]:
    out: dict[str, tuple[str, Better]] = {}
    for what, pcts in _LATENCY_STATS.items():
        out[f"mean_{what}_ms"] = ("ms", "lower")
        out[f"median_{what}_ms"] = ("ms", "lower")
        out[f"std_{what}_ms"] = ("ms", "none")  # noise, not performance
        for p in pcts:
            out[f"p{p}_{what}_ms"] = ("ms", "lower")
    return out


# bench_serving's BenchmarkMetrics fields (compute_metrics) and what run_level adds.
METRICS: dict[str, tuple[str, Better]] = {
    "completed": ("requests", "none"),
    "failed": ("requests", "none"),
    "duration": ("s", "none"),
    "total_input_tokens": ("tokens", "none"),
    "total_output_tokens": ("tokens", "none"),
    "request_throughput": ("req/s", "higher"),
    "input_throughput": ("tok/s", "higher"),
    "output_throughput": ("tok/s", "higher"),
    "total_throughput": ("tok/s", "higher"),
    "concurrency": ("requests", "none"),  # the measured average in flight
    "max_output_tokens_per_s": ("tok/s", "higher"),
    "max_concurrent_requests": ("requests", "none"),
    "max_itl_ms": ("ms", "lower"),
    "single_stream_decode_tok_s": ("tok/s", "higher"),
    "num_prompts": ("requests", "none"),
    "warmup_requests": ("requests", "none"),
    "warmup_failed": ("requests", "none"),
    **_latencies(),
}
# Per-request samples run_level keeps (in ms), and the distribution each one is.
SAMPLES: dict[str, str] = {
    "ttfts_ms": "ttft_ms",
    "e2e_latencies_ms": "e2e_latency_ms",
    "tpots_ms": "tpot_ms",
}
# Fields that are not numbers of the run: the level itself, the first error messages.
NOT_MEASURED = frozenset({"max_concurrency", "errors"})


def measurements(fields: Mapping[str, Any], concurrency: int | None) -> list[Measurement]:
    """The typed measurements of one benchmark (a level of the sweep, or single-stream)."""
    out: list[Measurement] = []
    for name, value in fields.items():
        if name in NOT_MEASURED:
            continue
        if name in SAMPLES:
            out.append(
                Measurement(
                    name=SAMPLES[name],
                    unit="ms",
                    better="lower",
                    concurrency=concurrency,
                    samples=[float(v) for v in value],
                )
            )
            continue
        declared = METRICS.get(name)
        if declared is None:
            raise ValueError(f"benchmark field {name!r} is not declared in serve/measures.py")
        unit, better = declared
        out.append(
            Measurement(
                name=name, unit=unit, better=better, concurrency=concurrency, value=float(value)
            )
        )
    return out
