"""benchmarks/gate/rejudge.py re-judges the committed H200 booking from its bench files: with no
pair left out it must give the verdicts the booking gave (else the post-hoc numbers beside them
would be of another rule), and the post-hoc line the results page cites."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "gate" / "results" / "dial-h200-5"


def _rejudge(*args: str) -> tuple[dict[str, object], str]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gate" / "rejudge.py"), str(RESULTS), *args],
        capture_output=True, text=True, timeout=300, check=True, cwd=ROOT,
    )  # fmt: skip
    body, last = done.stdout.rstrip().rsplit("\n", 1)
    return json.loads(body), last


def test_with_every_pair_the_booking_s_verdicts_come_back() -> None:
    booked = {v["gate"]: v["verdict"] for v in json.loads((RESULTS / "verdicts.json").read_text())}
    assert booked == {"equal-1": "UNDERPOWERED", "dial-3": "REFUSED", "dial-5": "REFUSED"}
    for name, verdict in booked.items():
        out, last = _rejudge(name)
        assert out["verdict"] == verdict, (name, out)
        assert last == f"POST-HOC {name} without pairs []: {verdict}"


def test_equal_1_without_the_stalled_pair() -> None:
    out, last = _rejudge("equal-1", "--drop-pair", "1")
    assert out["pairs"] == [0, 2, 3, 4, 5, 6, 7]
    assert last == "POST-HOC equal-1 without pairs [1]: PASSED"
