"""The embedded record store: one SQLite file, append-only, every read verified.

Default `<project>/.state/stackgate.sqlite`; STACKGATE_STATE_DIR moves the folder, `--store FILE`
picks the file. Every read checks that:
- the body is a valid record whose content hash is its id (model.load_record);
- the row's columns (id, stack, kind, created_at, schema_version) say what the body says, so a
  row re-labelled behind the store's back is a tampered store, not another stack's baseline;
- the row's chain link follows from the row before it (chain.py);
- on open, the head beside the store (`<store>.head`) is still a prefix of it (a put-back older
  copy is caught).
A contradiction is `TamperedStore` (exit 1) naming the record; `verify()` walks the whole chain
and the exported heads. Read-only commands open with `mode=ro` (a read-only share works); writes
are one transaction per import.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackgate import settings
from stackgate.cli_hint import cli_command
from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.files import TEMP_SUFFIX, parse_json_text, remove_stale_temps
from stackgate.owned_files import open_owned
from stackgate.path_kind import kind_of
from stackgate.paths import project_root
from validators.records import store_schema
from validators.records.chain import (
    GENESIS,
    ChainHead,
    TamperedStore,
    link,
    now_utc,
    read_head,
    sidecar_path,
    write_head,
)
from validators.records.clock import ahead_of_clock
from validators.records.model import (
    Record,
    StoredBody,
    canonical_texts,
    load_record,
    stored_body,
)
from validators.records.store_busy import (
    ATTEMPT_S,
    WAIT_S,
    held_elsewhere,
    is_busy,
    retry_busy,
)
from validators.records.store_folder import StoreFolder, open_store_folder

STORE_FILENAME = "stackgate.sqlite"

_COLUMNS = "r.seq, r.record_id, r.stack, r.kind, r.created_at, r.schema_version, r.body, r.chain"
_SELECT = f"SELECT {_COLUMNS}, p.chain FROM records r LEFT JOIN records p ON p.seq = r.seq - 1"


# SQLite's words for a host problem, not a damaged store: a full disk, an I/O error, a
# read-only file system, no room for a lock (errors of the host: exit 3, not 2).
_HOST_ERRORS = frozenset(
    {sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOLFS}
)


def default_store_path() -> Path:
    state = settings.folder("STACKGATE_STATE_DIR", "the record store")
    folder = state if state is not None else project_root() / ".state"
    return folder / STORE_FILENAME


@dataclass(frozen=True)
class ImportResult:
    added: list[str]
    present: list[str]
    # files of a folder import left out, each with why: dated ahead of this host's clock
    skipped: list[str] = field(default_factory=list)


@dataclass
class Verification:
    count: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Committed heads of other stores, not longer than this one, that it does not extend.
    unmatched_heads: list[tuple[Path, ChainHead]] = field(default_factory=list)


class RecordStore:
    """Open with `RecordStore.open(path)`; all methods verify what they read."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        store_id: str | None,
        *,
        read_only: bool,
        say: Callable[[str], None] | None = None,
        wait_s: float = WAIT_S,
        folder: StoreFolder | None = None,
    ) -> None:
        self.path = path
        # A writer's opened folder (store_folder.py): its own files beside the store are
        # reached through it; a reader works by the name.
        self._folder = folder
        self._files = folder.here(path.name) if folder is not None else path
        self.store_id = store_id
        self.read_only = read_only
        self.notes: list[str] = []  # what a reader should be told (an empty store file)
        self._conn = conn
        self._say = say or _say_err
        self._wait_s = wait_s

    # -- opening -------------------------------------------------------------------------------
    @classmethod
    @contextmanager
    def open(
        cls,
        path: Path | None = None,
        *,
        read_only: bool = False,
        say: Callable[[str], None] | None = None,
        wait_s: float = WAIT_S,
    ) -> Iterator[RecordStore]:
        """The store at `path` (default_store_path()); a store another process holds is
        waited for boundedly, each wait told to `say` (stderr by default), store_busy."""
        target = path or default_store_path()
        say = say or _say_err
        notes = _empty_file_notes(target) if read_only else []
        folder = None if read_only else open_store_folder(target)
        try:
            if folder is not None:
                remove_stale_temps_here(folder.here(target.name))
            conn = _connect(target, read_only=read_only, say=say, wait_s=wait_s, folder=folder)
        except BaseException:
            if folder is not None:
                folder.close()
            raise
        try:

            def prepared() -> RecordStore:
                store_id = _prepare(conn, target, read_only=read_only, folder=folder)
                store = cls(
                    target,
                    conn,
                    store_id,
                    read_only=read_only,
                    say=say,
                    wait_s=wait_s,
                    folder=folder,
                )
                store._check_sidecar()
                return store

            store = retry_busy(prepared, target=target, doing="opening it", say=say, wait_s=wait_s)
            store.notes = notes
            yield store
        except sqlite3.DatabaseError as exc:
            if (explained := _interrupted_write(target, exc)) is not None:
                raise explained from None
            if is_busy(exc):  # held past the bound by a statement outside retry_busy
                raise held_elsewhere(target, ATTEMPT_S, "reading it") from None
            if getattr(exc, "sqlite_errorcode", None) in _HOST_ERRORS:
                # the disk (full, failing, read-only), not the store's bytes: exit 3
                raise EnvironmentProblem(
                    f"{target}: cannot write the record store: {exc}"
                ) from None
            raise BadInput(f"{target}: not a readable record store: {exc}") from None
        finally:
            conn.close()
            if folder is not None:
                folder.close()

    def _tampered(self, what: str) -> TamperedStore:
        return TamperedStore(
            f"{self.path}: tampered store: {what}",
            details=[f"run `{cli_command('records verify')}` for every problem"],
        )

    def _check_sidecar(self) -> None:
        """The head written beside the store must still be a prefix of it (rollback check)."""
        if self.store_id is None:
            return
        head = read_head(sidecar_path(self._files))
        if head is not None:
            problem = self.head_problem(head, sidecar_path(self.path))
            if problem:
                raise self._tampered(problem)

    # -- writing -------------------------------------------------------------------------------
    def add(self, record: Record) -> bool:
        """Insert a sealed record; False when the same content is already stored."""
        return bool(self.add_many([record]).added)

    def add_many(self, records: Iterable[Record | StoredBody]) -> ImportResult:
        """Append records in one transaction: all of them or, on any error, none.

        `records` may be a generator that reads and verifies files as it goes: a bad one
        raises inside the transaction and nothing is added. The chain is extended in order.
        A StoredBody (a record read and verified where it was read, with its body) is
        stored as it is, once its body's content hashes to its id.
        """
        if self.read_only:
            raise BadInput(f"{self.path}: opened read-only")
        added: list[str] = []
        present: list[str] = []
        conn = self._conn
        if self._folder is not None:
            self._folder.check("before this write")
        self._execute_when_free("BEGIN IMMEDIATE", "starting a write")
        try:
            seq, previous = self._tail()
            now = now_utc()
            for item in records:
                row = item if isinstance(item, StoredBody) else _row(item)
                if not row.hash_matches():
                    raise BadInput(f"record {row.record_id[:12]}: id does not match its content")
                hit = conn.execute(
                    "SELECT 1 FROM records WHERE record_id = ?", (row.record_id,)
                ).fetchone()
                if hit:
                    present.append(row.record_id)
                    continue
                seq += 1
                previous = link(previous, seq, row.record_id)
                conn.execute(
                    "INSERT INTO records (seq, record_id, stack, kind, created_at, "
                    "schema_version, inserted_at, body, chain) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (seq, row.record_id, row.stack, row.kind, row.created_at,
                     row.schema_version, now, row.body, previous),
                )  # fmt: skip
                added.append(row.record_id)
            # A reader's open cursor holds the file: COMMIT waits for it (boundedly, said).
            self._execute_when_free("COMMIT", "committing")
        except sqlite3.OperationalError as exc:
            _rollback(conn)
            # A read-only file or folder, a full disk, a lock held past the timeout.
            raise EnvironmentProblem(f"{self.path}: cannot write the record store: {exc}") from None
        except BaseException:
            _rollback(conn)
            raise
        if self._folder is not None:
            self._folder.check("during this write (SQLite's journal may have gone there)")
        if added and self.store_id is not None:
            write_head(sidecar_path(self._files), self.chain_head())
        return ImportResult(added=added, present=present)

    def _execute_when_free(self, sql: str, doing: str) -> None:
        """`sql` run as soon as no other process holds the store (store_busy.retry_busy)."""
        conn, say, wait_s = self._conn, self._say, self._wait_s
        retry_busy(lambda: conn.execute(sql), target=self.path, doing=doing, say=say, wait_s=wait_s)

    def _tail(self) -> tuple[int, str]:
        row = self._conn.execute("SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1")
        found = row.fetchone()
        return (0, GENESIS) if found is None else (int(found[0]), str(found[1]))

    # -- reading -------------------------------------------------------------------------------
    def _row_to_record(self, row: tuple[Any, ...]) -> Record:
        """Check the row's link to the row before it, then its body against its columns."""
        seq, record_id, chain, previous = row[0], row[1], row[7], row[8]
        where = f"record {str(record_id)[:12]} (row {seq})"
        expected_prev = GENESIS if seq == 1 else previous
        if expected_prev is None:
            raise self._tampered(f"{where}: the row before it is gone (deleted?)")
        if chain != link(expected_prev, seq, record_id):
            raise self._tampered(f"{where}: hash chain broken (rows changed or re-ordered)")
        return self._check_body(row)

    def _check_body(self, row: tuple[Any, ...]) -> Record:
        seq, record_id, stack, kind, created_at, schema_version, body = row[:7]
        where = f"record {str(record_id)[:12]} (row {seq})"
        try:
            data = parse_json_text(body, where=f"{self.path}: {where}")
            record = load_record(data, where=f"{self.path}: {where}")
        except BadInput as exc:
            raise self._tampered(exc.message) from None
        if record.record_id != record_id:
            raise self._tampered(f"{where}: stored under another id than its content hash")
        columns = {"stack": stack, "kind": kind, "created_at": created_at,
                   "schema_version": schema_version}  # fmt: skip
        for name, value in columns.items():
            if getattr(record, name) != value:
                raise self._tampered(
                    f"{where}: column {name} says {value!r}, its sealed body says "
                    f"{getattr(record, name)!r}"
                )
        return record

    def get(self, ref: str) -> Record:
        """A record by full id or unique id prefix (>= 6 hex digits)."""
        if len(ref) < 6:
            raise BadInput(f"record id '{ref}' is too short; give at least 6 hex digits")
        found = self.matching(ref)
        if not found:
            raise BadInput(f"no record '{ref}' in {self.path}")
        if len(found) > 1:
            raise BadInput(
                f"record id '{ref}' is ambiguous", details=[r.record_id[:16] for r in found[:10]]
            )
        return found[0]

    def matching(self, prefix: str) -> list[Record]:
        """The stored records whose id starts with prefix (at most 11: enough to say ambiguous)."""
        low = prefix.lower()
        rows = self._conn.execute(
            f"{_SELECT} WHERE r.record_id >= ? AND r.record_id < ? ORDER BY r.record_id LIMIT 11",
            (low, low + "g"),
        ).fetchall()
        return [self._row_to_record(row) for row in rows]

    def iter_records(
        self,
        stack: str | None = None,
        kind: str | None = None,
        *,
        newest_first: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> Iterator[Record]:
        """Records in the chain's order (the order the store took them in), streamed.

        Not by created_at: that is the maker's clock, and a host 3 days fast or a year slow
        would put its record out of place (records/clock.py).
        """
        query, params = _filtered(stack, kind)
        way = "DESC" if newest_first else "ASC"
        query = f"{_SELECT}{query} ORDER BY r.seq {way}"
        if limit is not None or offset:
            query += " LIMIT ? OFFSET ?"
            params += [-1 if limit is None else limit, offset]
        for row in self._conn.execute(query, params):
            yield self._row_to_record(row)

    def records(self, stack: str | None = None, kind: str | None = None) -> list[Record]:
        """Records, oldest first."""
        return list(self.iter_records(stack, kind))

    def latest(self, stack: str, kind: str = "known-good") -> Record | None:
        """The last record of a stack and kind the chain took in; its body must say that
        stack and kind."""
        found = next(self.iter_records(stack, kind, newest_first=True, limit=1), None)
        if found is not None and (found.stack, found.kind) != (stack, kind):
            raise self._tampered(f"record {found.short_id} is not a {kind} record of {stack}")
        return found

    def newest_created_at(self) -> str | None:
        """The latest date any stored record carries (dates sort as text: model._CREATED_RE)."""
        row = self._conn.execute("SELECT MAX(created_at) FROM records").fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def contains(self, record_id: str) -> bool:
        row = self._conn.execute("SELECT 1 FROM records WHERE record_id = ?", (record_id,))
        return row.fetchone() is not None

    def count(self, stack: str | None = None, kind: str | None = None) -> int:
        query, params = _filtered(stack, kind)
        row = self._conn.execute(f"SELECT COUNT(*) FROM records r{query}", params).fetchone()
        return int(row[0])

    # -- tamper evidence -----------------------------------------------------------------------
    def chain_head(self) -> ChainHead:
        if self.store_id is None:
            raise BadInput(f"{self.path}: no store here yet")
        seq, head = self._tail()
        return ChainHead(store_id=self.store_id, count=seq, head=head, written_at=now_utc())

    def chain_at(self, seq: int) -> str | None:
        """The chain value after record `seq` (None: no such row)."""
        found = self._conn.execute("SELECT chain FROM records WHERE seq = ?", (seq,)).fetchone()
        return None if found is None else str(found[0])

    def head_problem(self, head: ChainHead, source: Path) -> str | None:
        """Why the store contradicts a head kept elsewhere (None when it extends it)."""
        if head.store_id != self.store_id:
            return f"{source} belongs to store {head.store_id}, this is {self.store_id}"
        if head.count == 0:
            return None
        row = self._conn.execute("SELECT chain FROM records WHERE seq = ?", (head.count,))
        found = row.fetchone()
        total = self.count()
        if found is None:
            return (
                f"{source} says {head.count} record(s) were written, the store has {total}: "
                "rolled back (an older copy of the file?) or rows deleted"
            )
        if found[0] != head.head:
            return (
                f"{source}: the first {head.count} record(s) were rewritten since (or another "
                "copy of this store, with its id, wrote that head: a fork)"
            )
        return None

    def verify(self, exported: Iterable[Path] = ()) -> Verification:
        """Walk the whole chain, read every record, compare every head: every problem."""
        out = Verification(count=self.count())
        previous, expected = GENESIS, 1
        rows = self._conn.execute(f"{_SELECT} ORDER BY r.seq")
        for row in rows:
            seq, record_id = int(row[0]), str(row[1])
            if seq != expected:
                out.problems.append(f"rows {expected}..{seq - 1} are missing (deleted)")
            if row[7] != link(previous, seq, record_id):
                out.problems.append(f"record {record_id[:12]} (row {seq}): hash chain broken")
            previous, expected = str(row[7]), seq + 1
            try:
                record = self._check_body(row)
            except TamperedStore as exc:
                out.problems.append(exc.message.removeprefix(f"{self.path}: tampered store: "))
                continue
            if ahead := ahead_of_clock(record.created_at):
                out.notes.append(f"record {record.short_id} is {ahead} (ordered by the chain)")
        for source in (sidecar_path(self.path), *exported):
            try:
                head = read_head(source)
            except BadInput as exc:
                out.problems.append(exc.message)
                continue
            if head is None and source == sidecar_path(self.path) and out.count:
                # Every write and the upgrade leave this head: without it the last rows could
                # have been cut (deleting it is as easy as cutting them).
                out.problems.append(
                    f"the head beside the store, {source}, is missing: rows cut from the end "
                    "cannot be ruled out (compare with an exported head: records verify --dir)"
                )
            elif head is None:
                out.notes.append(f"no head at {source} to compare with")
            elif head.store_id != self.store_id and source != sidecar_path(self.path):
                self._foreign_head(head, source, out)
            elif problem := self.head_problem(head, source):
                out.problems.append(problem)
            else:
                out.notes.append(f"{source}: the store extends it ({head.count} record(s))")
        return out

    def _foreign_head(self, head: ChainHead, source: Path, out: Verification) -> None:
        """A committed head of another store id: this store's predecessor (re-created, or
        re-labelled by the format-1 upgrade), or a teammate's. The chain does not depend on the
        store id, so a store holding the same records in the same order extends it. A head longer
        than this store is a store cut short (tampering, or records never imported here); a shorter
        one it does not extend goes to `unmatched_heads`, which the caller resolves against the
        committed record files.
        """
        total = self.count()
        row = self._conn.execute("SELECT chain FROM records WHERE seq = ?", (head.count,))
        found = row.fetchone()
        if head.count == 0 or (found is not None and found[0] == head.head):
            out.notes.append(f"{source}: the store extends it ({head.count} record(s))")
        elif head.count > total:
            out.problems.append(
                f"{source} commits a head of {head.count} record(s) (store {head.store_id}); "
                f"this store ({self.store_id}) has {total}: a store deleted and re-created "
                "from fewer records, or an older copy put back, unless those records were never "
                "imported here (records import --dir)"
            )
        else:
            out.unmatched_heads.append((source, head))


def _say_err(line: str) -> None:
    from stackgate.lines import lines_err

    lines_err().plain(line)


def _filtered(stack: str | None, kind: str | None) -> tuple[str, list[Any]]:
    clauses, params = [], []
    for column, value in (("stack", stack), ("kind", kind)):
        if value is not None:
            clauses.append(f"r.{column} = ?")
            params.append(value)
    return ((" WHERE " + " AND ".join(clauses)) if clauses else ""), params


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _empty_file_notes(target: Path) -> list[str]:
    """A 0-byte store file (a first write cut short by a full disk) reads as an empty store,
    said so; unless the head beside it says records were written: then they are lost."""
    if not target.is_file() or target.stat().st_size:
        return []
    head = read_head(sidecar_path(target))
    if head is not None and head.count:
        raise EnvironmentProblem(
            f"{target}: the store file is empty (0 bytes) but its head says {head.count} "
            "record(s) were written: the store was lost (a full disk?), not tampered with",
            details=[
                "restore it from a backup, or move it and its .head aside and rebuild it from "
                f"the committed records: {cli_command('records import --dir records/')}"
            ],
        )
    return [
        f"{target} is an empty file (0 bytes: a first write cut short, e.g. by a full disk); "
        "read as a store with no records, the next writing command makes it a store"
    ]


def remove_stale_temps_here(target: Path) -> None:
    """A writer removes temp files of the store's head left by a killed writer."""
    remove_stale_temps(target.parent, pattern=f".{target.name}.*{TEMP_SUFFIX}", recursive=False)


def _roll_back_interrupted_write(target: Path) -> None:
    """A write killed mid-transaction (SIGKILL during `records import`) leaves a hot rollback
    journal, and a `mode=ro` connection cannot roll it back (SQLITE_READONLY_ROLLBACK): every
    read-only command failed until a writer came. Roll it back here, as SQLite does for any
    connection that may write; where this user cannot write, say what happened and what to do.
    """
    journal = target.with_name(target.name + "-journal")
    try:
        hot = journal.is_file() and journal.stat().st_size > 0
    except OSError:
        hot = False
    if not hot:
        return
    _written_where_it_is(target)  # the roll-back writes the store
    try:
        conn = sqlite3.connect(
            f"{target.resolve().as_uri()}?mode=rw", uri=True, timeout=30, isolation_level=None
        )
        try:
            # SQLite rolls a hot journal back on the first read of a connection that can write
            # (and leaves a journal alone while its writer is still alive and holds its lock).
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        # Not writable by this user (or busy): read as before. A journal that is really hot
        # then fails the read with SQLITE_READONLY_ROLLBACK, which open() explains.
        return


def _interrupted_write(target: Path, exc: sqlite3.DatabaseError) -> EnvironmentProblem | None:
    """The explanation for a read refused because a hot journal could not be rolled back."""
    if getattr(exc, "sqlite_errorname", "") != "SQLITE_READONLY_ROLLBACK":
        return None
    return EnvironmentProblem(
        f"{target}: a write to the record store was interrupted (killed, power cut) and left "
        f"{target.name}-journal, which must be rolled back before the store can be read; this "
        "user cannot write there to do it",
        details=[
            "run one writing command where the store is writable ("
            f"{cli_command('records import --dir records/')}), or ask the store's owner to; the last "
            "completed write is kept, the interrupted one is undone"
        ],
    )


def _link_target(path: Path) -> str:
    try:
        return str(path.readlink())
    except OSError:
        return "gone already"


def _written_where_it_is(target: Path, *, named: Path | None = None) -> None:
    """A store is written only at its own name: the store file and SQLite's files beside it
    (-journal, -wal, -shm) must not be symlinks or hard links. A store symlinked to an empty
    file elsewhere was turned into a database there by `records import`; a planted journal
    symlink would have SQLite write the journal through it. SQLite follows both. `target`
    is looked at, `named` (default: target) is what messages call it."""
    shown = named or target
    for looked, path in (
        (target, shown),
        *(
            (target.with_name(target.name + s), shown.with_name(shown.name + s))
            for s in ("-journal", "-wal", "-shm")
        ),
    ):
        try:
            info = looked.lstat()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise EnvironmentProblem(f"cannot check {path}: {exc.strerror}") from None
        if stat.S_ISLNK(info.st_mode):
            raise EnvironmentProblem(
                f"{path}: a symlink; the record store is written only where it is",
                details=[f"give --store the file it leads to ({_link_target(looked)})"],
            )
        if not stat.S_ISREG(info.st_mode):
            raise BadInput(f"{path}: not a regular file (a record store is an SQLite file)")
        if info.st_nlink != 1:
            raise EnvironmentProblem(
                f"{path}: a hard link ({info.st_nlink} names for one file); the record store "
                "is written only where it is"
            )


def _connect(
    target: Path,
    *,
    read_only: bool,
    say: Callable[[str], None],
    wait_s: float,
    folder: StoreFolder | None = None,
) -> sqlite3.Connection:
    if kind_of(target) not in (None, "file"):
        # SQLite would open a FIFO and block on its first read, or a device and read it.
        raise BadInput(f"{target}: not a regular file (a record store is an SQLite file)")
    here = folder.here(target.name) if folder is not None else target
    if not read_only:
        try:
            _written_where_it_is(here, named=target)
        except OSError as exc:  # removed or replaced while it was being checked
            raise EnvironmentProblem(f"cannot check the record store {target}: {exc}") from None
    try:
        if read_only:
            if not target.exists() or target.stat().st_size == 0:
                return sqlite3.connect(":memory:", isolation_level=None)
            _roll_back_interrupted_write(target)
            uri = f"{target.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, timeout=ATTEMPT_S, isolation_level=None)
            try:
                empty = retry_busy(
                    lambda: _empty_schema(conn),
                    target=target,
                    doing="opening it",
                    say=say,
                    wait_s=wait_s,
                )
            except BaseException:  # held past the bound, or not a database: not left open
                conn.close()
                raise
            if empty:
                # An SQLite file with no tables at all (made by `sqlite3 FILE .databases`, a
                # VACUUM of nothing): no store yet, read as the empty file is (the stand-in
                # schema cannot be made in a read-only connection).
                conn.close()
                return sqlite3.connect(":memory:", isolation_level=None)
            return conn
        assert folder is not None  # a writer always has its opened folder
        # Made (never through a symlink) in the opened folder before SQLite opens it by
        # name, mode=rw (SQLite creates nothing by name); what SQLite then opened is checked
        # to be that file before anything is written (_opened_is_named).
        os.close(open_owned(here, os.O_RDWR | os.O_CREAT, 0o644, named=target))
        uri = f"{(folder.real / target.name).as_uri()}?mode=rw"
        conn = sqlite3.connect(uri, uri=True, timeout=ATTEMPT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise EnvironmentProblem(f"cannot open the record store {target}: {exc}") from None
    if not _opened_is_named(here):
        conn.close()
        raise EnvironmentProblem(
            f"{target}: replaced while it was opened (a symlink or another file swapped in); "
            "nothing was written",
            details=["the record store is written only where it is: check who else writes there"],
        )
    return conn


def _empty_schema(conn: sqlite3.Connection) -> bool:
    """Whether the opened database holds no schema at all (user_version 0, no table)."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    return version == 0 and not conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]


def _opened_is_named(target: Path) -> bool:
    """Whether the store file SQLite holds open is, itself, the regular file at `target` (a
    symlink swapped in between the checks and the open would have SQLite open its target)."""
    try:
        info = target.lstat()
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode):
        return False
    fds = Path("/proc/self/fd")
    for entry in fds.iterdir():
        try:
            held = entry.stat()
        except OSError:
            continue
        if (held.st_dev, held.st_ino) == (info.st_dev, info.st_ino):
            return True
    return False


def _prepare(
    conn: sqlite3.Connection, target: Path, *, read_only: bool, folder: StoreFolder | None = None
) -> str | None:
    """Create or upgrade the schema (writers); the store id (None: no store yet)."""
    _refuse_foreign(conn, target)
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > store_schema.STORE_VERSION:
        raise BadInput(
            f"{target}: store format {version} is newer than this stackgate reads "
            f"({store_schema.STORE_VERSION})"
        )
    if read_only:
        if version == 0:
            if conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]:
                raise BadInput(f"{target}: not a stackgate record store")
            store_schema.create(conn)  # an empty stand-in: nothing stored yet
            return None
        if version < store_schema.STORE_VERSION:
            raise BadInput(
                f"{target}: store format {version} has no hash chain; run a writing command "
                f"once (`{cli_command('records import')}`) to upgrade it"
            )
    elif version != store_schema.STORE_VERSION or not _application_id(conn):
        # Only a store to make, upgrade or mark takes the write lock here: a COMMIT waits
        # for every reader, and opening a current store must not.
        conn.execute("BEGIN IMMEDIATE")
        try:
            _refuse_foreign(conn, target)  # again, under the write lock: nothing written
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version == 0:
                store_schema.create(conn)
            elif version == 1:
                store_schema.upgrade_from_1(conn)
            elif not _application_id(conn):
                # a store made before the id was set: marked now that its tables are known
                conn.execute(f"PRAGMA application_id = {store_schema.APPLICATION_ID}")
            conn.execute("COMMIT")
            if version == 1:
                _write_upgraded_head(
                    conn, folder.here(target.name) if folder is not None else target
                )
        except BaseException:
            _rollback(conn)
            raise
    row = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
    if row is None:
        raise TamperedStore(f"{target}: tampered store: its id (meta.store_id) is gone")
    return str(row[0])


def _application_id(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA application_id").fetchone()[0])


def _refuse_foreign(conn: sqlite3.Connection, target: Path) -> None:
    """BadInput (exit 2) for an SQLite file of another program: a store is never made in it."""
    if (why := store_schema.foreign(conn)) is not None:
        raise BadInput(
            f"{target}: not a stackgate record store: {why}; nothing was written",
            details=["give --store a stackgate store, or a path where none exists yet"],
        )


def _write_upgraded_head(conn: sqlite3.Connection, target: Path) -> None:
    """The head of a store just chained by the upgrade, so a later cut is caught."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
    tail = conn.execute("SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1").fetchone()
    if row is not None and tail is not None:
        head = ChainHead(store_id=str(row[0]), count=int(tail[0]), head=str(tail[1]),
                         written_at=now_utc())  # fmt: skip
        write_head(sidecar_path(target), head)


def _row(record: Record) -> StoredBody:
    """A record as a row: one dump of it serves the id check and the stored body (compact
    canonical JSON: json's C encoder, several times faster than the indented export)."""
    sealed = record if record.record_id else record.sealed()
    data = sealed.data()
    del data["record_id"]
    _content, body = canonical_texts(data, sealed.record_id)
    return stored_body(sealed, body)
