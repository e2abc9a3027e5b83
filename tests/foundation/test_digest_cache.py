"""The digest cache must never vouch for a file whose content changed: an in-place edit that
keeps the size and puts the old mtime back (`touch -r`, os.utime) still changes the inode's
ctime, which no unprivileged call can set. Real files, a real sqlite cache, real hard links."""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from stackgate.envtree import Tree, compute_tree, digests
from stackgate.envtree.digests import DigestCache

OLD_NS = time.time_ns() - 3600 * 10**9
RACY_NS = 50_000_000  # longer than a file-system timestamp tick, shorter than the default 3 s


@pytest.fixture(autouse=True)
def _short_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(digests, "RACY_WINDOW_NS", RACY_NS)


def _env(tmp_path: Path) -> tuple[Path, Path, Path]:
    env = tmp_path / "env"
    (env / "lib").mkdir(parents=True)
    big = env / "lib" / "big.so"  # > 1 MiB: cached even when not hard-linked
    big.write_bytes(b"A" * (2 << 20))
    linked = env / "lib" / "mod.py"  # hard-linked as uv links from its cache: cached
    linked.write_bytes(b"print('good')\n")
    os.link(linked, tmp_path / "uv-cache-copy")
    for path in (big, linked):
        os.utime(path, ns=(OLD_NS, OLD_NS))
    time.sleep(2 * RACY_NS / 1e9)  # ctime (moved by the link and utime) out of the window
    return env, big, linked


def _edit_keeping_size_and_mtime(path: Path, content: bytes) -> None:
    st = path.stat()
    assert len(content) == st.st_size
    with path.open("r+b") as handle:
        handle.write(content)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # what `touch -r` does
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        st.st_size, st.st_mtime_ns, st.st_ino,
    )  # fmt: skip


@pytest.mark.parametrize("which", ["big", "hard-linked"])
def test_an_edit_that_restores_size_and_mtime_changes_the_hash(tmp_path: Path, which: str) -> None:
    env, big, linked = _env(tmp_path)
    cache_file = tmp_path / "digests.sqlite"
    before = _tree(env, cache_file).sha256
    with closing(sqlite3.connect(cache_file)) as db, db:  # both files were remembered
        assert db.execute("SELECT COUNT(*) FROM file_digests").fetchone()[0] == 2
    target = big if which == "big" else linked
    new = b"B" * (2 << 20) if which == "big" else b"print('evil')\n"
    _edit_keeping_size_and_mtime(target, new)
    with_cache = _tree(env, cache_file).sha256
    without = compute_tree(env).sha256
    assert without != before
    assert with_cache == without, "the digest cache vouched for changed content"


def test_the_cache_keeps_one_row_per_file_and_drops_old_rows(tmp_path: Path) -> None:
    env, big, _linked = _env(tmp_path)
    cache_file = tmp_path / "digests.sqlite"
    _tree(env, cache_file)
    for n in range(3):  # three versions of the same file: one row, the newest
        _edit_keeping_size_and_mtime(big, bytes([67 + n]) * (2 << 20))
        time.sleep(2 * RACY_NS / 1e9)
        _tree(env, cache_file)
    with closing(sqlite3.connect(cache_file)) as db, db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        rows = db.execute("SELECT COUNT(*) FROM file_digests").fetchone()[0]
        assert rows == 2  # big + the hard-linked module
        # a row no walk has seen for longer than the retention is pruned on the next flush
        db.execute("UPDATE file_digests SET seen_day = 0")
    assert "digests" not in tables  # the old key format (no ctime) is dropped
    cache = DigestCache(cache_file)
    cache.remember((1, 2, 3, 4, 5), b"x" * 32)
    cache.close()
    with closing(sqlite3.connect(cache_file)) as db, db:
        assert db.execute("SELECT COUNT(*) FROM file_digests").fetchone()[0] == 1


def test_a_warm_walk_is_answered_from_the_cache(tmp_path: Path) -> None:
    """The cache still works: an unchanged file's digest comes from its row (shown by changing
    the row: the tree follows it), so a warm re-check costs a stat per file."""
    env, _big, _linked = _env(tmp_path)
    cache_file = tmp_path / "digests.sqlite"
    first = _tree(env, cache_file).sha256
    with closing(sqlite3.connect(cache_file)) as db, db:
        db.execute("UPDATE file_digests SET sha256 = ?", (b"Z" * 32,))
    assert _tree(env, cache_file).sha256 != first


def test_a_cache_anybody_can_write_is_not_trusted(tmp_path: Path) -> None:
    """Whoever can write the cache can make a changed file look unchanged (a row with the new
    key and the old digest): a cache file or folder others may write is not used."""
    env, _big, _linked = _env(tmp_path)
    cache_file = tmp_path / "digests.sqlite"
    first = _tree(env, cache_file).sha256
    with closing(sqlite3.connect(cache_file)) as db, db:  # a poisoned row, as another user could write it
        db.execute("UPDATE file_digests SET sha256 = ?", (b"Z" * 32,))
    cache_file.chmod(0o666)
    assert _tree(env, cache_file).sha256 == first
    cache_file.chmod(0o644)
    tmp_path.chmod(0o777)  # a folder anybody may write: they could swap the file
    try:
        assert _tree(env, cache_file).sha256 == first
    finally:
        tmp_path.chmod(0o755)


def test_a_new_cache_file_is_private(tmp_path: Path) -> None:
    cache_file = tmp_path / "cache" / "digests.sqlite"
    DigestCache(cache_file).close()
    assert cache_file.stat().st_mode & 0o777 == 0o600


def _tree(env: Path, cache_file: Path) -> Tree:
    with DigestCache(cache_file) as cache:
        return compute_tree(env, cache=cache)
