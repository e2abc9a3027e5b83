"""How often ANY search that measures no step twice can name a single culprit within
log2(units) + 2 gates at the gate's measured noise: the ceiling the bisect's numbers in
benchmarks/bisect/results/bisect_search*.md are read against.

A search that never re-measures is a binary tree of prefix gates whose leaves are the
hypotheses (h = units + 1 from a stack: "none of them" too; h = units from a refused gate's
JSON, whose verdict already makes "none" unlikely), at most B = floor(log2 units) + 2 deep.
The culprit at a leaf is named right only when no gate on its path missed: each REGRESSED
edge (a prefix holding the culprit) is caught with probability `power`, each SAME edge is
right unless a false alarm (counted as right here: an upper bound). The best tree maximises
the sum over leaves of power^(REGRESSED edges): f(h, B) = max_k power * f(k, B-1) +
f(h - k, B-1), f(1, B) = 1. The ceiling for the population of the simulation (units uniform
in 10-60, the culprit uniform among them) is the mean of f(h, B) / h.

A search that measures a step again can in principle do better; the volume bound for
correcting one miss (sum over leaves of 1 + REGRESSED edges <= 2^B) fails for most unit
counts in 10-60 with B = floor(log2 units) + 2, so not by much.

Run:  .venv/bin/python benchmarks/bisect/bisect_ceiling.py   (well under a second)
Writes benchmarks/bisect/results/bisect_ceiling.json.
"""

from __future__ import annotations

import json
import math
import os
import resource
import sys
import time
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "bisect" / "results"


def ceiling(power: float, low: int = 10, high: int = 60) -> dict[str, float]:
    @cache
    def best(h: int, depth: int) -> float:
        if h == 1:
            return 1.0
        if depth == 0 or h > 2**depth:
            return -math.inf
        return max(power * best(k, depth - 1) + best(h - k, depth - 1) for k in range(1, h))

    out = {}
    for label, extra in (("stack", 1), ("refused", 0)):
        rates = []
        for units in range(low, high + 1):
            depth = math.floor(math.log2(units)) + 2
            rates.append(best(units + extra, depth) / (units + extra))
        out[label] = sum(rates) / len(rates)
    return out


def main() -> None:
    started = time.monotonic()
    verified = json.loads((ROOT / "benchmarks" / "gate" / "results" / "gate_power.json").read_text())["verified"]
    power = float(verified["power"])
    found = ceiling(power)
    used = resource.getrusage(resource.RUSAGE_SELF)
    out = {
        "power": power,
        "units": [10, 60],
        "ceiling_right_within_log2_plus_2": {k: round(v, 4) for k, v in found.items()},
        "seconds": round(time.monotonic() - started, 2),
        "cpu_seconds": round(used.ru_utime + used.ru_stime, 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    (RESULTS / "bisect_ceiling.json").write_text(json.dumps(out, indent=1) + "\n")
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
