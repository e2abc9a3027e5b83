"""Metric keys and what is pulled out of validators/serve's evidence (its real shapes)."""

from __future__ import annotations

from validators.core.results import Report, Result
from validators.records.extract import merge_runs, run_metrics
from validators.records.metrics import direction, metric_key, parse_metric_key

# As validators/serve/group.py writes them: single-stream numbers at the top of the evidence,
# the sweep as `levels` of bench_serving fields.
SINGLE = {
    "single_stream_decode_tok_s": 89.4,
    "output_throughput": 87.9,
    "median_tpot_ms": 11.2,
    "mean_ttft_ms": 130.5,
    "completed": 8,
    "failed": 0,
    "jsonl": "/x/serve-bench.jsonl",
}
LEVELS = [
    {"max_concurrency": c, "completed": 16, "failed": 0, "output_throughput": t,
     "median_ttft_ms": 200.0 + c, "p99_ttft_ms": 400.0 + c, "median_itl_ms": 11.0,
     "p99_itl_ms": 30.0, "median_tpot_ms": 11.5, "p99_e2e_latency_ms": 3000.0,
     "ttfts_ms": [190.0, 210.0], "itls_ms": [[10.0, 11.0], [12.0]]}
    for c, t in ((1, 88.0), (16, 1100.0))
]  # fmt: skip


def _report() -> Report:
    return Report(
        stack="cu130", started_at="2026-11-30T12:00:00+00:00",
        results=[
            Result(check="serve-bench.single_stream", group="serve-bench", status="PASS",
                   reason="89.4 tok/s", evidence=SINGLE),
            Result(check="serve-bench.sweep", group="serve-bench", status="PASS",
                   reason="peak", evidence={"levels": LEVELS, "errors": [], "jsonl": "/x"}),
            Result(check="static.abi.summary", group="static", status="PASS", reason="ok",
                   evidence={"objects": 12, "elapsed_s": 0.4}),
        ],
    )  # fmt: skip


def test_serve_bench_evidence_becomes_keyed_samples() -> None:
    run = run_metrics(_report())
    m = run.metrics
    assert m["serve-bench.single_stream/single_stream_decode_tok_s"] == [89.4]
    assert m["serve-bench.sweep/output_throughput@c16"] == [1100.0]
    assert m["serve-bench.sweep/p99_ttft_ms@c1"] == [401.0]
    assert not any(k.startswith("static.") for k in m)  # only benchmarks, not check timings
    assert run.distributions["serve-bench.sweep/itl_ms@c16"] == [10.0, 11.0, 12.0]
    assert run.distributions["serve-bench.sweep/ttft_ms@c1"] == [190.0, 210.0]


def test_repeated_runs_append_one_sample_each() -> None:
    metrics, _, _ = merge_runs([run_metrics(_report()), run_metrics(_report())])
    assert metrics["serve-bench.sweep/output_throughput@c1"] == [88.0, 88.0]


def test_keys_and_directions() -> None:
    key = metric_key("median_itl_ms", 16, "serve-bench.sweep")
    assert key == "serve-bench.sweep/median_itl_ms@c16"
    parsed = parse_metric_key(key)
    assert (parsed.scope, parsed.name, parsed.concurrency) == (
        "serve-bench.sweep",
        "median_itl_ms",
        16,
    )
    assert parsed.series == "serve-bench.sweep/median_itl_ms"
    assert direction("x/output_throughput@c4") == "higher"
    assert direction("x/total_throughput") == "higher"
    assert direction("x/single_stream_decode_tok_s") == "higher"
    assert direction("x/p99_e2e_latency_ms@c4") == "lower"
    for neutral in ("x/completed", "x/std_ttft_ms", "x/total_output_tokens", "x/failed"):
        assert direction(neutral) == "none", neutral
