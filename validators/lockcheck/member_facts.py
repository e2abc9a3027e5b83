"""What one ELF member of a wheel exports and imports, read from a MemberView into the
cached form both readers share (`validators.elf.cached_facts.CachedFacts`).

The dynamic-linking view is parsed by the installed-env check's own reader
(`validators.elf.elf_symbols`) over a stream that fetches bytes on demand, so the facts
are the ones that check would read from the same file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import struct
from pathlib import Path
from typing import Any, BinaryIO, cast

import numpy as np

from validators.elf.cached_facts import CachedFacts, ReadEvidence
from validators.elf.elf_symbols import (
    EM_CUDA,
    SHT_PROGBITS,
    ElfHeader,
    ElfObject,
    ElfReadError,
    read_elf_stream,
    read_header,
    section_headers,
)
from validators.elf.fatbin import (
    FATBIN_MAGIC,
    FATBIN_SECTIONS,
    GpuCode,
    fatbin_codes_bytes,
    fatbin_entries,
    may_embed_fatbins,
)
from validators.lockcheck.member_view import MemberStream, MemberView, NotKnown
from validators.lockcheck.synthetic_sections import CannotSynthesize, synthesize

# Data sections that may hold fatbins a library loads itself, by name too: a section table
# decoded leniently may read sh_flags as 0 (see _SHDR64_USED)
_DATA_NAMES = (".data", ".rodata", ".ldata", ".lrodata")
# an unread data section this large may hold kernels (cuFFT's .data: 270 MB of fatbins); a
# smaller one (an extension's few KB of .data) is not worth a verdict of "read in part"
_DATA_WORTH = 1 << 20


def _evidence(
    view: MemberView, gpu: str, dynamic: str = "read", sections: str = "read"
) -> ReadEvidence:
    log = view.log
    return ReadEvidence(
        member=view.member.name,
        member_size=view.size,
        compressed_size=view.member.compressed_size,
        compressed_read=log.compressed_read,
        whole=log.whole,
        sha256_checked=log.sha256_checked,
        record_mismatch=log.record_mismatch,
        prefix_bytes=log.prefix_bytes,
        tail_from=log.tail_from,
        gpu_code=gpu,
        dynamic=dynamic,
        sections=sections,
    )


def extract(view: MemberView, virtual_path: Path) -> CachedFacts:
    """Facts of one member; a member that is not ELF gives is_elf=False."""
    stream = MemberStream(view)
    head = stream.read(64)
    if head[:4] != b"\x7fELF":
        return CachedFacts(is_elf=False, read=_evidence(view, "none"))
    stream.seek(0)
    header = read_header(_io(stream))
    if header.machine == EM_CUDA:
        code = _cubin_code(head, view.member.name)
        return CachedFacts(
            machine=str(header.machine),
            elf_class=header.elf_class,
            elf_type=str(header.elf_type),
            gpu_codes=[code.label()],
            read=_evidence(view, "from-header"),
        )
    dynamic = _dynamic_or_infer(stream, header)
    _section_table_lenient(stream, header)
    try:
        obj = read_elf_stream(_io(stream), virtual_path)
    except NotKnown:
        raise
    except ElfReadError:
        raise
    except Exception as exc:
        raise ElfReadError(virtual_path, f"{type(exc).__name__}: {exc}") from None
    if dynamic == "inferred":
        obj = _infer_dynamic(stream, header, obj)
    codes, gpu = _gpu_codes(view, stream.overrides)
    if stream.synthetic_sections or (stream.names_unreliable and gpu != "none"):
        gpu = "partial"  # sections not found by name: GPU code not looked for
    return CachedFacts.from_object(
        obj,
        codes,
        _evidence(view, gpu, dynamic, "from PT_DYNAMIC" if stream.synthetic_sections else "read"),
    )


PT_DYNAMIC = 2


DYNAMIC_BUDGET = 4 << 20  # compressed bytes worth fetching for PT_DYNAMIC alone
SHT_DYNAMIC_TYPE = 6
_SONAME_LIKE = re.compile(r"^[A-Za-z0-9_.+-]+\.so(\.[0-9]+)*$")


def _program_headers(stream: MemberStream, header: ElfHeader) -> list[tuple[int, ...]]:
    stream.seek(0)
    raw = stream.read(64)
    is64 = header.elf_class == 64
    phoff = struct.unpack_from("<Q" if is64 else "<I", raw, 32 if is64 else 28)[0]
    phentsize = struct.unpack_from("<H", raw, 54 if is64 else 42)[0]
    phnum = struct.unpack_from("<H", raw, 56 if is64 else 44)[0]
    stream.seek(phoff)
    table = stream.read(phentsize * phnum)
    fmt = "<IIQQQQQQ" if is64 else "<IIIIIIII"
    rows = [struct.unpack_from(fmt, table, i * phentsize) for i in range(phnum)]
    # (type, offset, filesz, vaddr, memsz) in either class
    return [
        (r[0], r[2], r[5], r[3], r[6]) if is64 else (r[0], r[1], r[4], r[2], r[5]) for r in rows
    ]


def _dynamic_or_infer(stream: MemberStream, header: ElfHeader) -> str:
    """Read PT_DYNAMIC first when it is cheap: in a large library it sits well before the end,
    and one tail decoded from there also covers the section headers and a .dynstr moved to
    the end by patchelf. When it would cost more than DYNAMIC_BUDGET (cuBLASLt keeps 100 MB
    of .ldata after it), it is not read: the section is hidden from the reader and DT_NEEDED,
    DT_SONAME and the run path are inferred from .dynstr (`_infer_dynamic`)."""
    for ptype, offset, size, *_ in _program_headers(stream, header):
        if ptype != PT_DYNAMIC:
            continue
        if stream.view.estimated_cost(offset, size) <= DYNAMIC_BUDGET:
            stream.seek(offset)
            stream.read(size)
            return "read"
        _section_table_lenient(stream, header)
        sections = section_headers(header, _io(stream))
        for sec in sections:
            if sec.type == SHT_DYNAMIC_TYPE:
                at = header.shoff + sec.index * header.shentsize + 4  # sh_type
                _patch(stream, at, struct.pack("<I", 0))
                return "inferred"
        return "read"
    return "none"


# Bytes of an Elf64_Shdr the reader uses: sh_name, sh_type (0-7); sh_offset, sh_size, sh_link
# (24-43). sh_flags, sh_addr, sh_info, sh_addralign and sh_entsize it ignores.
_SHDR64_USED = np.zeros(64, dtype=bool)
_SHDR64_USED[0:8] = True
_SHDR64_USED[24:44] = True


def _patch(stream: MemberStream, at: int, data: bytes) -> None:
    """Serve `data` at `at`, inside an existing patch when one covers it."""
    for start, patch in stream.overrides.items():
        if start <= at and at + len(data) <= start + len(patch):
            rel = at - start
            stream.overrides[start] = patch[:rel] + data + patch[rel + len(data) :]
            return
    stream.overrides[at] = data


def _section_table_lenient(stream: MemberStream, header: ElfHeader) -> None:
    """The section header table from a decoded tail may hold bytes copied from before the
    tail's start (zero runs chain far back through cuFFT's 270 MB of .ldata). When every such
    byte sits in a field the reader ignores, the table is used as decoded (those bytes read 0)
    instead of decoding a far longer tail."""
    if header.elf_class != 64 or header.shentsize != 64 or not header.shnum:
        return
    size = header.shnum * header.shentsize
    table = stream.overrides.get(header.shoff)
    if table is None:
        table, unknown = stream.view.read_lenient(header.shoff, size)
        if len(table) != size:
            return
        if unknown is not None:
            if bool((unknown & np.tile(_SHDR64_USED, header.shnum)).any()):
                _synthesize(stream, header)
                return
            stream.overrides[header.shoff] = table
    # The section names: only the GPU-code scan looks sections up by name, so names with
    # unknown bytes are used as decoded and that scan reports itself partial.
    if header.shstrndx >= header.shnum:
        return
    offset, length = struct.unpack_from("<QQ", table, header.shstrndx * 64 + 24)
    if offset in stream.overrides or offset + length > stream.view.size:
        return
    names, unknown = stream.view.read_lenient(offset, length)
    if unknown is not None and len(names) == length:
        stream.overrides[offset] = names
        stream.names_unreliable = True


def _synthesize(stream: MemberStream, header: ElfHeader) -> None:
    """Describe the dynamic tables as ld.so finds them (`synthetic_sections`) when the real
    section table has unknown bytes the reader would use."""
    view = stream.view
    phdrs = _program_headers(stream, header)
    dyn = next(((p[1], p[2]) for p in phdrs if p[0] == PT_DYNAMIC), None)
    if dyn is None or not view.known(*dyn):
        return

    def read(offset: int, size: int) -> bytes:
        data, unknown = view.read_lenient(offset, size)
        if unknown is not None or len(data) != size:
            raise CannotSynthesize(f"bytes {offset}-{offset + size} not known")
        return data

    try:
        overrides = synthesize(read, phdrs, dyn, view.size)
    except (CannotSynthesize, struct.error):
        return
    stream.overrides.update(overrides)
    stream.names_unreliable = True
    stream.synthetic_sections = True


def _infer_dynamic(stream: MemberStream, header: ElfHeader, obj: ElfObject) -> ElfObject:
    """DT_NEEDED / DT_SONAME / run path from the strings of .dynstr: every soname-like string
    but the object's own name is a needed library (version-need file names are among them
    by construction); `$ORIGIN` or absolute paths are taken as the run path."""
    sections = section_headers(header, _io(stream))
    strtab = b""
    for sec in sections:
        if sec.type == 11 and sec.link < len(sections):  # SHT_DYNSYM -> its string table
            link = sections[sec.link]
            stream.seek(link.offset)
            strtab = stream.read(link.size)
            break
    own = Path(stream.view.member.name).name
    needed: list[str] = []
    runpath: list[str] = []
    soname: str | None = None
    for raw in strtab.split(b"\0"):
        text = raw.decode("utf-8", "replace")
        if not text:
            continue
        if _SONAME_LIKE.match(text):
            if text == own:
                soname = text
            elif text not in needed:
                needed.append(text)
        elif text.startswith(("$ORIGIN", "${ORIGIN}", "/")) and "/" in text:
            runpath.extend(p for p in text.split(":") if p)
    # DT_RPATH or DT_RUNPATH cannot be told apart from the string: taken as DT_RPATH (what
    # torch's libraries carry), the more permissive of the two (it also serves dependents).
    return dataclasses.replace(
        obj, needed=tuple(needed), soname=soname, rpath=tuple(runpath), runpath=()
    )


def cubin_label(head: bytes, name: str) -> str:
    """The label of a cubin's target from its first 64 bytes ("" when not a CUDA ELF)."""
    if len(head) < 52 or head[:4] != b"\x7fELF" or struct.unpack_from("<H", head, 18)[0] != EM_CUDA:
        return ""
    return _cubin_code(head, name).label()


def _io(stream: MemberStream) -> BinaryIO:
    # MemberStream is a RawIOBase: the readers need only seek/read/tell of BinaryIO
    return cast(BinaryIO, stream)


def _cubin_code(head: bytes, name: str) -> GpuCode:
    """A cubin's SM from e_flags; the a/f suffix from its file name (as the static group's
    fast path does), '?' when the name does not say."""
    is64 = head[4] == 2
    (flags,) = struct.unpack_from("<I", head, 48 if is64 else 36)
    sm = (flags >> 8) & 0xFF if head[8] >= 8 else flags & 0xFF
    lower = name.lower().rsplit("/", 1)[-1]
    for suffix in ("a", "f"):
        if f"sm{sm}{suffix}" in lower or f"sm_{sm}{suffix}" in lower:
            return GpuCode("sass", sm, suffix)
    return GpuCode("sass", sm, "" if f"sm_{sm}" in lower or f"sm{sm}" in lower else "?")


def _gpu_codes(view: MemberView, overrides: dict[int, bytes]) -> tuple[list[GpuCode], str]:
    """Fatbin entries from the bytes already read; never fetches more for them. A fatbin
    section read only in part gives the entries of the fatbins inside the read part."""
    stream = MemberStream(view, fetch=False)
    stream.overrides = dict(overrides)
    if view.log.whole:  # every byte known: exactly the installed group's reader
        try:
            whole = fatbin_codes_bytes(view.get(0, view.size), Path(view.member.name))
        except ElfReadError:
            return [], "none"
        return whole, ("complete" if whole else "none")
    try:
        header = read_header(_io(stream))
        sections = section_headers(header, _io(stream))
    except (NotKnown, ElfReadError, struct.error, ValueError):
        return [], "none"
    except Exception:
        return [], "none"
    codes: set[GpuCode] = set()
    partial = False
    found = False
    for section in sections:
        if section.type != SHT_PROGBITS or not section.size:
            continue
        if section.name in FATBIN_SECTIONS:
            found = True
            if view.known(section.offset, section.size):
                codes.update(fatbin_entries(_io(stream), section.offset, section.size))
                continue
        elif may_embed_fatbins(section) or section.name in _DATA_NAMES:
            # fatbins a library loads itself (cuFFT keeps them in .data)
            if view.known(section.offset, section.size):
                codes.update(_known_fatbins(view, stream, section.offset, section.size))
                found = found or bool(codes)
                continue
            if section.size < _DATA_WORTH:
                continue
            found = True
        else:
            continue
        partial = True
        codes.update(_known_fatbins(view, stream, section.offset, section.size))
    if not found:
        return [], "none"
    return sorted(codes), "partial" if partial else "complete"


def _known_fatbins(view: MemberView, stream: Any, start: int, size: int) -> set[GpuCode]:
    """Entries of the whole fatbins (magic, header, body) that lie in known bytes."""
    out: set[GpuCode] = set()
    magic = struct.pack("<I", FATBIN_MAGIC)
    for lo, hi in view.known_ranges(start, start + size):
        data = view.get(lo, hi - lo)
        pos = data.find(magic)
        while pos >= 0:
            at = lo + pos
            if at % 8 == 0 and pos + 16 <= len(data):
                _m, version, hsize, body = struct.unpack_from("<IHHQ", data, pos)
                if version == 1 and hsize == 16 and pos + 16 + body <= len(data):
                    with contextlib.suppress(NotKnown, ElfReadError):
                        out.update(fatbin_entries(_io(stream), at, 16 + body))
                    pos = data.find(magic, pos + 16 + body)
                    continue
            pos = data.find(magic, pos + 4)
    return out
