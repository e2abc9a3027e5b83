"""Read what the dynamic loader reads from an ELF shared object: DT_NEEDED, RPATH/RUNPATH,
the dynamic symbol table with GNU symbol versions, and weak bindings.

pyelftools parses the headers, the dynamic section and the version sections (all small);
the dynamic symbol table itself is decoded in bulk with numpy, because libtorch_cpu.so holds
~100k dynamic symbols and a per-symbol Python object would cost seconds per library.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import BinaryIO

import numpy as np
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

STB_GLOBAL = 1
STB_WEAK = 2
STB_GNU_UNIQUE = 10
SHN_UNDEF = 0
VERSYM_HIDDEN = 0x8000
VER_NDX_LOCAL = 0
VER_NDX_GLOBAL = 1

_SYM64 = np.dtype(
    [("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"), ("value", "<u8"), ("size", "<u8")]
)
_SYM32 = np.dtype(
    [("name", "<u4"), ("value", "<u4"), ("size", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2")]
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


@dataclass(frozen=True)
class Definition:
    version: str | None
    hidden: bool  # `foo@V` (non-default) rather than `foo@@V`


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
    exports: dict[str, tuple[Definition, ...]]
    version_defs: frozenset[str]
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
        return any(n.startswith("PyInit_") for n in self.exports)


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


def _read(path: Path, stream: BinaryIO) -> ElfObject:
    elf = ELFFile(stream)
    needed: list[str] = []
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    soname: str | None = None
    dynsym = elf.get_section_by_name(".dynsym")
    dynamic = elf.get_section_by_name(".dynamic")
    if dynamic is not None:
        for tag in dynamic.iter_tags():
            kind = tag.entry.d_tag
            if kind == "DT_NEEDED":
                needed.append(tag.needed)
            elif kind == "DT_RPATH":
                rpath = _split_path_list(tag.rpath)
            elif kind == "DT_RUNPATH":
                runpath = _split_path_list(tag.runpath)
            elif kind == "DT_SONAME":
                soname = tag.soname

    version_defs: dict[int, str] = {}
    version_needs: dict[int, tuple[str, str]] = {}
    needs_by_file: dict[str, set[str]] = {}
    versym: np.ndarray | None = None
    for section in elf.iter_sections():
        stype = section["sh_type"]
        if stype == "SHT_GNU_verdef":
            for verdef, aux_iter in section.iter_versions():
                names = [aux.name for aux in aux_iter]
                if names and not (verdef["vd_flags"] & 0x1):  # VER_FLG_BASE names the file
                    version_defs[verdef["vd_ndx"]] = names[0]
        elif stype == "SHT_GNU_verneed":
            for verneed, aux_iter in section.iter_versions():
                for aux in aux_iter:
                    version_needs[aux["vna_other"]] = (verneed.name, aux.name)
                    needs_by_file.setdefault(verneed.name, set()).add(aux.name)
        elif stype == "SHT_GNU_versym":
            raw = _read_table(stream, section["sh_offset"], section["sh_size"])
            versym = np.frombuffer(raw, dtype="<u2")

    imports: list[Import] = []
    exports: dict[str, list[Definition]] = {}
    if dynsym is not None and dynsym["sh_size"]:
        strtab_section = elf.get_section(dynsym["sh_link"])
        strtab = _read_table(stream, strtab_section["sh_offset"], strtab_section["sh_size"])
        raw = _read_table(stream, dynsym["sh_offset"], dynsym["sh_size"])
        dtype = _SYM64 if elf.elfclass == 64 else _SYM32
        count = len(raw) // dtype.itemsize
        syms = np.frombuffer(raw, dtype=dtype, count=count)
        bind = syms["info"] >> 4
        visibility = syms["other"] & 0x3
        undefined = syms["shndx"] == SHN_UNDEF
        wanted = np.isin(bind, (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE)) & (syms["name"] != 0)
        # Hidden/internal definitions are not visible to other objects.
        exported = wanted & ~undefined & ((visibility == 0) | (visibility == 3))
        for idx in np.flatnonzero(wanted & undefined).tolist():
            name = _cstr(strtab, int(syms["name"][idx]))
            ver = int(versym[idx]) & 0x7FFF if versym is not None and idx < len(versym) else 1
            file_version = version_needs.get(ver)
            imports.append(
                Import(
                    name=name,
                    version=file_version[1] if file_version else None,
                    version_file=file_version[0] if file_version else None,
                    weak=int(bind[idx]) == STB_WEAK,
                )
            )
        for idx in np.flatnonzero(exported).tolist():
            name = _cstr(strtab, int(syms["name"][idx]))
            raw_ver = int(versym[idx]) if versym is not None and idx < len(versym) else 1
            ndx = raw_ver & 0x7FFF
            exports.setdefault(name, []).append(
                Definition(version=version_defs.get(ndx), hidden=bool(raw_ver & VERSYM_HIDDEN))
            )

    return ElfObject(
        path=path,
        machine=str(elf["e_machine"]),
        elf_class=elf.elfclass,
        elf_type=str(elf["e_type"]),
        soname=soname,
        needed=tuple(needed),
        rpath=rpath,
        runpath=runpath,
        imports=tuple(imports),
        exports={k: tuple(v) for k, v in exports.items()},
        version_defs=frozenset(version_defs.values()),
        version_needs={k: frozenset(v) for k, v in needs_by_file.items()},
    )


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def satisfies(obj: ElfObject, want: Import) -> bool:
    """Would `obj` satisfy `want` under glibc's versioned lookup rules?

    A versioned reference matches a definition of that version; an object without any version
    definitions satisfies any version (glibc accepts it, dl-lookup.c check_match). An
    unversioned reference takes the default definition (`foo@@V` or unversioned), or a hidden
    one only when it is the sole definition of the name.
    """
    defs = obj.exports.get(want.name)
    if not defs:
        return False
    if want.version is not None:
        if not obj.has_versions:
            return True
        return any(d.version == want.version or d.version is None for d in defs)
    if any(not d.hidden for d in defs):
        return True
    return len(defs) == 1
