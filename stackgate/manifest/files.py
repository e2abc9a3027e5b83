"""Files a manifest names (patches, correctness references, anything added later): they must
be regular files inside the manifest's folder, no larger than a cap, read in chunks.

A manifest is shared and reviewed as text; a path in it that leaves its folder (`/etc/shadow`,
`../../.aws/credentials.json`, a symlink pointing out) would let the tool read and hash, or
copy into records meant for git, any file of the host. Such a reference is bad input (exit 2)
at `check`, before a byte of it is read.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path, PurePosixPath

MAX_PATCH_BYTES = 16 << 20
_CHUNK = 1 << 20


def relative_problem(value: str) -> str | None:
    """Why `value` cannot name a file below the manifest's folder, or None (pure check)."""
    path = PurePosixPath(value)
    if not value or path.is_absolute() or value.startswith("~"):
        return "must be a path relative to the manifest's folder"
    if ".." in path.parts:
        return "must stay inside the manifest's folder (no '..')"
    return None


def inside_folder(folder: Path, value: str) -> tuple[Path | None, str | None]:
    """(resolved file, None), or (None, why not): symlinks are followed and must stay inside."""
    why = relative_problem(value)
    if why is not None:
        return None, why
    root = folder.resolve()
    target = (folder / value).resolve()
    if not target.is_relative_to(root):
        return None, f"resolves to {target}, outside the manifest's folder {root}"
    return target, None


def sha256_regular(path: Path, max_bytes: int = MAX_PATCH_BYTES) -> tuple[str | None, str | None]:
    """(sha256, None) of a regular file up to max_bytes, read in chunks; else (None, why)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        if st.st_size > max_bytes:
            return None, f"{st.st_size} bytes, more than the {max_bytes >> 20} MiB a patch may be"
        digest = hashlib.sha256()
        read = 0
        while chunk := handle.read(_CHUNK):
            read += len(chunk)
            if read > max_bytes:
                return None, f"grew past the {max_bytes >> 20} MiB a patch may be"
            digest.update(chunk)
    return digest.hexdigest(), None
