"""Records as JSON files for git: export from the store, import into it, read one.

Layout: `<dir>/<stack>/<created>-<id12>.json`, plus `<dir>/_store-heads/<store_id>.head` (the
exporting store's chain head, chain.py). File names come from record fields the model holds to
a strict shape on every read, and every target is refused unless it resolves inside `<dir>`
(a symlinked stack folder included). Export writes each file atomically and rewrites an
existing copy that differs byte for byte ("repaired"), never skipping it as exported. Import
(`import_record_files`, also the bulk API for fleet collection) reads each file bounded and
typed, verifies it, and adds all of them in one transaction, or none.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from stackgate import dirfd
from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.files import (
    parse_json_text,
    read_bytes_bounded,
    read_json_file,
    remove_stale_temps,
)
from validators.records.chain import HEADS_FOLDER, exported_head_path, read_head, write_head_at
from validators.records.clock import ahead_of_clock
from validators.records.model import Record, load_record_body
from validators.records.store import ImportResult, RecordStore

MAX_RECORD_BYTES = 64 << 20
# The name export gives a file: <created, UTC, to the second>-<first 12 of the id>.json
EXPORT_NAME = re.compile(r"^(?P<stamp>\d{8}T\d{6})-(?P<short>[0-9a-f]{12})\.json\Z")


@dataclass
class ExportResult:
    written: list[Path] = field(default_factory=list)
    repaired: list[Path] = field(default_factory=list)
    unchanged: int = 0
    head: Path | None = None


def export_filename(record: Record) -> str:
    return f"{record.created_stamp}-{record.short_id}.json"


def _read_json(path: Path, under: Path | None) -> object:
    """The JSON of a record file; with `under` (a folder others may write: records/, a fleet's
    job folder) every component below it is reached without following a symlink and only a
    regular file is read (a link to /etc/shadow is bad input naming the link)."""
    if under is None:
        return read_json_file(path, MAX_RECORD_BYTES)
    raw = dirfd.read_bytes_under(under, path.relative_to(under), MAX_RECORD_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_json_text(text, where=str(path))


def read_record_file(path: Path, *, under: Path | None = None) -> Record:
    """A record from a file. Files carry only their dates (no chain orders them), so one
    dated more than clock.MAX_SKEW ahead of this host is refused (records/clock.py)."""
    return record_from_file_data(_read_json(path, under), path)


def read_record_file_body(path: Path, *, under: Path | None = None) -> tuple[Record, str]:
    """read_record_file, and the record's body as the store keeps it (model.load_record_body):
    every check the same, the body a by-product of the hash check."""
    return _from_file_data(_read_json(path, under), path)


def is_record_data(data: object) -> bool:
    """JSON that holds a record (vs a run report): what a file argument is told apart by."""
    return isinstance(data, dict) and "record_id" in data and "checks" in data


def record_from_file_data(data: object, path: Path) -> Record:
    """read_record_file for JSON already read from path (read once, told apart, parsed)."""
    return _from_file_data(data, path)[0]


class FutureRecord(BadInput):
    """A record file dated ahead of this host's clock: refused when named, skipped (and said)
    when one of a folder's files, so one record from a fast clock never blocks the others."""

    error_id = "record-from-the-future"
    hint = "the host that made it had a fast clock; its other records may be dated ahead too"


def _from_file_data(data: object, path: Path) -> tuple[Record, str]:
    record, body = load_record_body(data, where=str(path), secrets=True)
    if problem := ahead_of_clock(record.created_at):
        raise FutureRecord(
            f"{path}: created_at is in the future: {problem}",
            details=[
                "fix the clock that is wrong; a record is never edited, so one with a wrong "
                "date is removed (git rm) and made again"
            ],
        )
    return record, body


def record_files(folder: Path) -> Iterator[Path]:
    """Every *.json below folder, sorted; symlinked folders are not followed.

    A folder named like a record file (`x.json/`) is bad input, not skipped: importing one
    read as "imported 0 records" with exit 0.
    """
    if not folder.is_dir():
        raise BadInput(f"{folder}: no such folder")
    for path in sorted(folder.rglob("*.json")):
        if HEADS_FOLDER in path.relative_to(folder).parts:
            continue
        if path.is_symlink():
            raise BadInput(
                f"{path}: a symlink (only regular files are read from a records folder)",
                details=["replace it with the file itself, or remove it"],
            )
        if path.is_dir():
            raise BadInput(f"{path}: a folder named like a record file (*.json)")
        yield path


def export_records(store: RecordStore, folder: Path, stack: str | None = None) -> ExportResult:
    """Write the store's records (of one stack, or all) under folder; repair damaged copies.

    Everything is written relative to folders opened once (stackgate/dirfd.py): `folder`,
    then each `<stack>` in it and `heads/`, each opened O_NOFOLLOW; a file is written as a
    new temp file (O_EXCL) renamed over its name. A folder swapped for a symlink while the
    export runs is refused (exit 3), never written through.
    """
    out = ExportResult()
    if folder.is_dir():
        remove_stale_temps(folder)  # left by an export killed mid-write
    if store.store_id is not None and (fork := _fork(store, folder)) is not None:
        raise EnvironmentProblem(
            fork,
            details=[
                "two copies of one store (a copied .sqlite file) exported into one folder; "
                "keep one store per records/ folder: import the other copy's records into it "
                "(records import --dir) and stop using the copy; nothing was written"
            ],
        )
    with dirfd.opened(dirfd.open_dir(folder, create=True)) as root_fd:
        stack_fds: dict[str, int] = {}
        try:
            for record in store.iter_records(stack):
                if record.stack not in stack_fds:
                    stack_fds[record.stack] = _open_stack_folder(root_fd, folder, record.stack)
                target = folder / record.stack / export_filename(record)
                existed = _export_one(stack_fds[record.stack], target, record)
                if existed is None:
                    out.unchanged += 1
                else:
                    (out.repaired if existed else out.written).append(target)
        finally:
            for fd in stack_fds.values():
                os.close(fd)
        if store.store_id is not None and store.count():
            head_file = exported_head_path(folder, store.store_id)
            where = head_file.parent
            with dirfd.opened(
                dirfd.open_child(root_fd, HEADS_FOLDER, where=where, create=True)
            ) as heads_fd:
                write_head_at(heads_fd, head_file, store.chain_head())
            out.head = head_file
    return out


def _fork(store: RecordStore, folder: Path) -> str | None:
    """Why the head this store's id left in folder cannot be this store's own earlier head:
    another copy of the store, with the same id, wrote it (None: it can be)."""
    assert store.store_id is not None
    path = exported_head_path(folder, store.store_id)
    try:
        have = read_head(path)
    except BadInput:
        return None  # a damaged head is replaced by a good one
    if have is None or have.count == 0:
        return None
    if have.count > store.count():
        return (
            f"{path}: a copy of this store ({store.store_id}) exported {have.count} record(s) "
            f"here, this one holds {store.count()}: a fork (or this is an older copy of it)"
        )
    if store.chain_at(have.count) != have.head:
        return (
            f"{path}: a copy of this store ({store.store_id}) exported a different record "
            f"{have.count} here: the two copies forked"
        )
    return None


def _open_stack_folder(root_fd: int, folder: Path, stack: str) -> int:
    where = folder / stack
    try:
        return dirfd.open_child(root_fd, stack, where=where, create=True)
    except dirfd.Swapped:
        raise BadInput(
            f"{where}: a symlink or not a folder; an export never writes through one (it could "
            f"lead outside {folder})"
        ) from None


def _export_one(stack_fd: int, target: Path, record: Record) -> bool | None:
    """Write one record file in its opened stack folder: None when it already held the
    record, else whether a file was there (repaired) or not (written)."""
    name = target.name
    try:
        info = os.stat(name, dir_fd=stack_fd, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    if info is not None:
        if stat.S_ISREG(info.st_mode):
            data = dirfd.read_regular_at(stack_fd, name, MAX_RECORD_BYTES)
            if data is not None and _holds_bytes(data, target, record):
                return None
        elif not stat.S_ISLNK(info.st_mode):
            raise BadInput(f"{target}: in the way of an export (not a regular file)")
    try:
        dirfd.write_at(stack_fd, name, record.to_json().encode("utf-8"))
    except OSError as exc:  # the opened folder was removed or moved away meanwhile
        raise EnvironmentProblem(f"{target}: cannot be written: {exc.strerror or exc}") from None
    return info is not None


def _holds_bytes(data: bytes, path: Path, record: Record) -> bool:
    try:
        parsed = parse_json_text(data.decode("utf-8"), where=str(path))
    except (BadInput, UnicodeDecodeError):
        return False
    return bool(parsed == record.model_dump(mode="json"))


def _holds(path: Path, record: Record) -> bool:
    """Whether the file already holds exactly this record (any JSON layout of it).

    Parsing with json's C decoder and comparing data is several times cheaper than rendering
    the indented export text of every record on every export.
    """
    try:
        data = parse_json_text(
            read_bytes_bounded(path, MAX_RECORD_BYTES).decode("utf-8"), where=str(path)
        )
    except (BadInput, UnicodeDecodeError):
        return False  # truncated, a FIFO, too big, not UTF-8: rewritten by the caller
    return bool(data == record.data())


def import_record_files(store: RecordStore, paths: Iterable[Path]) -> ImportResult:
    """Verify and add records from files, in one transaction (all added, or none)."""
    return store.add_many(read_record_file(p) for p in paths)


def import_dir(store: RecordStore, folder: Path) -> ImportResult:
    """Import every record file below folder in one transaction; a file dated ahead of this
    host's clock is skipped and named in `skipped` (its date is checked again next time)."""
    records: list[Record] = []
    skipped: list[str] = []
    for path in record_files(folder):
        try:
            records.append(read_record_file(path, under=folder))
        except FutureRecord as exc:
            skipped.append(exc.message)
    result = store.add_many(records)
    return ImportResult(added=result.added, present=result.present, skipped=skipped)


def verify_files(folder: Path) -> tuple[int, list[str]]:
    """Read and verify every record file below folder: (files read, problems).

    Besides each file's own hash: a file in `<stack>/` must hold a record of that stack, and a
    file named the way export names it must hold the record its name says.
    """
    problems: list[str] = []
    count = 0
    for path in record_files(folder):
        count += 1
        try:
            record = read_record_file(path, under=folder)
        except BadInput as exc:
            problems.append("; ".join(exc.lines()))
            continue
        parts = path.relative_to(folder).parts
        if len(parts) > 1 and parts[0] != record.stack:
            problems.append(
                f"{path}: in the folder of stack '{parts[0]}' but names '{record.stack}'"
            )
        if EXPORT_NAME.match(path.name) and path.name != export_filename(record):
            problems.append(f"{path}: named as another record ({export_filename(record)})")
    return count, problems


def exported_heads(folder: Path, store: RecordStore) -> list[Path]:
    """Every store head committed under folder (for `records verify`): this store's and any
    other's. A head of another id is this store's predecessor or a teammate's; either way a
    head longer than the store, or one that names records the store lacks, is looked at
    (RecordStore.verify, missing_committed)."""
    heads = folder / HEADS_FOLDER
    found: list[Path] = []
    if store.store_id is not None:
        own = exported_head_path(folder, store.store_id)
        if own.exists() or own.is_symlink():
            found.append(own)
    if heads.is_dir() and not heads.is_symlink():
        found += sorted(p for p in heads.glob("*.head") if p not in found)
    return found


def missing_committed(store: RecordStore, folder: Path, limit: int = 5) -> tuple[int, list[str]]:
    """Committed record files under folder whose record the store lacks: (count, first few).

    Files that cannot be read are verify_files' to report, not counted here.
    """
    missing: list[str] = []
    count = 0
    for path in record_files(folder):
        try:
            record = read_record_file(path, under=folder)
        except BadInput:
            continue
        if not store.contains(record.record_id):
            count += 1
            if len(missing) < limit:
                missing.append(f"{path} ({record.short_id})")
    return count, missing
