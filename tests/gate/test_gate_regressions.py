"""The gate's answers on the regressions it exists for, at noise of known size, with its own code.

- Machine 2's `--max-running-requests 15` candidate (the real knob: output throughput x0.817,
  p99 TTFT x4.49, median TPOT x1.127 at C=16; benchmarks/h200_sglang/results/machine2/
  gate-mrr15.json), redrawn at the noise machine 2 measured for each metric: REFUSED at the
  default 8 runs a side, naming throughput and p99 TTFT (the pre-registered rule of that
  booking PASSED it); at the 2-against-3 runs machine 2 had, INCONCLUSIVE, never PASSED.
- Uniform 3% and 5% regressions at 1% noise: REFUSED at the runs that see them.
- Equal candidates: never REFUSED, PASSED at the runs that see the target; too few runs answer
  UNDERPOWERED, not PASSED.

Samples are drawn here (no GPU); the records, the family test and the verdicts are the gate's.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from stackgate.manifest.loading import load_stack
from tests.helpers.synth_reports import make_report, measured_cv
from validators.core.results import Report, Result
from validators.gate.compare import GateResult, gate
from validators.gate.policy import GatePolicy
from validators.records.compose import compose_record
from validators.records.model import BuildFacts, HostFingerprint, Record

SWEEP = "serve-bench.sweep"
TWO_RUNS = GatePolicy(min_repeats=2)  # a stack declaring `repeats = 2`, as machine 2's did
# Candidate / baseline mean of each gated metric in machine 2's mrr15 gate, and the run-to-run
# CV machine 2 measured for it (the larger of the two sides' CVs in gate-mrr15.json).
MRR15: dict[str, tuple[float, float, float]] = {
    # key: (baseline mean, candidate / baseline, CV)
    f"{SWEEP}/output_throughput@c16": (5607.0, 4581.7 / 5607.0, 0.062),
    f"{SWEEP}/p99_ttft_ms@c16": (108.7, 487.6 / 108.7, 0.037),
    f"{SWEEP}/median_ttft_ms@c16": (101.5, 99.9 / 101.5, 0.048),
    f"{SWEEP}/median_tpot_ms@c16": (2.12, 2.38 / 2.12, 0.093),
    "serve-bench.single_stream/single_stream_decode_tok_s": (607.1, 562.0 / 607.1, 0.175),
}


def _mrr15_record(rng: np.random.Generator, runs: int, candidate: bool) -> Record:
    metrics = {
        key: [base * (change if candidate else 1.0) * math.exp(rng.normal(0, cv))
              for _ in range(runs)]
        for key, (base, change, cv) in MRR15.items()
    }  # fmt: skip
    checks = [Result(check=c, group="serve-bench", status="PASS", reason="ok")
              for c in (SWEEP, "serve-bench.single_stream")]  # fmt: skip
    return Record.model_validate(
        {
            "kind": "candidate" if candidate else "known-good",
            "stack": "h200-sglang",
            "created_at": "2026-12-05T10:00:00+00:00",
            "stackgate_version": "0.1.0",
            "build": BuildFacts(env_tree_sha256=("cd" if candidate else "ab") * 32).model_dump(),
            "host": HostFingerprint(hostname="h200").model_dump(),
            "runs": runs,
            "checks": [c.model_dump() for c in checks],
            "metrics": metrics,
        }
    ).sealed()


def _status(result: GateResult, key: str) -> str:
    return next(m.status for m in result.metrics if m.key == key)


@pytest.mark.parametrize("seed", range(10))
def test_the_mrr15_knob_is_refused_at_eight_runs_on_throughput_and_tail(seed: int) -> None:
    rng = np.random.default_rng(seed)
    result = gate(_mrr15_record(rng, 8, False), _mrr15_record(rng, 8, True))
    assert result.verdict == "REFUSED", result.reasons
    assert _status(result, f"{SWEEP}/output_throughput@c16") == "REGRESSION"
    assert _status(result, f"{SWEEP}/p99_ttft_ms@c16") == "REGRESSION"
    assert not result.checks or all(not c.failing for c in result.checks)


@pytest.mark.parametrize("seed", range(10))
def test_the_mrr15_knob_at_machine_twos_runs_is_inconclusive_not_passed(seed: int) -> None:
    """3 runs against 2 (machine 2's stack declared 2 runs a side): ten run-label permutations,
    smallest family p 1/10 > 1%. The gate cannot refuse, and says the evidence points at a
    regression instead of passing it."""
    rng = np.random.default_rng(seed)
    result = gate(_mrr15_record(rng, 3, False), _mrr15_record(rng, 2, True), TWO_RUNS)
    assert result.verdict == "INCONCLUSIVE", [m.reason for m in result.metrics]
    tail = next(m for m in result.metrics if m.key == f"{SWEEP}/p99_ttft_ms@c16")
    assert tail.status == "INCONCLUSIVE" and tail.runs_to_decide is not None
    assert tail.runs_to_decide >= 5  # C(10, 5) = 252 permutations reach 1%


def _record(reports: list[Report], kind: str = "known-good") -> Record:
    return compose_record(load_stack("cu128"), reports, build=BuildFacts(),
                          host=HostFingerprint(hostname="h1"), kind=kind)  # type: ignore[arg-type]  # fmt: skip


def _gate(
    seed: int, runs: int, slowdown: float, *, interleaved: bool, policy: GatePolicy | None = None
) -> GateResult:
    """A gate of `runs` runs a side at the fixture's 1% noise; interleaved: the baseline's env
    re-measured beside the candidate (paired, sign-flip family test)."""
    rng = np.random.default_rng(seed)
    draw = lambda s: [make_report(rng, cv=measured_cv(), slowdown=s) for _ in range(runs)]  # noqa: E731
    record, fresh, cand = (
        _record(draw(0.0)),
        _record(draw(0.0)),
        _record(draw(slowdown), "candidate"),
    )
    return gate(record, cand, policy, remeasured=fresh if interleaved else None)


@pytest.mark.parametrize(("slowdown", "runs"), [(0.03, 12), (0.05, 8)])
@pytest.mark.parametrize("interleaved", [False, True])
def test_uniform_three_and_five_percent_regressions_are_refused(
    slowdown: float, runs: int, interleaved: bool
) -> None:
    verdicts = Counter(_gate(s, runs, slowdown, interleaved=interleaved).verdict for s in range(10))
    assert verdicts == {"REFUSED": 10}, verdicts


@pytest.mark.parametrize("interleaved", [False, True])
def test_equal_candidates_pass_at_twelve_runs_and_are_never_refused(interleaved: bool) -> None:
    verdicts = Counter(_gate(s, 12, 0.0, interleaved=interleaved).verdict for s in range(20))
    assert verdicts["REFUSED"] == 0, verdicts
    assert verdicts["PASSED"] >= 18, verdicts  # INCONCLUSIVE is allowed, at most ~5% (1 in 20)


def test_too_few_runs_say_underpowered_or_inconclusive_never_passed() -> None:
    """3 pairs under a stack that allows 2 runs: 8 sign patterns, smallest p 1/8, so neither
    PASSED nor REFUSED can be reached; under the default minimum (8) they are TOO_FEW."""
    for slowdown in (0.0, 0.03, 0.05):
        verdicts = {_gate(s, 3, slowdown, interleaved=True, policy=TWO_RUNS).verdict
                    for s in range(5)}  # fmt: skip
        assert verdicts <= {"UNDERPOWERED", "INCONCLUSIVE"}, (slowdown, verdicts)
    result = _gate(0, 3, 0.0, interleaved=True)
    assert result.verdict == "REFUSED"
    assert {m.status for m in result.metrics if m.gated} == {"TOO_FEW"}
