"""Read what the dynamic loader reads from an ELF shared object: DT_NEEDED, RPATH/RUNPATH,
the dynamic symbol table with GNU symbol versions, and weak bindings.

pyelftools parses the headers, the dynamic section and the version sections (all small);
the dynamic symbol table itself is decoded in bulk with numpy, because libtorch_cpu.so holds
~100k dynamic symbols and a per-symbol Python object would cost seconds per library.
"""

from __future__ import annotations

import bisect
import io
import struct
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from pathlib import Path
from typing import BinaryIO

import numpy as np
from elftools.common.exceptions import ELFError

STB_GLOBAL = 1
STB_WEAK = 2
STB_GNU_UNIQUE = 10
SHN_UNDEF = 0
VERSYM_HIDDEN = 0x8000
VER_NDX_GLOBAL = 1

_SYM64 = np.dtype(
    [
        ("name", "<u4"),
        ("info", "u1"),
        ("other", "u1"),
        ("shndx", "<u2"),
        ("value", "<u8"),
        ("size", "<u8"),
    ]
)
_SYM32 = np.dtype(
    [
        ("name", "<u4"),
        ("value", "<u4"),
        ("size", "<u4"),
        ("info", "u1"),
        ("other", "u1"),
        ("shndx", "<u2"),
    ]
)


class ElfReadError(Exception):
    """The file is not a readable ELF object (truncated, not ELF, unreadable)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class Import:
    """An undefined dynamic symbol: what the object needs from its lookup scope."""

    name: str
    version: str | None = None
    version_file: str | None = None  # the DT_NEEDED soname the verneed entry names
    weak: bool = False


@dataclass
class ElfObject:
    path: Path
    machine: str
    elf_class: int
    elf_type: str
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    imports: tuple[Import, ...]
    exports: dict[str, int]  # name -> raw versym of its definition (bit 15: hidden)
    version_defs: frozenset[str]
    multi: dict[str, tuple[int, ...]] = field(default_factory=dict)  # names defined more than once
    version_names: dict[int, str] = field(default_factory=dict)  # versym index -> version name
    version_needs: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def has_versions(self) -> bool:
        return bool(self.version_defs)

    @cached_property
    def sorted_names(self) -> list[str]:
        return sorted(self.exports)

    def names_with_prefix(self, prefix: str, limit: int = 5) -> list[str]:
        """Exported names that start with `prefix` (to find the symbol a mangled name became)."""
        names = self.sorted_names
        i = bisect.bisect_left(names, prefix)
        out: list[str] = []
        while i < len(names) and names[i].startswith(prefix) and len(out) < limit:
            out.append(names[i])
            i += 1
        return out

    def exports_python_module(self) -> bool:
        return self._python_module

    @cached_property
    def _python_module(self) -> bool:
        # once per object, in C (map/repeat): asked per library and the libraries of an
        # SGLang env export ~700k names
        return any(map(str.startswith, self.exports, repeat("PyInit_")))


def _split_path_list(value: str) -> tuple[str, ...]:
    return tuple(p for p in value.split(":") if p)


def _read_table(stream: BinaryIO, offset: int, size: int) -> bytes:
    stream.seek(offset)
    data = stream.read(size)
    if len(data) != size:
        raise ELFError(f"section at offset {offset} runs past the end of the file (truncated?)")
    return data


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", "replace")


def read_elf(path: Path) -> ElfObject:
    """Parse the dynamic-linking view of `path`; ElfReadError on anything unreadable."""
    try:
        with path.open("rb") as stream:
            return _read(path, stream)
    except ElfReadError:
        raise
    except (ELFError, OSError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise ElfReadError(path, f"{type(exc).__name__}: {exc}") from None
    except Exception as exc:  # pyelftools raises construct errors on truncated files
        raise ElfReadError(path, f"{type(exc).__name__}: {exc}") from None


@dataclass(frozen=True)
class SectionHeader:
    index: int
    name: str
    type: int
    offset: int
    size: int
    link: int
    flags: int = 0  # sh_flags (SHF_ALLOC, SHF_EXECINSTR, ...)
    info: int = 0  # sh_info (the entry count of the GNU version sections)


SHT_PROGBITS = 1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
DT_NULL = 0
DT_NEEDED = 1
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29
SHT_DYNSYM = 11
SHT_DYNAMIC = 6
SHT_GNU_VERDEF = 0x6FFFFFFD
SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_GNU_VERSYM = 0x6FFFFFFF


@dataclass(frozen=True)
class ElfHeader:
    """The ELF header fields the checks use (little-endian files; the only kind on x86_64)."""

    elf_class: int  # 32 or 64
    elf_type: int
    machine: int
    flags: int
    abi_version: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int


EM_CUDA = 190


def read_header(stream: BinaryIO) -> ElfHeader:
    """Parse the ELF header with struct: building pyelftools' `construct` structs for each of
    ~500 files of an SGLang env cost about a second on its own."""
    stream.seek(0)
    ident = stream.read(16)
    if len(ident) < 16 or ident[:4] != b"\x7fELF":
        raise ELFError("not an ELF file (bad magic or truncated)")
    if ident[5] != 1:
        raise ELFError("big-endian ELF is not supported")
    is64 = ident[4] == 2
    fmt = "<HHIQQQIHHHHHH" if is64 else "<HHIIIIIHHHHHH"
    rest = stream.read(struct.calcsize(fmt))
    if len(rest) < struct.calcsize(fmt):
        raise ELFError("ELF header truncated")
    (
        etype,
        machine,
        _ver,
        _entry,
        _phoff,
        shoff,
        flags,
        _ehsize,
        _phentsize,
        _phnum,
        shentsize,
        shnum,
        shstrndx,
    ) = struct.unpack(fmt, rest)
    return ElfHeader(
        64 if is64 else 32, etype, machine, flags, ident[8], shoff, shentsize, shnum, shstrndx
    )


def section_headers(header: ElfHeader, stream: BinaryIO) -> list[SectionHeader]:
    """All section headers from one read of the table (pyelftools builds an object per
    section through `construct`, which dominated the run time on large envs)."""
    shoff, entsize, count, strndx = header.shoff, header.shentsize, header.shnum, header.shstrndx
    if not shoff or not count:
        return []
    table = _read_table(stream, shoff, entsize * count)
    fmt = "<IIQQQQIIQQ" if header.elf_class == 64 else "<IIIIIIIIII"
    rows = [struct.unpack_from(fmt, table, i * entsize) for i in range(count)]
    # (name, type, flags, addr, offset, size, link, info, align, entsize); 32-bit order is the same
    if strndx >= count:
        raise ELFError(f"e_shstrndx {strndx} out of range")
    names = _read_table(stream, rows[strndx][4], rows[strndx][5])
    return [
        SectionHeader(i, _cstr(names, r[0]), r[1], r[4], r[5], r[6], r[2], r[7])
        for i, r in enumerate(rows)
    ]


def _string_starts(strtab: bytes) -> dict[int, bytes]:
    starts: dict[int, bytes] = {}
    pos = 0
    for part in strtab.split(b"\0"):
        starts[pos] = part
        pos += len(part) + 1
    return starts


def _names(strtab: bytes, offsets: list[int], starts: dict[int, bytes]) -> list[str]:
    """Decode many string-table offsets at once: most point at the start of a string."""
    out: list[str] = []
    for off in offsets:
        raw = starts.get(off)
        if raw is None:  # a suffix shared with a longer string
            end = strtab.find(b"\0", off)
            raw = strtab[off : end if end >= 0 else len(strtab)]
        out.append(raw.decode("utf-8", "replace"))
    return out


SHT_STRTAB = 3
_VERDEF = struct.Struct(
    "<HHHHIII"
)  # vd_version, vd_flags, vd_ndx, vd_cnt, vd_hash, vd_aux, vd_next
_VERDAUX = struct.Struct("<II")  # vda_name, vda_next
_VERNEED = struct.Struct("<HHIII")  # vn_version, vn_cnt, vn_file, vn_aux, vn_next
_VERNAUX = struct.Struct("<IHHII")  # vna_hash, vna_flags, vna_other, vna_name, vna_next


def _at(stream: BinaryIO, offset: int, layout: struct.Struct) -> tuple[int, ...]:
    return layout.unpack(_read_table(stream, offset, layout.size))


def _linked_strings(stream: BinaryIO, headers: list[SectionHeader], h: SectionHeader) -> bytes:
    if h.link >= len(headers) or headers[h.link].type != SHT_STRTAB:
        raise ELFError(f"section {h.name}: sh_link {h.link} is not a string table")
    return _read_table(stream, headers[h.link].offset, headers[h.link].size)


def _verdefs(
    stream: BinaryIO, headers: list[SectionHeader], h: SectionHeader
) -> list[tuple[int, int, list[str]]]:
    """(vd_flags, vd_ndx, names) of each of the sh_info entries of a GNU version definition
    section, walked the way glibc and pyelftools walk it (vd_aux/vda_next/vd_next offsets,
    each entry read from the file wherever it points)."""
    strs = _linked_strings(stream, headers, h)
    out: list[tuple[int, int, list[str]]] = []
    entry = h.offset
    for _ in range(h.info):
        _v, flags, ndx, cnt, _hash, aux, nxt = _at(stream, entry, _VERDEF)
        if cnt <= 0:
            raise ELFError(f"version definition at {entry} has no auxiliary entries")
        names: list[str] = []
        where = entry + aux
        for _ in range(cnt):
            name, aux_next = _at(stream, where, _VERDAUX)
            names.append(_cstr(strs, name))
            where += aux_next
        out.append((flags, ndx, names))
        entry += nxt
    return out


def _verneeds(
    stream: BinaryIO, headers: list[SectionHeader], h: SectionHeader
) -> list[tuple[str, list[tuple[int, str]]]]:
    """(file, [(vna_other, version name)]) of each of the sh_info entries of a GNU version
    needed section (vn_aux/vna_next/vn_next offsets)."""
    strs = _linked_strings(stream, headers, h)
    out: list[tuple[str, list[tuple[int, str]]]] = []
    entry = h.offset
    for _ in range(h.info):
        _v, cnt, file, aux, nxt = _at(stream, entry, _VERNEED)
        if cnt <= 0:
            raise ELFError(f"version need at {entry} has no auxiliary entries")
        auxes: list[tuple[int, str]] = []
        where = entry + aux
        for _ in range(cnt):
            _hash, _flags, other, name, aux_next = _at(stream, where, _VERNAUX)
            auxes.append((other, _cstr(strs, name)))
            where += aux_next
        out.append((_cstr(strs, file), auxes))
        entry += nxt
    return out


def _read(path: Path, stream: BinaryIO) -> ElfObject:
    header = read_header(stream)
    headers = section_headers(header, stream)
    by_type: dict[int, SectionHeader] = {}
    for h in headers:
        by_type.setdefault(h.type, h)
    needed, rpath, runpath, soname = _dynamic(stream, header, headers, by_type.get(SHT_DYNAMIC))
    version_defs, version_needs, needs_by_file, versym = _versions(stream, headers, by_type)
    imports, exports, multi = _symbols(
        stream, header, headers, by_type.get(SHT_DYNSYM), versym, version_needs
    )
    return ElfObject(
        path=path,
        machine=str(header.machine),
        elf_class=header.elf_class,
        elf_type=str(header.elf_type),
        soname=soname,
        needed=needed,
        rpath=rpath,
        runpath=runpath,
        imports=tuple(imports),
        exports=exports,
        multi=multi,
        version_names=version_defs,
        version_defs=frozenset(version_defs.values()),
        version_needs={k: frozenset(v) for k, v in needs_by_file.items()},
    )


def _dynamic(
    stream: BinaryIO, header: ElfHeader, headers: list[SectionHeader], dyn: SectionHeader | None
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], str | None]:
    """(DT_NEEDED names, DT_RPATH, DT_RUNPATH, DT_SONAME) of the dynamic section."""
    needed: list[str] = []
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    soname: str | None = None
    if dyn is None or dyn.link >= len(headers):
        return (), rpath, runpath, soname
    # Elf_Dyn is (d_tag, d_val) in the file's word size; strings live in the linked .dynstr.
    fmt = "<qQ" if header.elf_class == 64 else "<iI"
    size = struct.calcsize(fmt)
    raw = _read_table(stream, dyn.offset, dyn.size)
    strs_h = headers[dyn.link]
    strs = _read_table(stream, strs_h.offset, strs_h.size)
    for tag, value in struct.iter_unpack(fmt, raw[: len(raw) - len(raw) % size]):
        if tag == DT_NULL:
            break
        if tag == DT_NEEDED:
            needed.append(_cstr(strs, value))
        elif tag == DT_RPATH:
            rpath = _split_path_list(_cstr(strs, value))
        elif tag == DT_RUNPATH:
            runpath = _split_path_list(_cstr(strs, value))
        elif tag == DT_SONAME:
            soname = _cstr(strs, value) or None
    return tuple(needed), rpath, runpath, soname


def _versions(
    stream: BinaryIO, headers: list[SectionHeader], by_type: dict[int, SectionHeader]
) -> tuple[dict[int, str], dict[int, tuple[str, str]], dict[str, set[str]], np.ndarray | None]:
    """(version index -> name defined, version index -> (file, name) needed, file -> names
    needed from it, the .gnu.version array or None) of the GNU version sections."""
    version_defs: dict[int, str] = {}
    version_needs: dict[int, tuple[str, str]] = {}
    needs_by_file: dict[str, set[str]] = {}
    verdef_h = by_type.get(SHT_GNU_VERDEF)
    verneed_h = by_type.get(SHT_GNU_VERNEED)
    if verdef_h is not None:
        for flags, ndx, names in _verdefs(stream, headers, verdef_h):
            if names and not (flags & 0x1):  # VER_FLG_BASE names the file
                version_defs[ndx] = names[0]
    if verneed_h is not None:
        for file, auxes in _verneeds(stream, headers, verneed_h):
            for other, name in auxes:
                version_needs[other] = (file, name)
                needs_by_file.setdefault(file, set()).add(name)
    versym_h = by_type.get(SHT_GNU_VERSYM)
    versym: np.ndarray | None = None
    if versym_h is not None:
        versym = np.frombuffer(_read_table(stream, versym_h.offset, versym_h.size), dtype="<u2")
    return version_defs, version_needs, needs_by_file, versym


def _symbols(
    stream: BinaryIO,
    header: ElfHeader,
    headers: list[SectionHeader],
    dynsym: SectionHeader | None,
    versym: np.ndarray | None,
    version_needs: dict[int, tuple[str, str]],
) -> tuple[list[Import], dict[str, int], dict[str, tuple[int, ...]]]:
    """(imports, exports -> version index, names exported at several versions) of the dynamic
    symbol table: global, weak and unique symbols with a name; hidden definitions left out."""
    imports: list[Import] = []
    if dynsym is None or not dynsym.size or dynsym.link >= len(headers):
        return imports, {}, {}
    strtab_h = headers[dynsym.link]
    strtab = _read_table(stream, strtab_h.offset, strtab_h.size)
    raw = _read_table(stream, dynsym.offset, dynsym.size)
    dtype = _SYM64 if header.elf_class == 64 else _SYM32
    count = len(raw) // dtype.itemsize
    syms = np.frombuffer(raw, dtype=dtype, count=count)
    if versym is not None and len(versym) >= count:
        vers = versym[:count]
    else:
        vers = np.ones(count, dtype="<u2")
    bind = syms["info"] >> 4
    visibility = syms["other"] & 0x3
    undefined = syms["shndx"] == SHN_UNDEF
    wanted = np.isin(bind, (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE)) & (syms["name"] != 0)
    # Hidden/internal definitions are not visible to other objects.
    exported = wanted & ~undefined & ((visibility == 0) | (visibility == 3))
    imp_idx = np.flatnonzero(wanted & undefined)
    starts = _string_starts(strtab)
    imp_names = _names(strtab, syms["name"][imp_idx].tolist(), starts)
    imp_vers = (vers[imp_idx] & 0x7FFF).tolist()
    imp_weak = (bind[imp_idx] == STB_WEAK).tolist()
    for name, ver, weak in zip(imp_names, imp_vers, imp_weak, strict=True):
        file_version = version_needs.get(ver)
        imports.append(
            Import(
                name=name,
                version=file_version[1] if file_version else None,
                version_file=file_version[0] if file_version else None,
                weak=weak,
            )
        )
    exp_idx = np.flatnonzero(exported)
    exp_names = _names(strtab, syms["name"][exp_idx].tolist(), starts)
    exp_vers = vers[exp_idx].tolist()
    exports = dict(zip(exp_names, exp_vers, strict=True))
    multi: dict[str, tuple[int, ...]] = {}
    if len(exports) != len(exp_names):  # several versions of one name (libc, libstdc++)
        grouped: dict[str, list[int]] = {}
        for name, ver in zip(exp_names, exp_vers, strict=True):
            grouped.setdefault(name, []).append(ver)
        multi = {k: tuple(v) for k, v in grouped.items() if len(v) > 1}
    return imports, exports, multi


def read_elf_bytes(data: bytes, path: Path) -> ElfObject:
    """The same facts from bytes already in memory (a wheel member fetched over HTTP); `path`
    is where the object would be installed, and becomes ElfObject.path."""
    return read_elf_stream(io.BytesIO(data), path)


def read_elf_stream(stream: BinaryIO, path: Path) -> ElfObject:
    """The same facts from a seekable stream (one that fetches byte ranges on demand, say).
    An error the stream raises stays the ElfReadError's `__context__`."""
    try:
        return _read(path, stream)
    except ElfReadError:
        raise
    except Exception as exc:  # the same set read_elf maps, construct errors included
        raise ElfReadError(path, f"{type(exc).__name__}: {exc}") from None


def is_elf(path: Path) -> bool:
    """True for an ELF file; OSError (unreadable) propagates so the caller can report it."""
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def satisfies(obj: ElfObject, want: Import) -> bool:
    """Would `obj` satisfy `want` under glibc's versioned lookup rules?

    A versioned reference matches a definition of that version; an object without any version
    definitions satisfies any version (glibc accepts it, dl-lookup.c check_match). An
    unversioned reference takes the default definition (`foo@@V` or unversioned), or a hidden
    one only when it is the sole definition of the name.
    """
    defs = obj.multi.get(want.name)
    if defs is None:
        one = obj.exports.get(want.name)
        if one is None:
            return False
        defs = (one,)
    if want.version is not None:
        if not obj.has_versions:
            return True
        for raw in defs:
            ndx = raw & 0x7FFF
            if ndx <= VER_NDX_GLOBAL or obj.version_names.get(ndx) == want.version:
                return True
        return False
    if any(not raw & VERSYM_HIDDEN for raw in defs):
        return True
    return len(defs) == 1
