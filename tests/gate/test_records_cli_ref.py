"""`records import FILE` used to ignore FILE and import the default records/ folder (exit 0,
"imported N record(s) from .../records"): a careless user believed the file was in the store.
Now the named file (or folder) is what is imported, and a ref the action does not take is bad
input. Real CLI processes, real store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.gate.record_factory import make_record
from validators.records.store import RecordStore

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "validators", "records", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_import_of_a_named_file_imports_that_file_only(tmp_path: Path) -> None:
    one, other = make_record(minute=1), make_record(minute=2)
    (tmp_path / "one.json").write_text(one.to_json())
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "other.json").write_text(other.to_json())
    store = tmp_path / "s.sqlite"
    done = _cli("import", tmp_path / "one.json", "--store", store, "--dir", folder)
    assert done.returncode == 0, done.stderr
    with RecordStore.open(store, read_only=True) as opened:
        assert [r.record_id for r in opened.records()] == [one.record_id]
    assert "one.json" in done.stderr


def test_import_of_a_missing_file_is_bad_input(tmp_path: Path) -> None:
    done = _cli("import", tmp_path / "nope.json", "--store", tmp_path / "s.sqlite")
    assert done.returncode == 2, done.stderr
    assert "nope.json" in done.stderr


def test_verify_with_a_ref_is_bad_input(tmp_path: Path) -> None:
    done = _cli("verify", "smoke", "--store", tmp_path / "s.sqlite", "--dir", tmp_path)
    assert done.returncode == 2, done.stderr


def test_verify_of_a_store_that_is_not_there_verifies_nothing_and_says_so(tmp_path: Path) -> None:
    """A mistyped or deleted --store said "ok: 0 record(s) verified ... (hash chain intact)",
    exit 0. With record files beside it only those are verified, and the line says the store
    was not; with neither, nothing was checked: exit 1."""
    empty = tmp_path / "empty"
    empty.mkdir()
    done = _cli("verify", "--store", tmp_path / "typo.sqlite", "--dir", empty, "--json")
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    assert payload["ok"] is False and payload["store_exists"] is False
    assert "nothing verified: no record store at" in done.stderr, done.stderr
    assert "hash chain intact" not in done.stderr

    records = tmp_path / "records"
    record = make_record(minute=1)
    (records / record.stack).mkdir(parents=True)
    (records / record.stack / f"{record.created_stamp}-{record.short_id}.json").write_text(
        record.to_json()
    )
    done = _cli("verify", "--store", tmp_path / "typo.sqlite", "--dir", records)
    assert done.returncode == 0, done.stderr
    assert "1 record file(s) verified" in done.stderr and "(not verified)" in done.stderr
    assert "hash chain intact" not in done.stderr


def test_a_prefix_naming_a_stored_and_a_committed_record_is_ambiguous(tmp_path: Path) -> None:
    """`records show PREFIX` took the stored record silently when a committed file held another
    record with the same prefix (a reviewer reading that file saw a different record). Notes
    n80 and n5606 give ids sharing their first 6 hex digits (found by search over n0, n1, ...)."""
    stored, committed = make_record(note="n80"), make_record(note="n5606")
    prefix = stored.record_id[:6]
    assert committed.record_id.startswith(prefix) and committed.record_id != stored.record_id
    store = tmp_path / "s.sqlite"
    with RecordStore.open(store) as opened:
        opened.add(stored)
    root = tmp_path / "project"
    folder = root / "records" / committed.stack
    folder.mkdir(parents=True)
    (folder / f"{committed.created_stamp}-{committed.short_id}.json").write_text(
        committed.to_json()
    )
    (root / "stacks").mkdir()
    env = {**os.environ, "STACKGATE_ROOT": str(root)}
    done = subprocess.run(
        [sys.executable, "-m", "validators", "records", "show", prefix, "--store", str(store)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "matches 2 records" in done.stderr, done.stderr
    assert stored.record_id[:16] in done.stderr and committed.record_id[:16] in done.stderr
    # The full id of either one is not ambiguous.
    for record in (stored, committed):
        done = subprocess.run(
            [sys.executable, "-m", "validators", "records", "show", record.record_id,
             "--store", str(store), "--json"],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["record_id"] == record.record_id
    # Without --json: the record (what was asked for) on stdout, the verdict line on stderr.
    done = subprocess.run(
        [sys.executable, "-m", "validators", "records", "show", stored.record_id,
         "--store", str(store)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # A summary on stdout (the whole record is --json's), the verdict line on stderr.
    assert f"id       {stored.record_id}" in done.stdout.splitlines()
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith(f"OK {stored.label}: summary printed on stdout")
    )


def test_a_ref_longer_than_any_name_is_bad_input_not_the_file_systems_error(
    tmp_path: Path,
) -> None:
    """`records show` with a 10,000-character stack-like argument (or a path with such a part)
    was looked up as a folder: ENAMETOOLONG, exit 3, the whole argument echoed. Bad input,
    exit 2, the argument shortened; a 64-hex id still reads as an id (control)."""
    store = tmp_path / "s.sqlite"
    record = make_record(minute=3)
    with RecordStore.open(store) as opened:
        opened.add(record)
    for ref in ("a" * 10_000, "x/" + "b" * 300 + ".json", "é" * 200):
        done = _cli("show", ref, "--store", store)
        assert done.returncode == 2, (ref[:8], done.stderr[-400:])
        assert "longer than any record id, stack name or file name" in done.stderr
        assert len(done.stderr) < 1000 and "Traceback" not in done.stderr
    done = _cli("show", record.record_id, "--store", store, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["record_id"] == record.record_id
