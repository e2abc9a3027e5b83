"""Compiled `.pyc` files kept between builds, so a source compiled once is not compiled again.

What fixes a `.pyc`'s bytes is the interpreter that compiled it (its version and byte-code
magic), the invalidation mode, the source's bytes and the file name recorded in it (the path
relative to site-packages: builder.venv.bytecode). An entry is keyed by exactly those, so an
entry put into another env is the file that env's compile would have written.

An entry is put into an env as a hard link where the two share a file system: a new file costs
the file system an inode, and on a disk where envs of 58,000 files come and go ext4 spends
~1 ms of CPU finding one (its allocator steps over recently deleted inodes), more than the link
and the read together; elsewhere it is copied. Nothing writes a `.pyc` in place (imports and
this store replace them by rename), so a link never changes under an env. Each entry's name
ends in the start of its own sha256, checked before use: an entry changed or damaged after it
was written is a miss (and goes), never a `.pyc` that breaks an import (the interpreter checks
a checked-hash `.pyc` against its source, not its body). Entries are written to a temporary
name and renamed, so builds running at once share the store. Whoever can write the store
chooses the code an env runs, so it is used only while its folder is this user's and writable
by nobody else, as stackgate's other caches; otherwise every source is compiled.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_NAMED = 16  # hex digits of a sha256 in an entry's name


def _private(folder: Path) -> bool:
    """folder (made 0700 when missing) is a real folder of this user, writable by nobody else."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.geteuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def _short(text: str) -> str:
    return hashlib.sha256(os.fsencode(text)).hexdigest()[:_NAMED]


def _listed(root: Path) -> dict[tuple[str, str], Path]:
    """(source sha256, recorded name's short hash) -> entry, for every entry under root."""
    found: dict[tuple[str, str], Path] = {}
    with contextlib.suppress(FileNotFoundError):
        for folder in sorted(os.scandir(root), key=lambda e: e.name):
            if not folder.is_dir(follow_symlinks=False):
                continue
            for entry in sorted(os.scandir(folder.path), key=lambda e: e.name):
                parts = entry.name.removesuffix(".pyc").split("-")
                if entry.name.endswith(".pyc") and len(parts) == 3:
                    found[(parts[0], parts[1])] = Path(entry.path)
    return found


@dataclass(frozen=True)
class PycStore:
    """The entries of one interpreter and invalidation mode under root, as listed at open."""

    root: Path
    entries: Mapping[tuple[str, str], Path]

    @classmethod
    def open(cls, base: Path, interpreter: str) -> PycStore | None:
        """The store under base for interpreter (its version, magic and mode in one string);
        None when base is not private (bytecode compiles everything then)."""
        if not _private(base):
            return None
        root = base / _short(interpreter)
        return cls(root, _listed(root))

    def put(self, source_sha256: str, recorded: str, target: Path) -> bool:
        """The entry's `.pyc` at target (linked, else copied); False, target untouched, when
        there is none or it is not what was stored (then it goes)."""
        entry = self.entries.get((source_sha256, _short(recorded)))
        if entry is None:
            return False
        try:
            body = entry.read_bytes()
        except OSError:
            return False
        if not entry.name.endswith(f"-{hashlib.sha256(body).hexdigest()[:_NAMED]}.pyc"):
            with contextlib.suppress(OSError):
                entry.unlink()
            return False
        try:
            try:
                target.hardlink_to(entry)
            except FileExistsError:  # a `.pyc` the wheel shipped: compiling replaces it too
                target.unlink()
                target.hardlink_to(entry)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EMLINK, errno.EPERM, errno.ENOTSUP):
                raise
            target.write_bytes(body)
        return True

    def keep(self, source_sha256: str, recorded: str, made: Path) -> None:
        """Store the `.pyc` made for the source; a store that cannot be written is no error."""
        with contextlib.suppress(OSError):
            body = made.read_bytes()
            folder = self.root / source_sha256[:2]
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            name = f"{source_sha256}-{_short(recorded)}-{hashlib.sha256(body).hexdigest()[:_NAMED]}"
            fd, temp = tempfile.mkstemp(dir=folder, suffix=".tmp")
            try:
                os.fchmod(fd, 0o644)  # as readable as the `.pyc` it came from
                with os.fdopen(fd, "wb") as out:
                    out.write(body)
                Path(temp).replace(folder / f"{name}.pyc")
            except OSError:
                Path(temp).unlink()
                raise
