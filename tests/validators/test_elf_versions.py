"""The GNU version sections read with struct (elf_symbols._verdefs/_verneeds; pyelftools' set-up
per file cost ~45% of reading an SGLang env's 530 objects): the same definitions and needs as
pyelftools reads, on a gcc-built library with a version script and on the host's libstdc++ and
libc, and a malformed section is an ElfReadError, not a wrong answer."""

from __future__ import annotations

import ctypes.util
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection

from tests.validators import elf_env
from validators.elf.elf_symbols import ElfReadError, read_elf, read_header, section_headers

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")


def _pyelftools(path: Path) -> tuple[dict[int, str], dict[str, frozenset[str]]]:
    defs: dict[int, str] = {}
    needs: dict[str, set[str]] = {}
    with path.open("rb") as f:
        elf = ELFFile(f)
        for section in elf.iter_sections():
            if isinstance(section, GNUVerDefSection):
                for verdef, aux in section.iter_versions():
                    names = [a.name for a in aux]
                    if names and not verdef["vd_flags"] & 1:
                        defs[verdef["vd_ndx"]] = names[0]
            elif isinstance(section, GNUVerNeedSection):
                for verneed, aux in section.iter_versions():
                    for a in aux:
                        needs.setdefault(str(verneed.name), set()).add(a.name)
    return defs, {k: frozenset(v) for k, v in needs.items()}


def _host_libraries() -> list[Path]:
    out = []
    for name in ("stdc++", "c", "m"):
        found = ctypes.util.find_library(name)
        for folder in (
            "/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
            "/lib64",
            "/usr/lib64",
        ):
            if found and (Path(folder) / found).is_file():
                out.append((Path(folder) / found).resolve())
                break
    return out


def test_version_sections_read_as_pyelftools_reads_them(tmp_path: Path) -> None:
    script = elf_env.version_script(
        tmp_path, "v.map", "V_1 { global: a; local: *; };\nV_2 { global: b; } V_1;\n"
    )
    lib = elf_env.gxx(
        tmp_path / "libv.so",
        '#include <string>\nextern "C" int a(void){return std::string("x").size();}\n'
        'extern "C" int b(void){return 2;}\n',
        script,
        "-Wl,-soname,libv.so",
    )
    libs = [lib, *_host_libraries()]
    assert len(libs) >= 2, "no host libstdc++/libc found"
    for path in libs:
        obj = read_elf(path)
        defs, needs = _pyelftools(path)
        assert obj.version_names == defs, path
        assert obj.version_needs == needs, path
    ours = read_elf(lib)
    assert set(ours.version_names.values()) == {"V_1", "V_2"}
    assert "GLIBCXX_3.4" in " ".join(ours.version_needs.get("libstdc++.so.6", ()))


def test_a_version_section_pointing_outside_the_file_is_unreadable(tmp_path: Path) -> None:
    lib = elf_env.gcc(tmp_path / "libw.so", '#include <stdio.h>\nint w(void){return puts("w");}\n')
    data = bytearray(lib.read_bytes())
    with lib.open("rb") as f:
        header = read_header(f)
        verneed = next(h for h in section_headers(header, f) if h.type == 0x6FFFFFFE)
    # vn_aux of the first entry (offset 8 in Elf_Verneed) sent past the end of the file
    data[verneed.offset + 8 : verneed.offset + 12] = (len(data) * 2).to_bytes(4, "little")
    broken = tmp_path / "libbroken.so"
    broken.write_bytes(bytes(data))
    assert read_elf(lib).version_needs["libc.so.6"]  # puts@GLIBC_2.2.5
    with pytest.raises(ElfReadError):
        read_elf(broken)
