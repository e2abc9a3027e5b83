"""What a RECORD|STACK argument names, and reading run reports from files.

Order: an existing file (a record JSON), a record id (or unique prefix) in the store or in the
committed `records/` folder, then a stack name (its newest known-good record). Committed
records count as much as stored ones: a fresh clone can gate against what the team committed
without importing first.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import ValidationError

from stackgate.errors import BadInput
from stackgate.paths import project_root, stack_names
from validators.records.model import Record
from validators.records.store import RecordStore, read_json_file, read_record_file
from validators.results import Report

_HEX = re.compile(r"^[0-9a-f]{6,64}$")


def committed_records_dir() -> Path:
    return project_root() / "records"


def committed_records(stack: str | None = None) -> list[Record]:
    folder = committed_records_dir()
    if stack is not None:
        folder = folder / stack
    if not folder.is_dir():
        return []
    return [read_record_file(p) for p in sorted(folder.rglob("*.json"))]


def resolve_record(ref: str, store: RecordStore) -> Record:
    path = Path(ref)
    if path.suffix == ".json" or "/" in ref:
        if not path.is_file():
            raise BadInput(f"{ref}: no such record file")
        return read_record_file(path)
    if _HEX.match(ref.lower()):
        hits = [r for r in committed_records() if r.record_id.startswith(ref.lower())]
        try:
            return store.get(ref)
        except BadInput:
            if len(hits) == 1:
                return hits[0]
            if not hits and ref not in stack_names():
                raise
    return latest_known_good(ref, store)


def latest_known_good(stack: str, store: RecordStore) -> Record:
    candidates = [*store.records(stack, "known-good"), *committed_records(stack)]
    candidates = [r for r in candidates if r.kind == "known-good"]
    if not candidates:
        raise BadInput(
            f"no known-good record for stack '{stack}' in {store.path} or "
            f"{committed_records_dir()}",
            details=[
                f"make one: python -m validators mark-good {stack} --run RESULT.json",
                "or import committed ones: python -m validators records import records/",
            ],
        )
    return max(candidates, key=lambda r: (r.created_at, r.record_id))


def read_report(path: Path) -> Report:
    """A `python -m validators run --json` report from a file."""
    data = read_json_file(path)
    if isinstance(data, dict) and isinstance(data.get("report"), dict):
        data = data["report"]  # a --json envelope {"ok": ..., "report": {...}}
    try:
        return Report.model_validate(data)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise BadInput(f"{path}: not a validation report", details=problems[:10]) from None


def is_record_file(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and "record_id" in data and "checks" in data
