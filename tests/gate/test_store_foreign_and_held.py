"""A record store is made only in a file of its own, and a store another process holds is
waited for boundedly, said while waiting, and given up on as an environment problem.

Real SQLite files made by "another program", real holder processes with open transactions,
real `python -m validators records ...` processes.
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from stackgate.errors import BadInput, EnvironmentProblem
from tests.gate.record_factory import make_record
from validators.records import store_busy, store_schema
from validators.records.chain import sidecar_path
from validators.records.store import RecordStore

ROOT = Path(__file__).resolve().parents[2]


def _cli(
    tmp_path: Path, *argv: str | Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "STACKGATE_ROOT": str(tmp_path), "NO_COLOR": "1",
           "STACKGATE_STATE_DIR": str(tmp_path / "state")}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "validators", *map(str, argv)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip


def _records_dir(tmp_path: Path, *minutes: int) -> Path:
    folder = tmp_path / "in" / "smoke"
    folder.mkdir(parents=True, exist_ok=True)
    for m in minutes:
        (folder / f"r{m}.json").write_text(make_record(minute=m).to_json())
    return tmp_path / "in"


def _sqlite(path: Path, script: str) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(script)
    conn.commit()
    conn.close()
    return path


# Files of other programs: each is refused, none is turned into a store.
FOREIGN = {
    "another table": "CREATE TABLE t(x); INSERT INTO t VALUES (1);",
    "another program's user_version 2": "CREATE TABLE jobs(id); PRAGMA user_version = 2;",
    "another program's user_version 1": "CREATE TABLE jobs(id); PRAGMA user_version = 1;",
    "a store's tables under another application id": (
        "CREATE TABLE records(x); CREATE TABLE meta(key, value); PRAGMA user_version = 2; "
        "PRAGMA application_id = 1234;"
    ),
    "a store's tables plus another program's": (
        "CREATE TABLE records(x); CREATE TABLE meta(key, value); CREATE TABLE users(pw); "
        "PRAGMA user_version = 2;"
    ),
}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_records_import_into_another_programs_sqlite_file_is_refused(
    tmp_path: Path, kind: str
) -> None:
    foreign = _sqlite(tmp_path / "theirs.sqlite", FOREIGN[kind])
    before = _digest(foreign)
    done = _cli(
        tmp_path, "records", "import", "--dir", _records_dir(tmp_path, 1), "--store", foreign
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "not a stackgate record store" in done.stderr and str(foreign) in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("REFUSED")
    assert "Traceback" not in done.stderr
    assert _digest(foreign) == before  # nothing written
    assert not sidecar_path(foreign).exists()
    with pytest.raises(BadInput, match="not a stackgate record store"), RecordStore.open(foreign):
        pass
    assert _digest(foreign) == before


def test_stores_of_our_own_are_still_written(tmp_path: Path) -> None:
    """Controls: a new file, an empty-schema SQLite file and a store made before the
    application id was set are stores (the old one gets the id on its next write)."""
    new = tmp_path / "new.sqlite"
    empty = _sqlite(tmp_path / "empty.sqlite", "CREATE TABLE t(x); DROP TABLE t;")
    for path in (new, empty):
        done = _cli(
            tmp_path, "records", "import", "--dir", _records_dir(tmp_path, 1), "--store", path
        )
        assert done.returncode == 0, done.stderr
    old = tmp_path / "old.sqlite"
    with RecordStore.open(old) as store:
        store.add(make_record(minute=1))
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == store_schema.APPLICATION_ID
    conn.execute("PRAGMA application_id = 0")  # as a store made before the id was
    conn.commit()
    conn.close()
    with RecordStore.open(old) as store:
        store.add(make_record(minute=2))
    with RecordStore.open(old, read_only=True) as store:
        assert store.count() == 2
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == store_schema.APPLICATION_ID
    conn.close()


_HOLD = (
    "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "for sql in ('BEGIN ' + sys.argv[2]).split(';'): c.execute(sql).fetchall()\n"
    "print('held', flush=True); time.sleep(float(sys.argv[3]))"
)


def _holder(store: Path, mode: str, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(store), mode, str(seconds)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def _stop(holder: subprocess.Popen[str], *, kill: bool = True) -> None:
    if kill:
        holder.kill()
    holder.wait()
    assert holder.stdout is not None
    holder.stdout.close()


def test_records_import_on_a_held_store_says_what_it_waits_for_and_ends_exit_3(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s.sqlite"
    first = _cli(
        tmp_path, "records", "import", "--dir", _records_dir(tmp_path, 1), "--store", store
    )
    assert first.returncode == 0, first.stderr
    _records_dir(tmp_path, 2)
    holder = _holder(store, "EXCLUSIVE", 600)
    try:
        started = time.monotonic()
        done = _cli(tmp_path, "records", "import", "--dir", tmp_path / "in", "--store", store)
        took = time.monotonic() - started
    finally:
        _stop(holder)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    waiting = [line for line in lines if line.startswith("waiting for the record store")]
    assert len(waiting) >= 2 and str(store) in waiting[0]  # said at once, and again
    assert "held by another process" in done.stderr and "nothing was written" in done.stderr
    assert lines[-1].startswith("FAILED") and "exit 3" in lines[-1]
    assert took < store_busy.WAIT_S + 60  # bounded (a generous margin for a loaded host)
    with RecordStore.open(store, read_only=True) as s:
        assert s.count() == 1  # nothing was written


@pytest.mark.parametrize(
    ("mode", "read_only"), [("EXCLUSIVE", True), ("EXCLUSIVE", False), ("IMMEDIATE", False)]
)
def test_a_held_store_is_waited_for_boundedly_by_readers_and_writers(
    tmp_path: Path, mode: str, read_only: bool
) -> None:
    store = tmp_path / "s.sqlite"
    with RecordStore.open(store) as s:
        s.add(make_record(minute=1))
    said: list[str] = []
    holder = _holder(store, mode, 600)
    try:
        with (
            pytest.raises(EnvironmentProblem, match="held by another process") as caught,
            RecordStore.open(store, read_only=read_only, say=said.append, wait_s=2.5) as s,
        ):
            s.add(make_record(minute=2))
    finally:
        _stop(holder)
    assert str(store) in caught.value.message
    assert said and all("waiting for the record store" in line for line in said)


def test_a_store_held_for_a_moment_is_written_after_the_wait(tmp_path: Path) -> None:
    """A holder that finishes inside the bound: the writer waits, says so, and writes."""
    store = tmp_path / "s.sqlite"
    with RecordStore.open(store) as s:
        s.add(make_record(minute=1))
    said: list[str] = []
    holder = _holder(store, "EXCLUSIVE", 2.0)
    try:
        with RecordStore.open(store, say=said.append, wait_s=30) as s:
            assert s.add(make_record(minute=2))
    finally:
        _stop(holder, kill=False)
    assert said and "waiting for the record store" in said[0]
    with RecordStore.open(store, read_only=True) as s:
        assert s.count() == 2


def test_a_commit_waits_for_a_reader_boundedly(tmp_path: Path) -> None:
    """A reader's open SHARED lock blocks a writer's COMMIT: waited for, said, bounded."""
    store = tmp_path / "s.sqlite"
    with RecordStore.open(store) as s:
        s.add(make_record(minute=1))
    said: list[str] = []
    holder = _holder(store, "DEFERRED; SELECT COUNT(*) FROM records", 600)
    # the holder's SELECT inside a transaction keeps its SHARED lock
    try:
        with (
            RecordStore.open(store, say=said.append, wait_s=2.5) as s,
            pytest.raises(EnvironmentProblem, match="held by another process"),
        ):
            s.add(make_record(minute=2))
    finally:
        _stop(holder)
    assert said and "committing" in said[-1]
    with RecordStore.open(store, read_only=True) as s:
        assert s.count() == 1


def test_the_wait_rule_on_its_own() -> None:
    """retry_busy: an error other than busy is not waited on; busy is tried again until the
    bound, said after SAY_AFTER_S and every SAY_EVERY_S."""
    now = [0.0]
    tries: list[float] = []
    said: list[str] = []

    def busy() -> None:
        tries.append(now[0])
        now[0] += 0.5
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(EnvironmentProblem, match="held by another process"):
        store_busy.retry_busy(busy, target=Path("/x.sqlite"), doing="testing", say=said.append,
                              wait_s=25, clock=lambda: now[0])  # fmt: skip
    assert len(said) == 3  # at 1 s, 11 s, 21 s
    assert now[0] >= 25

    def other() -> None:
        raise sqlite3.OperationalError("no such table: x")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        store_busy.retry_busy(other, target=Path("/x"), doing="t", say=said.append)
    assert threading.active_count() >= 1
