"""All-or-nothing environments: a `.partial` folder, one rename, one `current` symlink swap.

The layout under the venv root is stackgate.layout (EnvLayout); this module changes it. Every
step a reader can observe is a single rename(2), `current` included (a fresh symlink renamed
over it). A build killed at any point leaves at most a `.partial` folder, which the next build
(holding the lock, so no build is using it) removes. Finished envs are never modified here.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from stackgate import dirfd, waits
from stackgate.errors import EnvironmentProblem
from stackgate.layout import PARTIAL_SUFFIX, EnvLayout
from stackgate.lines import lines_err
from stackgate.owned_files import open_owned

# A build waits this long for another build of its stack, then says whose lock it is and
# stops (exit 3): a wait is never endless.
BUILD_WAIT_S = 4 * 3600.0


@dataclass(frozen=True)
class HeldLock:
    fd: int  # pass it to child processes (pass_fds) so they hold the lock too
    waited_s: float


@contextlib.contextmanager
def build_lock(layout: EnvLayout, *, wait: bool = True) -> Iterator[HeldLock]:
    """Hold the stack's build lock.

    flock is released by the kernel when the last holder of the open file dies, so a
    SIGKILLed build never leaves a lock behind (a pid file would). Build steps inherit the
    descriptor: if the builder itself is killed, an orphaned `uv` still writing into the
    .partial folder keeps the lock until it exits, and the next build waits instead of
    deleting the folder under it.
    """
    layout.stack_dir.mkdir(parents=True, exist_ok=True)
    # Never through a symlink or hard link planted at the name (stackgate.owned_files).
    # 0600: flock needs only an open descriptor, so a lock file others can read is one they
    # can hold (the wait below is bounded and said all the same).
    fd = open_owned(layout.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    started = time.monotonic()
    try:
        os.fchmod(fd, 0o600)
        if wait:
            waits.acquire(
                fd,
                path=layout.lock_path,
                what=f"another build of '{layout.stack}'",
                timeout_s=BUILD_WAIT_S,
                say=lines_err().plain,
            )
        else:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise EnvironmentProblem(
                    f"another build of '{layout.stack}' holds {layout.lock_path}"
                ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield HeldLock(fd, time.monotonic() - started)
    finally:
        os.close(fd)  # closing drops the flock


def leftovers(layout: EnvLayout) -> list[Path]:
    """What remove_partials would remove: `.partial` folders and `.current-*` links."""
    if not layout.stack_dir.is_dir():
        return []
    return [
        entry
        for entry in sorted(layout.stack_dir.iterdir())
        if entry.name.endswith(PARTIAL_SUFFIX) or entry.name.startswith(".current-")
    ]


def remove_partials(layout: EnvLayout) -> list[Path]:
    """Remove leftovers of killed builds. Call only while holding the build lock."""
    removed: list[Path] = []
    if not layout.stack_dir.is_dir():
        return removed
    for entry in sorted(layout.stack_dir.iterdir()):
        if entry.name.endswith(PARTIAL_SUFFIX) or entry.name.startswith(".current-"):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish_at(stack_fd: int, partial_name: str, final: Path, partial_fd: int) -> None:
    """Rename the finished partial folder into place, relative to the opened stack folder: the
    object renamed is checked to be the opened partial folder (dirfd.rename_checked), never a
    swapped-in link."""
    try:
        dirfd.rename_checked(stack_fd, partial_name, final.name, partial_fd, where=final.parent)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise EnvironmentProblem(f"disk full while publishing {final}") from exc
        raise
    os.fsync(stack_fd)


def remove_partial_at(stack_fd: int, partial_name: str) -> None:
    """Remove a failed build's partial folder by name in the opened stack folder; rmtree with
    dir_fd never follows a symlink swapped in at the name (it is then left alone)."""
    with contextlib.suppress(OSError):
        shutil.rmtree(partial_name, dir_fd=stack_fd)


def switch_current(layout: EnvLayout, target: Path) -> None:
    """Point `current` at target with a relative symlink, atomically (rename over the old)."""
    tmp = layout.stack_dir / f".current-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target.name)
    tmp.replace(layout.current)
    _fsync_dir(layout.stack_dir)
