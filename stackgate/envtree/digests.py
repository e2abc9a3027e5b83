"""Remembered file digests, so hashing a 10 GiB env whose files uv hard-linked from its cache
costs a stat per file instead of reading 10 GiB again.

Key: (device, inode, size, mtime_ns, ctime_ns). mtime alone is not enough: `touch -r` or
os.utime puts an old mtime back after an in-place edit of the same size. ctime cannot be set
by any unprivileged call (only by changing the system clock), and every write, chmod, link or
utime moves it. The price: a new hard link to an inode (uv linking a cache file into another
env) moves its ctime too, so the first hash after such a build reads those files again; the
build hashes its env right after installing, which remembers the new ctime for every env that
shares the inode.

One row per inode (a changed file replaces its row), and a row no walk has used for
RETENTION_DAYS is dropped, so the table stays the size of the files still hashed. A file
written or linked within the last few seconds is never remembered (the "racy" case git knows:
a second change in the same timestamp tick). A cache file or folder that another user owns
or anybody may write is not used (it could vouch for anything). Set STACKGATE_NO_DIGEST_CACHE=1 to read
every byte every time.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path

from stackgate.settings import cache_root, switch

Key = tuple[int, int, int, int, int]  # dev, ino, size, mtime_ns, ctime_ns
RACY_WINDOW_NS = 3_000_000_000
RETENTION_DAYS = 60
_REFRESH_DAYS = 7  # a used row's day is rewritten at most this often (few writes per walk)
_DAY_NS = 86_400 * 10**9


def cache_path() -> Path:
    return cache_root() / "file-digests.sqlite"  # stackgate/settings.py


def key_of(st: os.stat_result) -> Key:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def rememberable(st: os.stat_result) -> bool:
    return time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_WINDOW_NS


def _today() -> int:
    return time.time_ns() // _DAY_NS


def _private(path: Path) -> bool:
    """Whoever can write the cache can make a changed file look unchanged (a row with the new
    key and the old digest), so it is used only when its file and folder belong to this user
    and are not world-writable. Group write is tolerated: with umask 002 (user-private groups)
    every folder is group-writable by a group of one. A new cache file is created mode 0600."""
    me = os.geteuid()
    try:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
    except OSError:
        return False
    for target in (path.parent, path):
        st = target.lstat()
        if (
            st.st_uid != me
            or st.st_mode & 0o002
            or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode))
        ):
            return False
    return True


class DigestCache:
    """A small sqlite table; a cache that cannot be opened simply stays empty."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_path()
        self._pending: list[tuple[int, int, int, int, int, bytes, int]] = []
        self._seen_day: dict[Key, int] = {}
        self._used: set[tuple[int, int]] = set()
        self._db: sqlite3.Connection | None = None
        if switch("STACKGATE_NO_DIGEST_CACHE"):
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not _private(self.path):
                return
            db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
        except (OSError, sqlite3.Error):
            return
        try:
            db.execute("PRAGMA journal_mode=WAL")
            with db:
                db.execute("DROP TABLE IF EXISTS digests")  # keyed without ctime: not sound
                db.execute(
                    "CREATE TABLE IF NOT EXISTS file_digests (dev INTEGER, ino INTEGER, "
                    "size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER, sha256 BLOB, "
                    "seen_day INTEGER, PRIMARY KEY (dev, ino))"
                )
            self._db = db
        except (OSError, sqlite3.Error):
            db.close()

    def load(self) -> dict[Key, bytes]:
        if self._db is None:
            return {}
        try:
            rows = self._db.execute(
                "SELECT dev, ino, size, mtime_ns, ctime_ns, sha256, seen_day FROM file_digests"
            )
            out: dict[Key, bytes] = {}
            stale = _today() - _REFRESH_DAYS
            for d, i, s, m, c, h, day in rows:
                out[(d, i, s, m, c)] = h
                if day < stale:
                    self._seen_day[(d, i, s, m, c)] = day
            return out
        except sqlite3.Error:
            return {}

    def used(self, key: Key) -> None:
        """A walk took this row: keep it past the retention (written at flush, rarely)."""
        if key in self._seen_day:
            self._used.add(key[:2])

    def remember(self, key: Key, digest: bytes) -> None:
        self._pending.append((*key, digest, _today()))

    def flush(self) -> None:
        if self._db is None or not (self._pending or self._used):
            return
        today = _today()
        try:
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO file_digests VALUES (?, ?, ?, ?, ?, ?, ?)",
                    self._pending,
                )
                self._db.executemany(
                    "UPDATE file_digests SET seen_day = ? WHERE dev = ? AND ino = ?",
                    [(today, d, i) for d, i in self._used],
                )
                self._db.execute(
                    "DELETE FROM file_digests WHERE seen_day < ?", (today - RETENTION_DAYS,)
                )
        except sqlite3.Error:
            pass
        self._pending.clear()
        self._used.clear()
        self._seen_day.clear()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> DigestCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
