"""One remote wheel: its central directory, its RECORD and METADATA, and the facts of each
ELF member, each read from as few bytes as the member's layout allows."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from email.parser import HeaderParser
from pathlib import Path

from stackgate.lock.wheel_listing import WheelListing
from validators.elf.cached_facts import CachedFacts
from validators.lockcheck.http_ranges import FetchError, RemoteFile
from validators.lockcheck.member_facts import extract
from validators.lockcheck.member_view import IntegrityError, MemberView
from validators.lockcheck.zip_directory import (
    LOCAL_HEADER,
    Member,
    NeedMore,
    ZipFormatError,
    data_offset,
    parse_directory,
)

TAIL_FIRST = 1 << 16
# RECORD and METADATA are read whole into memory: torch's RECORD is ~1.5 MB, the longest
# METADATA (a README inlined) a few hundred KB.
MAX_SMALL_FILE = {"RECORD": 32 << 20, "METADATA": 8 << 20, "__init__.py": 4 << 20}
# Members a wheel may ask the check to read (ELF candidates and cubins): torch has ~100,
# flashinfer-cubin ~320.
MAX_READ_MEMBERS = 20_000


def is_shared_object_name(name: str) -> bool:
    """The names the installed-env group looks at (`environment.shared_objects`)."""
    base = name.rsplit("/", 1)[-1]
    return ".so" in base and (base.endswith(".so") or ".so." in base)


def record_hash(value: str) -> str | None:
    """RECORD's `sha256=<urlsafe b64>` as hex; None for other or missing hashes."""
    algo, _, digest = value.partition("=")
    if algo != "sha256" or not digest:
        return None
    raw = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4))
    return raw.hex()


class RemoteWheel:
    def __init__(self, remote: RemoteFile, sha256: str) -> None:
        self.remote = remote
        self.sha256 = sha256
        self.members: dict[str, Member] = {}

    def read_directory(self) -> None:
        size = self.remote.size
        tail = self.remote.read(max(0, size - TAIL_FIRST), size)
        parsed = parse_directory(tail, size)
        if isinstance(parsed, NeedMore):
            tail = self.remote.read(parsed.start, size)
            parsed = parse_directory(tail, size)
        if isinstance(parsed, NeedMore):
            raise ZipFormatError("central directory could not be located")
        self.members = {m.name: m for m in parsed}

    def view(self, member: Member, record_sha256: str | None) -> MemberView:
        head = self.remote.read(member.local_offset, member.local_offset + LOCAL_HEADER)
        start = data_offset(member, head)
        if start + member.compressed_size > self.remote.size:
            raise ZipFormatError(
                f"{member.name}: its local header puts its data at {start}+"
                f"{member.compressed_size}, past the wheel's {self.remote.size} bytes"
            )
        # the local header's name/extra lengths were read; the data follows
        return MemberView(self.remote, member, start, record_sha256)

    def read_small(self, name: str) -> bytes:
        member = self.members[name]
        limit = MAX_SMALL_FILE[name.rsplit("/", 1)[-1]]
        if member.size > limit:
            raise ZipFormatError(
                f"{name}: {member.size} bytes inflated, more than the limit of {limit} for it"
            )
        view = self.view(member, None)
        view.ensure(0, member.size)
        return view.get(0, member.size)

    def listing(self, url: str) -> WheelListing:
        if not self.members:
            self.read_directory()
        dist_info = sorted(
            n.split("/")[0] for n in self.members if n.split("/")[0].endswith(".dist-info")
        )
        if not dist_info:
            raise ZipFormatError("no .dist-info folder")
        record_name = f"{dist_info[0]}/RECORD"
        hashes: dict[str, str | None] = {}
        if record_name in self.members:
            text = self.read_small(record_name).decode("utf-8", "replace")
            try:
                for row in csv.reader(io.StringIO(text)):
                    if len(row) >= 2:
                        hashes[row[0]] = record_hash(row[1])
            except (csv.Error, ValueError) as exc:  # ValueError: bad base64 (binascii.Error)
                raise ZipFormatError(f"{record_name}: not a RECORD file: {exc}") from None
        requires: list[str] = []
        name = version = ""
        meta_name = f"{dist_info[0]}/METADATA"
        if meta_name in self.members:
            meta = self.read_small(meta_name).decode("utf-8", "replace")
            headers = HeaderParser().parsestr(meta, headersonly=True)
            requires = list(headers.get_all("Requires-Dist") or ())
            name, version = str(headers.get("Name", "")), str(headers.get("Version", ""))
        objects = {n: hashes.get(n) for n in sorted(self.members) if is_shared_object_name(n)}
        cubins = {n: hashes.get(n) for n in sorted(self.members) if n.endswith(".cubin")}
        if len(objects) + len(cubins) > MAX_READ_MEMBERS:
            raise ZipFormatError(
                f"{len(objects)} shared objects and {len(cubins)} cubins: more than the limit "
                f"of {MAX_READ_MEMBERS} members to read"
            )
        return WheelListing(
            url=url,
            sha256=self.sha256,
            size=self.remote.size,
            objects=objects,
            cubins=cubins,
            requires=requires,
            name=name,
            version=version,
        )

    def object_facts(self, name: str, record_sha256: str | None, virtual: Path) -> CachedFacts:
        member = self.members[name]
        view = self.view(member, record_sha256)
        return extract(view, virtual)


def verify_spooled(remote: RemoteFile, sha256: str) -> bool | None:
    """When the server ignored ranges the whole wheel was streamed: check it against the
    lock's sha256. None when it was read by ranges (cannot be checked)."""
    if remote.mode == "ranges":
        return None
    digest = hashlib.sha256()
    pos = 0
    while pos < remote.size:
        chunk = remote.read(pos, min(remote.size, pos + (8 << 20)))
        digest.update(chunk)
        pos += len(chunk)
    return digest.hexdigest() == sha256


__all__ = ["FetchError", "IntegrityError", "RemoteWheel", "verify_spooled"]
