"""Compare a candidate record with a baseline record: checks, metrics, versions, env, host.

The verdict is data (`GateResult`); rendering it (rich table, JSON, HTML) is elsewhere.
A gate fails on: a candidate check that FAILed or ERRORed, a check the baseline passed that
the candidate did not run, a metric whose interval says regression, a gated metric the
candidate lacks, or too few runs to judge noise.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Literal

import numpy as np
from pydantic import Field

from stackgate.model import StrictModel
from validators.gate.diffs import Change, diff_flat, diff_manifests, diff_versions
from validators.gate.policy import TARGET_REGRESSION, GatePolicy, detectable_regression
from validators.gate.stats import bootstrap_ratio, coefficient_of_variation
from validators.records.fingerprint import diff_hosts
from validators.records.metrics import Direction, direction, parse_metric_key
from validators.records.model import Record

MetricStatus = Literal[
    "REGRESSION", "IMPROVEMENT", "SAME", "MISSING", "NEW", "TOO_FEW", "UNGATED", "INCOMPARABLE"
]
# The order a table lists metrics in: refusals first, then what is unproven, then the rest.
METRIC_ORDER: dict[MetricStatus, int] = {
    "REGRESSION": 0,
    "INCOMPARABLE": 0,
    "MISSING": 1,
    "TOO_FEW": 2,
    "IMPROVEMENT": 3,
    "SAME": 4,
    "NEW": 5,
    "UNGATED": 6,
}
CheckStatus = Literal["OK", "FAILED", "NOT_RUN", "NEW", "SKIPPED", "NOT_HERE"]
# NOT_HERE: only in an interleaved gate. The record PASSed the check on its host, but here the
# record's own env (same tree hash), re-measured beside the candidate, skipped it too: this host
# cannot run it (one GPU: no interconnect, no P2P). Not the candidate's doing, so it does not
# refuse; not proven either, so the verdict lists it (GateResult.not_proven_here).
# INCOMPARABLE: a gated metric whose samples give no ratio (NaN, inf, zero, negative). Records
# refuse such samples on read; this is the gate's own guard, so no path can turn "cannot
# compare" into a pass.
# Also INCOMPARABLE: finite samples whose means or interval are not finite (1e308 overflows the
# mean to inf, and inf/inf is NaN: a NaN interval is neither below nor above 1, so it read as
# SAME), and an "improvement" too large to be a measurement (a unit mix-up, a broken run).
_FAILING_METRIC: frozenset[str] = frozenset({"REGRESSION", "MISSING", "TOO_FEW", "INCOMPARABLE"})
# A candidate more than this many times better is not judged an improvement: a real upgrade
# does not make a metric 100x better, a number in seconds where milliseconds were meant (1000x)
# or a fabricated one does. Re-baseline (mark the candidate good) if it is real.
IMPLAUSIBLE_RATIO = 100.0


class MetricVerdict(StrictModel):
    key: str
    direction: Direction
    status: MetricStatus
    reason: str
    baseline_mean: float | None = None
    candidate_mean: float | None = None
    n_baseline: int = 0
    n_candidate: int = 0
    ratio: float | None = Field(default=None, description="Oriented: < 1 is worse.")
    low: float | None = None
    high: float | None = None
    tolerance: float = 0.0
    cv_baseline: float | None = None
    cv_candidate: float | None = None
    detectable: float | None = Field(
        default=None, description="Smallest regression this metric's noise lets us catch."
    )

    @property
    def failing(self) -> bool:
        return self.status in _FAILING_METRIC


class CheckVerdict(StrictModel):
    check: str
    baseline: str | None
    candidate: str | None
    status: CheckStatus
    reason: str

    @property
    def failing(self) -> bool:
        return self.status in ("FAILED", "NOT_RUN")


class HostChange(StrictModel):
    field: str
    baseline: str
    candidate: str
    impact: str
    why: str


class GateResult(StrictModel):
    baseline: str
    candidate: str
    passed: bool
    reasons: list[str]
    checks: list[CheckVerdict]
    metrics: list[MetricVerdict]
    versions: list[Change]
    versions_unknown: str | None = Field(
        default=None,
        description="Set when one side's package versions are unknown (a run report): then "
        "`versions` is empty, not a list of removals.",
    )
    env: list[Change]
    manifest: list[Change]
    host: list[HostChange]
    policy: dict[str, float | int]
    seed: int
    baseline_numbers: str = Field(
        default="record", description="Where the baseline's metric samples came from."
    )
    underpowered: list[str] = Field(
        default_factory=list,
        description="Metrics judged SAME whose noise hides a TARGET_REGRESSION at these repeats.",
    )
    not_proven_here: list[str] = Field(
        default_factory=list,
        description="Checks the record passed that this host cannot run (interleaved gate: the "
        "record's env skipped them here too); the verdict does not cover them.",
    )


def _seed(baseline: Record, candidate: Record) -> int:
    """Same inputs, same resamples, same verdict: the seed comes from the two contents."""
    digest = hashlib.sha256((baseline.compute_id() + candidate.compute_id()).encode())
    return int.from_bytes(digest.digest()[:8], "big")


def compare_checks(
    baseline: Record, candidate: Record, remeasured: Record | None = None
) -> list[CheckVerdict]:
    base = {r.check: r for r in baseline.checks}
    cand = {r.check: r for r in candidate.checks}
    here = {r.check: r for r in remeasured.checks} if remeasured is not None else {}
    out: list[CheckVerdict] = []
    for check in sorted(set(base) | set(cand)):
        b, c = base.get(check), cand.get(check)
        b_status = b.status if b else None
        c_status = c.status if c else None
        if c is None:
            assert b is not None
            status: CheckStatus = "NOT_RUN" if b.status == "PASS" else "SKIPPED"
            reason = (
                "passed on the baseline, absent from the candidate's run"
                if (status == "NOT_RUN")
                else f"baseline {b.status}, absent from the candidate"
            )
        elif c.status in ("FAIL", "ERROR"):
            status, reason = "FAILED", c.reason
        elif c.status == "SKIP":
            status = "NOT_RUN" if b is not None and b.status == "PASS" else "SKIPPED"
            reason = f"skipped: {c.reason}"
            same_env_here = here.get(check)
            if status == "NOT_RUN" and same_env_here is not None and same_env_here.status == "SKIP":
                status = "NOT_HERE"
                reason = (
                    f"not provable on this host: the record's env, re-measured here, skipped it "
                    f"too ({same_env_here.reason}); the candidate: {c.reason}"
                )
        elif b is None:
            status, reason = "NEW", "check not in the baseline"
        else:
            status, reason = "OK", c.reason
        out.append(
            CheckVerdict(
                check=check, baseline=b_status, candidate=c_status, status=status, reason=reason
            )
        )
    return out


def _mean(samples: list[float] | None) -> float | None:
    """The mean for display; None when there is nothing finite to average."""
    finite = [v for v in samples or [] if math.isfinite(v)]
    if not finite or len(finite) != len(samples or []):
        return None
    return float(np.mean(finite))


def compare_metric(
    key: str,
    baseline: list[float] | None,
    candidate: list[float] | None,
    policy: GatePolicy,
    rng: np.random.Generator,
    *,
    baseline_runs: int | None = None,
    candidate_runs: int | None = None,
) -> MetricVerdict:
    """One metric's verdict. `*_runs`: how many validation runs the side's record merges; a
    run may report several samples of a metric, but repeats inside one run are not the
    independent runs the noise estimate needs, so the run count caps the n judged."""
    way = direction(key)
    tol = policy.tolerance_for(key)
    if not baseline:
        return MetricVerdict(
            key=key,
            direction=way,
            status="NEW",
            reason="not measured on the baseline",
            candidate_mean=_mean(candidate),
            n_candidate=len(candidate or []),
            tolerance=tol,
        )
    samples = baseline + (candidate or [])
    unusable = [v for v in samples if not (math.isfinite(v) and v > 0)]
    if way != "none" and unusable:
        return MetricVerdict(
            key=key,
            direction=way,
            status="INCOMPARABLE",
            reason=f"samples {unusable[:3]} give no ratio (need finite numbers > 0); "
            "refusing to guess",
            baseline_mean=_mean(baseline),
            candidate_mean=_mean(candidate),
            n_baseline=len(baseline),
            n_candidate=len(candidate or []),
            tolerance=tol,
        )
    means = [_mean(baseline), _mean(candidate)] if candidate else [_mean(baseline)]
    if way != "none" and any(m is None or not math.isfinite(m) for m in means):
        return MetricVerdict(
            key=key,
            direction=way,
            status="INCOMPARABLE",
            reason="the samples overflow when averaged (a mean is not finite); refusing to guess",
            n_baseline=len(baseline),
            n_candidate=len(candidate or []),
            tolerance=tol,
        )
    cv_b = coefficient_of_variation(baseline)
    base = MetricVerdict(
        key=key,
        direction=way,
        status="UNGATED",
        reason="",
        baseline_mean=_mean(baseline),
        n_baseline=len(baseline),
        tolerance=tol,
        cv_baseline=cv_b,
    )

    def verdict(status: MetricStatus, reason: str, **more: Any) -> MetricVerdict:
        return base.model_copy(update={"status": status, "reason": reason, **more})

    if not candidate:
        if way == "none":
            return verdict("UNGATED", "not measured (not gated)")
        return verdict("MISSING", "the candidate did not measure it")
    cv_c = coefficient_of_variation(candidate)
    base = base.model_copy(
        update={
            "candidate_mean": _mean(candidate),
            "n_candidate": len(candidate),
            "cv_candidate": cv_c,
        }
    )
    if way == "none":
        return verdict("UNGATED", "describes the run; not gated")
    interval = bootstrap_ratio(
        candidate,
        baseline,
        direction=way,
        confidence=policy.confidence,
        resamples=policy.resamples,
        rng=rng,
    )
    base = base.model_copy(
        update={
            "ratio": interval.ratio,
            "low": interval.low,
            "high": interval.high,
            "detectable": detectable_regression(
                cv_b, cv_c, len(baseline), len(candidate), tol, policy.confidence
            ),
        }
    )
    if not all(math.isfinite(v) for v in (interval.ratio, interval.low, interval.high)):
        return verdict(
            "INCOMPARABLE",
            f"the ratio or its interval is not finite ({interval.ratio}, [{interval.low}, "
            f"{interval.high}]); refusing to guess",
        )
    few = [
        f"{side} has {n} run{'s' if n != 1 else ''}"
        + (f" ({samples} samples: repeats within a run are not runs)" if samples > n else "")
        for side, samples, runs in (
            ("baseline", len(baseline), baseline_runs),
            ("candidate", len(candidate), candidate_runs),
        )
        if (n := samples if runs is None else min(samples, runs)) < policy.min_repeats
    ]
    if few:
        return verdict(
            "TOO_FEW",
            f"{' and '.join(few)}; need >= {policy.min_repeats} to tell noise from change",
        )
    pct = _change(interval.ratio)
    bounds = f"[{interval.low:.3f}, {interval.high:.3f}]"
    if interval.ratio > IMPLAUSIBLE_RATIO:
        return verdict(
            "INCOMPARABLE",
            f"{interval.ratio:.3g}x better is not a measurement (units? a broken run?); "
            f"refusing to pass it (above {IMPLAUSIBLE_RATIO:g}x; mark the candidate good "
            "on its own if it is real)",
        )
    if interval.high < 1 - tol:
        return verdict(
            "REGRESSION",
            f"{pct} worse: whole {policy.confidence:.0%} interval {bounds} is below 1 - {tol:.1%}",
        )
    if interval.low > 1 + tol:
        return verdict(
            "IMPROVEMENT", f"{pct} better: whole interval {bounds} is above 1 + {tol:.1%}"
        )
    return verdict("SAME", f"{pct}, interval {bounds}: within noise")


def _change(ratio: float) -> str:
    """The change a ratio (< 1 worse) stands for, as a person reads it: a percent near 1, a
    factor beyond 2x either way ("-77.7% worse" for a p99 4.5 times slower read as mild)."""
    if ratio < 0.5:
        return f"x{1 / ratio:.1f}"
    if ratio > 2:
        return f"x{ratio:.1f}"
    return f"{(ratio - 1) * 100:+.1f}%"


def compare_metrics(
    baseline: Record, candidate: Record, policy: GatePolicy, rng: np.random.Generator
) -> list[MetricVerdict]:
    keys = sorted(set(baseline.metrics) | set(candidate.metrics))
    # A metric absent from a check that did report others (a concurrency level that did not
    # run) is MISSING and refuses. A check that reported nothing at all is judged by its own
    # status above (NOT_RUN/FAILED), and an older record may hold fields a newer stackgate
    # no longer extracts: those are shown, not gated.
    # A check that PASSed yet reported none of the baseline's metrics is no excuse: its metrics
    # stay MISSING (a report whose numbers were all null or stripped must not pass).
    measured_scopes = {parse_metric_key(k).scope for k in candidate.metrics}
    measured_scopes |= {c.check for c in candidate.checks if c.status == "PASS"}
    out = []
    for k in keys:
        verdict = compare_metric(
            k,
            baseline.metrics.get(k),
            candidate.metrics.get(k),
            policy,
            rng,
            baseline_runs=baseline.runs,
            candidate_runs=candidate.runs,
        )
        if verdict.status == "MISSING" and parse_metric_key(k).scope not in measured_scopes:
            verdict = verdict.model_copy(
                update={
                    "status": "UNGATED",
                    "reason": "its check reported no metrics in the candidate (see the check)",
                }
            )
        out.append(verdict)
    return out


def gate(
    baseline: Record,
    candidate: Record,
    policy: GatePolicy | None = None,
    *,
    remeasured: Record | None = None,
) -> GateResult:
    """Judge candidate against baseline. `remeasured`: the baseline's env run again, interleaved
    with the candidate's runs; its numbers replace the record's (checks, versions and host
    still come from the record; a record check that the re-measured env skipped here too is
    NOT_HERE, listed in not_proven_here, and does not refuse)."""
    policy = policy or GatePolicy()
    numbers = remeasured or baseline
    seed = _seed(numbers, candidate)
    rng = np.random.default_rng(seed)
    checks = compare_checks(baseline, candidate, remeasured)
    metrics = compare_metrics(numbers, candidate, policy, rng)
    reasons: list[str] = []
    for c in checks:
        if c.failing:
            reasons.append(f"check {c.check}: {c.status}: {c.reason}")
    for m in metrics:
        if m.failing:
            reasons.append(f"metric {m.key}: {m.status}: {m.reason}")
    versions = diff_versions(
        baseline.build.packages,
        candidate.build.packages,
        (baseline.build.env_tree_sha256, candidate.build.env_tree_sha256),
    )
    host = [
        HostChange(field=d.field, baseline=d.recorded, candidate=d.here, impact=d.impact, why=d.why)
        for d in diff_hosts(baseline.host, candidate.host)
    ]
    return GateResult(
        baseline=baseline.label,
        candidate=candidate.label,
        passed=not reasons,
        reasons=reasons,
        checks=checks,
        metrics=metrics,
        versions=versions.changes,
        versions_unknown=versions.summary(),
        env=diff_flat(baseline.env, candidate.env),
        manifest=diff_manifests(baseline.manifest, candidate.manifest),
        host=host,
        policy={
            "tolerance": policy.tolerance,
            "tail_tolerance": policy.tail_tolerance,
            "confidence": policy.confidence,
            "min_repeats": policy.min_repeats,
            "resamples": policy.resamples,
        },
        seed=seed,
        baseline_numbers=(
            "record"
            if remeasured is None
            else f"re-measured interleaved with the candidate ({remeasured.runs} runs)"
        ),
        not_proven_here=[c.check for c in checks if c.status == "NOT_HERE"],
        underpowered=[
            m.key
            for m in metrics
            if m.status == "SAME"
            and m.tolerance < TARGET_REGRESSION  # tail metrics are not sized for 3%
            and (
                blind := detectable_regression(
                    m.cv_baseline,
                    m.cv_candidate,
                    m.n_baseline,
                    m.n_candidate,
                    m.tolerance,
                    policy.confidence,
                    sure=True,
                )
            )
            is not None
            and blind > TARGET_REGRESSION
        ],
    )
