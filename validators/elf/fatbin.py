"""List the GPU code inside kernel libraries: SASS (cubin) and PTX entries of the fatbins in
shared objects, and standalone `.cubin` files (e.g. flashinfer-cubin).

Fatbins sit in `.nv_fatbin` and, in libraries that register their kernels themselves (cuFFT),
anywhere in allocated data: every allocated, non-executable PROGBITS section is searched for
the fatbin magic (8-byte aligned, version 1, 16-byte header, body inside the section). What
looks like a fatbin but cannot be read (another header version, a body past its section, an
entry kind other than PTX, SASS and LTO IR) is reported as unknown, never as "no code".

Only headers are read (payloads are skipped by seeking). Layout (confirmed with nvcc 13.0,
tests/validators/fixtures): a 16-byte header (magic 0xBA55ED50, u16 version, u16 header size,
u64 body size), then entries of u16 kind (1 PTX, 2 ELF/SASS), u16 version, u32 header size,
u64 padded payload size, the SM number at +28 and flags at +40 (0x100000 an arch-specific `a`
target, 0x200000 a family `f` target).

Standalone cubins are ELF with e_machine EM_CUDA: the SM number is in e_flags bits 8-15 (ELF
ABI version >= 8, CUDA 12.8+) or bits 0-7 (older); the `a`/`f` suffix is read from the ptxas
command line in the `.note.nv.tkinfo` note, else the file name.
"""

from __future__ import annotations

import io
import mmap
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from elftools.common.exceptions import ELFError

from validators.elf.elf_symbols import (
    EM_CUDA,
    SHF_ALLOC,
    SHF_EXECINSTR,
    SHT_PROGBITS,
    ElfReadError,
    SectionHeader,
    read_header,
    section_headers,
)

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_ELF = 2
KIND_LTO_IR = 8  # NVVM LTO IR (`code=lto_90`): linked by nvJitLink at run time, not run as is
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000

Suffix = Literal["", "a", "f", "?"]


@dataclass(frozen=True, order=True)
class GpuCode:
    """One code object: SASS for sm_XY[a|f] or PTX for compute_XY[a|f]."""

    kind: Literal["sass", "ptx"]
    sm: int
    suffix: Suffix = ""

    @property
    def cc(self) -> tuple[int, int]:
        return self.sm // 10, self.sm % 10

    def label(self) -> str:
        prefix = "sm" if self.kind == "sass" else "compute"
        return f"{prefix}_{self.sm}{self.suffix}"

    def runs_on(self, major: int, minor: int) -> bool:
        """Can a device of compute capability major.minor run this (SASS) or JIT it (PTX)?

        SASS sm_XY runs on the same major with minor >= Y; sm_XYa only on exactly X.Y;
        sm_XYf on the same family (major X, minor >= Y). PTX compute_XY JITs forward to any
        CC >= X.Y; compute_XYa only to X.Y; compute_XYf within major X. Unknown suffix: exact.
        """
        cmaj, cmin = self.cc
        if self.suffix in ("a", "?"):
            return (major, minor) == (cmaj, cmin)
        if self.kind == "sass" or self.suffix == "f":
            return major == cmaj and minor >= cmin
        return (major, minor) >= (cmaj, cmin)


@dataclass(frozen=True)
class CodeScan:
    """The GPU code of one file, and what looked like GPU code but could not be read (each
    with where it is): kernels in a form this reader does not know decide nothing."""

    codes: tuple[GpuCode, ...] = ()
    unknown: tuple[str, ...] = ()


FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
_MAGIC_BYTES = struct.pack("<I", FATBIN_MAGIC)


def may_embed_fatbins(section: SectionHeader) -> bool:
    """An allocated data section (not code, not .bss) other than the fatbin sections: where a
    library keeps fatbins it registers or loads itself. cuFFT 11.2.1.3 and 11.3.0.4 keep a
    408-byte sm_52 stub in `.nv_fatbin` and 17,607 / 22,705 fatbins (sm_50..sm_90 SASS,
    compute_90 PTX) in `.data`; older builds used `.ldata`."""
    return (
        section.type == SHT_PROGBITS
        and bool(section.flags & SHF_ALLOC)
        and not section.flags & SHF_EXECINSTR
        and section.name not in FATBIN_SECTIONS
        and section.size > 0
    )


def fatbin_entries(stream: BinaryIO, start: int, size: int) -> list[GpuCode]:
    """The code objects of the fatbins in stream[start:start+size] (a `.nv_fatbin` section)."""
    return _entries(stream, start, size, [])


def _entries(stream: BinaryIO, start: int, size: int, unknown: list[str]) -> list[GpuCode]:
    found: list[GpuCode] = []
    pos, end = start, start + size
    while pos + 16 <= end:
        stream.seek(pos)
        header = stream.read(16)
        if len(header) < 16:
            raise ElfReadError(Path(getattr(stream, "name", "?")), "fatbin header truncated")
        magic, version, header_size, body_size = struct.unpack("<IHHQ", header)
        if magic != FATBIN_MAGIC:
            pos += 8  # fatbins in one section are 8-byte aligned; skip padding
            continue
        if version != 1 or header_size != 16:
            unknown.append(f"fatbin at {pos:#x}: header version {version}, size {header_size}")
            pos += 8
            continue
        entry = pos + header_size
        body_end = entry + body_size
        if body_end > end:
            unknown.append(f"fatbin at {pos:#x}: body of {body_size} bytes runs past its section")
        while entry + 48 <= min(body_end, end):
            stream.seek(entry)
            raw = stream.read(48)
            if len(raw) < 48:
                raise ElfReadError(Path(getattr(stream, "name", "?")), "fatbin entry truncated")
            kind, _ver, ehsize, payload = struct.unpack_from("<HHIQ", raw, 0)
            (sm,) = struct.unpack_from("<I", raw, 28)
            (flags,) = struct.unpack_from("<Q", raw, 40)
            if ehsize == 0:
                break
            suffix: Suffix = (
                "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
            )
            if kind in (KIND_PTX, KIND_ELF):
                found.append(GpuCode("ptx" if kind == KIND_PTX else "sass", sm, suffix))
            elif kind != KIND_LTO_IR:
                unknown.append(f"fatbin entry at {entry:#x}: kind {kind} (sm {sm})")
            entry += ehsize + payload
        pos = max(body_end, pos + 16)
        pos = (pos + 7) & ~7
    return found


def _embedded(stream: BinaryIO, start: int, size: int, unknown: list[str]) -> list[GpuCode]:
    if isinstance(stream, io.BytesIO):  # bytes already in memory (a wheel member)
        return _embedded_in(stream, stream.getvalue(), start, size, unknown)
    try:
        mapped = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
    except (ValueError, OSError, io.UnsupportedOperation):
        unknown.append(f"bytes {start:#x}+{size:#x} could not be mapped to look for fatbins")
        return []
    with mapped:
        return _embedded_in(stream, mapped, start, size, unknown)


def _embedded_in(
    stream: BinaryIO, data: mmap.mmap | bytes, start: int, size: int, unknown: list[str]
) -> list[GpuCode]:
    found: list[GpuCode] = []
    end = min(start + size, len(data))
    pos = data.find(_MAGIC_BYTES, start, end)
    while pos >= 0:
        if pos % 8 == 0 and pos + 16 <= end:
            _magic, version, header_size, body_size = struct.unpack_from("<IHHQ", data, pos)
            if version == 1 and header_size == 16 and pos + 16 + body_size <= end:
                found.extend(_entries(stream, pos, 16 + body_size, unknown))
                pos = data.find(_MAGIC_BYTES, pos + 16 + body_size, end)
                continue
            if header_size == 16:  # the magic and a fatbin's header size: not by chance
                unknown.append(
                    f"fatbin at {pos:#x}: body of {body_size} bytes runs past its section"
                    if version == 1
                    else f"fatbin at {pos:#x}: header version {version}"
                )
        pos = data.find(_MAGIC_BYTES, pos + 4, end)
    return found


def fatbin_codes(path: Path) -> list[GpuCode]:
    """Code objects of every fatbin in an ELF file; [] when it has none."""
    return list(gpu_code(path).codes)


def gpu_code(path: Path) -> CodeScan:
    """The code objects of every fatbin in an ELF file (fatbin sections and the fatbins a
    library embeds in its data), and the fatbin-like data it could not read."""
    try:
        with path.open("rb") as stream:
            return gpu_code_stream(stream, path)
    except ElfReadError:
        raise
    except OSError as exc:
        raise ElfReadError(path, f"{type(exc).__name__}: {exc}") from None


def fatbin_codes_bytes(data: bytes, path: Path) -> list[GpuCode]:
    """The same from bytes in memory (a wheel member); `path` names it in errors."""
    return list(gpu_code_stream(io.BytesIO(data), path).codes)


def gpu_code_stream(stream: BinaryIO, path: Path) -> CodeScan:
    try:
        header = read_header(stream)
        if header.machine == EM_CUDA:
            stream.seek(0)
            return CodeScan((_cubin_code(path, stream),))
        codes: list[GpuCode] = []
        unknown: list[str] = []
        for section in section_headers(header, stream):
            if section.type != SHT_PROGBITS or not section.size:
                continue
            if section.name in FATBIN_SECTIONS:
                codes.extend(_entries(stream, section.offset, section.size, unknown))
            elif may_embed_fatbins(section):
                codes.extend(_embedded(stream, section.offset, section.size, unknown))
        return CodeScan(tuple(sorted(set(codes))), tuple(dict.fromkeys(unknown)))
    except ElfReadError:
        raise
    except (ELFError, OSError, ValueError, struct.error) as exc:
        raise ElfReadError(path, f"{type(exc).__name__}: {exc}") from None
    except Exception as exc:  # construct errors from pyelftools on truncated files
        raise ElfReadError(path, f"{type(exc).__name__}: {exc}") from None


_ARCH_IN_TEXT = re.compile(r"(?:-arch[= ])?sm_?(\d{2,3})([af]?)\b")


def cubin_code(path: Path) -> GpuCode:
    """The SASS target of a standalone cubin, from its header and its `.note.nv.tkinfo` read
    directly (pyelftools is slow per cubin; hundreds of flashinfer-cubin's cubins have no a/f
    in their names and need the note)."""
    with path.open("rb") as f:
        return _cubin_code(path, f)


def _cubin_code(path: Path, stream: BinaryIO) -> GpuCode:
    stream.seek(0)
    header = read_header(stream)
    sm = (header.flags >> 8) & 0xFF if header.abi_version >= 8 else header.flags & 0xFF
    suffix: Suffix = "?"
    note = next((s for s in section_headers(header, stream) if s.name == ".note.nv.tkinfo"), None)
    if note is not None:
        stream.seek(note.offset)
        text = stream.read(note.size).decode("latin-1")
        match = re.search(r"-arch sm_(\d{2,3})([af]?)", text)
        if match and int(match.group(1)) == sm:
            suffix = match.group(2)  # type: ignore[assignment]
    if suffix == "?":
        match = _ARCH_IN_TEXT.search(path.name.lower())
        if match and int(match.group(1)) == sm:
            suffix = match.group(2)  # type: ignore[assignment]
    return GpuCode("sass", sm, suffix)


def covers(codes: list[GpuCode], major: int, minor: int) -> list[GpuCode]:
    """The code objects a device of CC major.minor can use (SASS first)."""
    return [c for c in codes if c.runs_on(major, minor)]
