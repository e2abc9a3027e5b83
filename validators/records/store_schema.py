"""The record store's SQLite schema (format 2), its creation and the upgrade from format 1.

Format 2 adds insertion order (`seq`, the rowid) and the hash chain (`chain`, see chain.py),
a `meta` table holding the store's random id, indexes for what `records list`, `latest` and
the gate filter on, and triggers that refuse UPDATE, DELETE, a second row with an existing
record id (what `INSERT OR REPLACE` would do: REPLACE deletes without firing delete triggers)
and a row out of order. Triggers stop a careless tool; someone who drops them is caught by the
chain and the column checks on read, not by the triggers.
"""

from __future__ import annotations

import sqlite3
import uuid

from validators.records.chain import GENESIS, link

STORE_VERSION = 2
# PRAGMA application_id of a stackgate store ("STKG"): another program's SQLite file is never
# taken for one (stores made before it was set read 0 and are judged by their tables).
APPLICATION_ID = 0x53544B47
# The tables of each format: a file with others (or without these) belongs to another program.
TABLES = {1: frozenset({"records"}), 2: frozenset({"records", "meta"})}

_TABLES = """
CREATE TABLE records (
    seq            INTEGER PRIMARY KEY,
    record_id      TEXT NOT NULL UNIQUE,
    stack          TEXT NOT NULL,
    kind           TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    inserted_at    TEXT NOT NULL,
    body           TEXT NOT NULL,
    chain          TEXT NOT NULL
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_INDEXES_AND_TRIGGERS = """
CREATE INDEX records_by_stack_kind ON records (stack, kind, created_at, seq);
CREATE INDEX records_by_stack ON records (stack, created_at, seq);
CREATE INDEX records_by_kind ON records (kind, created_at, seq);
CREATE INDEX records_by_created ON records (created_at, seq);
CREATE TRIGGER records_no_update BEFORE UPDATE ON records
BEGIN SELECT RAISE(ABORT, 'stackgate records are append-only'); END;
CREATE TRIGGER records_no_delete BEFORE DELETE ON records
BEGIN SELECT RAISE(ABORT, 'stackgate records are append-only'); END;
CREATE TRIGGER records_no_replace BEFORE INSERT ON records
WHEN EXISTS (SELECT 1 FROM records WHERE record_id = NEW.record_id OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'stackgate records are append-only (no REPLACE)'); END;
CREATE TRIGGER records_in_order BEFORE INSERT ON records
WHEN NEW.seq IS NOT (SELECT COALESCE(MAX(seq), 0) + 1 FROM records)
BEGIN SELECT RAISE(ABORT, 'stackgate records are appended in order'); END;
CREATE TRIGGER meta_no_update BEFORE UPDATE ON meta
BEGIN SELECT RAISE(ABORT, 'stackgate store meta is write-once'); END;
CREATE TRIGGER meta_no_delete BEFORE DELETE ON meta
BEGIN SELECT RAISE(ABORT, 'stackgate store meta is write-once'); END;
"""


def create(conn: sqlite3.Connection) -> None:
    """A new, empty format-2 store (inside the caller's transaction)."""
    _run(conn, _TABLES)
    _run(conn, _INDEXES_AND_TRIGGERS)
    conn.execute("INSERT INTO meta VALUES ('store_id', ?)", (uuid.uuid4().hex,))
    conn.execute(f"PRAGMA user_version = {STORE_VERSION}")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def foreign(conn: sqlite3.Connection) -> str | None:
    """Why the opened SQLite file is not a stackgate store (None: it is one, or it is empty):
    another application id, or tables that no store format has."""
    app = int(conn.execute("PRAGMA application_id").fetchone()[0])
    if app not in (0, APPLICATION_ID):
        return f"its application id is {app:#x}, not stackgate's ({APPLICATION_ID:#x})"
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    tables = {
        str(row[0])
        for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if not str(row[0]).startswith("sqlite_")
    }
    expected = TABLES.get(version, frozenset()) if version else frozenset()
    if version > STORE_VERSION or tables == expected:
        return None  # a newer format is refused by its version, with its own words
    shown = ", ".join(sorted(tables)[:5]) or "none"
    return f"it holds the tables {shown} (user_version {version}), not a record store's"


def upgrade_from_1(conn: sqlite3.Connection) -> int:
    """Move a format-1 store's rows into format 2, chained in insertion order; rows moved."""
    rows = conn.execute(
        "SELECT record_id, stack, kind, created_at, schema_version, inserted_at, body "
        "FROM records ORDER BY inserted_at, rowid"
    ).fetchall()
    conn.execute("DROP TABLE records")  # its triggers and index go with it
    create(conn)
    previous = GENESIS
    for seq, row in enumerate(rows, start=1):
        previous = link(previous, seq, row[0])
        conn.execute(
            "INSERT INTO records (seq, record_id, stack, kind, created_at, schema_version, "
            "inserted_at, body, chain) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (seq, *row, previous),
        )
    return len(rows)


def _run(conn: sqlite3.Connection, script: str) -> None:
    """Run statements one by one: executescript() would COMMIT the caller's transaction."""
    for statement in _statements(script):
        conn.execute(statement)


def _statements(script: str) -> list[str]:
    out: list[str] = []
    buffer = ""
    for line in script.strip().splitlines():
        buffer += line + "\n"
        if sqlite3.complete_statement(buffer):
            out.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete SQL statement: {buffer.strip()[:60]}")
    return out
