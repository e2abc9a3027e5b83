"""Files the builder writes in folders others may write too (the env root, a wheelhouse).

`envs/<stack>/.build.lock`, `build.log` or a wheelhouse's `<wheel>.part` replaced by a symlink
made `build` truncate and write through it (the link's target was overwritten); a hard link
does the same without a symlink. Every such file is opened here: O_NOFOLLOW (a symlink at
the name is refused by the kernel, not checked and then raced), then fstat of what was
opened: a regular file, one link, owned by this user, root or the folder's owner. Anything
else is an environment problem (exit 3) naming the path and what is there; nothing is
written through it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from stackgate.errors import EnvironmentProblem


def _refuse(path: Path, what: str) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"{path}: {what}; refusing to write through it",
        details=["remove it (it is not something the builder made) and run the command again"],
    )


def open_owned(path: Path, flags: int, mode: int = 0o644, *, named: Path | None = None) -> int:
    """os.open(path, flags) for writing a file of ours, refusing symlinks and hard links.
    `named`: what messages call the file when `path` is a descriptor path (/proc/self/fd/N/x).

    flags: os.O_RDWR / O_WRONLY plus O_CREAT, O_TRUNC, O_APPEND, O_EXCL as the caller needs;
    O_NOFOLLOW, O_NONBLOCK (a FIFO cannot block the open) and O_CLOEXEC are added. Truncation
    is done after the checks, never by the open itself.
    """
    shown = named or path
    truncate = bool(flags & os.O_TRUNC)
    try:
        fd = os.open(
            path,
            (flags & ~os.O_TRUNC) | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            mode,
        )
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            try:
                target = str(path.readlink())
            except OSError:
                target = "?"
            raise _refuse(shown, f"a symlink (to {target})") from None
        if exc.errno == errno.ENXIO:  # a FIFO (or socket) with nobody at the other end
            raise _refuse(shown, "not a regular file (a FIFO or socket)") from None
        raise EnvironmentProblem(f"cannot open {shown}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(shown, "not a regular file")
        if info.st_nlink != 1:
            raise _refuse(shown, f"a hard link ({info.st_nlink} names for one file)")
        folder_owner = path.parent.stat().st_uid
        if info.st_uid not in (os.geteuid(), 0, folder_owner):
            raise _refuse(shown, f"owned by uid {info.st_uid}, not this user or the folder's owner")
        os.set_blocking(fd, True)
        if truncate:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd
