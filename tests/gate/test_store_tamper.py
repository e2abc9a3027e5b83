"""The record store attacked the way an outsider would: real sqlite3 statements on a real store
file, old copies of the file put back, heads compared. Each attack must end in TamperedStore
(exit 1) naming the record, or in a refused baseline; never in a quiet PASS."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from stackgate.errors import BadInput, CheckFailed
from tests.gate.record_factory import make_record
from validators.gate.compare import gate
from validators.records.chain import TamperedStore, read_head, sidecar_path
from validators.records.json_files import export_records, exported_heads
from validators.records.model import Record
from validators.records.resolve import latest_known_good
from validators.records.store import RecordStore

# The attack: the weaker stack's rows written back under the name 'smoke'.
RELABEL_WEAK = (
    "INSERT OR REPLACE INTO records SELECT seq, record_id, 'smoke', kind, created_at, "
    "schema_version, inserted_at, body, chain FROM records WHERE stack = 'weak'"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty checkout root: no committed records/ to fall back on."""
    monkeypatch.setenv("STACKGATE_ROOT", str(tmp_path / "checkout"))
    (tmp_path / "checkout").mkdir()
    return tmp_path


def _store(path: Path, *records: Record) -> None:
    with RecordStore.open(path) as store:
        store.add_many(records)


def _sql(path: Path, *statements: str) -> None:
    with closing(sqlite3.connect(path)) as conn:  # closed also when a statement is refused
        for statement in statements:
            conn.execute(statement)
        conn.commit()


def _weak_and_smoke(path: Path) -> tuple[Record, Record]:
    smoke = make_record("smoke", minute=1, throughput=1000.0)
    weak = make_record("weak", minute=2, throughput=700.0)  # 30% slower, a newer record
    _store(path, smoke, weak)
    return smoke, weak


def test_insert_or_replace_is_stopped_by_the_database(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _weak_and_smoke(path)
    with pytest.raises(sqlite3.IntegrityError, match="stackgate records are append"):
        _sql(path, RELABEL_WEAK)


def test_relabelled_row_with_triggers_dropped_is_a_tampered_store(project: Path) -> None:
    """The issue's attack: another stack's faster-looking record relabelled as 'smoke'."""
    path = project / "s.sqlite"
    _, weak = _weak_and_smoke(path)
    _sql(path, "DROP TRIGGER records_no_replace", "DROP TRIGGER records_in_order", RELABEL_WEAK)
    with RecordStore.open(path, read_only=True) as store:
        with pytest.raises(TamperedStore, match=rf"record {weak.short_id}.*column stack") as hit:
            latest_known_good("smoke", store)
        assert hit.value.exit_code == 1
        problems = store.verify().problems
    assert any("column stack says 'smoke'" in p for p in problems)


def test_update_with_triggers_dropped_is_caught_on_read(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    smoke = make_record("smoke", kind="candidate")
    _store(path, smoke)
    _sql(path, "DROP TRIGGER records_no_update", "UPDATE records SET kind = 'known-good'")
    with RecordStore.open(path) as store, pytest.raises(TamperedStore, match="column kind"):
        store.latest("smoke", "known-good")


def test_delete_in_the_middle_breaks_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    a, b, c = (make_record("smoke", minute=i, note=str(i)) for i in range(3))
    _store(path, a, b, c)
    _sql(
        path,
        "DROP TRIGGER records_no_delete",
        f"DELETE FROM records WHERE record_id = '{b.record_id}'",
    )
    with RecordStore.open(path) as store:
        problems = store.verify().problems
        with pytest.raises(
            TamperedStore, match=rf"{c.short_id} \(row 3\): the row before it is gone"
        ):
            store.get(c.record_id)
    assert any("rows 2..2 are missing" in p for p in problems)
    assert any(f"{c.short_id} (row 3): hash chain broken" in p for p in problems)


def test_delete_of_the_last_row_is_caught_by_the_head_beside_the_store(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _weak_and_smoke(path)
    _sql(path, "DROP TRIGGER records_no_delete", "DELETE FROM records WHERE seq = 2")
    with (
        pytest.raises(TamperedStore, match=r"says 2 record\(s\) were written, the store has 1"),
        RecordStore.open(path, read_only=True),
    ):
        pass


def test_an_older_copy_of_the_store_put_back_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _store(path, make_record("smoke", minute=1))
    shutil.copy(path, tmp_path / "old.sqlite")
    _store(path, make_record("smoke", minute=2, note="the newer proof"))
    shutil.copy(tmp_path / "old.sqlite", path)
    with pytest.raises(TamperedStore, match="rolled back"), RecordStore.open(path):
        pass


def test_rollback_of_store_and_its_head_is_caught_by_the_exported_head(tmp_path: Path) -> None:
    path, records = tmp_path / "s.sqlite", tmp_path / "records"
    _store(path, make_record("smoke", minute=1))
    shutil.copy(path, tmp_path / "old.sqlite")
    shutil.copy(sidecar_path(path), tmp_path / "old.head")
    _store(path, make_record("smoke", minute=2))
    with RecordStore.open(path, read_only=True) as store:
        export_records(store, records)  # the head goes to git with the records
    shutil.copy(tmp_path / "old.sqlite", path)
    shutil.copy(tmp_path / "old.head", sidecar_path(path))
    with RecordStore.open(path, read_only=True) as store:
        heads = exported_heads(records, store)
        result = store.verify(heads)
    assert len(heads) == 1
    assert any("says 2 record(s) were written, the store has 1" in p for p in result.problems)


def test_a_consistently_rewritten_chain_is_caught_by_the_head(tmp_path: Path) -> None:
    """Delete a row and recompute every later link (what someone who read chain.py would do):
    the chain is consistent again, the head kept beside the store is not."""
    path = tmp_path / "s.sqlite"
    a, b, c = (make_record("smoke", minute=i, note=str(i)) for i in range(3))
    _store(path, a, b, c)
    forged = make_record("smoke", minute=5, note="forged")
    conn = sqlite3.connect(path)
    for trigger in ("records_no_delete", "records_in_order", "records_no_replace"):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DELETE FROM records WHERE seq >= 2")
    previous = conn.execute("SELECT chain FROM records WHERE seq = 1").fetchone()[0]
    for seq, record in ((2, c), (3, forged)):
        previous = hashlib.sha256(
            f"stackgate-chain-v1\n{previous}\n{seq}\n{record.record_id}".encode()
        ).hexdigest()
        conn.execute(
            "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (seq, record.record_id, record.stack, record.kind, record.created_at,
             record.schema_version, "2026-01-01T00:00:00+00:00", record.to_json(), previous),
        )  # fmt: skip
    conn.commit()
    conn.close()
    with (
        pytest.raises(TamperedStore, match=r"first 3 record\(s\) were rewritten"),
        RecordStore.open(path),
    ):
        pass


def test_an_untouched_store_verifies_and_its_heads_agree(tmp_path: Path) -> None:
    path, records = tmp_path / "s.sqlite", tmp_path / "records"
    _weak_and_smoke(path)
    with RecordStore.open(path, read_only=True) as store:
        export_records(store, records)
        result = store.verify(exported_heads(records, store))
        head = store.chain_head()
    assert result.problems == [] and result.count == 2
    assert read_head(sidecar_path(path)) is not None
    exported = read_head(records / "_store-heads" / f"{head.store_id}.head")
    assert exported is not None and (exported.count, exported.head) == (2, head.head)


def test_a_committed_file_naming_another_stack_is_no_baseline(project: Path) -> None:
    folder = project / "checkout" / "records" / "smoke"
    folder.mkdir(parents=True)
    weak = make_record("weak", throughput=700.0)
    (folder / f"20260101T100000-{weak.short_id}.json").write_text(weak.to_json())
    with (
        RecordStore.open(project / "s.sqlite", read_only=True) as store,
        pytest.raises(BadInput, match="in the folder of stack 'smoke' but names 'weak'"),
    ):
        latest_known_good("smoke", store)


def test_a_candidate_record_is_no_baseline(project: Path) -> None:
    path = project / "s.sqlite"
    _store(path, make_record("smoke", kind="candidate"))
    with (
        RecordStore.open(path, read_only=True) as store,
        pytest.raises(BadInput, match="no known-good"),
    ):
        latest_known_good("smoke", store)


def test_the_gate_refuses_to_pass_on_a_relabelled_store(project: Path) -> None:
    """End to end in-process: the tampered baseline never reaches the comparison."""
    path = project / "s.sqlite"
    smoke, _ = _weak_and_smoke(path)
    _sql(path, "DROP TRIGGER records_no_replace", "DROP TRIGGER records_in_order", RELABEL_WEAK)
    slower = make_record("smoke", minute=9, kind="candidate", throughput=700.0)
    with RecordStore.open(path, read_only=True) as store, pytest.raises(CheckFailed):
        gate(latest_known_good("smoke", store), slower)
    assert not gate(smoke, slower).passed  # against the real baseline it is a regression


def test_upgrade_from_a_format_1_store_chains_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    a, b = make_record("smoke", minute=1), make_record("weak", minute=2)
    conn = sqlite3.connect(path)
    conn.executescript(
        """CREATE TABLE records (record_id TEXT PRIMARY KEY, stack TEXT NOT NULL,
        kind TEXT NOT NULL, created_at TEXT NOT NULL, schema_version INTEGER NOT NULL,
        inserted_at TEXT NOT NULL, body TEXT NOT NULL);
        CREATE TRIGGER records_no_delete BEFORE DELETE ON records
        BEGIN SELECT RAISE(ABORT, 'stackgate records are append-only'); END;
        PRAGMA user_version = 1;"""
    )
    for i, r in enumerate((a, b)):
        conn.execute(
            "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)",
            (r.record_id, r.stack, r.kind, r.created_at, 1, f"2026-01-0{i + 1}", r.to_json()),
        )
    conn.commit()
    conn.close()
    with (
        pytest.raises(BadInput, match="format 1 has no hash chain"),
        RecordStore.open(path, read_only=True),
    ):
        pass
    with RecordStore.open(path) as store:
        assert store.verify().problems == []
        assert [r.record_id for r in store.records()] == [a.record_id, b.record_id]
        assert store.chain_head().count == 2
    head = read_head(sidecar_path(path))  # the upgrade leaves the head a later cut is checked by
    assert head is not None and head.count == 2


def test_the_last_row_cut_and_the_head_beside_the_store_deleted_fails_verify(
    tmp_path: Path,
) -> None:
    """Deleting the head file is as easy as cutting the tail: `records verify` must not say ok
    for a non-empty store whose head is gone (every write and the upgrade leave one)."""
    path = tmp_path / "s.sqlite"
    _weak_and_smoke(path)
    _sql(path, "DROP TRIGGER records_no_delete", "DELETE FROM records WHERE seq = 2")
    sidecar_path(path).unlink()
    with RecordStore.open(path, read_only=True) as store:
        problems = store.verify().problems
    assert any("is missing" in p and str(sidecar_path(path)) in p for p in problems), problems
