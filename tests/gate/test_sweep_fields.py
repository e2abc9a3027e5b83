"""Malformed sweep fields in a run report are bad input naming the field (issue 23 §5).

Before, a `levels` that was not a list, a level that was not a mapping, a `max_concurrency`
of "16" or a gated metric given as an object were dropped silently: the run then lacked those
metrics and the gate said TOO_FEW (exit 1), pointing at the runs instead of the field.
Each case is a real report file read the way `gate --run` and `mark-good --run` read it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stackgate.errors import BadInput
from validators.records.resolve import read_report

ROOT = Path(__file__).resolve().parents[2]


def _level(conc: Any = 4, **fields: Any) -> dict[str, Any]:
    return {"max_concurrency": conc, "output_throughput": 100.0 * (conc if isinstance(conc, int)
            else 1), "mean_ttft_ms": 20.0, **fields}  # fmt: skip


def _report(tmp_path: Path, levels: Any) -> Path:
    report = {
        "stack": "cu128", "started_at": "2026-11-30T12:00:00+00:00",
        "results": [{"check": "serve-bench.sweep", "group": "serve-bench", "status": "PASS",
                     "reason": "ok", "evidence": {"levels": levels}}],
    }  # fmt: skip
    path = tmp_path / "run.json"
    path.write_text(json.dumps(report))
    return path


GOOD = [_level(1), _level(4)]
BAD = {
    "levels not a list": ("a string", "levels = 'a string', not a list"),
    "a level not a mapping": ([5, _level(4)], "levels[0] = 5, not a level"),
    "concurrency as text": ([_level("16"), _level(4)], "max_concurrency is '16'"),
    "concurrency zero": ([_level(0), _level(4)], "max_concurrency is 0"),
    "concurrency a float": ([_level(4.0), _level(8)], "max_concurrency is 4.0"),
    "two levels, no concurrency": (
        [{"output_throughput": 1.0}, {"output_throughput": 2.0}],
        "no max_concurrency",
    ),
    "gated metric as an object": (
        [_level(4, output_throughput={"v": 1})],
        "output_throughput@c4 = {'v': 1}",
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_malformed_sweep_field_is_bad_input_naming_it(tmp_path: Path, name: str) -> None:
    levels, said = BAD[name]
    with pytest.raises(BadInput) as caught:
        read_report(_report(tmp_path, levels))
    assert any(said in line for line in caught.value.lines()), caught.value.lines()


def test_well_formed_levels_still_read(tmp_path: Path) -> None:
    report = read_report(_report(tmp_path, GOOD))
    assert report.results[0].check == "serve-bench.sweep"


def test_gate_exits_2_naming_the_field(tmp_path: Path) -> None:
    bad = _report(tmp_path, [_level("16"), _level(4)])
    done = subprocess.run(
        [sys.executable, "-m", "validators", "gate", "cu128", "--run", str(bad)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": "/usr/bin:/bin", "STACKGATE_ROOT": str(tmp_path), "NO_COLOR": "1",
             "STACKGATE_STACKS_DIR": str(ROOT / "stacks"),
             "STACKGATE_STATE_DIR": str(tmp_path / "state")},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "max_concurrency is '16'" in done.stderr and "TOO_FEW" not in done.stderr


@pytest.mark.parametrize("started_at", ["yesterday", "2026-11-30 12:00", "2026-11-30T12:00:00"])
def test_a_run_report_started_at_must_be_a_time_with_a_zone(
    tmp_path: Path, started_at: str
) -> None:
    path = _report(tmp_path, GOOD)
    data = json.loads(path.read_text())
    data["started_at"] = started_at
    path.write_text(json.dumps(data))
    with pytest.raises(BadInput) as caught:
        read_report(path)
    assert any("started_at" in line for line in caught.value.lines()), caught.value.lines()
