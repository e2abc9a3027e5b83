"""Finite numbers the gate must not turn into a pass: samples that overflow when averaged
(1e308: the mean is inf, inf/inf is NaN, and a NaN interval read as SAME), a 1e297x
"improvement" or a latency in seconds where milliseconds were meant (1000x better), and
eight samples from ONE run (a record saying runs 1, or one report listing repeats)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.gate.conftest import Project, fake_env_with_build_record
from tests.gate.record_factory import THROUGHPUT, TTFT, make_record
from tests.gate.test_cli import _mark_baseline
from tests.helpers.synth_reports import make_report
from validators.gate.compare import compare_metric
from validators.gate.policy import GatePolicy
from validators.records.model import content_sha256

ROOT = Path(__file__).resolve().parents[2]


def _resealed(data: dict[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in data.items() if k != "record_id"}
    data["record_id"] = content_sha256(data)
    return data


def _gate(tmp_path: Path, cand: dict[str, Any], base: dict[str, Any]) -> Any:
    (tmp_path / "cand.json").write_text(json.dumps(_resealed(cand)))
    (tmp_path / "base.json").write_text(json.dumps(_resealed(base)))
    return subprocess.run(
        [sys.executable, "-m", "validators", "gate", str(tmp_path / "cand.json"), "--baseline",
         str(tmp_path / "base.json"), "--store", str(tmp_path / "s.sqlite"), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _sides() -> tuple[dict[str, Any], dict[str, Any]]:
    cand = make_record(kind="candidate", minute=5).model_dump(mode="json")
    return cand, make_record().model_dump(mode="json")


def _status(done: Any, key: str) -> tuple[str, str]:
    payload = json.loads(done.stdout)
    (metric,) = [m for m in payload["metrics"] if m["key"] == key]
    return metric["status"], metric["reason"]


@pytest.mark.parametrize(
    ("name", "candidate", "baseline", "key", "says"),
    [
        # Both sides 1e308: finite samples, an infinite mean; used to gate SAME, PASSED.
        ("overflow", [1e308] * 8, [1e308] * 8, THROUGHPUT, "overflow"),
        ("overflow-one-side", [1e308] * 8, None, THROUGHPUT, "overflow"),
        ("absurd-improvement", [1e300] * 8, None, THROUGHPUT, "not a measurement"),
        # TTFT in seconds under a _ms name: 1000x "better", used to pass as IMPROVEMENT.
        ("seconds-as-ms", [0.2 + i * 1e-3 for i in range(8)], None, TTFT, "not a measurement"),
    ],
)
def test_absurd_finite_samples_refuse(
    tmp_path: Path,
    name: str,
    candidate: list[float],
    baseline: list[float] | None,
    key: str,
    says: str,
) -> None:
    cand, base = _sides()
    cand["metrics"][key] = candidate
    if baseline is not None:
        base["metrics"][key] = baseline
    done = _gate(tmp_path, cand, base)
    assert done.returncode == 1, done.stderr
    status, reason = _status(done, key)
    assert status == "INCOMPARABLE" and says in reason, (status, reason)
    assert "PASSED" not in done.stderr


def test_a_real_twofold_improvement_still_passes() -> None:
    """The plausibility bound does not touch real changes."""
    rng = np.random.default_rng(1)
    base = [1000.0 + i for i in range(8)]
    verdict = compare_metric(THROUGHPUT, base, [2 * v for v in base], GatePolicy(), rng)
    assert verdict.status == "IMPROVEMENT"


def test_a_record_of_one_run_with_eight_samples_is_too_few(tmp_path: Path) -> None:
    cand, base = _sides()
    cand["runs"] = 1  # the samples stay eight: repeats reported inside one run
    done = _gate(tmp_path, cand, base)
    assert done.returncode == 1, done.stderr
    status, reason = _status(done, THROUGHPUT)
    assert status == "TOO_FEW"
    assert "candidate has 1 run (8 samples: repeats within a run are not runs)" in reason


def test_one_run_report_listing_eight_repeats_is_too_few(project: Project) -> None:
    """A report whose sweep gives each metric as a list: one run, not eight."""
    _mark_baseline(project)
    env = fake_env_with_build_record(project.root / "cand", "cu128")
    rng = np.random.default_rng(3)
    report = make_report(rng, env_path=str(env)).model_dump(mode="json")
    (sweep,) = [r for r in report["results"] if r["check"] == "serve-bench.sweep"]
    for level in sweep["evidence"]["levels"]:
        for field, value in list(level.items()):
            if isinstance(value, float) and field != "max_concurrency":
                level[field] = [value * (1 + 0.001 * i) for i in range(8)]
    path = project.root / "one.json"
    path.write_text(json.dumps(report))
    done = project.run("validators", "gate", "cu128", "--run", str(path), "--json")
    assert done.returncode == 1, done.stderr
    statuses = {m["status"] for m in json.loads(done.stdout)["metrics"] if m["gated"]}
    assert statuses == {"TOO_FEW"}, statuses


def test_more_samples_than_any_gate_can_resample_is_bad_input(tmp_path: Path) -> None:
    """The bootstrap holds resamples x n numbers per side: a record listing millions of samples
    of one metric would ask for a terabyte. 1001 samples stand for them here."""
    cand, base = _sides()
    cand["metrics"][THROUGHPUT] = [1000.0 + i % 7 for i in range(1001)]
    cand["runs"] = 1001
    done = _gate(tmp_path, cand, base)
    assert done.returncode == 2, done.stderr
    assert THROUGHPUT in done.stderr and "at most 1000 items" in done.stderr


def test_a_run_report_listing_endless_repeats_is_bad_input(project: Project) -> None:
    _mark_baseline(project)
    env = fake_env_with_build_record(project.root / "cand", "cu128")
    report = make_report(np.random.default_rng(4), env_path=str(env)).model_dump(mode="json")
    (sweep,) = [r for r in report["results"] if r["check"] == "serve-bench.sweep"]
    sweep["evidence"]["levels"][0]["output_throughput"] = [1000.0] * 1001
    path = project.root / "endless.json"
    path.write_text(json.dumps(report))
    done = project.run("validators", "gate", "cu128", "--run", str(path))
    assert done.returncode == 2, done.stderr
    assert "more than 1000 samples" in done.stderr and "Traceback" not in done.stderr
