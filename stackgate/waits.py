"""Lock files and the waits on them: in folders only the owner can write, never forever.

A lock file in a folder every user can write (`/tmp/stackgate-lock-<hash>.lock`, mode 0644)
lets any local user take the lock first and hold it: root's `stackgate lock` then waited
forever, printing nothing. Here a lock file lives in `lock_dir()`, a folder of this user's
(mode 0700, owned by the effective user, checked by fstat of the opened folder, never
through a symlink), is opened O_NOFOLLOW, and every wait on it is bounded: after a first
non-blocking try the command says what it waits for (the lock's path and the holder's pid
when the file names one) and gives up with an environment problem (exit 3) at the bound.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from stackgate import dirfd
from stackgate.errors import EnvironmentProblem
from stackgate.settings import cache_root

POLL_S = 0.2
SAY_EVERY_S = 30.0


def _check_private(fd: int, path: Path) -> None:
    """The opened folder `fd` (named `path`) is this user's and writable by nobody else
    (group/other write bits are taken away; another owner is refused)."""
    info = os.fstat(fd)
    if info.st_uid != os.geteuid():
        raise EnvironmentProblem(
            f"{path}: lock folder owned by uid {info.st_uid}, not this user "
            f"({os.geteuid()}); another user could hold every lock in it",
            details=["remove it, or point STACKGATE_CACHE at a folder of your own"],
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.fchmod(fd, stat.S_IMODE(info.st_mode) & ~(stat.S_IWGRP | stat.S_IWOTH))


def _private(path: Path) -> Path:
    """`path` made (0700) and checked: a folder, owned by this user, writable by nobody else."""
    with dirfd.opened(dirfd.open_dir(path, create=True, mode=0o700)) as fd:
        _check_private(fd, path)
    return path


def lock_dir() -> Path:
    """The folder stackgate's own lock files live in: `<cache root>/locks`, this user's."""
    return _private(cache_root() / "locks")


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        text = os.pread(fd, 32, 0).decode().strip()
        if text.isdigit():
            return f" (held by pid {text})"
    return ""


def acquire(
    fd: int, *, path: Path, what: str, timeout_s: float, say: Callable[[str], None]
) -> None:
    """An exclusive flock on the opened `fd` (the lock file `path`), waiting at most
    `timeout_s`: busy at first, `say` is told what is waited for, again every SAY_EVERY_S;
    at the bound EnvironmentProblem (exit 3) names the lock and its holder."""
    started = time.monotonic()
    said: float | None = None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            waited = time.monotonic() - started
            if waited >= timeout_s:
                raise EnvironmentProblem(
                    f"gave up after {waited:.0f} s waiting for {what}: {path} is "
                    f"locked{_holder(fd)}",
                    details=["wait for that process to finish, or stop it"],
                ) from None
            if said is None or waited - said >= SAY_EVERY_S:
                say(
                    f"waiting for {what}: {path} is locked{_holder(fd)}; "
                    f"{waited:.0f} s of at most {timeout_s:.0f} s"
                )
                said = waited
            time.sleep(POLL_S)


@contextlib.contextmanager
def held(path: Path, *, what: str, timeout_s: float, say: Callable[[str], None]) -> Iterator[int]:
    """The lock file `path` held (acquire); this process's pid is written into it while held.

    Its folder is opened once (O_NOFOLLOW: a folder swapped for a symlink since `lock_dir()`
    checked it is refused, not followed), checked by fstat of what was opened (this user's,
    writable by nobody else), and the file is opened relative to it (O_NOFOLLOW, created
    0600): a check and a use of the same object, never of a name twice."""
    try:
        folder = dirfd.open_dir(path.parent)
    except EnvironmentProblem as exc:
        raise EnvironmentProblem(
            f"cannot open the lock {path}: {exc.message}", details=exc.details
        ) from None
    try:
        _check_private(folder, path.parent)
        fd = os.open(
            path.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder
        )
    except OSError as exc:
        why = "a symlink" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise EnvironmentProblem(f"cannot open the lock {path}: {why}") from None
    finally:
        os.close(folder)
    try:
        acquire(fd, path=path, what=what, timeout_s=timeout_s, say=say)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield fd
    finally:
        os.close(fd)
