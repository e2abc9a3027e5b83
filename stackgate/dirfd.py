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

from stackgate.errors import BadInput, EnvironmentProblem

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Swapped(EnvironmentProblem):
    """A name no longer leads to the object this process opened or made (exit 3)."""

    error_id = "swapped"
    hint = "remove it (stackgate never makes one there) and run the command again"


def _not_a_folder(path: Path | str, exc: OSError) -> EnvironmentProblem:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return Swapped(f"{path}: a symlink or not a folder; refusing to work through it")
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
    """A new folder `name` in `parent` (an existing entry of that name is an error), opened;
    `where` names the new folder in messages. Between the mkdir and the open another process
    can rename the new folder away (the open finds nothing) or put a symlink at its name: both
    are a swap of what this process made, refused as such."""
    try:
        os.mkdir(name, mode, dir_fd=parent)
    except FileExistsError:
        raise Swapped(f"{where}: already exists; it was not made by this process") from None
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise Swapped(
            f"{where}: replaced while it was being made ({exc.strerror or exc}); "
            "refusing to work through it",
            details=["another process renamed or replaced the folder; nothing was written in it"],
        ) from None


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
    try:
        os.rename(src, dst, src_dir_fd=parent, dst_dir_fd=parent)
    except FileNotFoundError:
        raise Swapped(
            f"{where}: removed or replaced while {src} was published; nothing published"
        ) from None
    if not entry_is(parent, dst, fd):
        with contextlib.suppress(OSError):
            if stat.S_ISLNK(os.stat(dst, dir_fd=parent, follow_symlinks=False).st_mode):
                os.unlink(dst, dir_fd=parent)
        raise Swapped(f"{where}: {src} was replaced while it was published; nothing published")


def write_failed(where: Path | str, exc: OSError) -> EnvironmentProblem:
    """An error writing in an opened folder. ENOENT there means the folder itself is gone: it
    was removed, or replaced (a folder renamed over it), after it was opened: a swap."""
    if exc.errno == errno.ENOENT:
        return Swapped(
            f"{where}: its folder was removed or replaced while it was written; "
            "nothing was written anywhere else",
            details=["another process changed the folder; run the command again"],
        )
    return EnvironmentProblem(f"cannot write {where}: {exc.strerror or exc}")


def write_at(
    parent: int, name: str, data: bytes, *, mode: int = 0o644, where: Path | str | None = None
) -> None:
    """Write file `name` in the opened `parent` as a whole: a new temp file (O_EXCL |
    O_NOFOLLOW) renamed over `name` (a symlink there is replaced, never written through).
    `where` names the file in messages (default: `name`)."""
    shown = name if where is None else where
    tmp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        fd = os.open(tmp, FILE_FLAGS, mode, dir_fd=parent)
    except OSError as exc:
        raise write_failed(shown, exc) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent)
        if isinstance(exc, OSError):
            raise write_failed(shown, exc) from None
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


def _parts(rel: Path | str, where: Path | str) -> list[str]:
    parts = [p for p in Path(rel).parts if p not in ("", ".")]
    if not parts or Path(rel).is_absolute() or ".." in parts:
        raise EnvironmentProblem(f"{where}: {str(rel)!r} is not a path inside its folder")
    return parts


def open_tree(root: Path, rel: Path | str, *, create: bool = False, mode: int = 0o755) -> int:
    """The folder `root/rel`, opened one component at a time from `root`, none of them
    followed when a symlink (made, with `mode`, when `create` and missing)."""
    fd = open_dir(root, create=create, mode=mode)
    where = root
    try:
        for part in _parts(rel, root):
            where = where / part
            child = open_child(fd, part, where=where, create=create, mode=mode)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular_under(root: Path, rel: Path | str) -> int:
    """An fd (read-only) of the regular file `root/rel`, reached without following a symlink
    at any component below `root` (root itself is followed); BadInput naming the file for a symlink, a folder, a FIFO
    or a device (only regular files are read from folders others can write)."""
    parts = _parts(rel, root)
    path = root.joinpath(*parts)
    try:
        # `root` itself is the caller's (named by the user, or the checkout's): followed.
        parent = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise BadInput(f"{root}: cannot open the folder: {exc.strerror or exc}") from None
    where = root
    try:
        for part in parts[:-1]:
            where = where / part
            child = open_child(parent, part, where=where)
            os.close(parent)
            parent = child
    except EnvironmentProblem as exc:
        os.close(parent)
        raise BadInput(f"{path}: {exc.message}") from None
    try:
        fd = os.open(
            parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent
        )
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadInput(f"{path}: a symlink (only regular files are read)") from None
        raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(parent)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise BadInput(f"{path}: not a regular file (only regular files are read)")
    os.set_blocking(fd, True)
    return fd


def read_bytes_under(root: Path, rel: Path | str, max_bytes: int) -> bytes:
    """The bytes of regular file `root/rel` (open_regular_under), at most max_bytes."""
    fd = open_regular_under(root, rel)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise BadInput(f"{root / rel}: larger than the {max_bytes} bytes this file may be")
    return data


def append_at(parent: int, name: str, data: bytes, *, where: Path | str) -> None:
    """Append to file `name` in `parent` (created 0o644 when missing): never through a
    symlink, a hard link or into something other than a regular file."""
    try:
        fd = os.open(
            name,
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            0o644,
            dir_fd=parent,
        )
    except OSError as exc:
        raise (
            _not_a_folder(where, exc) if exc.errno == errno.ELOOP else write_failed(where, exc)
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise Swapped(f"{where}: not a regular file of its own; refusing to write to it")
        os.write(fd, data)
    finally:
        os.close(fd)


def create_exclusive_at(parent: int, name: str, data: bytes, *, mode: int = 0o644) -> bool:
    """Create file `name` in `parent` holding `data` (O_EXCL | O_NOFOLLOW); False if any entry
    of that name exists (a symlink included: it is never followed)."""
    try:
        fd = os.open(name, FILE_FLAGS, mode, dir_fd=parent)
    except FileExistsError:
        return False
    except OSError as exc:
        raise write_failed(name, exc) from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return True
