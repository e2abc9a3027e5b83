"""Tamper evidence for the record store: a hash chain over insertion order, and its head.

Row n carries `chain_n = sha256("stackgate-chain-v1", chain_{n-1}, n, record_id_n)` with chain_0
= 64 zeros. A record's id is the sha256 of its content, so the chain covers every byte of every
record and their order: editing, deleting or re-ordering a row breaks the links after it,
whatever the triggers say. A store cut short at the end, or replaced by an older copy, still has
a consistent chain; that needs the head (count + last link) kept elsewhere: beside the store
(`<store>.head`, written after every commit) and exported with the JSON records
(`records/_store-heads/<store_id>.head`, its git history showing any rewrite). A head is a lower
bound: the store may have grown since, never shrunk or changed below it.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field, ValidationError

from stackgate import dirfd
from stackgate.errors import BadInput, CheckFailed
from stackgate.files import atomic_write_text, parse_json_text, read_text_bounded
from stackgate.model import StrictModel, parsed

GENESIS = "0" * 64
HEADS_FOLDER = "_store-heads"  # not a stack name: stack names start with a letter or digit
_MAX_HEAD_BYTES = 64 << 10


class TamperedStore(CheckFailed):
    """The store's content contradicts itself or a head kept elsewhere (exit 1)."""

    error_id = "store-tampered"
    hint = "`stackgate records verify` lists what changed; restore the store from its copy"


def link(previous: str, seq: int, record_id: str) -> str:
    text = f"stackgate-chain-v1\n{previous}\n{seq}\n{record_id}"
    return hashlib.sha256(text.encode("ascii")).hexdigest()


class ChainHead(StrictModel):
    store_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    count: int = Field(ge=0)
    head: str = Field(pattern=r"^[0-9a-f]{64}$")
    written_at: str = ""

    def to_text(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


def now_utc() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def sidecar_path(store_path: Path) -> Path:
    return store_path.with_name(store_path.name + ".head")


def exported_head_path(folder: Path, store_id: str) -> Path:
    return folder / HEADS_FOLDER / f"{store_id}.head"


def read_head(path: Path) -> ChainHead | None:
    """The head in path; None when there is none; BadInput when it is not a head."""
    if not path.exists() and not path.is_symlink():
        return None
    data = parse_json_text(read_text_bounded(path, _MAX_HEAD_BYTES), where=str(path))
    return parsed(ChainHead, data, f"{path}: not a store head")


def write_head(path: Path, head: ChainHead, *, durable: bool = True) -> None:
    """Write head unless the file already holds a later head of the same store."""
    try:
        have = read_head(path)
    except BadInput:
        have = None  # a damaged head file is replaced by a good one
    if have is not None and have.store_id == head.store_id and have.count >= head.count:
        return
    atomic_write_text(path, head.to_text(), durable=durable)


def write_head_at(parent_fd: int, path: Path, head: ChainHead) -> None:
    """write_head, in the opened folder `parent_fd` (path names the file in messages)."""
    have: ChainHead | None = None
    data = dirfd.read_regular_at(parent_fd, path.name, _MAX_HEAD_BYTES)
    if data is not None:
        try:
            have = ChainHead.model_validate(parse_json_text(data.decode("utf-8"), where=str(path)))
        except (BadInput, ValidationError, UnicodeDecodeError):
            have = None  # a damaged head file is replaced by a good one
    if have is not None and have.store_id == head.store_id and have.count >= head.count:
        return
    dirfd.write_at(parent_fd, path.name, head.to_text().encode("utf-8"))
