"""SGLang's run-to-run noise on the lent H200 (issue 22) and what the gate can do at it.

Input: the five `validators run` reports of machine 1 (benchmarks/h200_sglang/results/machine1:
runs0/run-1..3 and chain/run-1..2; the same env, model and profile, each run a fresh server).
Per gated metric: mean, CV across those restarts (ddof=1), min/max.

Then the gate's own statistics (validators.gate.stats.resampled_ratios through
benchmarks/gate/gate_power.py's simulation: x = 1 + cv * e, e normal, the one-sided 95% upper bound
of the bootstrap ratio interval against 1 - tolerance) at the measured median and p90 CV of
the main (non-tail) metrics, for n runs a side:
- false alarm of one metric at the tool's DEFAULT policy (1.25%, 8 runs), and the gate's over
  K independent metrics (the worst case);
- the smallest tolerance whose gate false alarm over K metrics is <= 5%, and the regression of
  one metric caught 95% of the time at that tolerance.

Run:  .venv/bin/python benchmarks/h200_sglang/h200_sglang_power.py [--trials 2000]
Writes benchmarks/h200_sglang/results/noise.json and noise.md. Machine 2 (5 restarts of the
margin-construction model: the record's 3 runs and the equal gate's 2):
  .venv/bin/python benchmarks/h200_sglang/h200_sglang_power.py --label "machine 2" \
    --out benchmarks/h200_sglang/results/machine2 --runs M2/runs0/run-{1,2,3}.json \
    M2/gate-equal/run-0{1,2}.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.gate.gate_power import upper_bounds  # noqa: E402
from validators.records.extract import merge_runs, run_metrics  # noqa: E402
from validators.records.metrics import direction, parse_metric_key  # noqa: E402
from validators.records.resolve import read_report  # noqa: E402

RESULTS = ROOT / "benchmarks" / "h200_sglang" / "results"
RUNS = [RESULTS / "machine1" / "runs0" / f"run-{i}.json" for i in (1, 2, 3)] + [
    RESULTS / "machine1" / "chain" / f"run-{i}.json" for i in (1, 2)
]
DEFAULT_TOL, DEFAULT_N = 0.0125, 8
REPEATS = (2, 4, 8, 16, 32, 64)
GOAL_GATE_FALSE_ALARM = 0.05


def noise(runs: list[Path]) -> dict[str, dict[str, Any]]:
    per_run = []
    for path in runs:
        merged, _, _ = merge_runs([run_metrics(read_report(path))])
        per_run.append({k: v[0] for k, v in merged.items() if v})
    keys = sorted(set.intersection(*(set(r) for r in per_run)))
    out: dict[str, dict[str, Any]] = {}
    for key in keys:
        if direction(key) == "none":
            continue
        values = [r[key] for r in per_run]
        mean = statistics.fmean(values)
        out[key] = {
            "direction": direction(key),
            "tail": parse_metric_key(key).name.startswith(("p9", "max_")),
            "values": [round(v, 3) for v in values],
            "mean": mean,
            "cv": statistics.stdev(values) / mean if mean else None,
        }
    return out


def at_cv(cv: float, k: int, trials: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    for j, n in enumerate(REPEATS):
        rng = np.random.default_rng(seed + j)
        equal = upper_bounds(rng, trials, n, cv, 1.0, "normal")[0.95]
        p_default = float(np.mean(equal < 1 - DEFAULT_TOL))
        tol = next(
            (
                t / 100
                for t in range(1, 100)
                if 1 - (1 - float(np.mean(equal < 1 - t / 100))) ** k <= GOAL_GATE_FALSE_ALARM
            ),
            None,
        )
        caught = None if tol is None else float(1 - (1 - tol) / np.quantile(equal, 0.95))
        rows.append({
            "cv": cv, "repeats": n, "trials": trials,
            "metric_false_alarm_default_policy": p_default,
            "gate_false_alarm_default_policy": 1 - (1 - p_default) ** k,
            "tolerance_for_5pct_gate_false_alarm": tol,
            "regression_caught_95pct_at_that_tolerance": caught,
        })  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--runs", type=Path, nargs="+", default=RUNS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--label", default="machine 1")
    args = parser.parse_args()
    runs = [p.resolve() for p in args.runs]
    per_metric = noise(runs)
    main_cvs = [m["cv"] for m in per_metric.values() if not m["tail"] and m["cv"]]
    k = len(main_cvs)
    median, p90 = statistics.median(main_cvs), float(np.quantile(main_cvs, 0.9))
    result = {
        "runs": [str(p.relative_to(ROOT)) for p in runs],
        "per_metric": per_metric,
        "main_metrics": k,
        "cv_median": median,
        "cv_p90": p90,
        "at_median": at_cv(median, k, args.trials, 100),
        "at_p90": at_cv(p90, k, args.trials, 200),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "noise.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = [
        f"# SGLang 0.5.17 run-to-run noise on ONE lent H200 (kimi-mini, {len(runs)} fresh servers)\n",
        f"Written by `benchmarks/h200_sglang/h200_sglang_power.py` from the {len(runs)} {args.label} run "
        "reports.\n",
        f"| metric | values ({len(runs)} runs) | CV |",
        "|---|---|---|",
    ]
    for key, m in per_metric.items():
        lines.append(f"| {key}{' (tail)' if m['tail'] else ''} | {m['values']} | {m['cv']:.1%} |")
    lines += [
        f"\nMain (non-tail) metrics: {k}; CV median {median:.1%}, p90 {p90:.1%}.\n",
        "| CV | runs a side | default policy (1.25%): metric / gate false alarm | "
        "tolerance for <= 5% gate false alarm | regression caught 95% there |",
        "|---|---|---|---|---|",
    ]
    for row in result["at_median"] + result["at_p90"]:
        tol = row["tolerance_for_5pct_gate_false_alarm"]
        caught = row["regression_caught_95pct_at_that_tolerance"]
        lines.append(
            f"| {row['cv']:.1%} | {row['repeats']} | {row['metric_false_alarm_default_policy']:.1%}"
            f" / {row['gate_false_alarm_default_policy']:.1%} | "
            f"{'-' if tol is None else f'{tol:.0%}'} | "
            f"{'-' if caught is None else f'{caught:.1%}'} |"
        )
    (args.out / "noise.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines[-(2 * len(REPEATS) + 3) :]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
