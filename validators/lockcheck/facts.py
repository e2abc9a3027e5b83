"""What one ELF member of a wheel exports and imports, read from a MemberView, and its
round trip to the cache and to the static group's ElfObject.

The dynamic-linking view is parsed by the static group's own reader
(`validators.static.elf_symbols`) over a stream that fetches bytes on demand, so the facts
are the ones the installed-env check would read from the same file.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from validators.lockcheck.member_view import MemberStream, MemberView, NotKnown
from validators.static.elf_symbols import (
    EM_CUDA,
    SHT_PROGBITS,
    ElfHeader,
    ElfObject,
    ElfReadError,
    Import,
    read_header,
    section_headers,
)
from validators.static.elf_symbols import _read as read_dynamic_view
from validators.static.fatbin import FATBIN_MAGIC, GpuCode, _entries

FACTS_VERSION = 1
_FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
_LABEL = re.compile(r"^(sm|compute)_(\d+)([af?]?)$")


class ReadEvidence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    member: str
    member_size: int
    compressed_size: int
    compressed_read: int
    whole: bool
    sha256_checked: bool
    prefix_bytes: int
    tail_from: int | None = None
    gpu_code: str = "none"  # none / complete / partial (sections only partly read) / from-name


class ObjectFacts(BaseModel):
    """The ElfObject fields (minus its path) plus GPU code, as stored in the cache."""

    model_config = ConfigDict(extra="forbid")

    facts_version: int = FACTS_VERSION
    is_elf: bool = True
    machine: str = ""
    elf_class: int = 64
    elf_type: str = ""
    soname: str | None = None
    needed: list[str] = []
    rpath: list[str] = []
    runpath: list[str] = []
    imports: list[tuple[str, str | None, str | None, bool]] = []
    exports: dict[str, int] = {}
    multi: dict[str, list[int]] = {}
    version_names: dict[int, str] = {}
    version_defs: list[str] = []
    version_needs: dict[str, list[str]] = {}
    gpu_codes: list[str] = []
    read: ReadEvidence | None = None

    def elf_object(self, path: Path) -> ElfObject:
        return ElfObject(
            path=path,
            machine=self.machine,
            elf_class=self.elf_class,
            elf_type=self.elf_type,
            soname=self.soname,
            needed=tuple(self.needed),
            rpath=tuple(self.rpath),
            runpath=tuple(self.runpath),
            imports=tuple(Import(n, v, f, w) for n, v, f, w in self.imports),
            exports=self.exports,
            version_defs=frozenset(self.version_defs),
            multi={k: tuple(v) for k, v in self.multi.items()},
            version_names=self.version_names,
            version_needs={k: frozenset(v) for k, v in self.version_needs.items()},
        )

    def codes(self) -> list[GpuCode]:
        out: list[GpuCode] = []
        for label in self.gpu_codes:
            m = _LABEL.match(label)
            if m:
                kind = "sass" if m.group(1) == "sm" else "ptx"
                out.append(GpuCode(kind, int(m.group(2)), m.group(3)))  # type: ignore[arg-type]
        return out


def _evidence(view: MemberView, gpu: str) -> ReadEvidence:
    log = view.log
    return ReadEvidence(
        member=view.member.name,
        member_size=view.size,
        compressed_size=view.member.compressed_size,
        compressed_read=log.compressed_read,
        whole=log.whole,
        sha256_checked=log.sha256_checked,
        prefix_bytes=log.prefix_bytes,
        tail_from=log.tail_from,
        gpu_code=gpu,
    )


def extract(view: MemberView, virtual_path: Path) -> ObjectFacts:
    """Facts of one member; a member that is not ELF gives is_elf=False."""
    stream = MemberStream(view)
    head = stream.read(64)
    if head[:4] != b"\x7fELF":
        return ObjectFacts(is_elf=False, read=_evidence(view, "none"))
    stream.seek(0)
    header = read_header(stream)
    if header.machine == EM_CUDA:
        code = _cubin_code(head, view.member.name)
        return ObjectFacts(
            machine=str(header.machine),
            elf_class=header.elf_class,
            elf_type=str(header.elf_type),
            gpu_codes=[code.label()],
            read=_evidence(view, "from-header"),
        )
    _read_dynamic_first(stream, header)
    try:
        obj = read_dynamic_view(virtual_path, stream)
    except NotKnown:
        raise
    except ElfReadError:
        raise
    except Exception as exc:
        raise ElfReadError(virtual_path, f"{type(exc).__name__}: {exc}") from None
    codes, gpu = _gpu_codes(view)
    return ObjectFacts(
        machine=obj.machine,
        elf_class=obj.elf_class,
        elf_type=obj.elf_type,
        soname=obj.soname,
        needed=list(obj.needed),
        rpath=list(obj.rpath),
        runpath=list(obj.runpath),
        imports=[(i.name, i.version, i.version_file, i.weak) for i in obj.imports],
        exports=obj.exports,
        multi={k: list(v) for k, v in obj.multi.items()},
        version_names=obj.version_names,
        version_defs=sorted(obj.version_defs),
        version_needs={k: sorted(v) for k, v in obj.version_needs.items()},
        gpu_codes=[c.label() for c in codes],
        read=_evidence(view, gpu),
    )


PT_DYNAMIC = 2


def _read_dynamic_first(stream: MemberStream, header: ElfHeader) -> None:
    """Fetch PT_DYNAMIC before the section headers: in a large library it sits well before the
    end, and one tail decoded from there also covers the section headers and a .dynstr
    moved to the end by patchelf, with no bytes copied from before its start left unknown."""
    stream.seek(0)
    raw = stream.read(64)
    is64 = header.elf_class == 64
    phoff, phentsize, phnum = (
        struct.unpack_from("<Q", raw, 32)[0] if is64 else struct.unpack_from("<I", raw, 28)[0],
        struct.unpack_from("<H", raw, 54 if is64 else 42)[0],
        struct.unpack_from("<H", raw, 56 if is64 else 44)[0],
    )
    stream.seek(phoff)
    table = stream.read(phentsize * phnum)
    fmt = "<IIQQQQQQ" if is64 else "<IIIIIIII"
    for i in range(phnum):
        row = struct.unpack_from(fmt, table, i * phentsize)
        if row[0] == PT_DYNAMIC:
            offset, size = (row[2], row[5]) if is64 else (row[1], row[4])
            stream.seek(offset)
            stream.read(size)
            return


def _cubin_code(head: bytes, name: str) -> GpuCode:
    """A cubin's SM from e_flags; the a/f suffix from its file name (as the static group's
    fast path does), '?' when the name does not say."""
    is64 = head[4] == 2
    (flags,) = struct.unpack_from("<I", head, 48 if is64 else 36)
    sm = (flags >> 8) & 0xFF if head[8] >= 8 else flags & 0xFF
    lower = name.lower().rsplit("/", 1)[-1]
    for suffix in ("a", "f"):
        if f"sm{sm}{suffix}" in lower or f"sm_{sm}{suffix}" in lower:
            return GpuCode("sass", sm, suffix)  # type: ignore[arg-type]
    return GpuCode("sass", sm, "" if f"sm_{sm}" in lower or f"sm{sm}" in lower else "?")


def _gpu_codes(view: MemberView) -> tuple[list[GpuCode], str]:
    """Fatbin entries from the bytes already read; never fetches more for them. A fatbin
    section read only in part gives the entries of the fatbins inside the read part."""
    stream = MemberStream(view, fetch=False)
    try:
        header = read_header(stream)
        sections = section_headers(header, stream)
    except (NotKnown, ElfReadError, struct.error, ValueError):
        return [], "none"
    except Exception:
        return [], "none"
    codes: set[GpuCode] = set()
    partial = False
    found = False
    for section in sections:
        if section.type != SHT_PROGBITS or not section.size or section.name not in _FATBIN_SECTIONS:
            continue
        found = True
        if view.known(section.offset, section.size):
            codes.update(_entries(stream, section.offset, section.size))
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
                    try:
                        out.update(_entries(stream, at, 16 + body))
                    except (NotKnown, ElfReadError):
                        pass
                    pos = data.find(magic, pos + 16 + body)
                    continue
            pos = data.find(magic, pos + 4)
    return out
