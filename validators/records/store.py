"""The embedded record store: one SQLite file, append-only, every read verified.

Default location `<project>/.state/stackgate.sqlite`; env STACKGATE_STATE_DIR moves the folder,
`--store FILE` picks the file. Append-only is enforced by the database itself (triggers that
abort UPDATE and DELETE), not only by this module, so another tool writing to the file cannot
rewrite history either. Records go to git as JSON (`export`) and come back (`import_dir`).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.paths import project_root
from validators.records.model import Record, load_record

STORE_FILENAME = "stackgate.sqlite"
_STORE_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    record_id      TEXT PRIMARY KEY,
    stack          TEXT NOT NULL,
    kind           TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    inserted_at    TEXT NOT NULL,
    body           TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_by_stack ON records (stack, created_at);
CREATE TRIGGER IF NOT EXISTS records_no_update BEFORE UPDATE ON records
BEGIN SELECT RAISE(ABORT, 'stackgate records are append-only'); END;
CREATE TRIGGER IF NOT EXISTS records_no_delete BEFORE DELETE ON records
BEGIN SELECT RAISE(ABORT, 'stackgate records are append-only'); END;
"""


def default_store_path() -> Path:
    state = os.environ.get("STACKGATE_STATE_DIR")
    folder = Path(state) if state else project_root() / ".state"
    return folder / STORE_FILENAME


@dataclass(frozen=True)
class ImportResult:
    added: list[str]
    present: list[str]


class RecordStore:
    """Open with `RecordStore.open(path)`; all methods verify what they read."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn

    @classmethod
    @contextmanager
    def open(cls, path: Path | None = None) -> Iterator[RecordStore]:
        target = path or default_store_path()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(target, timeout=30)
        except (OSError, sqlite3.Error) as exc:
            raise EnvironmentProblem(f"cannot open the record store {target}: {exc}") from None
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > _STORE_VERSION:
                raise BadInput(
                    f"{target}: store format {version} is newer than this stackgate "
                    f"reads ({_STORE_VERSION})"
                )
            with conn:
                conn.executescript(_SCHEMA)
                conn.execute(f"PRAGMA user_version = {_STORE_VERSION}")
            yield cls(target, conn)
        except sqlite3.DatabaseError as exc:
            raise BadInput(f"{target}: not a readable record store: {exc}") from None
        finally:
            conn.close()

    # -- writing -------------------------------------------------------------------------------
    def add(self, record: Record) -> bool:
        """Insert a sealed record; False when the same content is already stored."""
        sealed = record if record.record_id else record.sealed()
        if sealed.record_id != sealed.compute_id():
            raise BadInput(f"record {sealed.short_id}: id does not match its content")
        now = datetime.now(UTC).isoformat(timespec="seconds")
        with self._conn:
            cur = self._conn.execute(
                "INSERT OR IGNORE INTO records VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    sealed.record_id,
                    sealed.stack,
                    sealed.kind,
                    sealed.created_at,
                    sealed.schema_version,
                    now,
                    sealed.to_json(),
                ),
            )
        return cur.rowcount == 1

    # -- reading -------------------------------------------------------------------------------
    def _row_to_record(self, record_id: str, body: str) -> Record:
        where = f"{self.path}: record {record_id[:12]}"
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{where}: not JSON: {exc}") from None
        record = load_record(data, where=where)
        if record.record_id != record_id:
            raise BadInput(f"{where}: stored under another id than its content hash")
        return record

    def get(self, ref: str) -> Record:
        """A record by full id or unique id prefix (>= 6 hex digits)."""
        if len(ref) < 6:
            raise BadInput(f"record id '{ref}' is too short; give at least 6 hex digits")
        rows = self._conn.execute(
            "SELECT record_id, body FROM records WHERE record_id LIKE ? ORDER BY record_id",
            (ref.lower() + "%",),
        ).fetchall()
        if not rows:
            raise BadInput(f"no record '{ref}' in {self.path}")
        if len(rows) > 1:
            raise BadInput(
                f"record id '{ref}' is ambiguous",
                details=[r[0][:16] for r in rows[:10]],
            )
        return self._row_to_record(rows[0][0], rows[0][1])

    def records(self, stack: str | None = None, kind: str | None = None) -> list[Record]:
        """Records, oldest first."""
        query = "SELECT record_id, body FROM records WHERE 1=1"
        params: list[str] = []
        if stack is not None:
            query += " AND stack = ?"
            params.append(stack)
        if kind is not None:
            query += " AND kind = ?"
            params.append(kind)
        query += " ORDER BY created_at, inserted_at"
        return [self._row_to_record(i, b) for i, b in self._conn.execute(query, params)]

    def latest(self, stack: str, kind: str = "known-good") -> Record | None:
        found = self.records(stack, kind)
        return found[-1] if found else None

    def count(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM records").fetchone()[0])

    def verify_all(self) -> list[str]:
        """Problems with any stored record ([] when every record reads back intact)."""
        problems: list[str] = []
        for record_id, body in self._conn.execute("SELECT record_id, body FROM records"):
            try:
                self._row_to_record(record_id, body)
            except BadInput as exc:
                problems.append(exc.message)
        return problems

    # -- JSON in git -------------------------------------------------------------------------------
    def export(self, folder: Path, stack: str | None = None) -> list[Path]:
        """Write each record as `<folder>/<stack>/<created>-<id12>.json`; existing files kept."""
        written: list[Path] = []
        for record in self.records(stack):
            target = folder / record.stack / export_filename(record)
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(record.to_json(), encoding="utf-8")
            written.append(target)
        return written

    def import_dir(self, folder: Path) -> ImportResult:
        """Verify and add every *.json record below folder (all verified before any is added)."""
        records = [read_record_file(p) for p in sorted(folder.rglob("*.json"))]
        added: list[str] = []
        present: list[str] = []
        for record in records:
            (added if self.add(record) else present).append(record.record_id)
        return ImportResult(added=added, present=present)


def export_filename(record: Record) -> str:
    stamp = record.created_at.replace(":", "").replace("-", "")[:15]
    return f"{stamp}-{record.short_id}.json"


def read_record_file(path: Path) -> Record:
    return load_record(read_json_file(path), where=str(path))


def read_json_file(path: Path) -> Any:
    """A JSON file the user named; unreadable or malformed is bad input (exit 2)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path}: not JSON: {exc}") from None
