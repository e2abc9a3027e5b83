"""Facts about one ELF object, extracted once, from a file or from bytes.

This is the seam between "read an object" and "resolve a set of objects": the resolver
(`AbiChecker` over an `ObjectSource`) only ever sees `ElfObject`s, so facts extracted from wheel
members fetched over HTTP resolve exactly like an installed tree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from validators.elf.elf_symbols import ElfObject, Import
from validators.elf.fatbin import GpuCode
from validators.elf.source import DiskSource, FactsSource, ObjectSource

_PY_TAG = re.compile(r"\.cpython-(\d)(\d+)[a-z]*-")


def python_tag(name: str) -> tuple[int, int] | None:
    """(3, 10) for `_C.cpython-310-x86_64-linux-gnu.so`; None for abi3 or untagged names."""
    match = _PY_TAG.search(name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def is_python_extension(obj: ElfObject) -> bool:
    """What `import` dlopens (a cpython-/abi3 file name or a PyInit_ export), as opposed to a
    library or a plugin loaded with ctypes / torch.ops.load_library."""
    name = obj.path.name
    if ".cpython-" in name or ".abi3." in name or name.endswith(".abi3.so"):
        return True
    return obj.exports_python_module()


@dataclass(frozen=True)
class ObjectFacts:
    """One object: its dynamic-linking view (`elf`: soname, DT_NEEDED, RPATH/RUNPATH, defined
    symbols with versions, undefined symbols with versions and binding) and its GPU code."""

    elf: ElfObject
    gpu_codes: tuple[GpuCode, ...] = ()

    @property
    def path(self) -> Path:
        return self.elf.path

    @property
    def soname(self) -> str | None:
        return self.elf.soname

    @property
    def needed(self) -> tuple[str, ...]:
        return self.elf.needed

    @property
    def imports(self) -> tuple[Import, ...]:
        return self.elf.imports

    @property
    def python_extension(self) -> bool:
        return is_python_extension(self.elf)

    @property
    def python_tag(self) -> tuple[int, int] | None:
        return python_tag(self.elf.path.name)


def source_from_facts(
    facts: Iterable[ObjectFacts],
    roots: tuple[Path, ...],
    links: Mapping[Path, Path] | None = None,
    fallback: ObjectSource | None = None,
    *,
    host_fallback: bool = True,
) -> FactsSource:
    """An ObjectSource serving `facts` under `roots` (a virtual env root), the host's disk
    (system libraries) elsewhere unless host_fallback=False."""
    if fallback is None and host_fallback:
        fallback = DiskSource()
    return FactsSource({f.path: f.elf for f in facts}, roots, dict(links or {}), fallback)
