"""The record store's folder, opened once by a writer and worked on through what was opened.

A store written by its folder's name can be redirected: the folder renamed away and a symlink
to another folder put in its place between the checks and SQLite's open, and `records.sqlite`
and its `.head` were written into that other folder. A writer here opens the folder once
(O_DIRECTORY | O_NOFOLLOW: a symlink there is refused, never followed) and then:

- every file stackgate itself reads, writes or removes beside the store (the store file's
  creation and checks, the `.head`, stale temp files) goes through /proc/self/fd/<fd>, which
  leads to the opened folder whatever is done to its name (dirfd.held_path);
- SQLite, which resolves every symlink of a path it is given into text and opens by that text
  (it would turn /proc/self/fd/<fd> back into the folder's name), is given the folder's real
  path as the kernel reports it for the opened folder, opens the store with mode=rw (it never
  creates a file by name), and the file it opened is then checked to be the store file of the
  opened folder before anything is written;
- before each write transaction and after its commit the folder's name must still lead to the
  opened folder (`check`). SQLite opens its rollback journal by name inside a transaction: a
  swap in that instant is caught after the commit (Swapped, exit 3), not prevented; the
  store's own rows are written through the file SQLite already holds.
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
