"""What a path is, from one stat.

`path.exists() and not path.is_dir()` asks twice: a folder a racer moved aside between the two
calls read as "exists and is not a folder" (`builder wheelhouse --to` exited 2 while
tests/helpers/swap.py swapped the folder for a symlink). One stat gives one answer; what
is written below the path is still opened without following links where it matters.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Literal

Kind = Literal["folder", "file", "link", "other"]

# The errors under which pathlib's exists() says "does not exist" (a missing part, a part that
# is not a folder, a symlink loop): such a path is absent here too.
_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EBADF})


def kind_of(path: Path, *, follow: bool = True) -> Kind | None:
    """What `path` is (a symlink is "link" only when not `follow`); None when it is absent."""
    try:
        mode = path.stat(follow_symlinks=follow).st_mode
    except OSError as error:
        if error.errno in _ABSENT:
            return None
        raise
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISREG(mode):
        return "file"
    return "link" if stat.S_ISLNK(mode) else "other"


def nearest_part(path: Path) -> tuple[Path, Kind | None]:
    """The nearest part of `path` that exists (the path itself first) and what it is."""
    part, kind = path, kind_of(path)
    while kind is None and part != part.parent:
        part = part.parent
        kind = kind_of(part)
    return part, kind


def holds_anything(path: Path) -> bool:
    """True when the folder `path` (links followed) has an entry; a path that is absent, or
    went away while it was being listed, holds nothing."""
    try:
        with os.scandir(path) as entries:
            return next(entries, None) is not None
    except OSError as error:
        if error.errno in _ABSENT:
            return False
        raise
