"""What a STACK|RECORD|RUN argument names, told once, and each thing it names looked up once.

One rule for `gate`, `diff`, `report` and `mark-good`:
1. a path ending in `.toml`, or a name of a manifest in stacks/: a **stack**;
2. an existing folder, or an empty argument: bad input (exit 2);
3. an existing file: a **file** holding a record or a run report (its JSON tells which);
4. anything else: a **record** id (or unique prefix), or the name of a stack with records but
   no manifest here (its newest known-good record): validators.records.resolve.

What a command makes of each kind is its own business. A `Lookup` lives for one command: every
manifest is loaded, record resolved and file read at most once however many steps ask
(`Lookup.counts` and `Lookup.loads` say how often each was asked for and read; tests hold both).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from stackgate.errors import BadInput
from stackgate.files import read_json_file
from stackgate.manifest.loading import LoadedStack, load_stack
from stackgate.paths import resolve_stack, stack_names
from validators.core.results import Report
from validators.records.json_files import MAX_RECORD_BYTES, is_record_data, record_from_file_data
from validators.records.model import Record
from validators.records.resolve import report_from_file_data, resolve_record
from validators.records.store import RecordStore

RefKind = Literal["stack", "file", "record"]


@dataclass(frozen=True)
class Reference:
    """A STACK|RECORD|RUN argument as given, and which of the three kinds it is."""

    text: str
    kind: RefKind

    @property
    def is_stack(self) -> bool:
        return self.kind == "stack"

    @property
    def path(self) -> Path:
        return Path(self.text)

    def __str__(self) -> str:
        return self.text


def parse_reference(text: str) -> Reference:
    """The kind of thing `text` names (the module docstring's rule); a folder is exit 2."""
    if not text.strip():
        raise BadInput(f"{text!r}: empty; give a stack name, a record file or a record id")
    path = Path(text)
    if text.endswith(".toml") or text in stack_names():
        return Reference(text, "stack")
    if path.is_dir():
        raise BadInput(f"{text} is a folder; give a stack name, a record file or a record id")
    if path.is_file():
        return Reference(text, "file")
    return Reference(text, "record")


def parse_optional(text: str | None) -> Reference | None:
    return None if text is None else parse_reference(text)


@dataclass
class Lookup:
    """One command's lookups, each done once: manifests by file, records by reference, files
    by path. Not shared between commands (a store and the disk can change between them)."""

    store: RecordStore
    counts: Counter[str] = field(default_factory=Counter)
    loads: Counter[str] = field(default_factory=Counter)
    _stacks: dict[Path, LoadedStack] = field(default_factory=dict)
    _records: dict[str, Record] = field(default_factory=dict)
    _files: dict[Path, Record | Report] = field(default_factory=dict)

    def stack(self, ref: Reference | str) -> LoadedStack:
        """The manifest of a stack name or .toml path (load_stack's errors, exit 2)."""
        path = resolve_stack(str(ref)).resolve()
        self.counts[f"stack {path}"] += 1
        if path not in self._stacks:
            self.loads[f"stack {path}"] += 1
            self._stacks[path] = load_stack(str(ref))
        return self._stacks[path]

    def record(self, ref: Reference | str) -> Record:
        """A record named by id, file or stack (its newest known-good): resolve_record."""
        text = str(ref)
        self.counts[f"record {text}"] += 1
        if text not in self._records:
            self.loads[f"record {text}"] += 1
            self._records[text] = resolve_record(text, self.store)
        return self._records[text]

    def file(self, path: Path) -> Record | Report:
        """The record or run report a file holds, read and parsed once."""
        key = path.absolute()
        self.counts[f"file {key}"] += 1
        if key not in self._files:
            self.loads[f"file {key}"] += 1
            data = read_json_file(path, MAX_RECORD_BYTES)
            parsed: Record | Report
            if is_record_data(data):
                parsed = record_from_file_data(data, path)
            else:
                parsed = report_from_file_data(data, path)
            self._files[key] = parsed
        return self._files[key]

    def report(self, path: Path) -> Report:
        """A run report file (--run); a record file given there is exit 2."""
        found = self.file(path)
        if isinstance(found, Record):
            raise BadInput(f"{path}: a record, not a run report (give it as the candidate)")
        return found

    def any_record(self, ref: Reference) -> Record:
        """What a record-or-stack argument names as a record (diff's and the gate's
        baseline): a stack is its newest known-good record; a file must hold a record."""
        if ref.kind == "file":
            found = self.file(ref.path)
            if isinstance(found, Report):
                raise BadInput(f"{ref}: a run report, not a record (give a record file or id)")
            return found
        if ref.is_stack and ref.text.endswith(".toml"):
            return self.record(self.stack(ref).manifest.name)
        return self.record(ref)

    def stack_name(self, ref: Reference) -> str:
        """The stack a reference is about, looked up (and kept) to tell."""
        if ref.is_stack:
            return self.stack(ref).manifest.name
        if ref.kind == "file":
            return self.file(ref.path).stack
        return self.record(ref).stack
