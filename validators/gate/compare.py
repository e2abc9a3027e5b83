"""Compare a candidate record with a baseline record: checks, metrics, versions, env, host.

The verdict is data (`GateResult`); rendering it (rich table, JSON, HTML) is elsewhere.
A gate fails on: a candidate check that FAILed or ERRORed, a check the baseline passed that
the candidate did not run, a metric whose interval says regression, a gated metric the
candidate lacks, or too few runs to judge noise.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from stackgate.model import StrictModel
from validators.gate.diffs import Change, diff_flat, diff_manifests, diff_versions
from validators.gate.family import (
    FamilyInput,
    FamilyResult,
    MetricTest,
    detectable,
    family_test,
    low_noise_bound,
    normal_family_critical,
    runs_to_decide,
)
from validators.gate.policy import GatePolicy
from validators.gate.runs import PerRun, per_run
from validators.gate.stats import coefficient_of_variation, oriented_ratio
from validators.records.fingerprint import diff_hosts
from validators.records.gated import MetricFacts, ToleranceClass, facts_for
from validators.records.metrics import Direction, parse_metric_key
from validators.records.model import Record

MetricStatus = Literal[
    "REGRESSION",
    "INCONCLUSIVE",
    "UNDERPOWERED",
    "IMPROVEMENT",
    "SAME",
    "MISSING",
    "NEW",
    "TOO_FEW",
    "UNGATED",
    "INCOMPARABLE",
]
Verdict = Literal["PASSED", "REFUSED", "INCONCLUSIVE", "UNDERPOWERED"]
# The order a table lists metrics in: refusals first, then what is unproven, then the rest.
METRIC_ORDER: dict[MetricStatus, int] = {
    "REGRESSION": 0,
    "INCOMPARABLE": 0,
    "MISSING": 1,
    "TOO_FEW": 2,
    "INCONCLUSIVE": 2,
    "UNDERPOWERED": 2,
    "IMPROVEMENT": 3,
    "SAME": 4,
    "NEW": 5,
    "UNGATED": 6,
}
CheckStatus = Literal["OK", "FAILED", "NOT_RUN", "NEW", "SKIPPED", "NOT_HERE"]
# NOT_HERE (interleaved gate only): the record PASSed the check on its host, but its own env
# re-measured here skipped it too (one GPU: no interconnect): not the candidate's doing, so it
# does not refuse, but the verdict lists it (GateResult.not_proven_here).
# INCOMPARABLE: samples that give no ratio (NaN, inf, zero, negative), means or an interval that
# overflow (a NaN interval would read as SAME), or an "improvement" too large to be a
# measurement: the gate's own guard, so no path turns "cannot compare" into a pass.
_FAILING_METRIC: frozenset[str] = frozenset({"REGRESSION", "MISSING", "TOO_FEW", "INCOMPARABLE"})
# A candidate more than this many times better is not judged an improvement: a real upgrade
# does not make a metric 100x better, a number in seconds where milliseconds were meant (1000x)
# or a fabricated one does. Re-baseline (mark the candidate good) if it is real.
IMPLAUSIBLE_RATIO = 100.0
# A regression beyond its margin whose family false-alarm probability is above the goal but at
# most this (or the smallest p the runs can reach at all) is INCONCLUSIVE, not SAME: it looks
# worse, and the report says how many runs would decide it. An equal candidate is INCONCLUSIVE
# at most this often (family-wise), REFUSED at most 1 - confidence.
INCONCLUSIVE_SIGNAL = 0.05


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
        default=None,
        description="Smallest regression refused with 95% power at the measured noise and runs "
        "(inf: these runs cannot refuse anything at the family goal).",
    )
    gated: bool = Field(default=False, description="In the policy profile's gated list.")
    tolerance_class: ToleranceClass | None = None
    p_family: float | None = Field(
        default=None,
        description="Probability that an equal candidate shows a regression this large on some "
        "gated metric (Westfall-Young adjusted p).",
    )
    paired: bool = Field(default=False, description="Judged on within-pair log ratios.")
    runs_to_decide: int | None = Field(
        default=None, description="INCONCLUSIVE: about how many runs a side would decide it."
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
    verdict: Verdict = "REFUSED"
    underpowered: list[str] = Field(
        default_factory=list,
        description="Gated metrics within noise whose noise hides the policy's target "
        "regression at these runs (UNDERPOWERED).",
    )
    inconclusive: list[str] = Field(
        default_factory=list,
        description="Gated metrics that look worse but whose family false-alarm probability is "
        "above the goal (INCONCLUSIVE).",
    )
    family: dict[str, float | int | bool | str] = Field(
        default_factory=dict,
        description="The family-wise test: method, paired, relabellings, critical value, goal.",
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


@dataclass(frozen=True)
class Side:
    """One side's samples of a metric, how they map to runs, and its stored facts."""

    samples: list[float] | None
    runs: int | None = None  # how many validation runs the record merges
    index: list[int] | None = None  # each sample's run (records that keep it)
    facts: MetricFacts | None = None

    @classmethod
    def of(cls, r: Record, key: str) -> Side:
        return cls(r.metrics.get(key), r.runs, r.sample_runs.get(key), r.metric_facts.get(key))

    def per_run(self) -> PerRun | None:
        samples = self.samples or []
        runs = len(samples) if self.runs is None else self.runs
        return per_run(samples, runs, self.index)


@dataclass(frozen=True)
class Screened:
    """A gated metric that is comparable: its provisional verdict and per-run values."""

    verdict: MetricVerdict
    baseline: PerRun
    candidate: PerRun


def _start(key: str, policy: GatePolicy, baseline: Side, candidate: Side) -> MetricVerdict:
    """The candidate's stored facts (the newer declaration), else the baseline's, else the
    policy profile's (records written before they were kept)."""
    facts = candidate.facts or baseline.facts or facts_for(key, policy.profile)
    return MetricVerdict(
        key=key,
        direction=facts.direction,
        status="UNGATED",
        reason="",
        gated=facts.tolerance_class is not None,
        tolerance_class=facts.tolerance_class,
        baseline_mean=_mean(baseline.samples),
        candidate_mean=_mean(candidate.samples),
        n_baseline=len(baseline.samples or []),
        n_candidate=len(candidate.samples or []),
        tolerance=policy.tolerance_for(key, facts),
        cv_baseline=_cv(baseline.samples),
        cv_candidate=_cv(candidate.samples),
    )


def _cv(samples: list[float] | None) -> float | None:
    values = samples or []
    if not all(math.isfinite(x) and x > 0 for x in values):
        return None
    return coefficient_of_variation(values)


def _unusable(v: MetricVerdict, baseline: Side, candidate: Side) -> MetricVerdict | None:
    """INCOMPARABLE when the samples give no ratio or overflow when averaged."""
    samples = (baseline.samples or []) + (candidate.samples or [])
    bad = [x for x in samples if not (math.isfinite(x) and x > 0)]
    if bad:
        return _with(
            v,
            "INCOMPARABLE",
            f"samples {bad[:3]} give no ratio (need finite numbers > 0); refusing to guess",
            baseline_mean=_mean(baseline.samples),
            candidate_mean=_mean(candidate.samples),
        )
    means = [v.baseline_mean] + ([v.candidate_mean] if candidate.samples else [])
    if any(m is None or not math.isfinite(m) for m in means):
        return _with(
            v,
            "INCOMPARABLE",
            "the samples overflow when averaged (a mean is not finite); refusing to guess",
        )
    return None


def _too_few(policy: GatePolicy, sides: dict[str, tuple[Side, PerRun | None]]) -> str | None:
    few = []
    for name, (side, runs) in sides.items():
        samples = len(side.samples or [])
        if runs is None:
            few.append(
                f"{name}'s {samples} samples cannot be told apart by run ({side.runs} runs; "
                "repeats within a run are not runs)"
            )
            continue
        if runs.n < policy.min_repeats:
            more = (
                f" ({samples} samples: repeats within a run are not runs)"
                if samples > runs.n
                else ""
            )
            few.append(f"{name} has {runs.n} run{'s' if runs.n != 1 else ''}{more}")
    if not few:
        return None
    return f"{' and '.join(few)}; need >= {policy.min_repeats} to tell noise from change"


def screen_metric(
    key: str, baseline: Side, candidate: Side, policy: GatePolicy
) -> MetricVerdict | Screened:
    """A final verdict for a metric that cannot be judged (NEW, INCOMPARABLE, MISSING, UNGATED,
    TOO_FEW), else the comparable metric's per-run values for the family test."""
    v = _start(key, policy, baseline, candidate)
    if not baseline.samples:
        return _with(v, "NEW", "not measured on the baseline")
    if not v.gated:
        shown = "not measured" if not candidate.samples else "reported"
        return _with(v, "UNGATED", f"{shown}; not in the gated list of the policy's profile")
    bad = _unusable(v, baseline, candidate)
    if bad is not None:
        return bad
    if not candidate.samples:
        return _with(v, "MISSING", "the candidate did not measure it")
    b_runs, c_runs = baseline.per_run(), candidate.per_run()
    few = _too_few(policy, {"baseline": (baseline, b_runs), "candidate": (candidate, c_runs)})
    if few is not None or b_runs is None or c_runs is None:
        return _with(v, "TOO_FEW", few or "runs unknown")
    v = v.model_copy(update={"n_baseline": b_runs.n, "n_candidate": c_runs.n})
    ratio = oriented_ratio(float(np.mean(list(c_runs.values.values()))),
                           float(np.mean(list(b_runs.values.values()))), v.direction)  # fmt: skip
    if ratio > IMPLAUSIBLE_RATIO:
        return _with(
            v,
            "INCOMPARABLE",
            f"{ratio:.3g}x better is not a measurement (units? a broken run?); refusing to pass "
            f"it (above {IMPLAUSIBLE_RATIO:g}x; mark the candidate good on its own if it is real)",
            ratio=ratio,
        )
    return Screened(v, b_runs, c_runs)


def _with(v: MetricVerdict, status: MetricStatus, reason: str, **more: Any) -> MetricVerdict:
    return v.model_copy(update={"status": status, "reason": reason, **more})


def _oriented_logs(runs: PerRun, rows: list[int], way: Direction) -> NDArray[np.float64]:
    logs = np.log(np.array([runs.values[r] for r in rows], dtype=np.float64))
    out: NDArray[np.float64] = -logs if way == "lower" else logs
    return out


def _family_input(screened: list[Screened], policy: GatePolicy, paired: bool) -> FamilyInput:
    """Rows every gated metric has; paired when asked and both sides ran the same runs."""
    b_rows = sorted(set.intersection(*(set(s.baseline.values) for s in screened)))
    c_rows = sorted(set.intersection(*(set(s.candidate.values) for s in screened)))
    paired = paired and b_rows == c_rows
    cols_b = [_oriented_logs(s.baseline, b_rows, s.verdict.direction) for s in screened]
    cols_c = [_oriented_logs(s.candidate, c_rows, s.verdict.direction) for s in screened]
    margins = np.array([-math.log(1 - s.verdict.tolerance) for s in screened])
    return FamilyInput(np.stack(cols_b, axis=1), np.stack(cols_c, axis=1), margins, paired)


def _decide_runs(test: MetricTest, n: int, margin: float, policy: GatePolicy, k: int) -> int | None:
    """Runs a side that would decide this metric: enough relabellings to reach the goal at
    all, and enough runs to refuse the observed effect with 95% power if it is real."""
    z = normal_family_critical(policy.confidence, k) + NormalDist().inv_cdf(0.95)
    need = runs_to_decide(test, n, margin, z)
    floor = math.ceil(math.log2(1 / policy.family_alpha))  # 2^n sign patterns >= 1/alpha
    return None if need is None else max(need, floor)


def _judge(
    s: Screened, test: MetricTest, fam: FamilyResult, policy: GatePolicy, k: int
) -> MetricVerdict:
    """The family verdict of one comparable gated metric."""
    v, alpha = s.verdict, policy.family_alpha
    margin = -math.log(1 - v.tolerance)
    c = fam.critical
    bound = c if math.isfinite(c) else NormalDist().inv_cdf(policy.confidence)
    low, high = math.exp(-(test.worse + bound * test.se)), math.exp(-(test.worse - bound * test.se))
    blind = detectable(test.se, margin, c)
    n = min(s.baseline.n, s.candidate.n)
    dof = n - 1 if fam.paired else s.baseline.n + s.candidate.n - 2
    surely_blind = detectable(low_noise_bound(test.se, dof), margin, c)
    v = v.model_copy(
        update={
            "ratio": math.exp(-test.worse),
            "low": low,
            "high": high,
            "detectable": blind,
            "p_family": test.p_family,
            "paired": fam.paired,
        }
    )
    pct = _change(math.exp(-test.worse))
    bounds = f"[{low:.3f}, {high:.3f}]"
    # Each bound is one-sided at the family confidence over all gated metrics (the pair is not a
    # two-sided interval at that level: it covers 1 - 2 x (1 - confidence)).
    level = f"{policy.confidence:.0%} family-wise one-sided"
    if test.t > 0 and test.p_family <= alpha:
        return _with(
            v,
            "REGRESSION",
            f"{pct} worse: {level} bounds {bounds} below 1 - {v.tolerance:.1%} (family "
            f"false-alarm probability {test.p_family:.2%} <= {alpha:.0%})",
        )
    if math.isfinite(c) and (-test.worse - margin) / test.se > c:
        return _with(
            v, "IMPROVEMENT", f"{pct} better: {level} bounds {bounds} above 1 + {v.tolerance:.1%}"
        )
    if test.t > 0 and test.p_family <= max(INCONCLUSIVE_SIGNAL, fam.min_p):
        runs = _decide_runs(test, n, margin, policy, k)
        return _with(
            v,
            "INCONCLUSIVE",
            f"{pct} worse, but an equal candidate shows this much on some gated metric with "
            f"probability {test.p_family:.1%} (goal <= {alpha:.0%}) at {n} runs"
            + (f"; about {runs} runs a side would decide it" if runs else ""),
            runs_to_decide=runs,
        )
    target = policy.target_for(v.tolerance)
    if v.tolerance_class == "main" and surely_blind > target:
        return _with(
            v,
            "UNDERPOWERED",
            f"{pct}, {level} bounds {bounds}: within noise, but at this noise and {n} runs "
            f"only a regression of {blind:.1%} or more is caught with 95% power ({surely_blind:.1%} "
            f"even at the low end of the noise; target {target:.1%})",
        )
    return _with(v, "SAME", f"{pct}, {level} bounds {bounds}: within noise")


def judge_family(
    screened: list[Screened], policy: GatePolicy, rng: np.random.Generator, *, paired: bool
) -> tuple[list[MetricVerdict], FamilyResult | None]:
    """Every comparable gated metric judged together (validators/gate/family.py)."""
    if not screened:
        return [], None
    data = _family_input(screened, policy, paired)
    fam = family_test(data, policy.confidence, rng)
    k = len(screened)
    return [_judge(s, t, fam, policy, k) for s, t in zip(screened, fam.tests, strict=True)], fam


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
    """One metric judged alone (a family of one); `*_runs`: how many validation runs each
    side's record merges (repeats within a run are averaged, not counted as runs)."""
    found = screen_metric(
        key, Side(baseline, baseline_runs), Side(candidate, candidate_runs), policy
    )
    if isinstance(found, MetricVerdict):
        return found
    verdicts, _ = judge_family([found], policy, rng, paired=False)
    return verdicts[0]


def _change(ratio: float) -> str:
    """The change a ratio (< 1 worse) stands for, as a person reads it: a percent near 1, a
    factor beyond 2x either way ("-77.7% worse" for a p99 4.5 times slower read as mild)."""
    if ratio < 0.5:
        return f"x{1 / ratio:.1f}"
    if ratio > 2:
        return f"x{ratio:.1f}"
    return f"{(ratio - 1) * 100:+.1f}%"


def compare_metrics(
    baseline: Record,
    candidate: Record,
    policy: GatePolicy,
    rng: np.random.Generator,
    *,
    paired: bool = False,
) -> tuple[list[MetricVerdict], FamilyResult | None]:
    keys = sorted(set(baseline.metrics) | set(candidate.metrics))
    # A metric absent from a check that reported others, or that PASSed (numbers all null or
    # stripped), is MISSING and refuses. A check that reported nothing is judged by its status
    # (NOT_RUN/FAILED); fields of an older record no longer extracted are shown, not gated.
    measured_scopes = {parse_metric_key(k).scope for k in candidate.metrics}
    measured_scopes |= {c.check for c in candidate.checks if c.status == "PASS"}
    final: dict[str, MetricVerdict] = {}
    comparable: list[Screened] = []
    for k in keys:
        found = screen_metric(k, Side.of(baseline, k), Side.of(candidate, k), policy)
        if isinstance(found, Screened):
            comparable.append(found)
            continue
        if found.status == "MISSING" and parse_metric_key(k).scope not in measured_scopes:
            found = _with(
                found, "UNGATED", "its check reported no metrics in the candidate (see the check)"
            )
        final[k] = found
    judged, fam = judge_family(comparable, policy, rng, paired=paired)
    final.update({v.key: v for v in judged})
    return [final[k] for k in keys], fam


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
    metrics, fam = compare_metrics(numbers, candidate, policy, rng, paired=remeasured is not None)
    reasons = [f"check {c.check}: {c.status}: {c.reason}" for c in checks if c.failing]
    reasons += [f"metric {m.key}: {m.status}: {m.reason}" for m in metrics if m.failing]
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
        passed=_verdict(reasons, metrics) == "PASSED",
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
            "family_false_alarm_goal": policy.family_alpha,
            "target_regression": policy.target,
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
        verdict=_verdict(reasons, metrics),
        underpowered=[m.key for m in metrics if m.status == "UNDERPOWERED"],
        inconclusive=[m.key for m in metrics if m.status == "INCONCLUSIVE"],
        family=_family_facts(fam, policy, metrics),
    )


def _verdict(reasons: list[str], metrics: list[MetricVerdict]) -> Verdict:
    """REFUSED on any failing check or metric; else INCONCLUSIVE when a gated metric looks
    worse but its evidence is within the family's noise; else UNDERPOWERED when a gated metric
    could hide the target regression; else PASSED."""
    if reasons:
        return "REFUSED"
    statuses = {m.status for m in metrics}
    if "INCONCLUSIVE" in statuses:
        return "INCONCLUSIVE"
    if "UNDERPOWERED" in statuses:
        return "UNDERPOWERED"
    return "PASSED"


def _family_facts(
    fam: FamilyResult | None, policy: GatePolicy, metrics: list[MetricVerdict]
) -> dict[str, float | int | bool | str]:
    gated = sum(1 for m in metrics if m.gated)
    facts: dict[str, float | int | bool | str] = {
        "goal_false_alarm": policy.family_alpha,
        "gated_metrics": gated,
        "target_regression": policy.target,
    }
    if fam is None:
        return facts
    return {
        **facts,
        "method": "max-T over sign flips of pairs"
        if fam.paired
        else "max-T over run-label permutations",
        "paired": fam.paired,
        "relabellings": fam.relabellings,
        "exact": fam.exact,
        "critical_t": fam.critical if math.isfinite(fam.critical) else -1.0,
        "smallest_p": fam.min_p,
        "judged_together": len(fam.tests),
    }
