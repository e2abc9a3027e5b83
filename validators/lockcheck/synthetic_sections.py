"""A section header table rebuilt from PT_DYNAMIC, for when the real one cannot be had cheaply.

ld.so never reads section headers: it finds the dynamic symbols, their strings and the GNU
version tables through PT_DYNAMIC's DT_ tags. When a member's section header table sits behind
bytes a decoded tail cannot recover (cuFFT's long zero runs chain back before the tail), those
tables are located the loader's way and described as sections at a virtual offset past the
member's end: .dynsym (count from DT_GNU_HASH or DT_HASH), .dynstr, .gnu.version, .gnu.version_r
/ _d and .dynamic. Other section names are lost, so GPU code is not looked for by name there.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

DT_NULL = 0
DT_HASH = 4
DT_STRTAB = 5
DT_SYMTAB = 6
DT_STRSZ = 10
DT_GNU_HASH = 0x6FFFFEF5
DT_VERSYM = 0x6FFFFFF0
DT_VERDEF = 0x6FFFFFFC
DT_VERDEFNUM = 0x6FFFFFFD
DT_VERNEED = 0x6FFFFFFE
DT_VERNEEDNUM = 0x6FFFFFFF
PT_LOAD = 1

Read = Callable[[int, int], bytes]


class CannotSynthesize(Exception):
    """PT_DYNAMIC does not describe the tables (64-bit little-endian only)."""


def _to_offset(vaddr: int, loads: list[tuple[int, int, int]]) -> int:
    for offset, addr, size in loads:
        if addr <= vaddr < addr + size:
            return vaddr - addr + offset
    raise CannotSynthesize(f"address {vaddr:#x} is in no PT_LOAD segment")


def _symbol_count(read: Read, tags: dict[int, int], loads: list[tuple[int, int, int]]) -> int:
    if DT_HASH in tags:
        _nbucket, nchain = struct.unpack("<II", read(_to_offset(tags[DT_HASH], loads), 8))
        return int(nchain)
    if DT_GNU_HASH not in tags:
        raise CannotSynthesize("neither DT_HASH nor DT_GNU_HASH: symbol count unknown")
    at = _to_offset(tags[DT_GNU_HASH], loads)
    nbuckets, symoffset, bloom_size, _shift = struct.unpack("<IIII", read(at, 16))
    buckets_at = at + 16 + 8 * bloom_size
    buckets = struct.unpack(f"<{nbuckets}I", read(buckets_at, 4 * nbuckets))
    last = max(buckets, default=0)
    if last < symoffset:
        return int(symoffset)
    chains_at = buckets_at + 4 * nbuckets
    index = last
    while True:
        (value,) = struct.unpack("<I", read(chains_at + 4 * (index - symoffset), 4))
        if value & 1:
            return index + 1
        index += 1


_NAMES = b"\0.dynsym\0.dynstr\0.gnu.version\0.gnu.version_r\0.gnu.version_d\0.dynamic\0.shstrtab\0"
SHT_STRTAB, SHT_DYNSYM, SHT_DYNAMIC = 3, 11, 6
# (name, type, offset, size, link, info, entsize) of one section header
Row = tuple[int, int, int, int, int, int, int]


def synthesize(
    read: Read, phdrs: list[tuple[int, ...]], dynamic: tuple[int, int], member_size: int
) -> dict[int, bytes]:
    """Overrides (offset -> bytes) that make the ELF header point at a rebuilt table.

    `phdrs`: (type, offset, filesz, vaddr, memsz) rows; `dynamic`: PT_DYNAMIC (offset, size);
    `read(offset, size)` reads known member bytes."""
    loads = [(p[1], p[3], p[2]) for p in phdrs if p[0] == PT_LOAD]
    tags = _dynamic_tags(read(*dynamic))
    rows = _section_rows(tags, loads, _symbol_count(read, tags, loads), dynamic)
    table_at = (member_size + 4095) // 4096 * 4096 + 4096  # past the end: never fetched
    names_at = table_at + 64 * (len(rows) + 1)
    rows.append((_name(".shstrtab"), SHT_STRTAB, names_at, len(_NAMES), 0, 0, 0))
    table = b"".join(
        struct.pack("<IIQQQQIIQQ", n, t, 0, 0, off, size, link, info, 1, ent)
        for n, t, off, size, link, info, ent in rows
    )
    header = read(0, 64)
    patched = (
        header[:40]
        + struct.pack("<Q", table_at)
        + header[48:58]
        + struct.pack("<HHH", 64, len(rows), len(rows) - 1)
    )
    return {0: patched, table_at: table, names_at: _NAMES}


def _dynamic_tags(raw: bytes) -> dict[int, int]:
    """The first value of each DT_ tag before DT_NULL; the three the symbol table needs."""
    tags: dict[int, int] = {}
    for tag, value in struct.iter_unpack("<qQ", raw[: len(raw) - len(raw) % 16]):
        if tag == DT_NULL:
            break
        tags.setdefault(tag, value)
    for need in (DT_STRTAB, DT_STRSZ, DT_SYMTAB):
        if need not in tags:
            raise CannotSynthesize(f"PT_DYNAMIC lacks tag {need}")
    return tags


def _name(text: str) -> int:
    return _NAMES.index(b"\0" + text.encode() + b"\0") + 1


def _section_rows(
    tags: dict[int, int], loads: list[tuple[int, int, int]], count: int, dynamic: tuple[int, int]
) -> list[Row]:
    """The null row, .dynsym, .dynstr, the GNU version tables the tags name, .dynamic."""
    rows: list[Row] = [
        (0, 0, 0, 0, 0, 0, 0),
        (_name(".dynsym"), SHT_DYNSYM, _to_offset(tags[DT_SYMTAB], loads), 24 * count, 2, 1, 24),
        (_name(".dynstr"), SHT_STRTAB, _to_offset(tags[DT_STRTAB], loads), tags[DT_STRSZ], 0, 0, 0),
    ]
    # version needs and definitions are walked by count (sh_info), not by size
    for tag, section, kind, size, link, info, entsize in (
        (DT_VERSYM, ".gnu.version", 0x6FFFFFFF, 2 * count, 1, 0, 2),
        (DT_VERNEED, ".gnu.version_r", 0x6FFFFFFE, 0, 2, tags.get(DT_VERNEEDNUM, 0), 0),
        (DT_VERDEF, ".gnu.version_d", 0x6FFFFFFD, 0, 2, tags.get(DT_VERDEFNUM, 0), 0),
    ):
        if tag in tags:
            offset = _to_offset(tags[tag], loads)
            rows.append((_name(section), kind, offset, size, link, info, entsize))
    rows.append((_name(".dynamic"), SHT_DYNAMIC, dynamic[0], dynamic[1], 2, 0, 16))
    return rows
