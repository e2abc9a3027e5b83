"""Family false-alarm rate and power of the gate's rule, old vs new, by running the gate's own
code on simulated runs at a given run-to-run noise.

New rule: validators.gate.compare.judge_family (max-T over sign flips of ABBA pairs, declared
gated list: output throughput, median TPOT, median and p99 TTFT (tail), single-stream decode).
Old rule: validators.gate.stats.batch_bootstrap_bounds, the percentile bootstrap of the gate
before it (tolerance 1.25%, tail 8%, one-sided 95% bounds), over the metrics it gated at one
level plus single stream (27 main-class, 12 tail-class: the machine-2 record's list).

Noise model per run: a level factor shared by the throughput-like metrics (CV `cv`), TTFT with
its own factor (CV 1.5 x cv), tails 3 x cv; metrics built from the same factor are exact
multiples (as at fixed lengths). A regression of x scales throughputs by 1 - x and latencies by
1 / (1 - x) on every metric.

    python benchmarks/gate/gate_family_sim.py [--sims 400] [--runs 8] [--cvs 0.01,0.02,...]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from validators.gate.compare import MetricVerdict, Screened, judge_family
from validators.gate.policy import GatePolicy
from validators.gate.runs import PerRun
from validators.gate.stats import batch_bootstrap_bounds

# name, noise factor (its CV multiple: `mult` in new_rule); direction and tolerance class are
# the product's (policy.gated: validators/records/gated.py), so the simulation follows its list
NEW_GATED = (
    ("serve-bench.sweep/output_throughput@c16", "thr"),
    ("serve-bench.sweep/median_ttft_ms@c16", "ttft"),
    ("serve-bench.sweep/median_tpot_ms@c16", "thr"),
    ("serve-bench.sweep/p99_ttft_ms@c16", "tail"),
    ("serve-bench.single_stream/single_stream_decode_tok_s", "ss"),
)
# The old rule's gated set at one level + single stream: (factor, multiple, tail?) per metric.
OLD_GATED = (
    [("thr", 1.0, False)] * 12 + [("ttft", 1.5, False)] * 6 + [("ss", 1.0, False)] * 9
    + [("tail", 3.0, True)] * 12
)  # fmt: skip
FACTORS = ("thr", "ttft", "tail", "ss")


def draw(rng: np.random.Generator, sims: int, runs: int, cv: float, mult: dict[str, float],
         slow: float, instance_cv: float = 0.0) -> dict[str, NDArray[np.float64]]:  # fmt: skip
    """(sims, runs) multiplicative noise per factor, with a uniform slowdown applied.
    instance_cv: one offset per simulated side shared by all its runs (one server instance
    serving every run of a side: a restart offset that no number of benches averages away)."""
    return {
        f: np.exp(
            rng.normal(0.0, cv * mult[f], size=(sims, runs))
            + rng.normal(0.0, instance_cv * mult[f], size=(sims, 1))
            + math.log(1 - slow)
        )
        for f in FACTORS
    }


def new_rule(rng: np.random.Generator, sims: int, runs: int, cv: float, slow: float,
             policy: GatePolicy, instance_cv: float = 0.0) -> tuple[float, float]:  # fmt: skip
    """(refused, inconclusive) fractions of simulated paired gates, via judge_family."""
    mult = {"thr": 1.0, "ttft": 1.5, "tail": 3.0, "ss": 1.0}
    base = draw(rng, sims, runs, cv, mult, 0.0, instance_cv)
    cand = draw(rng, sims, runs, cv, mult, slow, instance_cv)
    refused = inconclusive = 0
    for s in range(sims):
        screened = []
        for key, factor in NEW_GATED:
            entry = policy.gated(key)
            assert entry is not None, key
            way, cls = entry.direction, entry.tolerance_class
            fb, fc = base[factor][s], cand[factor][s]
            vb, vc = (100 * fb, 100 * fc) if way == "higher" else (100 / fb, 100 / fc)
            v = MetricVerdict(key=key, direction=way, status="SAME", reason="", gated=True,
                              tolerance_class=cls, tolerance=policy.tolerance_for(key))  # fmt: skip
            screened.append(Screened(v, _per_run(vb), _per_run(vc)))
        verdicts, _ = judge_family(screened, policy, rng, paired=True)
        statuses = {v.status for v in verdicts}
        refused += "REGRESSION" in statuses
        inconclusive += "REGRESSION" not in statuses and "INCONCLUSIVE" in statuses
    return refused / sims, inconclusive / sims


def _per_run(values: NDArray[np.float64]) -> PerRun:
    return PerRun({i: float(x) for i, x in enumerate(values)}, len(values))


def old_rule(rng: np.random.Generator, sims: int, runs: int, cv: float, slow: float,
             resamples: int) -> float:  # fmt: skip
    """Fraction of simulated unpaired gates the old percentile-bootstrap rule refused."""
    mult = {"thr": 1.0, "ttft": 1.5, "tail": 3.0, "ss": 1.0}
    base = draw(rng, sims, runs, cv, mult, 0.0)
    cand = draw(rng, sims, runs, cv, mult, slow)
    refused = np.zeros(sims, dtype=bool)
    for factor, _, tail in OLD_GATED:
        tol = 0.08 if tail else 0.0125
        _, high = batch_bootstrap_bounds(cand[factor], base[factor], direction="higher",
                                         confidence=0.95, resamples=resamples, rng=rng)  # fmt: skip
        refused |= high < 1 - tol
    return float(refused.mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sims", type=int, default=400)
    ap.add_argument("--runs", type=int, default=8, help="runs (pairs) a side")
    ap.add_argument("--cvs", default="0.01,0.02,0.03,0.051,0.08")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--instance-cv", type=float, default=0.0,
                    help="per-server-instance offset (restart CV); new rule only")  # fmt: skip
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    policy = GatePolicy(min_repeats=2)
    print(f"runs a side {args.runs}, {args.sims} simulated gates per cell, goal <= "
          f"{policy.family_alpha:.0%} family false alarms; new: tolerance {policy.tolerance:.1%}, "
          f"{len(NEW_GATED)} gated, paired; old: 1.25%/8%, {len(OLD_GATED)} gated, unpaired")  # fmt: skip
    inst = args.instance_cv
    if inst:
        print(f"one server instance a side, instance offset CV {inst:.1%} (old rule not run)")
    print("| CV | rule | equal refused | equal inconclusive | 3% refused | 5% refused |")
    print("|---|---|---|---|---|---|")
    for cv in (float(c) for c in args.cvs.split(",")):
        fa, inc = new_rule(rng, args.sims, args.runs, cv, 0.0, policy, inst)
        p3, _ = new_rule(rng, args.sims, args.runs, cv, 0.03, policy, inst)
        p5, _ = new_rule(rng, args.sims, args.runs, cv, 0.05, policy, inst)
        print(f"| {cv:.1%} | new | {fa:.1%} | {inc:.1%} | {p3:.1%} | {p5:.1%} |", flush=True)
        if inst:
            continue
        old = [old_rule(rng, args.sims, args.runs, cv, s, args.resamples) for s in (0, 0.03, 0.05)]
        print(f"| {cv:.1%} | old | {old[0]:.1%} | - | {old[1]:.1%} | {old[2]:.1%} |", flush=True)


if __name__ == "__main__":
    main()
