"""`records import FILE` used to ignore FILE and import the default records/ folder (exit 0,
"imported N record(s) from .../records"): a careless user believed the file was in the store.
Now the named file (or folder) is what is imported, and a ref the action does not take is bad
input. Real CLI processes, real store."""

from __future__ import annotations

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
