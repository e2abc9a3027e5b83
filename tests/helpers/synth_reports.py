"""Synthetic validation reports: real Report objects whose benchmark numbers are drawn at a
chosen run-to-run noise. They stand for `python -m validators run --json` on a GPU host, which
cannot run here; the gate only ever sees these numbers, so the comparison itself is real.

Built the way the validators build theirs: every result through `make_result` (which refuses
an id validators.core.checks does not register, so a renamed check breaks this fixture), the sweep
as validators/serve's `serve-bench.sweep` result with its `levels` list, each level holding
fields of bench_client.compute_metrics (tests/gate/test_synth.py holds the two to each other).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from validators.core.results import Report, Result, make_result
from validators.serve.measures import SAMPLES, measurements

CONCURRENCIES = (1, 4, 16, 64)
# Per-concurrency levels loosely shaped like a TP8 MoE server (tok/s, ms).
BASE_THROUGHPUT = {1: 90.0, 4: 320.0, 16: 1100.0, 64: 2900.0}
BASE_TTFT_MS = {1: 120.0, 4: 160.0, 16: 260.0, 64: 700.0}
BASE_ITL_MS = {1: 11.0, 4: 12.5, 16: 14.5, 64: 22.0}
CHECKS = (
    ("host.gpus", "host"),
    ("host.driver", "host"),
    ("static.dists.lock", "static"),
    ("static.abi.sgl_kernel", "static"),
    ("runtime.torch", "runtime"),
    ("runtime.flashinfer_jit", "runtime"),
)


def bench_points(
    rng: np.random.Generator,
    *,
    slowdown: float,
    cv: float,
    raw: bool = False,
    levels: tuple[int, ...] = CONCURRENCIES,
) -> list[dict[str, Any]]:
    """One run of a concurrency sweep in bench_serving field names.

    slowdown 0.05 = 5% less throughput and 5% more latency. Run-level noise: one shared
    factor per run and level (throughput and latency move together, as on a real server).
    """
    points = []
    for c in levels:
        f = float(rng.normal(1.0, cv))
        thr = BASE_THROUGHPUT[c] * (1 - slowdown) * f
        ttft = BASE_TTFT_MS[c] * (1 + slowdown) / f
        itl = BASE_ITL_MS[c] * (1 + slowdown) / f
        point: dict[str, Any] = {
            "max_concurrency": c,
            "output_throughput": thr,
            "mean_ttft_ms": ttft,
            "median_ttft_ms": ttft * 0.95,
            "mean_itl_ms": itl,
            "median_itl_ms": itl * 0.97,
            "completed": 64,
        }
        if raw:
            point["ttfts_ms"] = list(rng.lognormal(np.log(ttft), 0.25, size=64))
            point["itls_ms"] = list(rng.lognormal(np.log(itl), 0.15, size=256))
        points.append(point)
    return points


def make_report(
    rng: np.random.Generator,
    *,
    stack: str = "cu128",
    slowdown: float = 0.0,
    cv: float = 0.01,
    failing: tuple[str, ...] = (),
    raw: bool = False,
    env_path: str | None = None,
    manifest_sha256: str | None = None,
    required: tuple[str, ...] = ("host", "static", "runtime", "serve-bench"),
    levels: tuple[int, ...] = CONCURRENCIES,
    measured: bool = False,
) -> Report:
    """measured: the sweep as the serve group writes it now (typed measurements, the levels'
    scalars in the evidence); else as reports before measurements did (numbers in the
    evidence only), which records still read."""
    results: list[Result] = []
    for check, group in CHECKS:
        if group not in required:
            continue
        if check in failing:
            results.append(make_result(check, "FAIL", f"{check} failed (synthetic)", group=group))
        else:
            results.append(make_result(check, "PASS", "ok", group=group))
    if "serve-bench" in required:
        points = bench_points(rng, slowdown=slowdown, cv=cv, raw=raw, levels=levels)
        typed = []
        if measured:  # run_level keeps no ITL samples (one per token)
            points = [{k: v for k, v in p.items() if k != "itls_ms"} for p in points]
            typed = [m for p in points for m in measurements(p, int(p["max_concurrency"]))]
            points = [{k: v for k, v in p.items() if k not in SAMPLES} for p in points]
        results.append(
            make_result(
                "serve-bench.sweep",
                "PASS",
                "sweep done",
                {"levels": points},
                group="serve-bench",
                measurements=typed,
            )
        )
    return Report(
        stack=stack,
        manifest_sha256=manifest_sha256,
        env_path=env_path,
        started_at="2026-11-30T12:00:00+00:00",
        groups_run=list(required),
        results=results,
    )


# The run-to-run noise (coefficient of variation) the gate's defaults were chosen at:
# `chosen_at_cv` of benchmarks/gate/results/gate_power.json, which
# tests/gate/test_gate.py::test_synthetic_noise_is_the_recorded_one holds this equal to.
CHOSEN_AT_CV = 0.01


def measured_cv() -> float:
    """The run-to-run noise the gate's defaults were chosen at (benchmarks/gate/gate_power.py)."""
    return CHOSEN_AT_CV
