"""The device driver of the gate's demonstration: on one GPU, one A server and one candidate
server up at once (--mem-fraction-static 0.4 each, the full-depth Kimi-K2.5-shaped config with
--load-format dummy), benches alternating A,B,B,A without restarts, `validators gate
--interleave-with`-style pairing: equal x2, dial 3%, dial 5%, mrr15.

    python benchmarks/gate/gate_dial_demo.py --env ENV --model-dir DIR --res RES [--dry-run]

--dry-run prints the plan (every server, bench and gate, with estimated device seconds) and
starts nothing: the CPU test runs it. Pre-registration: benchmarks/gate/prereg-dial.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

PAIRS = 8  # ABBA pairs a gate
BENCH_S = 9.0  # one bench at C=16, fixed lengths, GPU-bound shape (estimate, to be measured)
SERVER_START_S = 60.0  # warm kernels carried (no JIT); dummy weights
CANDIDATES = (
    ("equal-1", {}),
    ("equal-2", {}),
    ("dial-3", {"STACKGATE_DIAL": "0.03"}),
    ("dial-5", {"STACKGATE_DIAL": "0.05"}),
    ("mrr15", {"SERVER_ARGS": "--max-running-requests 15"}),
)
PREDICTED = {"equal-1": "PASSED", "equal-2": "PASSED", "dial-3": "REFUSED",
             "dial-5": "REFUSED", "mrr15": "REFUSED"}  # fmt: skip


@dataclass(frozen=True)
class Step:
    what: str
    side: str
    env: dict[str, str]
    seconds: float


def plan(pairs: int = PAIRS) -> list[Step]:
    """A server once; per candidate: its server, `pairs` ABBA pairs of benches, the gate."""
    steps = [Step("start A server", "A", {}, SERVER_START_S)]
    for name, env in CANDIDATES:
        steps.append(Step(f"start {name} server", name, env, SERVER_START_S))
        for p in range(pairs):
            order = ("A", name) if p % 2 == 0 else (name, "A")
            steps += [Step(f"bench pair {p} {side}", side, {}, BENCH_S) for side in order]
        steps.append(Step(f"gate {name} (predicted {PREDICTED[name]})", name, {}, 2.0))
        steps.append(Step(f"stop {name} server", name, {}, 5.0))
    return steps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--env", type=Path, required=True)
    ap.add_argument("--model-dir", type=Path, required=True)
    ap.add_argument("--res", type=Path, required=True)
    ap.add_argument("--pairs", type=int, default=PAIRS)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    steps = plan(args.pairs)
    total = sum(s.seconds for s in steps)
    if args.dry_run:
        print(json.dumps([asdict(s) for s in steps], indent=1))
        print(f"PLANNED: {len(steps)} steps, about {total:.0f} device-seconds")
        return 0
    print("INCOMPLETE: the device run is not written yet (see prereg-dial.md)", file=sys.stderr)
    return 3


if __name__ == "__main__":
    raise SystemExit(main())
