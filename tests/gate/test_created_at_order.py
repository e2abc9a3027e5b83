"""The newest known-good record is the gate's default baseline, picked by comparing created_at
as text (store and committed files alike). Python's fromisoformat reads spellings that sort
out of time order, so a record could jump the queue and become the baseline:

- "2025-12-29 10:00:00+00:00" (space for 'T': sorts before any 'T' time of that day),
- "2026-W01-1T10:00:00+00:00" (an ISO week date, 2025-12-29: 'W' sorts after every month),
- "20251229T100000+00:00" (basic format: '2' after '-', newer than every extended date),
- "...Z" for "+00:00",
- or simply a date in the future, which stays "newest" ahead of every record made after it.

Only the spelling the tool writes is accepted, and nothing dated after tomorrow."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.gate.record_factory import make_record
from validators.records.model import content_sha256

ROOT = Path(__file__).resolve().parents[2]


def _resealed(data: dict[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in data.items() if k != "record_id"}
    data["record_id"] = content_sha256(data)
    return data


def _validators(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "validators", *argv, "--store", str(tmp_path / "s.sqlite")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": "/usr/bin:/bin", "STACKGATE_ROOT": str(tmp_path), "NO_COLOR": "1"},
    )  # fmt: skip


TOMORROW_AND_A_BIT = (datetime.now(UTC) + timedelta(days=2)).isoformat(timespec="seconds")


@pytest.mark.parametrize(
    "created_at",
    [
        "2025-12-29 10:00:00+00:00",
        "2026-W01-1T10:00:00+00:00",
        "20251229T100000+00:00",
        "2025-12-29T10:00:00Z",
        "2025-12-29T10:00:00.5+00:00",
        TOMORROW_AND_A_BIT,
        "2099-01-01T00:00:00+00:00",
    ],
    ids=["space", "week-date", "basic", "zulu", "short-fraction", "in-2-days", "2099"],
)
def test_a_created_at_that_would_sort_out_of_order_is_not_imported(
    tmp_path: Path, created_at: str
) -> None:
    folder = tmp_path / "in" / "smoke"
    folder.mkdir(parents=True)
    newest = make_record(minute=30)  # 2026-01-01T10:30:00+00:00, the real newest
    (folder / "newest.json").write_text(newest.to_json())
    older = make_record(note="older, slower").model_dump(mode="json")
    older["created_at"] = created_at
    (folder / "older.json").write_text(json.dumps(_resealed(older)))
    done = _validators(tmp_path, "records", "import", str(tmp_path / "in"))
    listed = _validators(tmp_path, "records", "list", "--json")
    if created_at in (TOMORROW_AND_A_BIT, "2099-01-01T00:00:00+00:00"):
        # Dated ahead of this host's clock: a fast clock's record, skipped and named; it never
        # blocks the others (the good one is imported).
        assert done.returncode == 0, done.stderr
        assert "warning: skipped" in done.stderr and "older.json" in done.stderr
        assert [r["record_id"] for r in json.loads(listed.stdout)] == [newest.record_id]
        return
    assert done.returncode == 2, done.stderr
    assert "older.json" in done.stderr and "created_at" in done.stderr
    assert json.loads(listed.stdout) == []  # all or nothing: the good one waits too


def test_a_committed_record_dated_in_the_future_is_not_the_baseline(tmp_path: Path) -> None:
    committed = tmp_path / "records" / "smoke"
    committed.mkdir(parents=True)
    (committed / "real.json").write_text(make_record(minute=30).to_json())
    future = make_record(note="dated ahead").model_dump(mode="json")
    future["created_at"] = "2099-01-01T00:00:00+00:00"
    (committed / "future.json").write_text(json.dumps(_resealed(future)))
    cand = tmp_path / "cand.json"
    cand.write_text(make_record(kind="candidate", minute=40).to_json())
    done = _validators(tmp_path, "gate", str(cand), "--baseline", "smoke", "--json")
    # skipped and named (one record from a fast clock never blocks every gate of its stack);
    # the baseline is the real one
    assert done.returncode in (0, 1), done.stderr
    assert "warning: skipped" in done.stderr and "future.json" in done.stderr, done.stderr
    assert "in the future" in done.stderr
    assert json.loads(done.stdout)["baseline"].startswith(
        "smoke@" + make_record(minute=30).short_id[:12]
    )
