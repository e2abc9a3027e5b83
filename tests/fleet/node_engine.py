"""The engine of one fleet node, for tests: the synthetic token server (tests/serve), which
stands for an inference engine because no GPU engine runs here.

The node is STACKGATE_HOSTNAME (the fleet's batch script sets it from Slurm's node name).
- On `--faulty-node` it answers with different tokens, as a node whose GPU computes wrong
  results would: the serve-bench correctness checks fail there, and only there.
- On `--slow-node` it streams `--slow-factor` times slower, as a lemon would (throttled
  clocks, a bad PCIe link): every check passes, its numbers are worse than its peers'.
- STACKGATE_TEST_SLOW_START=<node>=<seconds> makes that node's engine take that long to load,
  as a 10-minute Kimi-K2.5 load would: a test that kills the node's slurmd mid-job needs the
  job still running when slurmctld notices (on a quiet machine the whole step took 13 s).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SERVER = Path(__file__).resolve().parents[1] / "serve" / "synthetic_server.py"
OURS = ("--faulty-node", "--slow-node", "--slow-factor")


def main(argv: list[str]) -> None:
    ours = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i] in OURS}
    rest = [a for i, a in enumerate(argv) if a not in OURS and (i == 0 or argv[i - 1] not in OURS)]
    node = os.environ.get("STACKGATE_HOSTNAME")
    if node == ours.get("--faulty-node"):
        rest.append("--garble")
    if node == ours.get("--slow-node"):
        at = rest.index("--rate") + 1
        rest[at] = str(float(rest[at]) * float(ours["--slow-factor"]))
    slow_node, _, seconds = os.environ.get("STACKGATE_TEST_SLOW_START", "").partition("=")
    if node and node == slow_node:
        rest += ["--load-s", seconds]
    os.execv(sys.executable, [sys.executable, str(SERVER), *rest])


if __name__ == "__main__":
    main(sys.argv[1:])
