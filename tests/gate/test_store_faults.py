"""Faults and forgeries around the record store (issue 23 sections 4 and 5).

Real SQLite files, real SIGKILLs, real `python -m validators` processes:

- a store deleted and re-created from a subset, or an older copy disguised as format 1 and
  "upgraded" (both get a new store id), while `records/_store-heads/` commits a longer head;
- SIGKILL in the middle of `records import` (a hot rollback journal), a 0-byte store file;
- temp files left by a killed export; a folder named like a record file;
- out-of-range `--limit`/`--offset`; environment variables naming a file as a folder.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import pytest

from stackgate.errors import BadInput
from stackgate.settings import folder
from tests.gate.record_factory import make_record
from validators.records.chain import sidecar_path
from validators.records.model import Record
from validators.records.store import RecordStore, _interrupted_write

ROOT = Path(__file__).resolve().parents[2]


def _cli(tmp_path: Path, *argv: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    base = {"PATH": "/usr/bin:/bin", "STACKGATE_ROOT": str(tmp_path), "NO_COLOR": "1",
            "STACKGATE_STATE_DIR": str(tmp_path / "state")}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "validators", *argv], cwd=ROOT,
                          env={**base, **(env or {})}, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def _store_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "stackgate.sqlite"


def _add(path: Path, *records: Record) -> None:
    with RecordStore.open(path) as store:
        store.add_many(records)


# -- committed heads longer than the store (section 4) ---------------------------------------


def _exported_store(tmp_path: Path) -> list[Record]:
    """A store of 3 records, exported to the checkout's records/ (files and head)."""
    records = [make_record("smoke", minute=m) for m in (1, 2, 3)]
    _add(_store_path(tmp_path), *records)
    done = _cli(tmp_path, "records", "export", "--dir", str(tmp_path / "records"))
    assert done.returncode == 0, done.stderr
    return records


def _delete_store(tmp_path: Path) -> None:
    path = _store_path(tmp_path)
    path.unlink()
    sidecar_path(path).unlink()


def test_a_store_recreated_from_a_subset_fails_verify(tmp_path: Path) -> None:
    records = _exported_store(tmp_path)
    _delete_store(tmp_path)
    _add(_store_path(tmp_path), *records[:2])  # the newest known-good left out
    done = _cli(tmp_path, "records", "verify", "--dir", str(tmp_path / "records"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "commits a head of 3 record(s)" in done.stderr and "has 2" in done.stderr


def test_a_subset_padded_past_the_head_fails_verify(tmp_path: Path) -> None:
    records = _exported_store(tmp_path)
    _delete_store(tmp_path)
    padding = [make_record("smoke", minute=m, note="pad") for m in (4, 5)]
    _add(_store_path(tmp_path), records[0], records[1], *padding)  # 4 rows > the head's 3
    done = _cli(tmp_path, "records", "verify", "--dir", str(tmp_path / "records"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "does not extend" in done.stderr and records[2].short_id in done.stderr


def test_an_older_copy_disguised_as_format_1_fails_verify(tmp_path: Path) -> None:
    records = _exported_store(tmp_path)
    _delete_store(tmp_path)
    path = _store_path(tmp_path)
    conn = sqlite3.connect(path)
    conn.executescript(
        """CREATE TABLE records (record_id TEXT PRIMARY KEY, stack TEXT NOT NULL,
        kind TEXT NOT NULL, created_at TEXT NOT NULL, schema_version INTEGER NOT NULL,
        inserted_at TEXT NOT NULL, body TEXT NOT NULL);
        PRAGMA user_version = 1;"""
    )
    for r in records[:2]:
        conn.execute(
            "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)",
            (r.record_id, r.stack, r.kind, r.created_at, 1, r.created_at, r.to_json()),
        )
    conn.commit()
    conn.close()
    (tmp_path / "empty").mkdir()
    upgraded = _cli(tmp_path, "records", "import", "--dir", str(tmp_path / "empty"))  # a writer
    assert upgraded.returncode == 0, upgraded.stderr
    done = _cli(tmp_path, "records", "verify", "--dir", str(tmp_path / "records"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "commits a head of 3 record(s)" in done.stderr


def test_a_store_that_holds_every_committed_record_verifies(tmp_path: Path) -> None:
    """Not a false alarm: a teammate's store (another id) that imported the committed records,
    in another order, and made records of its own."""
    records = _exported_store(tmp_path)
    _delete_store(tmp_path)
    _add(_store_path(tmp_path), make_record("weak", minute=9), *reversed(records))
    done = _cli(tmp_path, "records", "verify", "--dir", str(tmp_path / "records"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every committed record is in this store" in done.stderr


# -- SIGKILL during an import: a hot journal (section 5) --------------------------------------

_KILLED_IMPORT = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from tests.gate.record_factory import make_record
    from validators.records.store import RecordStore, _interrupted_write

    def records():
        for minute in range(40):  # ~8 MB of records: SQLite spills pages, the journal is hot
            yield make_record("smoke", minute=minute + 10, note="x" * 200_000)
        os.kill(os.getpid(), signal.SIGKILL)  # mid-transaction, as a killed `records import`

    with RecordStore.open(Path({path!r})) as store:
        store.add_many(records())
    """
)


def test_sigkill_during_import_leaves_a_store_readers_recover(tmp_path: Path) -> None:
    path = _store_path(tmp_path)
    kept = make_record("smoke", minute=1)
    _add(path, kept)
    killed = subprocess.run([sys.executable, "-c",
                             _KILLED_IMPORT.format(root=str(ROOT), path=str(path))],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    journal = path.with_name(path.name + "-journal")
    assert journal.is_file() and journal.stat().st_size > 0  # the fault is real
    with (  # what readers hit before
        closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as ro,
        pytest.raises(sqlite3.OperationalError, match="readonly"),
    ):
        ro.execute("SELECT COUNT(*) FROM records").fetchone()
    # Every read-only command works, and sees the last completed write.
    listed = _cli(tmp_path, "records", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["record_id"] for r in json.loads(listed.stdout)] == [kept.record_id]
    verified = _cli(tmp_path, "records", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    shown = _cli(tmp_path, "records", "show", "smoke", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["record_id"] == kept.record_id


def test_a_hot_journal_this_user_cannot_roll_back_is_explained(tmp_path: Path) -> None:
    """Where the rollback cannot be done (a store on a share this user cannot write; as root
    here that cannot be staged), the read's real SQLITE_READONLY_ROLLBACK is explained (exit 3),
    not 'not a readable record store' (exit 2)."""
    path = _store_path(tmp_path)
    _add(path, make_record("smoke", minute=1))
    killed = subprocess.run([sys.executable, "-c",
                             _KILLED_IMPORT.format(root=str(ROOT), path=str(path))],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert killed.returncode == -9
    with (
        closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as ro,
        pytest.raises(sqlite3.OperationalError) as refused,
    ):
        ro.execute("SELECT COUNT(*) FROM records").fetchone()
    explained = _interrupted_write(path, refused.value)
    assert explained is not None and explained.exit_code == 3
    assert "interrupted" in explained.message and "records import" in explained.details[0]
    assert _interrupted_write(path, sqlite3.DatabaseError("file is not a database")) is None


# -- a 0-byte store file ------------------------------------------------------------------------


def test_an_empty_store_file_is_read_as_empty_and_said_so(tmp_path: Path) -> None:
    path = _store_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")  # a first write cut short by a full disk
    for argv in (["records", "list"], ["records", "verify"]):
        done = _cli(tmp_path, *argv)
        assert "empty file (0 bytes" in done.stderr, done.stderr
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr
    assert _cli(tmp_path, "records", "list").returncode == 0
    (tmp_path / "in" / "smoke").mkdir(parents=True)
    (tmp_path / "in" / "smoke" / "a.json").write_text(make_record("smoke").to_json())
    done = _cli(tmp_path, "records", "import", str(tmp_path / "in"))  # a writer makes a store
    assert done.returncode == 0, done.stderr
    assert _cli(tmp_path, "records", "verify").returncode == 0


def test_an_empty_store_file_whose_head_says_records_were_written_is_explained(
    tmp_path: Path,
) -> None:
    path = _store_path(tmp_path)
    _add(path, make_record("smoke", minute=1), make_record("smoke", minute=2))
    path.write_bytes(b"")  # the store lost, its head beside it kept
    done = _cli(tmp_path, "records", "list")
    assert done.returncode == 3, done.stderr
    assert "0 bytes" in done.stderr and "2 record(s) were written" in done.stderr
    assert "records import --dir records/" in done.stderr and "Traceback" not in done.stderr


# -- temp files of a killed export are cleaned by the next writer -------------------------------


def test_the_next_export_removes_temp_files_a_killed_export_left(tmp_path: Path) -> None:
    _add(_store_path(tmp_path), make_record("smoke", minute=1))
    folder = tmp_path / "records" / "smoke"
    folder.mkdir(parents=True)
    stale = folder / ".20260101T100100-abcdef012345.json.k1ll3d.tmp"
    stale.write_text('{"half": ')
    live = folder / ".20260101T100200-abcdef012345.json.wr1t1n.tmp"
    live.write_text("{")
    old = 1_700_000_000  # both older than any writer's create-to-lock instant
    os.utime(stale, (old, old))
    os.utime(live, (old, old))
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    linked = folder / ".x.json.l1nk.tmp"
    linked.symlink_to(target)
    with live.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a writer still at work holds its temp file
        done = _cli(tmp_path, "records", "export", "--dir", str(tmp_path / "records"))
    assert done.returncode == 0, done.stderr
    assert not stale.exists() and live.exists() and linked.is_symlink()
    assert target.read_text() == "keep"


# -- bad input --------------------------------------------------------------------------------


def test_a_folder_named_like_a_record_file_is_bad_input(tmp_path: Path) -> None:
    named = tmp_path / "x.json"
    named.mkdir()
    done = _cli(tmp_path, "records", "import", str(named))
    assert done.returncode == 2 and "a folder, not a record file" in done.stderr, done.stderr
    inner = tmp_path / "in" / "smoke" / "y.json"
    inner.mkdir(parents=True)
    done = _cli(tmp_path, "records", "import", str(tmp_path / "in"))
    assert done.returncode == 2 and "y.json: a folder named like a record file" in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["--limit", "100000000000000000000000"],
        ["--limit", "1e23"],
        ["--limit", "-1"],
        ["--offset", "99999999999999999999999"],
        ["--offset", "-3"],
    ],
)
def test_list_paging_numbers_are_bounded(tmp_path: Path, argv: list[str]) -> None:
    _add(_store_path(tmp_path), make_record("smoke"))
    done = _cli(tmp_path, "records", "list", *argv)
    assert done.returncode == 2, done.stderr
    assert argv[0] in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("var", ["STACKGATE_STATE_DIR", "STACKGATE_ROOT"])
@pytest.mark.parametrize("value", ["/etc/passwd", "/dev/null", "/etc/passwd/below"])
def test_a_folder_variable_naming_a_file_is_bad_input_naming_it(
    tmp_path: Path, var: str, value: str
) -> None:
    done = _cli(tmp_path, "records", "list", env={var: value})
    assert done.returncode == 2, done.stderr
    assert f"${var}" in done.stderr and "not a folder" in done.stderr
    assert Path("/etc/passwd").is_file()


@pytest.mark.parametrize(
    "var",
    [
        "STACKGATE_CACHE",
        "STACKGATE_CACHE_DIR",
        "STACKGATE_STACKS_DIR",
        "STACKGATE_DRIVER_STUB_CACHE",
        "STACKGATE_STORAGE_ROOT",
    ],
)
def test_every_folder_variable_is_checked_the_same_way(
    monkeypatch: pytest.MonkeyPatch, var: str
) -> None:
    monkeypatch.setenv(var, "/dev/null")
    with pytest.raises(BadInput, match=rf"\${var}=/dev/null is not a folder"):
        folder(var, "test")
    monkeypatch.setenv(var, "")
    assert folder(var, "test") is None


def test_the_cache_variable_is_named_by_a_command_that_reads_it(tmp_path: Path) -> None:
    """`STACKGATE_CACHE=/dev/null` failed without naming the variable."""
    lock = ROOT / "stacks" / "locks" / "cu128" / "uv.lock"
    done = subprocess.run(
        [sys.executable, "-m", "validators", "static", "cu128", "--lock", str(lock), "--offline"],
        cwd=ROOT, env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "STACKGATE_CACHE": "/dev/null",
                       "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "$STACKGATE_CACHE=/dev/null is not a folder" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_uv_variable_naming_a_folder_is_named(tmp_path: Path) -> None:
    """STACKGATE_UV=/etc (a folder is 'executable') went on to run it."""
    done = subprocess.run(
        [sys.executable, "-m", "builder", "lock", "cu128", "--locks-dir", str(tmp_path / "l")],
        cwd=ROOT, env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "STACKGATE_UV": "/etc",
                       "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "STACKGATE_UV names no executable uv" in done.stderr and "Traceback" not in done.stderr


def test_a_first_import_on_a_full_disk_is_an_environment_problem(tmp_path: Path) -> None:
    """A real full file system (a 1 MiB tmpfs, filled): the first import cannot create the
    store; that is the host's problem, exit 3 (before: exit 2, "not a readable record store")."""
    from tests.helpers.small_disk import small_tmpfs

    src = tmp_path / "in" / "smoke"
    src.mkdir(parents=True)
    for i in range(3):
        (src / f"r{i}.json").write_text(make_record("smoke", minute=i).to_json())
    with small_tmpfs(tmp_path, 1) as disk:
        with (disk / "fill").open("wb") as fill, pytest.raises(OSError):
            while True:
                fill.write(b"x" * 65536)
                fill.flush()
        done = subprocess.run(
            [sys.executable, "-m", "validators", "records", "import", "--dir",
             str(tmp_path / "in"), "--store", str(disk / "store.sqlite")],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 3, done.stderr
        assert "disk is full" in done.stderr and "Traceback" not in done.stderr
