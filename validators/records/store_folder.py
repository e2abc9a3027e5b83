"""The record store's folder, opened once by a writer and worked on through what was opened.

A store written by its folder's name can be redirected (the folder swapped for a symlink
between the checks and SQLite's open). A writer opens the folder once (O_DIRECTORY |
O_NOFOLLOW: a symlink is refused) and then:

- every file stackgate reads, writes or removes beside the store (the store file's creation
  and checks, the `.head`, stale temps) goes through /proc/self/fd/<fd> (dirfd.held_path);
- SQLite, which resolves symlinks to text and opens by name, is given the opened folder's real
  path, opens the store with mode=rw (creating nothing), and the file it opened is checked to
  be the opened folder's store file before anything is written;
- before each write transaction and after its commit the folder's name must still lead to the
  opened folder (`check`). SQLite opens its rollback journal by name: a swap in that instant
  is caught after the commit (Swapped, exit 3), not prevented; the rows themselves go through
  the file SQLite already holds.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from stackgate import dirfd
from stackgate.errors import EnvironmentProblem


@dataclass(frozen=True)
class StoreFolder:
    fd: int
    named: Path  # the folder as the user named it (messages)
    real: Path  # its path as the kernel reports it for the opened folder (given to SQLite)

    def here(self, name: str) -> Path:
        """`name` in the opened folder, for this process's own file calls (see the module)."""
        return dirfd.held_path(self.fd) / name

    def still_named(self) -> bool:
        """Whether `real` still leads, without a symlink at its end, to the opened folder."""
        try:
            info = os.lstat(self.real)
        except OSError:
            return False
        return stat.S_ISDIR(info.st_mode) and dirfd.same(info, os.fstat(self.fd))

    def check(self, doing: str) -> None:
        if not self.still_named():
            raise dirfd.Swapped(
                f"{self.named}: the record store's folder was replaced (a symlink or another "
                f"folder swapped in) {doing}; refusing to work through it",
                details=["check who else writes in the folder above it"],
            )

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def open_store_folder(store: Path) -> StoreFolder:
    """The folder of the store file `store`, made when missing, opened (see the module)."""
    named = store.parent
    with contextlib.suppress(OSError):
        named.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = dirfd.open_dir(named, create=True)
    except dirfd.Swapped:
        raise dirfd.Swapped(
            f"{named}: the record store's folder is a symlink or not a folder (or was swapped "
            "for one); a store is written only where it is, never through a link",
            details=["give --store a path in the folder it leads to"],
        ) from None
    try:
        real = dirfd.held_path(fd).readlink()
    except OSError as exc:
        os.close(fd)
        raise EnvironmentProblem(f"cannot open the record store's folder {named}: {exc}") from None
    folder = StoreFolder(fd=fd, named=named, real=real)
    if not real.is_absolute() or not folder.still_named():
        folder.close()
        raise dirfd.Swapped(
            f"{named}: the record store's folder was removed or replaced while it was opened; "
            "nothing was written"
        )
    return folder
