"""uv's partial extractions left by an interrupted install, removed when nothing uses them.

uv extracts a wheel into a `.tmp*` folder at the top of its cache and renames it into place; a
uv killed mid-install leaves gigabytes of those behind, and nothing removes them. Every uv
process holds a shared lock on `<cache>/.lock` while it runs (`uv cache clean` takes it
exclusively), so when this process can take it exclusively without waiting, no uv is running
and every `.tmp*` there is a leftover; otherwise nothing is removed and the next build tries
again. The lock is held only while the folders are removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from stackgate import proc
from stackgate.uvbin import uv_bin

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Swept:
    removed: list[Path]
    bytes: int
    busy: bool  # a uv process held the cache: nothing was looked at


def uv_cache_dir(env: dict[str, str]) -> Path | None:
    """The cache uv uses under `env` (UV_CACHE_DIR, XDG_CACHE_HOME, ...), as uv itself says."""
    try:
        done = proc.run([uv_bin(), "cache", "dir"], env=env)
    except Exception as exc:  # a cache we cannot name is not worth failing a build for
        log.debug("uv cache dir: %s", exc)
        return None
    text = done.stdout.strip()
    return Path(text) if text else None


def tree_bytes(path: Path) -> int:
    """Bytes of the files under path, links not followed (0 when it is gone)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).lstat().st_size
    return total


def sweep_leftovers(cache: Path) -> Swept:
    """Remove the `.tmp*` entries at the top of uv's cache if no uv process is running."""
    lock = cache / ".lock"
    if not lock.is_file():
        return Swept([], 0, busy=False)
    fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return Swept([], 0, busy=True)
        removed: list[Path] = []
        size = 0
        for entry in sorted(cache.iterdir()):
            if not entry.name.startswith(".tmp"):
                continue
            if entry.is_dir() and not entry.is_symlink():
                size += tree_bytes(entry)
                shutil.rmtree(entry, ignore_errors=True)
            else:
                size += entry.lstat().st_size
                entry.unlink(missing_ok=True)
            removed.append(entry)
        return Swept(removed, size, busy=False)
    finally:
        os.close(fd)  # releases the lock
