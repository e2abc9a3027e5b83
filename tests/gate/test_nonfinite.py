"""Numbers that cannot be compared: NaN, +-inf, null, strings, empty sample lists, zeros and
negative durations. Where records and run reports are read they are bad input (exit 2, naming
the file and the metric); whatever still reaches the gate makes it refuse, never pass."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stackgate.errors import BadInput
from tests.gate.record_factory import THROUGHPUT, make_record
from tests.helpers.synth_reports import make_report
from validators.gate.compare import compare_metric, gate
from validators.gate.policy import GatePolicy
from validators.records.model import Record, content_sha256, load_record
from validators.records.resolve import read_report

ROOT = Path(__file__).resolve().parents[2]
NAN, INF = float("nan"), float("inf")

VARIANTS: list[tuple[str, Any, str]] = [
    ("all-nan", [NAN] * 8, "finite number"),
    ("some-nan", [1000.0] * 7 + [NAN], "finite number"),
    ("inf", [1000.0] * 7 + [INF], "finite number"),
    ("-inf", [1000.0] * 7 + [-INF], "finite number"),
    ("null", [1000.0] * 7 + [None], "valid number"),
    ("string", ["1000.0"] * 8, "valid number"),
    ("bool", [True] * 8, "valid number"),
    ("empty", [], "at least 1 item"),
    ("negative", [1000.0] * 7 + [-5.0], "greater than or equal to 0"),
]


def _resealed(data: dict[str, Any]) -> dict[str, Any]:
    """The record with its id recomputed: a forger who knows the hash passes that check."""
    data = {k: v for k, v in data.items() if k != "record_id"}
    data["record_id"] = content_sha256(data)
    return data


@pytest.mark.parametrize(("name", "samples", "message"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_a_record_with_unusable_samples_is_bad_input_naming_the_metric(
    name: str, samples: list[Any], message: str
) -> None:
    data = make_record().model_dump(mode="json")
    data["metrics"][THROUGHPUT] = samples
    with pytest.raises(BadInput) as caught:
        load_record(_resealed(data), where=f"records/{name}.json")
    assert caught.value.message.startswith(f"records/{name}.json: invalid record")
    assert any(THROUGHPUT in d and message in d for d in caught.value.details), caught.value.details


def test_a_nan_record_file_exits_2_at_the_gate(tmp_path: Path) -> None:
    """The issue's repro: a candidate record of all-NaN samples used to gate as PASSED."""
    baseline = make_record("smoke")
    data = make_record("smoke", minute=5, kind="candidate").model_dump(mode="json")
    data["metrics"][THROUGHPUT] = [NAN] * 8
    text = json.dumps(_resealed(data))  # json.dumps writes NaN, as a careless tool would
    assert "NaN" in text
    cand = tmp_path / "cand.json"
    cand.write_text(text)
    base = tmp_path / "base.json"
    base.write_text(baseline.to_json())
    done = subprocess.run(
        [sys.executable, "-m", "validators", "gate", str(cand), "--baseline", str(base),
         "--store", str(tmp_path / "s.sqlite")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "cand.json" in done.stderr and THROUGHPUT in done.stderr
    assert "PASSED" not in done.stderr


def _report_file(tmp_path: Path, mutate: Any) -> Path:
    report = make_report(np.random.default_rng(0)).model_dump(mode="json")
    mutate(report)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(report))
    return path


def _sweep(report: dict[str, Any]) -> dict[str, Any]:
    for result in report["results"]:
        if result["check"] == "serve-bench.sweep":
            return dict(result["evidence"]["levels"][0])
    raise AssertionError("no sweep in the synthetic report")


@pytest.mark.parametrize(
    ("value", "shown"),
    [(NAN, "nan"), (INF, "inf"), (-INF, "-inf"), ("fast", "'fast'"), ([], "[]"), (-3.0, "-3.0")],
)
def test_a_run_report_with_an_unusable_metric_is_bad_input(
    tmp_path: Path, value: Any, shown: str
) -> None:
    def mutate(report: dict[str, Any]) -> None:
        for result in report["results"]:
            if result["check"] == "serve-bench.sweep":
                result["evidence"]["levels"][0]["output_throughput"] = value

    path = _report_file(tmp_path, mutate)
    with pytest.raises(BadInput) as caught:
        read_report(path)
    detail = " ".join(caught.value.details)
    assert "output_throughput@c1" in detail and shown in detail
    assert str(path) in detail


def test_null_in_a_run_report_is_not_measured_and_the_gate_calls_it_missing(
    tmp_path: Path,
) -> None:
    def mutate(report: dict[str, Any]) -> None:
        for result in report["results"]:
            if result["check"] == "serve-bench.sweep":
                for level in result["evidence"]["levels"]:
                    for key in list(level):
                        if key != "max_concurrency":
                            level[key] = None

    report = read_report(_report_file(tmp_path, mutate))
    assert _sweep(report.model_dump(mode="json"))["output_throughput"] is None
    baseline = make_record("cu128")
    candidate = Record.model_validate(
        {**baseline.model_dump(mode="json"), "record_id": "", "metrics": {}, "kind": "candidate"}
    )
    result = gate(baseline, candidate)
    assert not result.passed
    assert any(m.status == "MISSING" for m in result.metrics if m.key == THROUGHPUT)


def test_a_negative_duration_in_a_run_report_is_bad_input(tmp_path: Path) -> None:
    def mutate(report: dict[str, Any]) -> None:
        report["results"][0]["duration_s"] = -1.0

    with pytest.raises(BadInput, match="not a validation report") as caught:
        read_report(_report_file(tmp_path, mutate))
    assert any("results.0.duration_s" in d for d in caught.value.details)


@pytest.mark.parametrize(
    ("baseline", "candidate"),
    [
        ([0.0] * 8, [1000.0] * 8),  # zero baseline: the ratio divides by it
        ([1000.0] * 8, [0.0] * 8),
        ([NAN] * 8, [1000.0] * 8),
        ([1000.0] * 8, [1000.0] * 7 + [NAN]),
        ([1000.0] * 8, [INF] * 8),
        ([1000.0] * 8, [-1000.0] * 8),
    ],
)
def test_the_gate_refuses_a_metric_it_cannot_compare(
    baseline: list[float], candidate: list[float]
) -> None:
    """Records refuse these on read; the gate's own guard for anything built in memory."""
    verdict = compare_metric(
        THROUGHPUT, baseline, candidate, GatePolicy(), np.random.default_rng(0)
    )
    assert verdict.status == "INCOMPARABLE" and verdict.failing
    assert verdict.baseline_mean is None or math.isfinite(verdict.baseline_mean)
