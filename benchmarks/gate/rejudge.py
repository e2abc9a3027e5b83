"""Re-judge a demonstration's gate from its committed benches, with some pairs left out.

POST-HOC: what the pre-registered rule would have said without the named pairs. It never
replaces the verdict the booking gave (that stays in the results folder's verdicts.json); it
answers "how much of the verdict did one event carry". Server-side window metrics are not in
the bench files and are not gated by the demonstration's profile, so they are left out here.

    python benchmarks/gate/rejudge.py RESULTS_DIR GATE [--drop-pair P ...]

Prints the gate's verdict and, per gated metric, B/A ratio, CVs and the detectable regression,
as JSON; the last line is the verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gate_dial_demo as demo


def runs_of(res: Path, gate_name: str, pairs: list[int], side: str) -> list[dict[str, float]]:
    runs = []
    for p in pairs:
        fields = json.loads((res / "bench" / f"{gate_name}-p{p}-{side}-ours.json").read_text())
        runs.append(demo.metric_fields("sweep", fields, {}, int(fields["max_concurrency"])))
    return runs


def rejudge(res: Path, gate_name: str, drop: set[int], product: bool = False) -> dict[str, Any]:
    from validators.gate.compare import gate
    from validators.gate.policy import GatePolicy
    from validators.records.gated import SERVING_PROFILE

    found = sorted(int(f.name.split("-p")[1].split("-")[0])
                   for f in (res / "bench").glob(f"{gate_name}-p*-A-ours.json"))  # fmt: skip
    pairs = [p for p in found if p not in drop]
    baseline = demo.record_of(
        f"A for {gate_name}", runs_of(res, gate_name, pairs, "A"), "known-good"
    )
    candidate = demo.record_of(gate_name, runs_of(res, gate_name, pairs, "B"), "candidate")
    profile = SERVING_PROFILE if product else demo.dial_profile()
    policy = GatePolicy(min_repeats=min(7, len(pairs)), profile=profile)
    result = gate(baseline, candidate, policy, remeasured=baseline)
    return {"gate": gate_name, "pairs": pairs, "dropped": sorted(drop), "verdict": result.verdict,
            "reasons": result.reasons[:3], "underpowered": result.underpowered,
            "gated": {m.key.split("/")[-1]: {"ratio": round(m.ratio or 0, 4),
                                             "cv_a": round(m.cv_baseline or 0, 4),
                                             "cv_b": round(m.cv_candidate or 0, 4),
                                             "detectable": round(m.detectable or 0, 4),
                                             "p_family": m.p_family, "status": m.status}
                      for m in result.metrics if m.gated}}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("gate")
    ap.add_argument("--drop-pair", type=int, action="append", default=[])
    ap.add_argument("--product-profile", action="store_true",
                    help="judge with the product's default gated list, not the demonstration's")
    args = ap.parse_args()
    out = rejudge(args.results, args.gate, set(args.drop_pair), args.product_profile)
    print(json.dumps(out, indent=1))
    which = "the product's gated list" if args.product_profile else "the demonstration's gated list"
    print(f"POST-HOC {args.gate} without pairs {sorted(args.drop_pair)}, {which}: {out['verdict']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
