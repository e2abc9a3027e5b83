"""Remembered file digests, so hashing a 10 GiB env whose files uv hard-linked from its cache
costs a stat per file instead of reading 10 GiB again.

Key: (device, inode, size, mtime_ns). ctime is not in the key on purpose: every hard link uv
makes to a cache file changes the inode's ctime, which would make every rebuild a miss. A
content change rewrites the file and moves mtime; a file touched within the last few seconds
is never remembered (the "racy" case git knows: a second write in the same timestamp tick).
Set STACKGATE_NO_DIGEST_CACHE=1 to read every byte every time.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

Key = tuple[int, int, int, int]
RACY_WINDOW_NS = 3_000_000_000


def cache_path() -> Path:
    base = os.environ.get("STACKGATE_CACHE_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "stackgate"
    return root / "file-digests.sqlite"


def key_of(st: os.stat_result) -> Key:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def rememberable(st: os.stat_result) -> bool:
    return time.time_ns() - st.st_mtime_ns > RACY_WINDOW_NS


class DigestCache:
    """A small sqlite table; a cache that cannot be opened simply stays empty."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_path()
        self._pending: list[tuple[int, int, int, int, bytes]] = []
        self._db: sqlite3.Connection | None = None
        if os.environ.get("STACKGATE_NO_DIGEST_CACHE") == "1":
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS digests (dev INTEGER, ino INTEGER, size INTEGER, "
                "mtime_ns INTEGER, sha256 BLOB, PRIMARY KEY (dev, ino, size, mtime_ns))"
            )
            self._db = db
        except (OSError, sqlite3.Error):
            self._db = None

    def load(self) -> dict[Key, bytes]:
        if self._db is None:
            return {}
        try:
            rows = self._db.execute("SELECT dev, ino, size, mtime_ns, sha256 FROM digests")
            return {(d, i, s, m): h for d, i, s, m, h in rows}
        except sqlite3.Error:
            return {}

    def remember(self, key: Key, digest: bytes) -> None:
        self._pending.append((*key, digest))

    def flush(self) -> None:
        if self._db is None or not self._pending:
            return
        try:
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO digests VALUES (?, ?, ?, ?, ?)", self._pending
                )
        except sqlite3.Error:
            pass
        self._pending.clear()

    def close(self) -> None:
        self.flush()
        if self._db is not None:
            self._db.close()
