"""The record store is written only where it is (issue 23 section 4, shared folders).

SQLite follows symlinks: a store path that was a symlink to an empty file elsewhere made
`records import` turn that file into a database (found this wave). A writer now refuses a store,
or a -journal/-wal/-shm beside it, that is a symlink or a hard link (exit 3 naming it, the
target untouched); a reader still follows a symlinked store (reading cannot harm its target).
Real files, real links, a real committed record imported in-process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stackgate.cli import main_for

ROOT = Path(__file__).resolve().parents[2]
RECORD = next((ROOT / "records" / "h200-transformers").glob("*.json"))


def _records(monkeypatch: pytest.MonkeyPatch, state: Path, *argv: str) -> int:
    monkeypatch.setenv("STACKGATE_STATE_DIR", str(state))
    return main_for(["validators"], "python -m validators", "", ["records", *argv])


@pytest.mark.parametrize("what", ["store symlink", "store hard link", "journal symlink",
                                  "wal symlink"])  # fmt: skip
def test_a_writer_refuses_a_linked_store_and_leaves_the_target(
    tmp_path: Path, what: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"" if what.startswith("store") else b"keep\n")
    store = state / "stackgate.sqlite"
    if what == "store symlink":
        store.symlink_to(victim)
    elif what == "store hard link":
        os.link(victim, store)
    else:
        suffix = "-journal" if what.startswith("journal") else "-wal"
        store.with_name(store.name + suffix).symlink_to(victim)
    before = victim.read_bytes()
    code = _records(monkeypatch, state, "import", str(RECORD))
    err = capfd.readouterr().err
    assert code == 3, err
    assert "written only where it is" in err and str(state) in err
    assert victim.read_bytes() == before


def test_a_reader_still_follows_a_symlinked_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    real = tmp_path / "real"
    assert _records(monkeypatch, real, "import", str(RECORD)) == 0
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "stackgate.sqlite").symlink_to(real / "stackgate.sqlite")
    capfd.readouterr()
    assert _records(monkeypatch, linked, "list") == 0
    assert "h200-transformers" in capfd.readouterr().err
