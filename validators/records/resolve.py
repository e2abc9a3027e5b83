"""What a RECORD|STACK argument names, and reading run reports from files.

Order: an existing file (a record JSON), a record id (or unique prefix) in the store or in the
committed `records/` folder, then a stack name (its newest known-good record). Committed
records count as much as stored ones: a fresh clone can gate against what the team committed
without importing first.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from pathlib import Path

from stackgate.cli_hint import cli_command
from stackgate.errors import BadInput, CheckFailed
from stackgate.files import read_json_file
from stackgate.lines import lines_err
from stackgate.model import parsed
from stackgate.paths import project_root, stack_names
from validators.core.results import Report
from validators.records.extract import refuse_invalid, run_metrics
from validators.records.json_files import (
    EXPORT_NAME,
    FutureRecord,
    read_record_file,
    record_files,
)
from validators.records.model import Record
from validators.records.store import RecordStore

_HEX = re.compile(r"^[0-9a-f]{6,64}\Z")
_NAME_MAX = 255  # bytes in one file name (Linux NAME_MAX)


def committed_records_dir() -> Path:
    return project_root() / "records"


def committed_records(stack: str | None = None, id_prefix: str = "") -> Iterator[Record]:
    """Committed records (of a stack), read one at a time.

    With id_prefix, only files whose exported name (`<created>-<id12>.json`) can hold such an
    id are read, so looking up one id does not parse the whole folder.
    """
    folder = committed_records_dir()
    if stack is not None:
        folder = folder / stack
    if not folder.is_dir():
        return
    short = id_prefix[:12]
    for path in record_files(folder):
        if short and not path.stem.rpartition("-")[2].startswith(short):
            continue
        if (record := _read_committed(path, stack, folder)) is not None:
            yield record


def _read_committed(path: Path, stack: str | None, folder: Path) -> Record | None:
    """A committed record file; None (and a warning) for one dated ahead of this host's
    clock: one record made on a fast clock never blocks every gate of its stack."""
    try:
        record = read_record_file(path, under=folder)
    except FutureRecord as exc:
        lines_err().styled("[bold yellow]warning[/]: skipped {}", exc.message)
        return None
    if stack is not None and record.stack != stack:
        raise BadInput(f"{path}: in the folder of stack '{stack}' but names '{record.stack}'")
    return record


def newest_committed_known_good(stack: str) -> list[Record]:
    """The committed known-good records of stack that can be its newest, read as few as possible.

    Files named the way `records export` names them are read newest name first, down to the
    first known-good one (and any others of the same second); a file whose name does not match
    the record it holds is refused, so a name cannot hide a newer record. Files named any
    other way are all read. At fleet scale (thousands of records per stack in git) a gate
    reads a handful of files instead of every one.
    """
    folder = committed_records_dir() / stack
    if not folder.is_dir():
        return []
    named: list[Path] = []
    found: list[Record] = []
    for path in record_files(folder):
        if EXPORT_NAME.match(path.name):
            named.append(path)
        elif (record := _read_committed(path, stack, folder)) is not None and (
            record.kind == "known-good"
        ):
            found.append(record)
    newest: str | None = None
    for path in sorted(named, key=lambda p: p.name, reverse=True):
        match = EXPORT_NAME.match(path.name)
        assert match is not None
        if newest is not None and match["stamp"] < newest:
            break
        record = _read_committed(path, stack, folder)
        if record is None:
            continue
        if (record.created_stamp, record.short_id) != (match["stamp"], match["short"]):
            raise BadInput(
                f"{path}: the name says {match['stamp']}-{match['short']}, the record inside is "
                f"{record.created_stamp}-{record.short_id} (renamed by hand?)"
            )
        if record.kind == "known-good":
            found.append(record)
            newest = match["stamp"]
    return found


def resolve_record(ref: str, store: RecordStore) -> Record:
    if not ref.strip():
        raise BadInput(
            f"record {ref!r}: empty; give a record id (or a prefix of 6+), a stack name or a "
            "record file"
        )
    if any(len(part.encode("utf-8", "surrogateescape")) > _NAME_MAX for part in ref.split("/")):
        # No record id, stack name or file name is this long; looked up as a path it would
        # be the file system's ENAMETOOLONG (exit 3, the whole argument echoed).
        raise BadInput(
            f"record {ref[:40]!r}... ({len(ref)} characters): longer than any record id, stack "
            "name or file name"
        )
    path = Path(ref)
    if path.suffix == ".json" or "/" in ref:
        if not path.is_file():
            raise BadInput(f"{ref}: no such record file")
        return read_record_file(path)
    if _HEX.match(ref.lower()):
        hits = [
            r
            for r in committed_records(id_prefix=ref.lower())
            if r.record_id.startswith(ref.lower())
        ]
        # A prefix naming one stored and another committed record is ambiguous: the stored
        # one was taken silently (a reviewer reading the committed one saw another record).
        stored = store.matching(ref) if len(ref) >= 6 else []
        if len(stored) > 1:
            store.get(ref)  # raises: ambiguous within the store, naming them
        found = {r.record_id: r for r in [*stored, *hits]}
        if len(found) > 1:
            raise _ambiguous(ref, sorted(found))
        if found:
            return next(iter(found.values()))
        if ref not in stack_names():
            store.get(ref)  # raises: too short, or no such record
    return latest_known_good(ref, store)


def _neither(ref: str, store: RecordStore) -> BadInput:
    """`ref` names no stack and no record: a mistyped record id (`...-ea68e04fe20x`) is not
    a stack to mark good. Close names, the ids as exported files spell them, are offered."""
    files = sorted(p.stem for p in committed_records_dir().glob("*/*.json"))
    ids = [*files, *(name.rsplit("-", 1)[-1] for name in files)]
    close = difflib.get_close_matches(ref, [*stack_names(), *ids], n=3, cutoff=0.6)
    details = [f"did you mean: {', '.join(close)}"] if close else []
    details += [
        f"stacks: {', '.join(stack_names())}",
        f"record ids: {cli_command('records list')}",
    ]
    return BadInput(f"'{ref}' is neither a stack in stacks/ nor a record id", details=details)


def _ambiguous(ref: str, ids: list[str]) -> BadInput:
    return BadInput(
        f"record id prefix {ref!r} matches {len(ids)} records (store and committed files): "
        + ", ".join(i[:16] for i in ids)
        + "; give more of the id"
    )


def latest_known_good(stack: str, store: RecordStore) -> Record:
    """The newest known-good record of stack, stored or committed.

    A baseline is refused (exit 1) unless its sealed body names that stack and kind: the store
    checks its columns against the body, this checks what is finally handed to the gate.
    """
    stored = store.latest(stack, "known-good")  # the last one the chain took in
    # A committed record the store holds is ordered by the store's chain (it took the stored
    # one in later, whatever the dates say); only records it lacks are compared by date, the
    # one order they carry (records/clock.py).
    outside = [r for r in newest_committed_known_good(stack) if not store.contains(r.record_id)]
    candidates = [*([stored] if stored else []), *outside]
    for record in candidates:
        if (record.stack, record.kind) != (stack, "known-good"):
            raise CheckFailed(
                f"baseline {record.short_id} is a {record.kind} record of '{record.stack}', "
                f"not a known-good record of '{stack}'; refusing to compare"
            )
    if not candidates and stack not in stack_names() and not store.count(stack):
        raise _neither(stack, store)
    if not candidates:
        raise BadInput(
            f"no known-good record for stack '{stack}' in {store.path} or "
            f"{committed_records_dir()}",
            details=[
                f"make one: {cli_command(['mark-good', stack, '--run', 'RESULT.json'])}",
                f"or import committed ones: {cli_command('records import records/')}",
            ],
        )
    return max(candidates, key=lambda r: (r.created_at, r.record_id))


def read_report(path: Path) -> Report:
    """A `python -m validators run --json` report from a file."""
    return report_from_file_data(read_json_file(path), path)


def report_from_file_data(data: object, path: Path) -> Report:
    """read_report for JSON already read from path."""
    report = parsed(Report, data, f"{path}: not a validation report", limit=10)
    refuse_invalid([run_metrics(report)], where=[str(path)])
    return report
