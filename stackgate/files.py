"""Reading and writing files the user (or another machine) handed us, without trusting them.

Reads are bounded and typed: only regular files (a FIFO, a device, `/dev/zero` behind a
symlink is refused before a byte is read), at most `max_bytes`, JSON no deeper than
`MAX_JSON_DEPTH`. Every failure is `BadInput` naming the path (exit 2), never a traceback or
a hang. Writes are atomic: a temporary file in the same folder, fsync, then rename, so a full
disk or a kill leaves the old file or none, never half of one.
"""

from __future__ import annotations

import fcntl
import fnmatch
import hashlib
import json
import os
import re
import stat
import tempfile
import time
from itertools import accumulate
from pathlib import Path
from typing import Any

from stackgate.errors import BadInput

DEFAULT_MAX_BYTES = 64 << 20
TEMP_SUFFIX = ".tmp"  # atomic_write_bytes' temp files: .<name>.<random>.tmp
STALE_TEMP_AGE_S = 60.0
MAX_JSON_DEPTH = 64


def _open_regular(path: Path) -> int:
    """An fd of a regular file; O_NONBLOCK so opening a FIFO cannot block."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise BadInput(f"{path}: {kind} (only regular files are read)")
    return fd


def read_bytes_bounded(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The whole file, refusing a non-regular file or one larger than max_bytes."""
    fd = _open_regular(path)
    try:
        with os.fdopen(fd, "rb", closefd=True) as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise BadInput(f"{path}: larger than the {max_bytes >> 20} MiB this file may be")
    return data


def read_text_bounded(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    try:
        return read_bytes_bounded(path, max_bytes).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: not UTF-8 text (byte {exc.start})") from None


def json_depth_exceeds(data: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when lists/objects nest deeper than limit (checked without recursion)."""
    level: list[Any] = [data] if isinstance(data, dict | list) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            values = item.values() if isinstance(item, dict) else item
            below.extend(v for v in values if isinstance(v, dict | list))
        level = below
    return False


# Bytes of JSON text: one escape (a backslash and the byte after it), every byte but brackets.
_JSON_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def json_text_depth_exceeds(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """json_depth_exceeds for the JSON text `text` (valid JSON: json.loads took it), without
    walking the data (a record's walk visits every number): drop the escapes, keep what lies
    outside string literals (every other piece between quotes), count its brackets, in C."""
    if text.count("[") + text.count("{") <= limit:  # fewer openers than the limit at all
        return False
    raw = text.encode("utf-8")
    if b"\\" in raw:
        raw = _JSON_ESCAPE.sub(b"", raw)
    brackets = b"".join(raw.split(b'"')[::2]).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different. json.loads keeps the LAST of duplicate keys,
    while a reader of the file (a reviewer of a committed record, `git diff`) sees the first:
    `{"runs": 1, "runs": 8}` would be verified, hashed and gated as 8 runs."""
    out = dict(pairs)
    if len(out) != len(pairs):
        keys = [k for k, _ in pairs]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        raise _DuplicateKey(f"duplicate key(s) {', '.join(map(repr, dupes[:5]))} in one object")
    return out


def parse_json_text(text: str, *, where: str) -> Any:
    """JSON from a file or store row we did not write ourselves (or cannot trust).

    Strict where Python's json is lenient: duplicate keys in an object are refused (the last
    would silently win), so is an integer too long to convert (CPython's 4,300-digit limit
    raises a bare ValueError, which would surface as a traceback). `NaN`/`Infinity` literals
    still parse; the models that read numbers refuse them with the field's name.
    """
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{where}: not JSON: {exc}") from None
    except RecursionError:
        raise BadInput(f"{where}: JSON nested too deeply") from None
    except _DuplicateKey as exc:
        raise BadInput(f"{where}: not accepted: {exc}") from None
    except ValueError as exc:  # int_max_str_digits: a number thousands of digits long
        raise BadInput(f"{where}: not accepted: {exc}") from None
    if json_text_depth_exceeds(text):
        raise BadInput(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return data


def read_json_file(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Any:
    """A JSON file the user named; unreadable, oversized, not regular or malformed: exit 2."""
    return parse_json_text(read_text_bounded(path, max_bytes), where=str(path))


def sha256_file(path: Path) -> str:
    """sha256 of a regular file, read in chunks (any size, constant memory): the one file
    digest of the builder and the validators (hashlib.file_digest does the reading)."""
    fd = _open_regular(path)
    with os.fdopen(fd, "rb", closefd=True) as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def refuse_special(path: Path) -> None:
    """BadInput when `path` exists and is neither a regular file nor a symlink: an output
    written there would replace a device node, a FIFO or a folder."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:  # ENOTDIR: a parent is a file
        raise BadInput(f"{path}: cannot be written: {exc.strerror}") from None
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
        raise BadInput(
            f"{path}: exists and is not a regular file (a device, FIFO or folder is never "
            "replaced by an output file); name a file, or leave the flag out"
        )


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o644, durable: bool = True) -> None:
    """Write path as a whole or not at all (temp file in the same folder + rename).

    durable: fsync before the rename, so a power cut cannot leave an empty file either. Bulk
    writers that can repair a file on the next run (records export) pass False: thousands of
    fsyncs cost seconds and the rename alone already rules out a half-written file.

    Only a regular file (or a symlink, which is replaced, never written through) is replaced:
    the rename put a regular file in place of `--junit /dev/null`, and run as root that was
    the machine's /dev/null. A device, FIFO, socket or folder there is BadInput (exit 2).
    """
    refuse_special(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    tmp = Path(tmp_name)
    try:
        # Held until the rename: a temp file nobody holds was left by a killed writer, and the
        # next writer removes it (remove_stale_temps).
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        tmp.chmod(mode)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _named_below(folder: Path, pattern: str, *, recursive: bool) -> list[Path]:
    """Files below folder whose name matches pattern, never following a symlinked folder.

    A folder that vanishes or is swapped while it is listed (another process at work, or a
    racer) is skipped: os.walk passes over what it cannot list, where Path.rglob raises.
    """
    if not recursive:
        try:
            names = [e.name for e in os.scandir(folder) if not e.is_dir(follow_symlinks=False)]
        except OSError:
            return []
        return [folder / name for name in fnmatch.filter(names, pattern)]
    return [
        Path(top) / name
        for top, _dirs, files in os.walk(folder)
        for name in fnmatch.filter(files, pattern)
    ]


def remove_stale_temps(
    folder: Path,
    *,
    pattern: str = f".*{TEMP_SUFFIX}",
    recursive: bool = True,
    min_age_s: float = STALE_TEMP_AGE_S,
) -> list[Path]:
    """Remove atomic_write_bytes' temp files below folder that a killed writer left.

    A temp file is stale when no process holds its lock (a writer holds it until its rename)
    and it is older than min_age_s (the instant between a writer's create and its lock).
    Symlinks and anything not a regular file are left alone. Returns what was removed.
    """
    removed: list[Path] = []
    for path in _named_below(folder, pattern, recursive=recursive):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue  # a symlink (ELOOP), gone, unreadable: not ours to judge
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or time.time() - info.st_mtime < min_age_s:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live writer
            path.unlink(missing_ok=True)
            removed.append(path)
        finally:
            os.close(fd)
    return removed


def atomic_write_text(path: Path, text: str, *, mode: int = 0o644, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode, durable=durable)


def inside(base: Path, target: Path) -> Path:
    """target resolved (symlinks followed), refused unless it stays under base."""
    root = base.resolve()
    resolved = target.resolve()
    if resolved != root and not resolved.is_relative_to(root):
        raise BadInput(f"{target}: resolves to {resolved}, outside {root}")
    return resolved
