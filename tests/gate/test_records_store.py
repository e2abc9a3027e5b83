"""Records: content hash verified on read, append-only SQLite store, JSON export/import."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.manifest.loading import load_stack
from tests.gate.record_factory import make_record
from tests.helpers.synth_reports import make_report
from validators.records.chain import TamperedStore
from validators.records.compose import compose_record
from validators.records.json_files import export_records, import_dir, read_record_file
from validators.records.model import BuildFacts, HostFingerprint, Record, load_record
from validators.records.store import RecordStore, default_store_path

ROOT = Path(__file__).resolve().parents[2]


def _record(seed: int = 0, note: str | None = None) -> Record:
    rng = np.random.default_rng(seed)
    reports = [make_report(rng) for _ in range(3)]
    return compose_record(
        load_stack("cu128"),
        reports,
        build=BuildFacts(env_tree_sha256="ab" * 32),
        host=HostFingerprint(hostname="h1"),
        kind="known-good",
        note=note,
    )


def test_record_id_is_the_content_hash_and_survives_a_json_round_trip() -> None:
    record = _record()
    assert record.record_id == record.compute_id()
    again = load_record(json.loads(record.to_json()), where="test")
    assert again == record
    assert len(record.metrics["serve-bench.sweep/output_throughput@c16"]) == 3


def test_a_changed_number_is_caught_on_read() -> None:
    data = json.loads(_record().to_json())
    key = "serve-bench.sweep/output_throughput@c16"
    data["metrics"][key][0] *= 1.05
    with pytest.raises(BadInput, match="does not match its hash"):
        load_record(data, where="records/x.json")


def test_a_newer_schema_is_refused_with_the_versions() -> None:
    data = json.loads(_record().to_json())
    data["schema_version"] = 2
    with pytest.raises(BadInput, match=r"schema_version 2 is newer .* \(1\)"):
        load_record(data, where="x")


def test_state_dir_env_moves_the_default_store(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STACKGATE_STATE_DIR", str(tmp_path / "st"))
    assert default_store_path() == tmp_path / "st" / "stackgate.sqlite"
    monkeypatch.delenv("STACKGATE_STATE_DIR")
    assert default_store_path().parts[-2:] == (".state", "stackgate.sqlite")


def test_store_adds_once_gets_by_prefix_and_lists_newest_last(tmp_path: Path) -> None:
    a, b = _record(0, "first"), _record(1, "second")
    with RecordStore.open(tmp_path / "s.sqlite") as store:
        assert store.add(a) is True
        assert store.add(a) is False  # same content, same id: nothing new
        assert store.add(b) is True
        assert store.get(a.record_id[:10]) == a
        assert store.latest("cu128") in (a, b)
        assert [r.note for r in store.records("cu128")] in (
            ["first", "second"],
            ["second", "first"],
        )
        with pytest.raises(BadInput, match="too short"):
            store.get("abc")
        with pytest.raises(BadInput, match="no record"):
            store.get("ffffffffffff")


def test_the_database_itself_refuses_update_and_delete(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    record = _record()
    with RecordStore.open(path) as store:
        store.add(record)
    conn = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE records SET stack = 'x'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM records")
    conn.close()


def test_a_row_tampered_behind_the_stores_back_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    record = _record()
    with RecordStore.open(path) as store:
        store.add(record)
    conn = sqlite3.connect(path)
    body = json.loads(conn.execute("SELECT body FROM records").fetchone()[0])
    body["note"] = "edited"
    conn.execute("DROP TRIGGER records_no_update")  # what a careless tool could do
    conn.execute("UPDATE records SET body = ?", (json.dumps(body),))
    conn.commit()
    conn.close()
    with RecordStore.open(path) as store:
        problems = store.verify().problems
        assert len(problems) == 1 and "does not match its hash" in problems[0]
        with pytest.raises(TamperedStore, match="does not match its hash") as caught:
            store.get(record.record_id)
        assert caught.value.exit_code == 1


def test_export_then_import_into_a_fresh_store(tmp_path: Path) -> None:
    a, b = _record(0), _record(1)
    with RecordStore.open(tmp_path / "one.sqlite") as store:
        store.add(a)
        store.add(b)
        written = export_records(store, tmp_path / "records").written
        again = export_records(store, tmp_path / "records")
        assert again.written == [] and again.unchanged == 2  # identical files are kept
    assert sorted(p.parent.name for p in written) == ["cu128", "cu128"]
    assert read_record_file(written[0]).record_id in (a.record_id, b.record_id)
    with RecordStore.open(tmp_path / "two.sqlite") as fresh:
        result = import_dir(fresh, tmp_path / "records")
        assert sorted(result.added) == sorted([a.record_id, b.record_id])
        assert import_dir(fresh, tmp_path / "records").present


def test_import_refuses_a_tampered_file_and_adds_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "records" / "cu128"
    folder.mkdir(parents=True)
    good, bad = _record(0), _record(1)
    (folder / "a.json").write_text(good.to_json())
    data = json.loads(bad.to_json())
    data["host"]["hostname"] = "elsewhere"
    (folder / "b.json").write_text(json.dumps(data))
    with RecordStore.open(tmp_path / "s.sqlite") as store:
        with pytest.raises(BadInput, match=r"b\.json: record content does not match"):
            import_dir(store, tmp_path / "records")
        assert store.count() == 0


def test_a_file_that_is_not_a_store_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(BadInput, match="not a readable record store"), RecordStore.open(path):
        pass


def test_a_record_carries_the_golden_outputs_of_its_profiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_root: Path
) -> None:
    stacks = tmp_path / "stacks"
    (stacks / "refs").mkdir(parents=True)
    text = (repo_root / "stacks" / "cu128.toml").read_text()
    (stacks / "cu128.toml").write_text(
        text + '\n[serving.small]\nengine = "openai-command"\nmodel_path = "/m"\n'
        'command = ["true"]\ncorrectness_reference = "refs/small.json"\n'
    )
    golden = {"stack": "cu128", "profile": "small", "greedy": [{"prompt": "2+2", "text": "4"}]}
    (stacks / "refs" / "small.json").write_text(json.dumps(golden))
    monkeypatch.setenv("STACKGATE_STACKS_DIR", str(stacks))
    record = compose_record(
        load_stack("cu128"), [make_report(np.random.default_rng(0))], build=BuildFacts(),
        host=HostFingerprint(), kind="known-good",
    )  # fmt: skip
    assert record.golden_outputs["serving.small"] == golden


def test_batch_imports_keep_one_valid_chain_and_pages_read_newest_first(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    batch = [make_record("smoke" if i % 2 else "weak", minute=i) for i in range(40)]
    with RecordStore.open(path) as store:
        assert len(store.add_many(batch).added) == 40
        assert store.add(make_record("smoke", minute=50)) is True
        again = store.add_many([*batch[:5], make_record("smoke", minute=51)])
        assert (len(again.added), len(again.present)) == (1, 5)
        assert store.verify().problems == [] and store.chain_head().count == 42
        assert store.count("smoke") == 22 and store.count(kind="candidate") == 0
        page = list(store.iter_records("smoke", newest_first=True, limit=5, offset=2))
        assert [r.created_at[11:16] for r in page] == ["10:39", "10:37", "10:35", "10:33", "10:31"]
        assert store.latest("smoke") is not None and store.latest("smoke").created_at.startswith(
            "2026-01-01T10:51"
        )


def test_two_processes_importing_at_once_both_land_in_one_chain(tmp_path: Path) -> None:
    """Real concurrent writers: BEGIN IMMEDIATE serialises them, the chain stays whole."""
    path = tmp_path / "s.sqlite"
    folders = []
    for side in range(2):
        folder = tmp_path / f"in{side}"
        folder.mkdir()
        for i in range(30):
            record = make_record("smoke", minute=i, note=f"writer {side}")
            (folder / f"{i}.json").write_text(record.to_json())
        folders.append(folder)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "validators",
                "records",
                "import",
                "--dir",
                str(folder),
                "--store",
                str(path),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for folder in folders
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    with RecordStore.open(path, read_only=True) as store:
        assert store.count() == 60 and store.verify().problems == []


def test_a_golden_reference_linked_out_of_the_stack_folder_is_not_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_root: Path
) -> None:
    """The manifest names a harmless path; the file there is a symlink to a secret of the
    host. The loader refuses it; swapped in after loading, compose refuses it too. Either way
    the record (meant for git) never carries it: exit 2 naming the field."""
    secret = tmp_path / "cloud-credentials.json"
    secret.write_text(json.dumps({"private_key": "do-not-commit"}))
    stacks = tmp_path / "stacks"
    (stacks / "refs").mkdir(parents=True)
    reference = stacks / "refs" / "small.json"
    reference.symlink_to(secret)
    text = (repo_root / "stacks" / "cu128.toml").read_text()
    (stacks / "cu128.toml").write_text(
        text + '\n[serving.small]\nengine = "openai-command"\nmodel_path = "/m"\n'
        'command = ["true"]\ncorrectness_reference = "refs/small.json"\n'
    )
    monkeypatch.setenv("STACKGATE_STACKS_DIR", str(stacks))
    with pytest.raises(BadInput) as at_load:
        load_stack("cu128")
    assert any("serving.small.correctness_reference" in d for d in at_load.value.details)
    reference.unlink()
    reference.write_text(json.dumps({"greedy": []}))
    loaded = load_stack("cu128")
    reference.unlink()
    reference.symlink_to(secret)  # swapped between the check and the copy
    with pytest.raises(BadInput, match=r"serving\.small\.correctness_reference: .*outside"):
        compose_record(
            loaded, [make_report(np.random.default_rng(0))], build=BuildFacts(),
            host=HostFingerprint(), kind="known-good",
        )  # fmt: skip


def test_an_sqlite_file_with_no_schema_reads_as_an_empty_store(tmp_path: Path) -> None:
    """A real SQLite file holding no table (a table made and dropped): readers see no records
    (before: "attempt to write a readonly database"), a writer makes the store in it."""
    path = tmp_path / "empty.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t(x)")
    conn.execute("DROP TABLE t")
    conn.commit()
    conn.close()
    assert path.stat().st_size > 0
    with RecordStore.open(path, read_only=True) as store:
        assert store.count() == 0
    listed = subprocess.run(
        [sys.executable, "-m", "validators", "records", "list", "--store", str(path), "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stderr
    with RecordStore.open(path) as store:
        assert store.add(make_record("smoke"))
    with RecordStore.open(path, read_only=True) as store:
        assert store.count() == 1


def test_two_copies_of_one_store_exporting_into_one_folder_is_named_a_fork(
    tmp_path: Path,
) -> None:
    """A store file copied (same store id), each copy then marks its own record and exports
    into one records/ folder: the second export is refused as a fork, nothing written (before:
    it wrote, and `records verify` called the first copy's records "rewritten")."""
    import shutil

    first = tmp_path / "a.sqlite"
    with RecordStore.open(first) as store:
        store.add(make_record("smoke", minute=1))
    second = tmp_path / "b.sqlite"
    shutil.copyfile(first, second)
    records = tmp_path / "records"
    with RecordStore.open(first) as store:
        store.add(make_record("smoke", note="made on copy a", minute=2))
        export_records(store, records)
        export_records(store, records)  # control: its own head again is no fork
    before = sorted(p.name for p in records.rglob("*"))
    with RecordStore.open(second) as store:
        store.add(make_record("smoke", note="made on copy b", minute=3))
        with pytest.raises(EnvironmentProblem, match="the two copies forked") as refused:
            export_records(store, records)
        assert "keep one store per records/ folder" in refused.value.details[0]
    assert sorted(p.name for p in records.rglob("*")) == before
