"""Writes relative to an opened folder that another process removed or replaced after it was
opened (a folder renamed over it unlinks it): the kernel answers ENOENT to every create in it.
That is a swap, refused as dirfd.Swapped (a StackgateError, exit 3) naming the file, never a bare
FileNotFoundError. A real racer (tests/fleet/test_fleet_folder_races.py) met it: the node's
`mkdir` filled the racer's gap between its rename-aside and its symlink, and the racer's
rename-back replaced the folder the node had just opened. Here the folder is really removed
after it is opened, every time."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackgate import dirfd


@pytest.fixture
def gone(tmp_path: Path) -> Iterator[int]:
    folder = tmp_path / "node"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    folder.rmdir()  # opened, then removed: what a folder renamed over it also does
    yield fd
    os.close(fd)


def test_write_at_in_a_removed_folder_is_a_swap(gone: int, tmp_path: Path) -> None:
    with pytest.raises(dirfd.Swapped, match=r"status\.json: its folder was removed or replaced"):
        dirfd.write_at(gone, "status.json", b"{}", where=tmp_path / "node" / "status.json")


def test_append_at_in_a_removed_folder_is_a_swap(gone: int) -> None:
    with pytest.raises(dirfd.Swapped, match=r"build\.log: its folder was removed or replaced"):
        dirfd.append_at(gone, "build.log", b"x\n", where="build.log")


def test_create_exclusive_at_in_a_removed_folder_is_a_swap(gone: int) -> None:
    with pytest.raises(dirfd.Swapped, match=r"attempt-0\.json: its folder was removed"):
        dirfd.create_exclusive_at(gone, "attempt-0.json", b"{}")


def test_a_folder_renamed_over_the_opened_one_is_the_same_swap(tmp_path: Path) -> None:
    folder, other = tmp_path / "node", tmp_path / "other"
    folder.mkdir()
    other.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rename(other, folder)  # an empty folder is replaced by a rename: the opened one is gone
        with pytest.raises(dirfd.Swapped):
            dirfd.write_at(fd, "status.json", b"{}")
        assert os.listdir(folder) == []
    finally:
        os.close(fd)


def test_write_at_in_a_live_folder_writes(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        dirfd.write_at(fd, "status.json", b"{}")
        assert dirfd.create_exclusive_at(fd, "attempt-0.json", b"{}")
        assert not dirfd.create_exclusive_at(fd, "attempt-0.json", b"{}")
    finally:
        os.close(fd)
    assert (tmp_path / "status.json").read_bytes() == b"{}"
