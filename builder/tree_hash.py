"""The content hash of an environment's files (the build record's `tree`).

The record model itself is stackgate.build_record (builder writes it, validators read it).
The tree hash is over relative path, file type and content of every installed file, not
timestamps, so two builds of one lock (in different folders, on different days) compare equal.
Absolute mentions of the env's own folder (uv writes some into RECORD-free files such as
pyvenv.cfg or activation scripts) are replaced by a placeholder before hashing small files.
Bytecode caches and the record folder are left out: they are written after the install; so
is installer bookkeeping in *.dist-info (RECORD, INSTALLER, REQUESTED, direct_url.json,
uv_cache.json), which differs between an online and a wheelhouse install of the same files.
"""

from __future__ import annotations

import hashlib
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from builder.digests import DigestCache, Key, key_of, rememberable
from stackgate.build_record import RECORD_DIRNAME, TreeHash

# Text files this small are read whole so their own absolute path can be normalized.
_SMALL_FILE = 1 << 20
_PLACEHOLDER = b"<STACKGATE_ENV>"
_SKIP_DIRS = frozenset({"__pycache__", RECORD_DIRNAME})
# Installer bookkeeping inside *.dist-info: it says how a package got there (uv sync from an
# index vs uv pip from a wheelhouse write different ones), not what is installed.
_INSTALLER_FILES = frozenset(
    {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json", "uv_cache.json"}
)


def _walk(root: str, rel: str, out: list[tuple[str, str, os.stat_result]]) -> None:
    """(relative path, absolute path, lstat) of every file and symlink, without Path objects
    (a cu128 env has 58k files; pathlib alone cost seconds). Symlinked folders (lib64 -> lib)
    are listed as links, not walked twice."""
    with os.scandir(f"{root}/{rel}" if rel else root) as it:
        entries = sorted(it, key=lambda e: e.name)
    in_dist_info = rel.endswith(".dist-info")
    for entry in entries:
        sub = f"{rel}/{entry.name}" if rel else entry.name
        if entry.is_dir(follow_symlinks=False):
            if entry.name not in _SKIP_DIRS and not (not rel and entry.name == RECORD_DIRNAME):
                _walk(root, sub, out)
            continue
        if entry.name.endswith(".pyc") or (in_dist_info and entry.name in _INSTALLER_FILES):
            continue
        out.append((sub, entry.path, entry.stat(follow_symlinks=False)))


def _file_digest(path: Path, size: int, patterns: list[bytes]) -> bytes:
    digest = hashlib.sha256()
    if size <= _SMALL_FILE:
        data = path.read_bytes()
        for pattern in patterns:
            data = data.replace(pattern, _PLACEHOLDER)
        digest.update(data)
    else:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.digest()


def tree_hash(
    root: Path, *, own_paths: tuple[Path, ...] = (), cache: DigestCache | None = None
) -> TreeHash:
    """Content hash of every file under root (see the module docstring for what is excluded).

    own_paths: absolute paths this tree was built at (e.g. the .partial folder and the final
    folder); their mentions in small files are normalized so the hash does not depend on them.
    cache: remembered digests (builder.digests). Only files that cannot mention the env's own
    path are looked up there: files hard-linked from uv's cache (nlink > 1: shared with every
    env, so env-independent) and large files (never normalized). Files uv wrote for this env
    alone (scripts, RECORD, pyvenv.cfg) are always read.
    """
    patterns = sorted({str(p).encode() for p in (root, *own_paths)}, key=len, reverse=True)
    known = cache.load() if cache is not None else {}
    entries: list[tuple[str, bytes, bytes]] = []  # (rel, kind, digest)
    todo: list[tuple[int, Path, int, Key | None]] = []
    total = 0
    files: list[tuple[str, str, os.stat_result]] = []
    _walk(str(root), "", files)
    files.sort(key=lambda item: item[0])  # one order for every walk: by relative path
    for index, (rel, full, st) in enumerate(files):
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(full).encode()  # noqa: PTH115 -- str paths: speed
            for pattern in patterns:
                target = target.replace(pattern, _PLACEHOLDER)
            entries.append((rel, b"L", target))
            continue
        total += st.st_size
        kind = b"X" if st.st_mode & 0o111 else b"F"
        shared = st.st_nlink > 1 or st.st_size > _SMALL_FILE
        key = key_of(st) if shared else None
        if key is not None and key in known:
            entries.append((rel, kind, known[key]))
            continue
        entries.append((rel, kind, b""))
        todo.append((index, Path(full), st.st_size, key if key and rememberable(st) else None))
    # sha256 releases the GIL: a few threads use the cores a cold hash needs.
    workers = max(1, min(4, len(os.sched_getaffinity(0))))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        digests = list(pool.map(lambda t: _file_digest(t[1], t[2], patterns), todo))
    for (index, _path, _size, key), digest in zip(todo, digests, strict=True):
        rel, kind, _ = entries[index]
        entries[index] = (rel, kind, digest)
        if key is not None and cache is not None:
            cache.remember(key, digest)
    if cache is not None:
        cache.flush()
    tree = hashlib.sha256()
    for rel, kind, digest in entries:
        tree.update(kind + b"\0" + rel.encode() + b"\0" + digest + (b"\0" if kind == b"L" else b""))
    return TreeHash(
        sha256=tree.hexdigest(),
        files=len(entries),
        bytes=total,
    )
