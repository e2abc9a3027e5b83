"""The section table rebuilt from PT_DYNAMIC gives the reader the same facts as the real one."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest

from tests.validators import elf_env
from validators.elf.elf_symbols import read_elf, read_elf_stream
from validators.lockcheck.synthetic_sections import CannotSynthesize, synthesize

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")


class Overlay(io.BytesIO):
    """The file's bytes with patches (and patches past its end) served on top."""

    def __init__(self, data: bytes, patches: dict[int, bytes]) -> None:
        end = max([len(data), *(at + len(p) for at, p in patches.items())])
        buf = bytearray(data) + bytearray(end - len(data))
        for at, patch in patches.items():
            buf[at : at + len(patch)] = patch
        super().__init__(bytes(buf))


def _phdrs(data: bytes) -> list[tuple[int, ...]]:
    (phoff,) = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    rows = [struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize) for i in range(phnum)]
    return [(r[0], r[2], r[5], r[3], r[6]) for r in rows]


@pytest.mark.parametrize("hash_style", ["gnu", "sysv", "both"])
def test_rebuilt_table_reads_like_the_real_one(tmp_path: Path, hash_style: str) -> None:
    site = elf_env.new_env(tmp_path / "env")
    _, ext = elf_env.versioned_pair(site, tmp_path / "build", old_provider=False)
    lib = elf_env.gcc(
        tmp_path / "lib" / "libvers.so.1",
        elf_env.VERS_C,
        "-Wl,-soname,libvers.so.1",
        f"-Wl,--hash-style={hash_style}",
        elf_env.version_script(tmp_path, "v.map", elf_env.VERS_MAP),
    )
    for path in (ext, lib):
        data = path.read_bytes()
        phdrs = _phdrs(data)
        dyn = next((p[1], p[2]) for p in phdrs if p[0] == 2)
        patches = synthesize(lambda o, s, d=data: d[o : o + s], phdrs, dyn, len(data))
        rebuilt = read_elf_stream(Overlay(data, patches), path)
        real = read_elf(path)
        assert rebuilt.exports == real.exports and rebuilt.imports == real.imports
        assert rebuilt.needed == real.needed and rebuilt.soname == real.soname
        assert rebuilt.rpath == real.rpath and rebuilt.runpath == real.runpath
        assert rebuilt.version_defs == real.version_defs
        assert rebuilt.version_needs == real.version_needs


def test_a_dynamic_section_without_tables_is_refused() -> None:
    empty_dynamic = struct.pack("<qQ", 0, 0)
    with pytest.raises(CannotSynthesize):
        synthesize(lambda o, s: empty_dynamic[:s], [], (0, 16), 100)
