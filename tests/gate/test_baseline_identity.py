"""Which record the gate judges against, and which result of a check it reads.

- A record holding two results for one check ([FAIL x, PASS x]): the gate keys results by
  check id and saw only the last one, PASSED (compose_record never writes that; a hand-made or
  merged record file can).
- `--baseline FILE|ID` naming a candidate record: a baseline by stack name must be known-good,
  one by file or id could be anything and PASSED.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.gate.record_factory import make_record
from validators.records.model import content_sha256

ROOT = Path(__file__).resolve().parents[2]


def _resealed(data: dict[str, Any]) -> str:
    data = {k: v for k, v in data.items() if k != "record_id"}
    data["record_id"] = content_sha256(data)
    return json.dumps(data)


def _gate(tmp_path: Path, cand: str, base: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "cand.json").write_text(cand)
    (tmp_path / "base.json").write_text(base)
    return subprocess.run(
        [sys.executable, "-m", "validators", "gate", str(tmp_path / "cand.json"), "--baseline",
         str(tmp_path / "base.json"), "--store", str(tmp_path / "s.sqlite")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_failed_check_hidden_behind_a_second_pass_is_bad_input(tmp_path: Path) -> None:
    cand = make_record(kind="candidate", minute=5).model_dump(mode="json")
    passed = cand["checks"][0]
    cand["checks"] = [{**passed, "status": "FAIL", "reason": "wrong answers"}, passed]
    done = _gate(tmp_path, _resealed(cand), make_record().to_json())
    assert done.returncode == 2, done.stderr
    assert "cand.json: invalid record" in done.stderr
    assert "more than one result for check(s) serve-bench.sweep" in done.stderr
    assert "PASSED" not in done.stderr


def test_a_candidate_record_is_no_baseline(tmp_path: Path) -> None:
    base = make_record(kind="candidate").to_json()
    done = _gate(tmp_path, make_record(kind="candidate", minute=5).to_json(), base)
    assert done.returncode == 1, done.stderr
    assert "is a candidate record, not known-good" in done.stderr
    assert "PASSED" not in done.stderr
