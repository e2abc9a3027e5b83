"""benchmarks/gate/rejudge.py re-judges a committed GPU booking from its bench files: with no
pair left out it must give the verdicts the booking gave (else the post-hoc numbers beside them
would be of another rule), and the post-hoc lines the results pages cite. With
`--product-profile` it judges the same benches with the product's default gated list
(validators/records/gated.py): on the H100 booking, whose equal gates PASSED, the default must PASS
them too and refuse the dial and mrr15 gates (with median TTFT in the main class it answered
UNDERPOWERED on both equal gates: a burst's TTFT varies 5-21% from bench to bench)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GATE_RESULTS = ROOT / "benchmarks" / "gate" / "results"
H200 = GATE_RESULTS / "dial-h200-5"
H100 = GATE_RESULTS / "dial-h100-6"
DEMO = "the demonstration's gated list"
PRODUCT = "the product's gated list"


def _rejudge(results: Path, *args: str) -> tuple[dict[str, object], str]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gate" / "rejudge.py"), str(results), *args],
        capture_output=True, text=True, timeout=300, check=True, cwd=ROOT,
    )  # fmt: skip
    body, last = done.stdout.rstrip().rsplit("\n", 1)
    return json.loads(body), last


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        (H200, {"equal-1": "UNDERPOWERED", "dial-3": "REFUSED", "dial-5": "REFUSED"}),
        (H100, {"equal-1": "PASSED", "dial-3": "REFUSED", "dial-5": "REFUSED",
                "mrr15": "REFUSED", "equal-2": "PASSED"}),
    ],
    ids=["h200-5", "h100-6"],
)  # fmt: skip
def test_with_every_pair_the_booking_s_verdicts_come_back(
    results: Path, expected: dict[str, str]
) -> None:
    booked = {v["gate"]: v["verdict"] for v in json.loads((results / "verdicts.json").read_text())}
    assert booked == expected
    for name, verdict in booked.items():
        out, last = _rejudge(results, name)
        assert out["verdict"] == verdict, (name, out)
        assert last == f"POST-HOC {name} without pairs [], {DEMO}: {verdict}"


def test_equal_1_without_the_stalled_pair() -> None:
    out, last = _rejudge(H200, "equal-1", "--drop-pair", "1")
    assert out["pairs"] == [0, 2, 3, 4, 5, 6, 7]
    assert last == f"POST-HOC equal-1 without pairs [1], {DEMO}: PASSED"


def test_the_product_s_gated_list_gives_the_h100_booking_s_verdicts() -> None:
    for name, verdict in (("equal-1", "PASSED"), ("dial-3", "REFUSED"), ("dial-5", "REFUSED"),
                          ("mrr15", "REFUSED"), ("equal-2", "PASSED")):  # fmt: skip
        out, last = _rejudge(H100, name, "--product-profile")
        assert last == f"POST-HOC {name} without pairs [], {PRODUCT}: {verdict}", out
        gated = out["gated"]
        assert isinstance(gated, dict)
        assert "median_tpot_ms@c16" in gated and "median_ttft_ms@c16" in gated
