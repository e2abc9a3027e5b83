"""The demonstration driver's plan, run for real on the CPU (--dry-run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gate" / "gate_dial_demo.py"


def test_the_plan_interleaves_abba_and_gates_every_candidate(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--env", str(tmp_path), "--model-dir",
                           str(tmp_path), "--res", str(tmp_path / "r"), "--dry-run"],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    *body, last = done.stdout.strip().splitlines()
    steps = json.loads("\n".join(body))
    assert last.startswith("PLANNED:")
    gates = [s["what"] for s in steps if s["what"].startswith("gate ")]
    assert [g.split()[1] for g in gates] == ["equal-1", "equal-2", "dial-3", "dial-5", "mrr15"]
    benches = [s["side"] for s in steps if s["what"].startswith("bench pair 0 ")]
    assert benches[:2] == ["A", "equal-1"]
    pair1 = [s["side"] for s in steps if s["what"].startswith("bench pair 1 ")]
    assert pair1[:2] == ["equal-1", "A"]  # A,B then B,A
    dials = {
        s["side"]: s["env"].get("STACKGATE_DIAL") for s in steps if s["what"].startswith("start")
    }
    assert dials["dial-3"] == "0.03" and dials["dial-5"] == "0.05" and dials["A"] is None
