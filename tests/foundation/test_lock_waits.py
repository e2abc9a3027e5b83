"""Lock files live in a folder only their owner can write, and every wait on one is bounded
and says what it waits for. A real second process holds the lock; the waiter prints what it
waits for (the lock's path, the holder's pid) and gives up with exit-3 words at its bound."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builder.lock import resolve
from stackgate import waits
from stackgate.errors import EnvironmentProblem
from stackgate.layout import LockFiles

ROOT = Path(__file__).resolve().parents[2]
HOLD = (
    "import sys,time; from pathlib import Path; from stackgate import waits\n"
    "with waits.held(Path(sys.argv[1]), what='test', timeout_s=5, say=print):\n"
    "    print('held', flush=True); time.sleep(30)\n"
)


def _holder(path: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_the_lock_folder_is_the_owners_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STACKGATE_CACHE", str(tmp_path / "cache"))
    folder = waits.lock_dir()
    info = folder.stat()
    assert info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o700
    assert not str(folder).startswith("/tmp/stackgate-lock")
    with waits.held(folder / "x.lock", what="x", timeout_s=1, say=print):
        assert stat.S_IMODE((folder / "x.lock").stat().st_mode) == 0o600
    # a lock folder others can write is tightened; one swapped for a symlink is refused
    os.chmod(folder, 0o777)
    waits.lock_dir()
    assert not folder.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    folder.rename(tmp_path / "elsewhere")
    folder.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(EnvironmentProblem, match="symlink"):
        waits.lock_dir()


def test_a_held_lock_is_waited_for_boundedly_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`stackgate lock`'s own lock (resolve._locking) held by another process: the wait says
    what it waits for and stops at the bound, naming the holder's pid (before: it waited
    forever, printing nothing)."""
    monkeypatch.setenv("STACKGATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(resolve, "LOCK_WAIT_S", 1.0)
    files = LockFiles(tmp_path / "locks" / "smoke")
    files.folder.mkdir(parents=True)
    said: list[str] = []
    monkeypatch.setattr(resolve, "lines_err", lambda: type("L", (), {"plain": said.append})())
    with resolve._locking(files):  # control: a free lock is taken at once
        pass
    (path,) = list(waits.lock_dir().glob("lock-*.lock"))
    holder = _holder(path)
    try:
        started = time.monotonic()
        with pytest.raises(EnvironmentProblem) as gave_up, resolve._locking(files):
            pass
        assert time.monotonic() - started < 10
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert f"held by pid {holder.pid}" in gave_up.value.message, gave_up.value.message
    assert "gave up after 1 s waiting for another `stackgate lock`" in gave_up.value.message
    assert said and str(path) in said[0] and "of at most 1 s" in said[0], said
    with resolve._locking(files):  # the holder gone, the lock is free again
        pass
