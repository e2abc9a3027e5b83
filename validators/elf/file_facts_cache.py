"""Facts of installed files, cached across runs by file identity.

An unchanged file's dynamic-linking facts (ElfObject), GPU code (CodeScan) and, per
distribution, the modules its import-time code needs are the same on the next run. A file's
identity is (device, inode, size, mtime_ns): pip and uv write new files (a new inode, an mtime to
the nanosecond), and a hard link shares the identity and the bytes. Not ctime: uv hard-links
installed files from its cache, so any other install of the same wheel changes the link count,
hence the ctime, of every file shared with it.

Entries are JSON (cached_facts.CachedFacts, validated on read) renamed into place; a damaged or
stale entry is a miss. Root: static/ under stackgate's cache root (stackgate/settings.py).
`run_static` uses no cache unless given one (tests stay hermetic); the CLI gives the default one.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from stackgate import dirfd
from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.settings import cache_root
from validators.elf.cached_facts import CachedFacts
from validators.elf.elf_symbols import ElfObject, read_elf
from validators.elf.fatbin import CodeScan, gpu_code

CACHE_VERSION = 2  # 2: identity without ctime
# every ELF file: pyelftools' per-file set-up made the 286 small objects of the cu128 env
# (< 256 KiB) the larger part of a warm run when they were read directly
MIN_SIZE = 0
MAX_ENTRY_BYTES = 256 << 20  # an entry bigger than this is damaged (a miss)
T = TypeVar("T")


def file_identity(path: Path) -> str | None:
    """The identity of the file `path` names (symlinks followed); None if it cannot be stat'd."""
    try:
        st = path.stat()
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def default_root() -> Path:
    return cache_root() / "static"  # stackgate/settings.py: one root for every cache


@dataclass
class FileFactsCache:
    root: Path
    min_size: int = MIN_SIZE  # smaller files are read directly
    hits: int = 0
    misses: int = 0

    @classmethod
    def default(cls) -> FileFactsCache:
        return cls(default_root())

    def _rel(self, kind: str, key: str) -> Path:
        digest = hashlib.sha256(f"{kind}\0{key}".encode()).hexdigest()
        return Path(f"v{CACHE_VERSION}", kind, digest[:2], f"{digest}.json")

    def _read(self, kind: str, key: str) -> bytes | None:
        """An entry's bytes, reached below the root without following a symlink (an entry or
        folder swapped for a link to a planted file is a miss, never read)."""
        try:
            return dirfd.read_bytes_under(self.root, self._rel(kind, key), MAX_ENTRY_BYTES)
        except (BadInput, OSError):
            return None

    def get(self, kind: str, key: str) -> Any:
        return self._counted(self._read(kind, key), json.loads)

    def get_text(self, kind: str, key: str) -> str | None:
        return self._counted(self._read(kind, key), lambda data: data.decode("utf-8"))

    def _counted(self, data: bytes | None, parse: Callable[[bytes], T]) -> T | None:
        """`parse(data)`, a hit; a missing entry or one `parse` refuses is a miss (None)."""
        try:
            value = parse(data) if data is not None else None
        except ValueError:  # UnicodeDecodeError too
            value = None
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, kind: str, key: str, value: Any) -> None:
        self.put_text(kind, key, json.dumps(value))

    def put_text(self, kind: str, key: str, text: str) -> None:
        """Write an entry relative to its folder, opened from the root one component at a
        time (made 0o700, never through a symlink), as a new temp file renamed into place: a
        folder of the cache swapped for a link while a run writes writes nothing there."""
        rel = self._rel(kind, key)
        try:
            with dirfd.opened(
                dirfd.open_tree(self.root, rel.parent, create=True, mode=0o700)
            ) as fd:
                dirfd.write_at(fd, rel.name, text.encode("utf-8"))
        except (OSError, EnvironmentProblem):
            return  # a cache that cannot be written is only slower

    def has(self, kind: str, key: str) -> bool:
        """Is there an entry (valid or not: a damaged one is a miss when read)?"""
        try:
            os.close(dirfd.open_regular_under(self.root, self._rel(kind, key)))
        except (BadInput, OSError):
            return False
        return True

    @staticmethod
    def elf_key(ident: str, path: Path) -> str:
        return f"{ident}:{path.name}"

    def elf(self, path: Path) -> ElfObject:
        """read_elf(path), from the cache when the file is unchanged. ElfReadError as read_elf."""
        ident = file_identity(path)
        if ident is None or self._small(path):
            return read_elf(path)
        key = self.elf_key(ident, path)
        text = self.get_text("elf", key)
        if text is not None:
            try:
                return CachedFacts.model_validate_json(text).elf_object(path)
            except ValidationError:
                pass
        obj = read_elf(path)
        self.put_text("elf", key, CachedFacts.from_object(obj).model_dump_json())
        return obj

    def gpu(self, path: Path) -> CodeScan:
        """gpu_code(path), from the cache when the file is unchanged."""
        ident = file_identity(path)
        if ident is None or self._small(path):
            return gpu_code(path)
        hit = self.get("gpu", ident)
        if isinstance(hit, dict):
            try:
                facts = CachedFacts(gpu_codes=hit["codes"])
                return CodeScan(tuple(facts.codes()), tuple(str(u) for u in hit["unknown"]))
            except (KeyError, TypeError, ValidationError):
                pass
        scan = gpu_code(path)
        self.put("gpu", ident, {"codes": [c.label() for c in scan.codes], "unknown": scan.unknown})
        return scan

    def _small(self, path: Path) -> bool:
        try:
            return path.stat().st_size < self.min_size
        except OSError:
            return True
