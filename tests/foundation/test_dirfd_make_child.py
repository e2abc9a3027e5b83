"""dirfd.make_child between its mkdir and its open: another process can rename the new folder
away (the open then finds nothing) or also put a symlink at its name. Both are a swap of what
this process made: Swapped (exit 3) naming the new folder, never a bare "cannot open" naming
its parent. The real racer (tests/builder/test_partial_swap_race.py) hits this window about
once in ten runs on a loaded 2-core host; here the rename is made to land in it every time, by
wrapping os.mkdir (the stand-in for the racer's timing, not for the file system)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stackgate import dirfd


@pytest.fixture
def parent(tmp_path: Path) -> Iterator[int]:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def _mkdir_then(after: Callable[[str, int], None]) -> Callable[..., None]:
    real = os.mkdir

    def mkdir(name: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        real(name, mode, dir_fd=dir_fd)
        assert dir_fd is not None
        after(name, dir_fd)

    return mkdir


def _steal(name: str, dir_fd: int) -> None:
    os.rename(name, "stolen", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def test_a_new_folder_renamed_away_before_it_is_opened_is_a_swap(
    tmp_path: Path, parent: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "mkdir", _mkdir_then(_steal))
    with pytest.raises(dirfd.Swapped) as caught:
        dirfd.make_child(parent, "env.partial", where=tmp_path / "env.partial")
    assert caught.value.message.startswith(f"{tmp_path / 'env.partial'}: replaced while it was")


def test_a_new_folder_swapped_for_a_symlink_before_it_is_opened_is_a_swap(
    tmp_path: Path, parent: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()

    def steal_and_link(name: str, dir_fd: int) -> None:
        _steal(name, dir_fd)
        os.symlink(victim, name, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", _mkdir_then(steal_and_link))
    with pytest.raises(dirfd.Swapped, match="replaced while it was being made"):
        dirfd.make_child(parent, "env.partial", where=tmp_path / "env.partial")
    assert os.listdir(victim) == []


def test_a_new_folder_left_alone_is_opened(tmp_path: Path, parent: int) -> None:
    fd = dirfd.make_child(parent, "env.partial", where=tmp_path / "env.partial")
    try:
        assert dirfd.same(os.fstat(fd), os.stat(tmp_path / "env.partial"))
    finally:
        os.close(fd)
