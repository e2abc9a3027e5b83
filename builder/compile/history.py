"""Measured build facts kept between builds of a stack: the peak RSS per compile job the
watchdog saw, so the next plan divides memory by a measurement, not by the manifest's guess.
Stored beside the stack's envs (<venv-root>/<stack>/build-history.json)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from stackgate.model import StrictModel

FILENAME = "build-history.json"


class BuildHistory(StrictModel):
    peak_rss_per_job_bytes: int
    jobs_seen: int
    measured_at: str
    lock_hash: str


def read_history(stack_dir: Path) -> BuildHistory | None:
    try:
        return BuildHistory.model_validate_json((stack_dir / FILENAME).read_text("utf-8"))
    except (OSError, ValueError):
        return None


def write_history(stack_dir: Path, *, peak: int, jobs_seen: int, lock_hash: str) -> None:
    entry = BuildHistory(
        peak_rss_per_job_bytes=peak,
        jobs_seen=jobs_seen,
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        lock_hash=lock_hash,
    )
    stack_dir.mkdir(parents=True, exist_ok=True)
    tmp = stack_dir / f".{FILENAME}.tmp"
    tmp.write_text(entry.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(stack_dir / FILENAME)
