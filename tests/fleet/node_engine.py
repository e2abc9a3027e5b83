"""The engine of one fleet node, for tests: the synthetic token server (tests/serve), which
stands for an inference engine because no GPU engine runs here.

On the node named by `--faulty-node` (compared with STACKGATE_HOSTNAME, which the fleet's
batch script sets from Slurm's node name) it answers with different tokens, as a node whose
GPU computes wrong results would: the serve-bench correctness check fails there, and only there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SERVER = Path(__file__).resolve().parents[1] / "serve" / "synthetic_server.py"


def main(argv: list[str]) -> None:
    faulty = argv[argv.index("--faulty-node") + 1]
    rest = [a for i, a in enumerate(argv) if a != "--faulty-node" and argv[i - 1] != "--faulty-node"]
    if os.environ.get("STACKGATE_HOSTNAME") == faulty:
        rest.append("--garble")
    os.execv(sys.executable, [sys.executable, str(SERVER), *rest])


if __name__ == "__main__":
    main(sys.argv[1:])
