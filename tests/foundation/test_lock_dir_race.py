"""The lock folder swapped for a symlink between lock_dir()'s check and the lock's open: the
lock is never created through the link (a real racer thread, tests/helpers/swap.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stackgate import waits
from stackgate.errors import EnvironmentProblem, StackgateError
from tests.helpers.swap import racing

TRIES = 400


def test_a_lock_folder_swapped_for_a_symlink_never_gets_a_lock_file_through_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STACKGATE_CACHE", str(tmp_path / "cache"))
    folder = waits.lock_dir()
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    taken = refused = 0
    with racing(folder, victim) as racer:
        for i in range(TRIES):
            try:
                with waits.held(folder / f"l{i % 7}.lock", what="race", timeout_s=1, say=print):
                    taken += 1
            except StackgateError as exc:
                refused += 1
                assert "lock" in exc.message  # names the lock it could not take
    assert racer.swaps > 0, "the racer never swapped: the test proved nothing"
    assert os.listdir(victim) == [], (taken, refused, os.listdir(victim))
    # control: with the racer stopped the same folder gives its locks (how many of the tries
    # above fell between swaps depends on the scheduler: 0 to hundreds here)
    with waits.held(folder / "l0.lock", what="after", timeout_s=1, say=print):
        assert (folder / "l0.lock").is_file()


def test_a_lock_folder_that_is_a_symlink_is_refused_at_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Variants of the same swap, made before the call: a symlink to this user's own folder,
    and to a folder others can write; neither is written and both are named."""
    monkeypatch.setenv("STACKGATE_CACHE", str(tmp_path / "cache"))
    folder = waits.lock_dir()
    for mode in (0o700, 0o777):
        victim = tmp_path / f"victim-{mode:o}"
        victim.mkdir()
        victim.chmod(mode)
        folder.rmdir() if folder.is_dir() and not folder.is_symlink() else folder.unlink()
        folder.symlink_to(victim)
        with (
            pytest.raises(EnvironmentProblem, match="symlink") as caught,
            waits.held(folder / "x.lock", what="x", timeout_s=1, say=print),
        ):
            pass
        assert str(folder / "x.lock") in caught.value.message
        assert os.listdir(victim) == []
        assert victim.stat().st_mode & 0o777 == mode  # not touched either


def test_a_lock_folder_others_can_write_is_tightened_at_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Made group/world-writable between lock_dir() and held(): checked on the opened folder,
    tightened before the lock file is made in it."""
    monkeypatch.setenv("STACKGATE_CACHE", str(tmp_path / "cache"))
    folder = waits.lock_dir()
    folder.chmod(0o777)
    with waits.held(folder / "x.lock", what="x", timeout_s=1, say=print):
        assert folder.stat().st_mode & 0o022 == 0
