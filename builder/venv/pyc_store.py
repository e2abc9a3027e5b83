"""Compiled `.pyc` files kept between builds, so a source compiled once is not compiled again.

What fixes a `.pyc`'s bytes is the interpreter that compiled it (its version and byte-code
magic), the invalidation mode, the source's bytes and the file name recorded in it (the path
relative to site-packages: builder.venv.bytecode). An entry is keyed by exactly those, so an
entry copied into another env is the file that env's compile would have written.

An entry holds the sha256 of the `.pyc` before its bytes: a truncated or damaged entry is a
miss (and removed), never a `.pyc` that breaks an import (the interpreter checks a checked-hash
`.pyc` against its source, but not its body). Entries are written to a temporary name and
renamed, so builds running at once share the store. Whoever can write the store chooses the
code an env runs, so it is used only while its folder is this user's and writable by nobody
else, as stackgate's other caches; otherwise every source is compiled.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

_HEADER = b"stackgate-pyc 1\n"
_DIGEST = 32


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


@dataclass(frozen=True)
class PycStore:
    """The entries of one interpreter and invalidation mode under root."""

    root: Path

    @classmethod
    def open(cls, base: Path, interpreter: str) -> PycStore | None:
        """The store under base for interpreter (its version, magic and mode in one string);
        None when base is not private (bytecode compiles everything then)."""
        if not _private(base):
            return None
        key = hashlib.sha256(interpreter.encode()).hexdigest()[:16]
        return cls(base / key)

    def entry(self, source_sha256: str, recorded: str) -> Path:
        named = hashlib.sha256(recorded.encode()).hexdigest()[:16]
        return self.root / source_sha256[:2] / f"{source_sha256}-{named}.pyc"

    def fetch(self, source_sha256: str, recorded: str, target: Path) -> bool:
        """Write the entry's `.pyc` to target; False (target untouched) when there is none or
        it is damaged (then it goes)."""
        entry = self.entry(source_sha256, recorded)
        try:
            data = entry.read_bytes()
        except OSError:
            return False
        body = data[len(_HEADER) + _DIGEST :]
        if (
            not data.startswith(_HEADER)
            or data[len(_HEADER) : len(_HEADER) + _DIGEST] != hashlib.sha256(body).digest()
        ):
            with contextlib.suppress(OSError):
                entry.unlink()
            return False
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(body)
        return True

    def keep(self, source_sha256: str, recorded: str, made: Path) -> None:
        """Store the `.pyc` made for the source; a store that cannot be written is no error."""
        entry = self.entry(source_sha256, recorded)
        with contextlib.suppress(OSError):
            body = made.read_bytes()
            entry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=entry.parent, suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(_HEADER + hashlib.sha256(body).digest() + body)
                Path(temp).replace(entry)
            except OSError:
                Path(temp).unlink()
                raise
