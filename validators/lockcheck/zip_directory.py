"""A zip file's central directory read from its end (EOCD, ZIP64 included).

`parse_directory(tail, size)` is pure: give it the last bytes of the file; it says how many
more it needs when the directory starts earlier (`NeedMore`).
"""

from __future__ import annotations

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


def parse_directory(tail: bytes, file_size: int) -> list[Member] | NeedMore:
    """Members of the zip whose last `len(tail)` bytes are `tail`."""
    base = file_size - len(tail)
    pos = tail.rfind(EOCD_SIG)
    if pos < 0 or len(tail) - pos < 22:
        if len(tail) < file_size:
            return NeedMore(max(0, file_size - min(file_size, len(tail) * 4 + 66000)))
        raise ZipFormatError("no end-of-central-directory record")
    (_, _disk, _cd_disk, _n_here, count, cd_size, cd_offset, _clen) = struct.unpack_from(
        "<4sHHHHIIH", tail, pos
    )
    if count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
        loc = pos - 20
        if loc < 0 or tail[loc : loc + 4] != EOCD64_LOC_SIG:
            raise ZipFormatError("ZIP64 locator missing")
        (eocd64_offset,) = struct.unpack_from("<Q", tail, loc + 8)
        rel = eocd64_offset - base
        if rel < 0:
            return NeedMore(eocd64_offset)
        if tail[rel : rel + 4] != EOCD64_SIG:
            raise ZipFormatError("ZIP64 end record missing")
        count, cd_size, cd_offset = struct.unpack_from("<QQQ", tail, rel + 32)
    rel = cd_offset - base
    if rel < 0:
        return NeedMore(cd_offset)
    members: list[Member] = []
    p = rel
    for _ in range(count):
        if tail[p : p + 4] != CDIR_SIG:
            raise ZipFormatError(f"bad central directory entry at offset {base + p}")
        (flags, method, _t, _d, crc, csize, usize, nlen, elen, clen) = struct.unpack_from(
            "<4xHHHHIIIHHH", tail, p + 4
        )
        (local,) = struct.unpack_from("<I", tail, p + 42)
        name = tail[p + 46 : p + 46 + nlen].decode("utf-8" if flags & 0x800 else "cp437")
        extra = tail[p + 46 + nlen : p + 46 + nlen + elen]
        usize, csize, local = _zip64_sizes(extra, usize, csize, local)
        if flags & 0x1:
            raise ZipFormatError(f"{name}: encrypted members are not supported")
        members.append(Member(name, method, crc, csize, usize, local))
        p += 46 + nlen + elen + clen
    return members


def _zip64_sizes(extra: bytes, usize: int, csize: int, local: int) -> tuple[int, int, int]:
    i = 0
    while i + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, i)
        if tag == 1:
            j = i + 4
            if usize == 0xFFFFFFFF:
                (usize,) = struct.unpack_from("<Q", extra, j)
                j += 8
            if csize == 0xFFFFFFFF:
                (csize,) = struct.unpack_from("<Q", extra, j)
                j += 8
            if local == 0xFFFFFFFF:
                (local,) = struct.unpack_from("<Q", extra, j)
        i += 4 + length
    return usize, csize, local


def data_offset(member: Member, local_header: bytes) -> int:
    """Where the member's compressed bytes start, from its local header (30 bytes + lengths)."""
    if local_header[:4] != LOCAL_SIG:
        raise ZipFormatError(f"{member.name}: bad local header signature")
    nlen, elen = struct.unpack_from("<HH", local_header, 26)
    return int(member.local_offset + LOCAL_HEADER + nlen + elen)
