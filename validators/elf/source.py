"""Where the resolver gets ELF facts from: files on disk, or facts extracted elsewhere.

The ABI resolver never opens files itself; it asks an `ObjectSource` for a folder listing and
for the parsed facts of one path. `DiskSource` reads the installed tree. `FactsSource` serves
facts the caller already extracted (from wheel bytes fetched over HTTP, say) at virtual paths,
and falls back to another source (the host's disk, for the system libraries) for the rest.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from validators.elf.elf_symbols import ElfObject, ElfReadError, read_elf


class ObjectSource(Protocol):
    """The three questions the resolver asks about the file system."""

    def real_path(self, path: Path) -> Path:
        """The canonical path (symlinks resolved) that identifies the object."""
        ...

    def listdir(self, directory: str) -> frozenset[str]:
        """File names in `directory` (empty when it does not exist)."""
        ...

    def read(self, path: Path) -> ElfObject:
        """The object's facts; ElfReadError when it is not a readable ELF file."""
        ...


class ElfReader(Protocol):
    def elf(self, path: Path) -> ElfObject: ...


@dataclass
class DiskSource:
    """The installed tree: one listdir per folder, one resolve per path (both cached); objects
    through `reader` (file_facts_cache.FileFactsCache: facts kept across runs) when given."""

    reader: ElfReader | None = None
    _real: dict[str, Path] = field(default_factory=dict)
    _listings: dict[str, frozenset[str]] = field(default_factory=dict)
    _read: dict[Path, None] = field(default_factory=dict)  # paths read, in order

    def real_path(self, path: Path) -> Path:
        key = str(path)
        real = self._real.get(key)
        if real is None:
            real = self._real[key] = path.resolve()
        return real

    def listdir(self, directory: str) -> frozenset[str]:
        names = self._listings.get(directory)
        if names is None:
            try:
                names = frozenset(os.listdir(directory))  # noqa: PTH208 (names only, fast)
            except OSError:
                names = frozenset()
            self._listings[directory] = names
        return names

    def listed(self) -> list[str]:
        """The folders listed so far."""
        return list(self._listings)

    def resolved(self) -> dict[str, Path]:
        """Every path resolved so far -> its real path."""
        return dict(self._real)

    def read_paths(self) -> list[Path]:
        """Every path read (or tried) so far."""
        return list(self._read)

    def read(self, path: Path) -> ElfObject:
        self._read[path] = None
        if not path.is_file():
            raise ElfReadError(path, "not a regular file")
        return self.reader.elf(path) if self.reader is not None else read_elf(path)


@dataclass
class FactsSource:
    """Facts extracted elsewhere, served at their (virtual, absolute) paths.

    `objects` maps each path to its facts (ElfObject.path should equal the key). `links` maps
    extra names to a path in `objects` (a wheel's `libfoo.so.1 -> libfoo.so.1.2.3`). Paths not
    under any of `roots` go to `fallback` (DiskSource by default, for /usr/lib and friends);
    `fallback=None` makes the facts the whole world.
    """

    objects: Mapping[Path, ElfObject]
    roots: tuple[Path, ...]
    links: Mapping[Path, Path] = field(default_factory=dict)
    fallback: ObjectSource | None = field(default_factory=DiskSource)
    _dirs: dict[str, set[str]] = field(default_factory=dict, init=False)
    _listings: dict[str, frozenset[str]] = field(default_factory=dict, init=False)
    _root_strs: tuple[str, ...] = field(default=(), init=False)

    def __post_init__(self) -> None:
        self._root_strs = tuple(str(r) for r in self.roots)
        for path in [*self.objects, *self.links]:
            # every folder on the way down lists its child, so folders can be walked too
            child = path
            while child.parent != child and not any(child == r for r in self.roots):
                self._dirs.setdefault(str(child.parent), set()).add(child.name)
                child = child.parent

    def _ours(self, path: Path | str) -> bool:
        # string prefixes: Path.is_relative_to is far slower, and this runs for every path
        text = str(path)
        return any(text == r or text.startswith(r + "/") for r in self._root_strs)

    def real_path(self, path: Path) -> Path:
        path = Path(os.path.normpath(path))  # lexical: RPATH entries hold "$ORIGIN/../lib"
        if self._ours(path):
            return self.links.get(path, path)
        return self.fallback.real_path(path) if self.fallback is not None else path

    def listdir(self, directory: str) -> frozenset[str]:
        hit = self._listings.get(directory)
        if hit is not None:
            return hit
        norm = os.path.normpath(directory)
        if self._ours(norm):
            names = frozenset(self._dirs.get(norm, ()))
        else:
            names = self.fallback.listdir(norm) if self.fallback is not None else frozenset()
        self._listings[directory] = names
        return names

    def read(self, path: Path) -> ElfObject:
        path = Path(os.path.normpath(path))
        if self._ours(path):
            obj = self.objects.get(self.links.get(path, path))
            if obj is None:
                raise ElfReadError(path, "no facts for this path")
            return obj
        if self.fallback is None:
            raise ElfReadError(path, "outside the facts and no fallback source")
        return self.fallback.read(path)

    def paths(self) -> Iterable[Path]:
        return self.objects.keys()
