"""Work on folders another process may swap, relative to an opened folder (openat-style).

A path is looked up again by every call that takes it: a folder checked and then used by its
name can be renamed away and replaced by a symlink in between, and the use lands wherever the
link leads (a build wrote an env's files there, an export wrote records there). Here a folder
is opened once, O_DIRECTORY | O_NOFOLLOW, and checked by fstat of what was opened; everything
after is relative to that descriptor (dir_fd=, O_NOFOLLOW, O_EXCL for what is created), and a
rename's result is checked against the object that was opened, not against the name.

`held_path(fd)` names an opened folder for child processes (uv, an env's python):
/proc/<pid>/fd/<fd> leads to the opened folder itself whatever is done to its name, for as
long as this process keeps it open.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from stackgate.errors import EnvironmentProblem

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Swapped(EnvironmentProblem):
    """A name no longer leads to the object this process opened or made (exit 3)."""


def _not_a_folder(path: Path | str, exc: OSError) -> EnvironmentProblem:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return Swapped(
            f"{path}: a symlink or not a folder; refusing to work through it",
            details=["remove it (stackgate never makes one there) and run the command again"],
        )
    return EnvironmentProblem(f"cannot open {path}: {exc.strerror or exc}")


def open_dir(path: Path, *, create: bool = False, mode: int = 0o755) -> int:
    """An opened folder: its last component is never followed when a symlink (created, with
    its parents, when `create`)."""
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=mode)
    try:
        return os.open(path, DIR_FLAGS)
    except OSError as exc:
        raise _not_a_folder(path, exc) from None


def open_child(
    parent: int, name: str, *, where: Path | str, create: bool = False, mode: int = 0o755
) -> int:
    """Folder `name` in the opened `parent` (made when `create` and missing), never through a
    symlink; `where` only names it in messages."""
    if "/" in name or name in ("", ".", ".."):
        raise EnvironmentProblem(f"{where}: {name!r} is not one folder name")
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, mode, dir_fd=parent)
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise _not_a_folder(where, exc) from None


def make_child(parent: int, name: str, *, where: Path | str, mode: int = 0o755) -> int:
    """A new folder `name` in `parent` (an existing entry of that name is an error), opened."""
    try:
        os.mkdir(name, mode, dir_fd=parent)
    except FileExistsError:
        raise Swapped(f"{where}: already exists; it was not made by this process") from None
    return open_child(parent, name, where=where)


def same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def entry_is(parent: int, name: str, fd: int) -> bool:
    """Whether `name` in `parent` is, itself (not through a symlink), the object `fd`."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return False
    return same(info, os.fstat(fd))


def held_path(fd: int) -> Path:
    """A path that leads to the opened folder `fd` (for child processes), see the module."""
    return Path(f"/proc/{os.getpid()}/fd/{fd}")


def rename_checked(parent: int, src: str, dst: str, fd: int, *, where: Path | str) -> None:
    """Rename `src` to `dst` in `parent` (dst must not exist), then check that what now sits at
    `dst` is the object `fd`; if another thing was swapped in it is removed (a symlink, never
    followed) and Swapped raised."""
    if not entry_is(parent, src, fd):
        raise Swapped(f"{where}: {src} was replaced while it was being built; nothing published")
    try:
        os.stat(dst, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        pass
    else:
        raise EnvironmentProblem(f"{where}: {dst} already exists; refusing to replace it")
    os.rename(src, dst, src_dir_fd=parent, dst_dir_fd=parent)
    if not entry_is(parent, dst, fd):
        with contextlib.suppress(OSError):
            if stat.S_ISLNK(os.stat(dst, dir_fd=parent, follow_symlinks=False).st_mode):
                os.unlink(dst, dir_fd=parent)
        raise Swapped(f"{where}: {src} was replaced while it was published; nothing published")


def write_at(parent: int, name: str, data: bytes, *, mode: int = 0o644) -> None:
    """Write file `name` in the opened `parent` as a whole: a new temp file (O_EXCL |
    O_NOFOLLOW) renamed over `name` (a symlink there is replaced, never written through)."""
    tmp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, FILE_FLAGS, mode, dir_fd=parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent)
        raise


def read_regular_at(parent: int, name: str, max_bytes: int) -> bytes | None:
    """The bytes of regular file `name` in `parent` (None: missing, a symlink, not a regular
    file, or bigger than max_bytes)."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent
        )
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(max_bytes + 1)[: max_bytes + 1]
    finally:
        os.close(fd)


@contextlib.contextmanager
def opened(fd: int) -> Iterator[int]:
    """Close `fd` on leaving."""
    try:
        yield fd
    finally:
        os.close(fd)
