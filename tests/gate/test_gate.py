"""The gate's verdicts on synthetic runs drawn at the measured noise (the Python API)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stackgate.manifest.loading import load_stack
from tests.helpers.synth_reports import make_report, measured_cv
from validators.core.results import Report
from validators.gate.compare import gate
from validators.gate.policy import DEFAULT_REPEATS, GatePolicy
from validators.gate.stats import bootstrap_ratio
from validators.records.compose import compose_record
from validators.records.model import BuildFacts, GpuInfo, HostFingerprint, Record

HOST = HostFingerprint(
    hostname="gpu-1",
    gpu=GpuInfo(model="NVIDIA RTX PRO 6000", count=8, compute_capabilities=["12.0"]),
    driver="590.48.01",
    interconnect="pcie",
)


def _record(
    reports: list[Report], kind: str = "known-good", packages: dict[str, str] | None = None
) -> Record:
    return compose_record(
        load_stack("cu128"),
        reports,
        build=BuildFacts(packages=packages or {"torch": "2.9.1"}),
        host=HOST,
        kind=kind,  # type: ignore[arg-type]
    )


def _runs(rng: np.random.Generator, n: int = DEFAULT_REPEATS, **kw: object) -> list[Report]:
    return [make_report(rng, cv=measured_cv(), **kw) for _ in range(n)]  # type: ignore[arg-type]


def test_five_percent_slower_and_a_failing_check_is_refused_with_reasons() -> None:
    rng = np.random.default_rng(7)
    baseline = _record(_runs(rng))
    candidate = _record(
        _runs(rng, slowdown=0.05, failing=("runtime.flashinfer_jit",)),
        "candidate",
        {"torch": "2.9.2"},
    )
    result = gate(baseline, candidate)
    assert not result.passed
    failed = {c.check: c.status for c in result.checks if c.failing}
    assert failed == {"runtime.flashinfer_jit": "FAILED"}
    throughput = {m.key: m for m in result.metrics if "output_throughput@" in m.key}
    assert throughput and all(m.status == "REGRESSION" for m in throughput.values())
    assert all(m.high is not None and m.high < 1 - m.tolerance for m in throughput.values())
    assert any("runtime.flashinfer_jit" in r for r in result.reasons)
    assert [(c.key, c.a, c.b) for c in result.versions] == [("torch", "2.9.1", "2.9.2")]


@pytest.mark.parametrize("seed", range(20))
def test_an_equal_candidate_is_never_refused_seeded(seed: int) -> None:
    """At the fixture's 1% noise and 8 runs a side the gate sees 3% only at the edge: it says
    PASSED or UNDERPOWERED (blind, said so), never REFUSED; INCONCLUSIVE at most 5% of the time
    family-wise (benchmarks/gate/gate_family_sim.py measures the rates)."""
    rng = np.random.default_rng(seed)
    result = gate(_record(_runs(rng)), _record(_runs(rng), "candidate"))
    assert result.verdict != "REFUSED" and not result.reasons, result.reasons


@pytest.mark.parametrize("seed", range(5))
def test_an_equal_candidate_with_enough_runs_passes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    result = gate(_record(_runs(rng, n=12)), _record(_runs(rng, n=12), "candidate"))
    assert result.verdict == "PASSED", [m.reason for m in result.metrics if m.gated]


def test_an_equal_candidate_passes_twenty_seeded_draws() -> None:
    # Seeded: the false-alarm *rate* is a statistical claim measured by benchmarks/gate/gate_power.py
    # (results in benchmarks/gate/results/gate_power.md); a test with fresh entropy failed ~1 in 600 gates.
    rng = np.random.default_rng(20261130)
    failures = []
    for _ in range(20):
        result = gate(_record(_runs(rng)), _record(_runs(rng), "candidate"))
        failures += result.reasons
    assert failures == []


def test_a_faster_candidate_is_an_improvement_and_passes() -> None:
    rng = np.random.default_rng(3)
    result = gate(_record(_runs(rng)), _record(_runs(rng, slowdown=-0.06), "candidate"))
    assert result.passed
    assert {m.status for m in result.metrics if "output_throughput@" in m.key} == {"IMPROVEMENT"}


def test_the_same_inputs_give_the_same_interval() -> None:
    rng = np.random.default_rng(5)
    base, cand = _record(_runs(rng)), _record(_runs(rng), "candidate")
    assert gate(base, cand).metrics == gate(base, cand).metrics


def test_too_few_runs_fail_instead_of_passing_quietly() -> None:
    rng = np.random.default_rng(1)
    result = gate(_record(_runs(rng)), _record(_runs(rng, n=1), "candidate"))
    assert not result.passed
    gated = [m for m in result.metrics if m.gated]
    assert gated and {m.status for m in gated} == {"TOO_FEW"}
    assert "candidate has 1 run" in gated[0].reason


def test_a_level_the_candidate_did_not_measure_is_missing() -> None:
    rng = np.random.default_rng(2)
    candidate = _runs(rng, levels=(1, 4, 16))  # the sweep ran, but not at 64
    result = gate(_record(_runs(rng)), _record(candidate, "candidate"))
    missing = {m.key for m in result.metrics if m.status == "MISSING"}
    assert "serve-bench.sweep/output_throughput@c64" in missing
    assert all(k.endswith("@c64") for k in missing)
    assert not result.passed


def test_a_benchmark_that_did_not_run_is_judged_by_its_check() -> None:
    rng = np.random.default_rng(2)
    candidate = _runs(rng, required=("host", "static", "runtime"))
    result = gate(_record(_runs(rng)), _record(candidate, "candidate"))
    statuses = {c.check: c.status for c in result.checks}
    assert statuses["serve-bench.sweep"] == "NOT_RUN"
    assert {m.status for m in result.metrics} == {"UNGATED"}
    assert any("serve-bench.sweep: NOT_RUN" in r for r in result.reasons)
    assert not result.passed


def test_lower_is_better_metrics_are_oriented_so_below_one_is_worse() -> None:
    rng = np.random.default_rng(0)
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    slower = [v * 1.05 for v in base]
    interval = bootstrap_ratio(slower, base, direction="lower", confidence=0.95, rng=rng)
    assert interval.ratio == pytest.approx(1 / 1.05)
    assert interval.low <= interval.ratio <= interval.high < 1


def test_policy_tail_metrics_get_their_own_tolerance() -> None:
    policy = GatePolicy(tolerance=0.01, tail_tolerance=0.05, overrides={"mean_ttft_ms": 0.02})
    assert policy.tolerance_for("serve-bench.sweep/p99_ttft_ms@c16") == 0.05
    assert policy.tolerance_for("serve-bench.sweep/output_throughput@c16") == 0.01
    assert policy.tolerance_for("serve-bench.sweep/mean_ttft_ms@c4") == 0.02
    # the class is declared, not read off the name: a max_ throughput is not a tail
    assert policy.tolerance_for("serve-bench.sweep/max_output_tokens_per_s@c16") == 0.01
    assert policy.gated("serve-bench.sweep/max_output_tokens_per_s@c16") is None
    assert policy.gated("serve-bench.sweep/p99_itl_ms@c16") is None
    with pytest.raises(ValueError, match="at least 2 runs"):
        GatePolicy(min_repeats=1)


def test_a_gate_too_noisy_to_see_three_percent_says_so() -> None:
    rng = np.random.default_rng(9)
    noisy = [make_report(rng, cv=0.04) for _ in range(DEFAULT_REPEATS)]
    noisy_too = [make_report(rng, cv=0.04) for _ in range(DEFAULT_REPEATS)]
    result = gate(_record(noisy), _record(noisy_too, "candidate"))
    quiet = gate(*(_record(_runs(np.random.default_rng(s))) for s in (1, 2)))
    assert result.underpowered
    assert all(
        m.detectable is not None and m.detectable > 0.03
        for m in result.metrics
        if m.key in result.underpowered
    )
    assert quiet.underpowered == []


def _skipping(reports: list[Report], check: str, reason: str) -> list[Report]:
    """The same runs with `check` SKIPped, as a host without that hardware reports it."""
    out = []
    for report in reports:
        results = [
            r.model_copy(update={"status": "SKIP", "reason": reason}) if r.check == check else r
            for r in report.results
        ]
        out.append(report.model_copy(update={"results": results}))
    return out


def test_interleaved_a_check_this_host_cannot_run_is_not_here_and_listed_not_passed() -> None:
    # The record passed host.gpus on its host; here the record's own env (re-measured beside
    # the candidate) and the candidate both skip it: not the candidate's doing, not proven.
    rng = np.random.default_rng(11)
    record = _record(_runs(rng))
    why = "fewer than 2 GPUs: no peer-to-peer to check"
    here = _record(_skipping(_runs(rng), "host.gpus", why))
    candidate = _record(_skipping(_runs(rng), "host.gpus", why), "candidate")
    result = gate(record, candidate, remeasured=here)
    verdict = {c.check: c for c in result.checks}["host.gpus"]
    assert verdict.status == "NOT_HERE" and not verdict.failing
    assert why in verdict.reason
    assert result.not_proven_here == ["host.gpus"]
    assert result.verdict != "REFUSED", result.reasons  # UNDERPOWERED at 8 pairs: not this test


def test_a_skip_only_the_candidate_has_still_refuses_interleaved_or_not() -> None:
    rng = np.random.default_rng(12)
    record = _record(_runs(rng))
    here = _record(_runs(rng))  # the record's env ran the check here
    candidate = _record(_skipping(_runs(rng), "host.gpus", "skipped"), "candidate")
    for result in (gate(record, candidate, remeasured=here), gate(record, candidate)):
        assert not result.passed
        assert {c.check: c.status for c in result.checks}["host.gpus"] == "NOT_RUN"
        assert result.not_proven_here == []
    # the same skip on the record's env re-measured here is the host's; a sequential gate
    # (no re-measure) cannot tell, so the record's PASS stays the bar
    skipped_here = _record(_skipping(_runs(rng), "host.gpus", "skipped"))
    assert gate(record, candidate, remeasured=skipped_here).verdict != "REFUSED"
    assert not gate(record, candidate).passed


def test_a_check_the_remeasured_env_failed_here_still_refuses_the_candidate() -> None:
    rng = np.random.default_rng(13)
    record = _record(_runs(rng))
    here = _record(_runs(rng, failing=("host.driver",)))
    candidate = _record(_runs(rng, failing=("host.driver",)), "candidate")
    result = gate(record, candidate, remeasured=here)
    assert not result.passed
    assert {c.check: c.status for c in result.checks}["host.driver"] == "FAILED"


def test_detectable_regression_is_computed_at_the_confidence_asked_for() -> None:
    """Every confidence GatePolicy accepts gets its own z (a 4-entry table answered 0.8 and 0.97
    with the 95% value, so "cannot see a 3% regression" was computed at the wrong confidence)."""
    from statistics import NormalDist

    from validators.gate.policy import detectable_regression

    def at(confidence: float) -> float:
        found = detectable_regression(0.01, 0.01, 8, 8, 0.0125, confidence)
        assert found is not None
        return found

    assert at(0.8) < at(0.9) < at(0.95) < at(0.97) < at(0.975) < at(0.99)
    se = 0.01 * math.sqrt(2 * 7 / 64)
    for confidence in (0.8, 0.97):
        z = NormalDist().inv_cdf(confidence) + NormalDist().inv_cdf(0.95)
        assert at(confidence) == pytest.approx(0.0125 + z * se, rel=1e-9)
    # the table's four values are what they were
    assert at(0.975) == pytest.approx(0.0125 + (1.96 + 1.6449) * se, rel=1e-4)


def test_synthetic_noise_is_the_recorded_one() -> None:
    """A recorded fact: the synthetic runs every gate test draws use the noise the gate's
    defaults were chosen at, as gate_power.py recorded it (reading the recorded result is the
    point: a re-run of the benchmark that moves it must move the fixture too)."""
    import json
    from pathlib import Path

    from tests.helpers.synth_reports import CHOSEN_AT_CV

    recorded = Path(__file__).resolve().parents[2] / "benchmarks/gate/results/gate_power.json"
    assert json.loads(recorded.read_text())["chosen_at_cv"] == CHOSEN_AT_CV == measured_cv()
