"""A zip file's central directory read from its end (EOCD, ZIP64 included).

`parse_directory(tail, size)` is pure: give it the last bytes of the file; it says how many
more it needs when the directory starts earlier (`NeedMore`).
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass

EOCD_SIG = b"PK\x05\x06"
EOCD64_LOC_SIG = b"PK\x06\x07"
EOCD64_SIG = b"PK\x06\x06"
CDIR_SIG = b"PK\x01\x02"
LOCAL_SIG = b"PK\x03\x04"
STORED = 0
DEFLATED = 8
LOCAL_HEADER = 30


class ZipFormatError(Exception):
    """Not a zip file we can read (bad signature, encrypted, unknown compression)."""


@dataclass(frozen=True)
class NeedMore:
    start: int  # read from this offset to the end of the file


@dataclass(frozen=True)
class Member:
    name: str
    method: int
    crc32: int
    compressed_size: int
    size: int
    local_offset: int


MAX_MEMBERS = 1 << 18  # torch's wheel has ~15,000; the entry count is read from the file
MAX_DIRECTORY_BYTES = 64 << 20  # central directory bytes (torch's: ~2 MB)
MAX_RATIO = 1100  # deflate cannot inflate more than 1032:1; a zip entry that claims more lies


def parse_directory(tail: bytes, file_size: int) -> list[Member] | NeedMore:
    """Members of the zip whose last `len(tail)` bytes are `tail`. A directory that does not
    fit the file (offsets past the end or into the end record, more entries than bytes, names
    that are not text, ZIP64 fields cut short, entries whose data overlaps the directory)
    is a ZipFormatError, never an IndexError or struct.error."""
    try:
        return _parse(tail, file_size)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        raise ZipFormatError(f"malformed central directory: {exc}") from None


def _parse(tail: bytes, file_size: int) -> list[Member] | NeedMore:
    base = file_size - len(tail)
    found = _directory_at(tail, base, file_size)
    if isinstance(found, NeedMore):
        return found
    count, cd_size, cd_offset = found
    rel = cd_offset - base
    if rel < 0:
        return NeedMore(cd_offset)
    members: list[Member] = []
    spans: list[tuple[int, int, str]] = []  # (local header offset, end of its data, name)
    seen: set[str] = set()
    p = rel
    for _ in range(count):
        member, data_end, p = _entry(tail, p, base, rel + cd_size, cd_offset)
        if member.name in seen:
            raise ZipFormatError(f"{member.name}: two entries of one name")
        seen.add(member.name)
        members.append(member)
        spans.append((member.local_offset, data_end, member.name))
    _no_overlap(spans)
    return members


def _directory_at(tail: bytes, base: int, file_size: int) -> tuple[int, int, int] | NeedMore:
    """(entries, size, offset) of the central directory, from the end record (ZIP64's where
    the classic one says so), within the limits and ending before its end record."""
    pos = tail.rfind(EOCD_SIG)
    if pos < 0 or len(tail) - pos < 22:
        if len(tail) < file_size:
            return NeedMore(max(0, file_size - min(file_size, len(tail) * 4 + 66000)))
        raise ZipFormatError("no end-of-central-directory record")
    (_, _disk, _cd_disk, _n_here, count, cd_size, cd_offset, _clen) = struct.unpack_from(
        "<4sHHHHIIH", tail, pos
    )
    directory_end = base + pos  # the directory ends where its end record starts
    if count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
        found = _zip64_directory_at(tail, base, pos)
        if isinstance(found, NeedMore):
            return found
        count, cd_size, cd_offset, directory_end = found
    if count > MAX_MEMBERS:
        raise ZipFormatError(f"{count} entries: more than the limit of {MAX_MEMBERS}")
    if cd_size > MAX_DIRECTORY_BYTES:
        raise ZipFormatError(
            f"central directory of {cd_size} bytes: more than the limit of {MAX_DIRECTORY_BYTES}"
        )
    if cd_offset + cd_size > directory_end:
        raise ZipFormatError(
            f"central directory at {cd_offset}+{cd_size} runs past its end record at "
            f"{directory_end}"
        )
    if count * 46 > cd_size:
        raise ZipFormatError(f"{count} entries cannot fit in {cd_size} directory bytes")
    return count, cd_size, cd_offset


def _zip64_directory_at(tail: bytes, base: int, pos: int) -> tuple[int, int, int, int] | NeedMore:
    """(entries, size, offset, end) of the directory from the ZIP64 end record, found through
    the locator right before the classic end record at `pos`."""
    loc = pos - 20
    if loc < 0 or tail[loc : loc + 4] != EOCD64_LOC_SIG:
        raise ZipFormatError("ZIP64 locator missing")
    (eocd64_offset,) = struct.unpack_from("<Q", tail, loc + 8)
    if eocd64_offset + 56 > base + loc:
        raise ZipFormatError(f"ZIP64 end record offset {eocd64_offset} is past the locator")
    rel = eocd64_offset - base
    if rel < 0:
        return NeedMore(eocd64_offset)
    if tail[rel : rel + 4] != EOCD64_SIG:
        raise ZipFormatError("ZIP64 end record missing")
    count, cd_size, cd_offset = struct.unpack_from("<QQQ", tail, rel + 32)
    return count, cd_size, cd_offset, eocd64_offset


def _entry(tail: bytes, p: int, base: int, limit: int, cd_offset: int) -> tuple[Member, int, int]:
    """The central directory entry at `p` (ending by `limit`): (its member, where the member's
    data ends, where the next entry starts)."""
    if p + 46 > limit or tail[p : p + 4] != CDIR_SIG:
        raise ZipFormatError(f"bad central directory entry at offset {base + p}")
    (flags, method, _t, _d, crc, csize, usize, nlen, elen, clen) = struct.unpack_from(
        "<4xHHHHIIIHHH", tail, p + 4
    )
    (local,) = struct.unpack_from("<I", tail, p + 42)
    if p + 46 + nlen + elen + clen > limit:
        raise ZipFormatError(f"central directory entry at offset {base + p} runs past it")
    raw_name = tail[p + 46 : p + 46 + nlen]
    try:
        name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
    except UnicodeDecodeError:
        raise ZipFormatError(
            f"entry at offset {base + p}: name {raw_name[:80]!r} is not valid UTF-8"
        ) from None
    if "\x00" in name or not name:
        raise ZipFormatError(f"entry at offset {base + p}: empty name or a NUL in it")
    if name.startswith("/") or ".." in name.split("/"):
        # an installer would write it outside site-packages (pip and uv refuse it)
        raise ZipFormatError(f"{name}: an absolute name or one climbing out with '..'")
    extra = tail[p + 46 + nlen : p + 46 + nlen + elen]
    usize, csize, local = _zip64_sizes(name, extra, usize, csize, local)
    if flags & 0x1:
        raise ZipFormatError(f"{name}: encrypted members are not supported")
    if local + LOCAL_HEADER + csize > cd_offset:
        raise ZipFormatError(
            f"{name}: its data ({local}+{csize} bytes) runs into the central directory "
            f"at {cd_offset}"
        )
    if usize > MAX_RATIO * csize + (1 << 16):
        raise ZipFormatError(
            f"{name}: {csize} compressed bytes claim to inflate to {usize} (more than the "
            f"limit ratio of {MAX_RATIO}:1)"
        )
    member = Member(name, method, crc, csize, usize, local)
    return member, local + LOCAL_HEADER + nlen + csize, p + 46 + nlen + elen + clen


def _no_overlap(spans: list[tuple[int, int, str]]) -> None:
    """Entries whose data share bytes: the trick of non-recursive zip bombs (thousands of
    entries inflating one compressed kernel); CPython's zipfile refuses them too."""
    spans.sort()
    for (_start, end, name), (start, _end, other) in itertools.pairwise(spans):
        if start < end:
            raise ZipFormatError(f"{other}: its entry overlaps the data of {name}")


def _zip64_sizes(
    name: str, extra: bytes, usize: int, csize: int, local: int
) -> tuple[int, int, int]:
    i = 0
    while i + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, i)
        if tag == 1:
            field = extra[i + 4 : i + 4 + length]
            wanted = [usize == 0xFFFFFFFF, csize == 0xFFFFFFFF, local == 0xFFFFFFFF]
            if len(field) < 8 * sum(wanted):
                raise ZipFormatError(f"{name}: ZIP64 extra field cut short ({len(field)} bytes)")
            values = iter(struct.unpack_from(f"<{sum(wanted)}Q", field, 0))
            if wanted[0]:
                usize = next(values)
            if wanted[1]:
                csize = next(values)
            if wanted[2]:
                local = next(values)
            return usize, csize, local
        i += 4 + length
    if 0xFFFFFFFF in (usize, csize, local):
        raise ZipFormatError(f"{name}: sizes say ZIP64 but the entry has no ZIP64 field")
    return usize, csize, local


def data_offset(member: Member, local_header: bytes) -> int:
    """Where the member's compressed bytes start, from its local header (30 bytes + lengths)."""
    if len(local_header) < LOCAL_HEADER or local_header[:4] != LOCAL_SIG:
        raise ZipFormatError(f"{member.name}: bad local header at offset {member.local_offset}")
    nlen, elen = struct.unpack_from("<HH", local_header, 26)
    return int(member.local_offset + LOCAL_HEADER + nlen + elen)
