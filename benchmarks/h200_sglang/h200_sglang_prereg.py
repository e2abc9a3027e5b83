"""The gate policy for issue 22's deciding SGLang gates, by a rule fixed before they run.

    python benchmarks/h200_sglang/h200_sglang_prereg.py --record-runs R1.json R2.json R3.json \
        --within WITHIN.json [--knob KNOB.json] --candidate-runs 2 --out DIR

Committed (with the prediction in benchmarks/h200_sglang/results/prereg.md) BEFORE the device
session that runs it; benchmarks/h200_sglang/h200_sglang.sh calls it on that session's runs made before
the two gates (the record's restart runs, the within-server benches), and both gates then run
with the tolerances it writes. The rule, unchanged by anything those gates show:

1. per gated metric, the run-to-run CV of the record's runs (each a fresh server: restart
   noise); for sweep metrics also the within-server CV of WITHIN's benches (one server);
2. the noise the rule plans for: cv = SAFETY x max(restart CV, within CV), at least FLOOR
   (a CV from 3 runs is itself uncertain: SAFETY 1.5);
3. each metric drawn independently at that cv (normal, and Student-t3 for heavy tails), the
   record's N_BASE runs against the gate's N_CAND candidate runs, through the gate's own
   bootstrap (validators.gate.stats.resampled_ratios, confidence 0.95); the false-alarm budget
   of an equal gate (5%) split in half between main and tail metrics; for each, the smallest
   whole percent whose gate false alarm is <= 2.5% in both models;
4. predictions at that policy: the uniform slowdown of every metric caught 95% of the time, and
   when KNOB (the same within-server benches of the regressing candidate) is given, its
   measured per-metric ratios applied: P(the regressing gate refuses).
Writes DIR/tolerance.json (tolerance, tail_tolerance, predictions) and DIR/tolerance.md.

Warm-up benches (--discard-warmup K, default 1; added after machine 2): the first K benches of
each WITHIN / KNOB server are dropped before their CVs and means are taken. On machine 2 the
first bench of every server was slow (mean TTFT at C=16 116 / 104 / 99 ms, then 45-90 ms), and
the rule as pre-registered there (equivalent to --discard-warmup 0) planned tolerances of
68% / 96% from it. Machine 2's committed rule is reproduced with --discard-warmup 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.gate_h200.gate_h200_tolerance import (  # noqa: E402
    GOAL_FALSE_ALARM,
    smallest_tolerance,
    uniform_caught,
    upper_bounds,
)
from validators.gate.policy import GatePolicy  # noqa: E402
from validators.records.extract import merge_runs, run_metrics  # noqa: E402
from validators.records.metrics import direction  # noqa: E402
from validators.records.resolve import read_report  # noqa: E402

SAFETY = 1.5
FLOOR = 0.01


def restart_values(paths: list[Path]) -> tuple[list[str], np.ndarray]:
    """(gated keys, runs x metrics) of the record's run reports, oriented higher-is-better."""
    per_run = []
    for path in paths:
        merged, _, _ = merge_runs([run_metrics(read_report(path))])
        per_run.append({k: v[0] for k, v in merged.items() if v})
    keys = sorted(k for k in set.intersection(*(set(r) for r in per_run)) if direction(k) != "none")
    raw = np.array([[r[k] for k in keys] for r in per_run], dtype=np.float64)
    lower = np.array([direction(k) == "lower" for k in keys])
    return keys, np.where(lower, 1.0 / raw, raw)


def kept_benches(path: Path, discard: int) -> tuple[int, dict[str, dict[str, float]]]:
    """(concurrency, metric -> {mean, cv}) over one server's benches after the first `discard`.

    Refuses (SystemExit naming the file) when fewer than 2 benches would be left."""
    data = json.loads(path.read_text())
    benches = data["benches"][discard:]
    if len(benches) < 2:
        raise SystemExit(
            f"{path}: benches: {len(data['benches'])} benches, --discard-warmup {discard} "
            "leaves fewer than 2 to take a CV from"
        )
    out: dict[str, dict[str, float]] = {}
    for name in data["within_server"]:
        values = np.array([float(b[name]) for b in benches if b.get(name) is not None])
        if values.size >= 2 and values.mean():
            out[name] = {
                "mean": float(values.mean()),
                "cv": float(values.std(ddof=1) / values.mean()),
            }
    return int(data["benches"][0]["concurrency"]), out


def within_cvs(path: Path | None, discard: int = 1) -> dict[str, float]:
    """serve-bench.sweep/<metric>@c<C> -> CV over one server's benches, warm-up dropped."""
    if path is None or not path.is_file():
        return {}
    level, kept = kept_benches(path, discard)
    return {f"serve-bench.sweep/{k}@c{level}": v["cv"] for k, v in kept.items()}


def knob_ratios(
    base: Path | None, knob: Path | None, keys: list[str], discard: int = 1
) -> dict[str, float]:
    """Oriented candidate/baseline ratio of the within-server means (knob vs base server)."""
    if base is None or knob is None or not base.is_file() or not knob.is_file():
        return {}
    level, b = kept_benches(base, discard)
    _, k = kept_benches(knob, discard)
    out = {}
    for name, v in b.items():
        key = f"serve-bench.sweep/{name}@c{level}"
        if key in keys and name in k:
            ratio = k[name]["mean"] / v["mean"]
            out[key] = 1.0 / ratio if direction(key) == "lower" else ratio
    return out


def simulate(
    cvs: np.ndarray, n_base: int, n_cand: int, trials: int, rng: np.random.Generator, tails: str
) -> np.ndarray:
    def draw(n: int) -> np.ndarray:
        shape = (trials, n, cvs.size)
        e = (
            rng.standard_t(3, size=shape) / np.sqrt(3.0)
            if tails == "t3"
            else rng.standard_normal(shape)
        )
        return np.clip(1.0 + cvs * e, 0.05, None)

    return upper_bounds(draw(n_base), draw(n_cand), rng)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record-runs", type=Path, nargs="+", required=True)
    parser.add_argument("--within", type=Path, default=None)
    parser.add_argument("--knob", type=Path, default=None)
    parser.add_argument("--candidate-runs", type=int, default=2)
    parser.add_argument(
        "--discard-warmup", type=int, default=1,
        help="benches dropped at the start of each WITHIN/KNOB server (machine 2 ran with 0)",
    )  # fmt: skip
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    keys, values = restart_values(args.record_runs)
    n_base = values.shape[0]
    restart = values.std(axis=0, ddof=1) / values.mean(axis=0)
    if args.discard_warmup < 0:
        parser.error("--discard-warmup: must be >= 0")
    within = within_cvs(args.within, args.discard_warmup)
    within_arr = np.array([within.get(k, 0.0) for k in keys])
    cvs = np.maximum(FLOOR, SAFETY * np.maximum(restart, within_arr))
    policy = GatePolicy()
    tail = np.array([policy.tolerance_for(k) == policy.tail_tolerance for k in keys])
    n = args.candidate_runs
    models = {t: simulate(cvs, n_base, n, args.trials, rng, t) for t in ("normal", "t3")}
    half = GOAL_FALSE_ALARM / 2
    tol = smallest_tolerance(models, ~tail, half)
    tail_tol = smallest_tolerance(models, tail, half)
    tols = np.where(tail, tail_tol, tol)
    knob = knob_ratios(args.within, args.knob, keys, args.discard_warmup)
    factor = np.array([knob.get(k, 1.0) for k in keys])
    result: dict[str, Any] = {
        "rule": {
            "safety": SAFETY, "floor": FLOOR, "goal_false_alarm": GOAL_FALSE_ALARM,
            "discard_warmup": args.discard_warmup,
        },
        "record_runs": [p.name for p in args.record_runs],
        "n_base": n_base,
        "n_candidate": n,
        "trials": args.trials,
        "tolerance": tol,
        "tail_tolerance": tail_tol,
        "gate_false_alarm": {
            m: float(np.mean((h < 1 - tols).any(axis=1))) for m, h in models.items()
        },
        "false_alarm_at_defaults": {
            m: float(np.mean((h < 1 - np.where(tail, 0.08, 0.0125)).any(axis=1)))
            for m, h in models.items()
        },
        "uniform_regression_caught_95": {m: uniform_caught(h, tols) for m, h in models.items()},
        "knob_gate_refused": {
            m: float(np.mean((h * factor < 1 - tols).any(axis=1))) for m, h in models.items()
        } if knob else None,
        "metrics": {
            k: {
                "restart_cv": round(float(restart[i]), 5),
                "within_cv": within.get(k),
                "planned_cv": round(float(cvs[i]), 5),
                "tail": bool(tail[i]),
                "tolerance": float(tols[i]),
                "knob_ratio": knob.get(k),
            }
            for i, k in enumerate(keys)
        },
    }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tolerance.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"tolerance {tol:.0%}, tail tolerance {tail_tol:.0%} "
        f"({n_base} record runs vs {n} candidate runs; "
        f"{args.discard_warmup} warm-up bench(es) of each server dropped)",
        f"equal gate false alarm: {result['gate_false_alarm']}",
        f"at the defaults (1.25% / 8%): {result['false_alarm_at_defaults']}",
        f"uniform slowdown caught 95%: {result['uniform_regression_caught_95']}",
        f"regressing knob refused: {result['knob_gate_refused']}",
        "",
        "| metric | restart CV | within CV | planned CV | tolerance | knob ratio |",
        "|---|---|---|---|---|---|",
    ]
    for k, m in result["metrics"].items():
        w = "-" if m["within_cv"] is None else f"{m['within_cv']:.2%}"
        kr = "-" if m["knob_ratio"] is None else f"{m['knob_ratio']:.3f}"
        lines.append(
            f"| {k} | {m['restart_cv']:.2%} | {w} | {m['planned_cv']:.2%} | "
            f"{m['tolerance']:.0%} | {kr} |"
        )
    (args.out / "tolerance.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
