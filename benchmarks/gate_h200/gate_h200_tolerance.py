"""Pre-register the lent H200's gate tolerances from runs already made, before the run they judge.

Issue 16.3 on ONE lent H200 (machine 3): an equal candidate, 8 ABBA pairs, default policy
(1.25% / 8% tails) was refused on 10 C=8 metrics; the per-run CV there is 10-18%. This script
answers, from machine 3's 16 kept runs of that equal gate ONLY (the same env on both sides,
`machine3/runs-equal/`): at N pairs (N runs a side), which tolerance and tail tolerance does an
interleaved gate of this example stack need so that an equal candidate is refused at most
GOAL_FALSE_ALARM of the time, and what regression does the gate still catch at that setting?

Method, using the gate's own code (validators.gate.stats.resampled_ratios, GatePolicy's
tail split, the confidence quantile the gate compares with 1 - tolerance):
- empirical: TRIALS random splits of the 16 equal runs into N "baseline" and N "candidate"
  runs (without replacement; each run keeps all its metrics, so their correlation stays);
  per split and metric the gate's one-sided upper bound H of the oriented ratio. A metric is
  refused when H < 1 - tol; a gate when any metric is.
- parametric cross-check: each metric drawn independently (the worst case for a gate over
  many metrics) as x = 1 + cv * e at its pooled CV, e normal and Student-t3 (unit variance).
The rule, fixed before looking at any new run: the false-alarm budget is split in half
between the main metrics (means, medians, throughput) and the tail metrics (p90/p95/p99/max);
for each, the smallest whole-percent tolerance whose gate false alarm is <= half the goal in
the empirical AND both parametric models.

Power: a true regression scales the candidate's oriented ratio by (1 - r), so H_r = (1 - r) H
on the same splits: the smallest r caught 95% of the time is given per metric and for a
uniform slowdown of every metric (the gate refuses when any metric does), and the no-CB
candidate's per-metric ratios measured on machine 3 (gate B) are applied to the equal splits.

Run:  uv run python benchmarks/gate_h200/gate_h200_tolerance.py [--pairs 4] [--trials 2000]
Writes benchmarks/gate_h200/results/tolerance/tolerance.json and tolerance.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from validators.gate.policy import DEFAULT_CONFIDENCE, GatePolicy  # noqa: E402
from validators.gate.stats import resampled_ratios  # noqa: E402
from validators.records.extract import merge_runs, run_metrics  # noqa: E402
from validators.records.metrics import direction  # noqa: E402
from validators.records.resolve import read_report  # noqa: E402

MACHINE3 = ROOT / "benchmarks" / "gate_h200" / "results" / "machine3"
GOAL_FALSE_ALARM = 0.05  # per gate, equal candidate refused
GOAL_POWER = 0.95
RESAMPLES = GatePolicy().resamples  # the gate's own: 4000
CHUNK = 50


def load_runs(folder: Path) -> tuple[list[str], np.ndarray, list[str]]:
    """(gated metric keys, runs x metrics array, run names) of every kept run report."""
    names = sorted(p.name for p in folder.glob("pair-*.json"))
    if not names:  # a gate that made no runs (it refused before them): say so, not a TypeError
        raise SystemExit(f"{folder}: no pair-*.json run reports (did the gate run?)")
    per_run = []
    for name in names:
        merged, _, _ = merge_runs([run_metrics(read_report(folder / name))])
        per_run.append({k: v[0] for k, v in merged.items() if v})
    keys = sorted(k for k in set.intersection(*(set(r) for r in per_run)) if direction(k) != "none")
    return keys, np.array([[r[k] for k in keys] for r in per_run], dtype=np.float64), names


def oriented(values: np.ndarray, keys: list[str]) -> np.ndarray:
    """Values turned higher-is-better (1/x for latencies), so every ratio is cand/base."""
    lower = np.array([direction(k) == "lower" for k in keys])
    return np.where(lower, 1.0 / values, values)


def upper_bounds(base: np.ndarray, cand: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(trials, metrics) upper `confidence` bound of the gate's bootstrap ratio interval.
    base, cand: (trials, n, metrics), already oriented higher-is-better."""
    trials, _, metrics = base.shape
    out = np.empty((trials, metrics))
    for m in range(metrics):
        for s in range(0, trials, CHUNK):
            ratios = resampled_ratios(
                cand[s : s + CHUNK, :, m],
                base[s : s + CHUNK, :, m],
                direction="higher",
                resamples=RESAMPLES,
                rng=rng,
            )
            out[s : s + CHUNK, m] = np.quantile(ratios, DEFAULT_CONFIDENCE, axis=1)
    return out


def empirical(values: np.ndarray, n: int, trials: int, rng: np.random.Generator) -> np.ndarray:
    idx = np.array([rng.permutation(values.shape[0])[: 2 * n] for _ in range(trials)])
    picked = values[idx]  # (trials, 2n, metrics)
    return upper_bounds(picked[:, :n], picked[:, n:], rng)


def parametric(
    cvs: np.ndarray, n: int, trials: int, rng: np.random.Generator, tails: str
) -> np.ndarray:
    shape = (trials, n, cvs.size)

    def draw() -> np.ndarray:
        e = (
            rng.standard_t(3, size=shape) / math.sqrt(3.0)
            if tails == "t3"
            else rng.standard_normal(shape)
        )
        return np.clip(1.0 + cvs * e, 0.05, None)

    return upper_bounds(draw(), draw(), rng)


def gate_false_alarm(h: np.ndarray, mask: np.ndarray, tol: float) -> float:
    if not mask.any():
        return 0.0
    return float(np.mean((h[:, mask] < 1 - tol).any(axis=1)))


def smallest_tolerance(models: dict[str, np.ndarray], mask: np.ndarray, budget: float) -> float:
    """Smallest whole percent whose gate false alarm is <= budget in every model."""
    for pct in range(1, 100):
        if all(gate_false_alarm(h, mask, pct / 100) <= budget for h in models.values()):
            return pct / 100
    raise SystemExit("no tolerance below 100% holds the false-alarm budget")


def caught_95(h: np.ndarray, tol: np.ndarray) -> np.ndarray:
    """Per metric: smallest regression r with P((1 - r) H < 1 - tol) >= 95%."""
    q = np.quantile(h, GOAL_POWER, axis=0)
    return np.asarray(1 - (1 - tol) / q)


def gate_power(h: np.ndarray, tol: np.ndarray, factor: np.ndarray) -> float:
    """P(any metric refused) when the candidate's oriented ratios are scaled by factor."""
    return float(np.mean((h * factor < 1 - tol).any(axis=1)))


def uniform_caught(h: np.ndarray, tol: np.ndarray) -> float:
    """Smallest slowdown of every metric at once that the gate refuses >= 95% of the time."""
    slack = np.min(h / (1 - tol), axis=1)  # refused when (1 - r) * slack < 1
    return float(1 - 1 / np.quantile(slack, GOAL_POWER))


def nocb_ratios(keys: list[str]) -> dict[str, float]:
    """Per-metric oriented ratio the machine-3 no-CB gate (2 pairs) measured."""
    data = json.loads((MACHINE3 / "gate-nocb-abba.json").read_text())
    return {m["key"]: m["ratio"] for m in data["metrics"] if m["key"] in keys and m.get("ratio")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=MACHINE3 / "runs-equal")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=16_3)
    parser.add_argument("--out", type=Path, default=MACHINE3.parent / "tolerance")
    args = parser.parse_args()
    started = time.monotonic()
    rng = np.random.default_rng(args.seed)
    keys, raw, names = load_runs(args.runs)
    values = oriented(raw, keys)
    n = args.pairs
    policy = GatePolicy()
    tail = np.array([policy.tolerance_for(k) == policy.tail_tolerance for k in keys])
    cvs = values.std(axis=0, ddof=1) / values.mean(axis=0)
    models = {
        "empirical": empirical(values, n, args.trials, rng),
        "normal": parametric(cvs, n, args.trials, rng, "normal"),
        "t3": parametric(cvs, n, args.trials, rng, "t3"),
    }
    half = GOAL_FALSE_ALARM / 2
    tol = smallest_tolerance(models, ~tail, half)
    tail_tol = smallest_tolerance(models, tail, half)
    tols = np.where(tail, tail_tol, tol)
    false_alarm = {name: float(np.mean((h < 1 - tols).any(axis=1))) for name, h in models.items()}
    h = models["empirical"]
    per_metric = caught_95(h, tols)
    nocb = nocb_ratios(keys)
    factor = np.array([nocb.get(k, 1.0) for k in keys])
    nocb_refused = np.mean(h * factor < 1 - tols, axis=0)
    result: dict[str, Any] = {
        "source_runs": [str((args.runs / x).relative_to(ROOT)) for x in names],
        "pairs": n,
        "trials": args.trials,
        "resamples": RESAMPLES,
        "confidence": DEFAULT_CONFIDENCE,
        "goal_false_alarm_per_gate": GOAL_FALSE_ALARM,
        "tolerance": tol,
        "tail_tolerance": tail_tol,
        "gate_false_alarm": false_alarm,
        "false_alarm_at_defaults": {
            name: float(np.mean((hm < 1 - np.where(tail, 0.08, 0.0125)).any(axis=1)))
            for name, hm in models.items()
        },
        "uniform_regression_caught_95": uniform_caught(h, tols),
        "nocb_gate_refused": gate_power(h, tols, factor),
        "metrics": {
            k: {
                "cv_16_runs": float(cvs[i]),
                "tail": bool(tail[i]),
                "tolerance": float(tols[i]),
                "false_alarm_empirical": float(np.mean(h[:, i] < 1 - tols[i])),
                "regression_caught_95": float(per_metric[i]),
                "nocb_ratio_machine3": nocb.get(k),
                "nocb_refused": float(nocb_refused[i]),
            }
            for i, k in enumerate(keys)
        },
        "seconds": round(time.monotonic() - started, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tolerance.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "tolerance.md").write_text(render(result) + "\n")
    print(render(result))
    return 0


def render(r: dict[str, Any]) -> str:
    fa = r["gate_false_alarm"]
    md = [
        "# Pre-registered gate tolerances for h200-transformers on one lent H200 "
        "(benchmarks/gate_h200/gate_h200_tolerance.py)",
        "",
        f"From the {len(r['source_runs'])} kept runs of machine 3's equal gate "
        f"(`machine3/runs-equal/`), {r['pairs']} pairs a gate, {r['trials']} simulated gates "
        f"per model, {r['resamples']} bootstrap resamples, confidence {r['confidence']}. "
        f"Goal: an equal candidate refused in <= {r['goal_false_alarm_per_gate']:.0%} of gates "
        "(half the budget to main metrics, half to tails).",
        "",
        f"**Chosen: tolerance {r['tolerance']:.0%}, tail tolerance {r['tail_tolerance']:.0%}, "
        f"{r['pairs']} pairs.** Gate false alarm at that setting: empirical "
        f"{fa['empirical']:.1%}, normal {fa['normal']:.1%}, t3 {fa['t3']:.1%}. At the defaults "
        f"(1.25% / 8%) and {r['pairs']} pairs: "
        + ", ".join(f"{k} {v:.1%}" for k, v in r["false_alarm_at_defaults"].items())
        + ".",
        "",
        f"Power: a slowdown of every metric at once is refused 95% of the time from "
        f"{r['uniform_regression_caught_95']:.0%}; the no-CB candidate (machine 3's gate B "
        f"ratios applied to the equal splits) is refused in {r['nocb_gate_refused']:.1%} of "
        "gates.",
        "",
        "| metric | CV (16 runs, of x or 1/x) | tolerance | false alarm | regression caught 95% | "
        "no-CB ratio (m3) | no-CB refused |",
        "|---|---|---|---|---|---|---|",
    ]
    for k, m in r["metrics"].items():
        ratio = m["nocb_ratio_machine3"]
        md.append(
            f"| {k.split('.', 1)[1]} | {m['cv_16_runs']:.1%} | {m['tolerance']:.0%} | "
            f"{m['false_alarm_empirical']:.2%} | {m['regression_caught_95']:.0%} | "
            f"{'-' if ratio is None else f'{ratio:.3f}'} | {m['nocb_refused']:.1%} |"
        )
    md.append(f"\nRun time: {r['seconds']} s on the CPU host.")
    return "\n".join(md)


if __name__ == "__main__":
    sys.exit(main())
