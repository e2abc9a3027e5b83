"""Run-to-run noise of every gated metric on the lent H200s (issue 16.1), from committed runs.

Three sets of 8 runs of one env (h200-transformers, transformers serve, 1.03B random Llama):
  base   machine 1, the known-good record's runs (records/h200-transformers/*.json)
  pass   machine 1, the same env re-run right after (benchmarks/gate_h200/results/machine1/runs/pass)
  repro  machine 2, the env rebuilt by `reproduce` (its gate's candidate side, one run at a time)
Prints per-metric CV (ddof=1) within each set and the shift of the set means against base,
and writes benchmarks/gate_h200/results/noise.json.

Run:  .venv/bin/python benchmarks/gate_h200/gate_h200_noise.py
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from validators.records.extract import merge_runs, run_metrics  # noqa: E402
from validators.records.metrics import direction  # noqa: E402
from validators.records.resolve import read_report  # noqa: E402

RES = ROOT / "benchmarks" / "gate_h200" / "results"


def cv(samples: list[float]) -> float | None:
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / mean if len(samples) >= 3 and mean > 0 else None


def main() -> int:
    record = json.loads(next((ROOT / "records" / "h200-transformers").glob("*.json")).read_text())
    base: dict[str, list[float]] = record["metrics"]
    reports = [read_report(p) for p in sorted((RES / "machine1" / "runs" / "pass").glob("*.json"))]
    passed, _, _ = merge_runs(run_metrics(r) for r in reports)
    repro = json.loads((RES / "machine2" / "reproduce.json").read_text())
    repro_rows = {m["key"]: m for m in (repro.get("gate") or {}).get("metrics", [])}
    rows = []
    for key in sorted(base):
        if direction(key) == "none" or key not in passed:
            continue
        b, p = base[key], passed[key]
        r = repro_rows.get(key)
        rows.append(
            {
                "metric": key,
                "direction": direction(key),
                "cv_base": cv(b),
                "cv_pass": cv(p),
                "cv_repro": r["cv_candidate"] if r else None,
                "shift_pass": statistics.fmean(p) / statistics.fmean(b) - 1,
                "shift_repro": (r["candidate_mean"] / r["baseline_mean"] - 1) if r else None,
            }
        )
    (RES / "noise.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    def shift(x: float | None) -> str:
        return "-" if x is None else f"{x:+.1%}"

    print("| metric | CV base | CV pass | CV repro | mean shift pass | mean shift repro |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['metric']} | {pct(row['cv_base'])} | {pct(row['cv_pass'])} | "
            f"{pct(row['cv_repro'])} | {shift(row['shift_pass'])} | {shift(row['shift_repro'])} |"
        )
    for name in ("cv_base", "cv_pass", "cv_repro"):
        vals = [row[name] for row in rows if row[name] is not None]
        print(f"median {name}: {statistics.median(vals):.1%} over {len(vals)} metrics")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
