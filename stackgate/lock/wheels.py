"""The wheels a uv.lock would install on the target (CPython X.Y, Linux x86_64): one per
package, the most specific compatible tag first, with its URL, sha256 and size."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

from stackgate.errors import BadInput
from stackgate.lock.uvlock import LockedFile, UvLock, artifact_name, read_uv_lock

MAX_GLIBC_MINOR = 40


class LockError(Exception):
    """The lock cannot be read (file and field named)."""


@dataclass(frozen=True)
class LockedWheel:
    name: str
    version: str
    url: str
    sha256: str
    size: int
    filename: str  # validated (stackgate.lock.uvlock.artifact_name), never a piece of the raw URL

    @property
    def key(self) -> tuple[str, str]:
        """One file: its claimed sha256 at its URL (one sha256 at two URLs is two files)."""
        return self.sha256, self.url


@dataclass
class LockWheels:
    wheels: list[LockedWheel]
    no_wheel: list[str]  # packages with no compatible wheel (sdist, git, path): not checkable
    python: tuple[int, int]


def target_tags(python: tuple[int, int], arch: str = "x86_64") -> list[Tag]:
    """Compatible tags, most preferred first (the order installers use)."""
    return list(_target_tags(python, arch))


@functools.cache
def _target_tags(python: tuple[int, int], arch: str) -> tuple[Tag, ...]:
    # computed once per target: a membership test on a list compares every Tag, in every pair
    # of `validators compat` (benchmarks/compat/results/compat.md)
    platforms = [f"manylinux_2_{m}_{arch}" for m in range(MAX_GLIBC_MINOR, 4, -1)]
    platforms += [f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}"]
    platforms += [f"linux_{arch}"]
    tags = list(cpython_tags(python, platforms=platforms))
    seen = set(tags)
    tags += [
        t for t in compatible_tags(python, f"cp{python[0]}{python[1]}", platforms) if t not in seen
    ]
    return tuple(tags)


def lock_python(lock: UvLock, path: Path) -> tuple[int, int]:
    """The one CPython X.Y the lock targets (requires-python ==3.X.*); else LockError."""
    spec = lock.requires_python or ""
    for part in spec.replace(" ", "").split(","):
        if part.startswith("=="):
            bits = part[2:].split(".")
            if len(bits) >= 2 and bits[0].isdigit() and bits[1].isdigit():
                return int(bits[0]), int(bits[1])
    raise LockError(f"{path}: requires-python {spec!r} does not name one Python (want ==3.X.*)")


def read_lock(
    path: Path, python: tuple[int, int] | None = None, parsed: UvLock | None = None
) -> LockWheels:
    """`parsed`: the lock already read from `path` (one read: the bytes whose origins were
    checked are the bytes whose wheels are read)."""
    try:
        lock = parsed or read_uv_lock(path)  # the one uv.lock reader (stackgate.lock.uvlock)
    except BadInput as exc:
        raise LockError("; ".join(exc.lines())) from None
    if python is None:
        python = lock_python(lock, path)
    rank = {tag: i for i, tag in enumerate(target_tags(python))}
    wheels: list[LockedWheel] = []
    no_wheel: list[str] = []
    for i, pkg in enumerate(lock.package):
        if pkg.source.is_project:
            continue
        name, version = pkg.name, str(pkg.version)
        best: tuple[int, LockedFile, str] | None = None
        for j, entry in enumerate(pkg.wheels):
            url = entry.url
            if url is None:
                continue
            try:
                filename = artifact_name(
                    entry, name, pkg.version, where=f"{path}: package[{i}].wheels[{j}].url"
                )
                if not filename.endswith(".whl"):
                    raise BadInput(f"{path}: package[{i}].wheels[{j}].url: not a wheel: {url}")
            except BadInput as exc:
                raise LockError("; ".join(exc.lines())) from None
            _n, _v, _b, tags = parse_wheel_filename(filename)
            score = min((rank[t] for t in tags if t in rank), default=None)
            if score is not None and (best is None or score < best[0]):
                best = (score, entry, filename)
        if best is None:
            no_wheel.append(f"{name} {version}")
            continue
        entry = best[1]
        digest = entry.hash or ""
        if not digest.startswith("sha256:"):
            raise LockError(f"{path}: package[{i}] ({name}).wheels: no sha256 hash")
        if entry.size is None:
            raise LockError(f"{path}: package[{i}] ({name}).wheels: no size")
        wheels.append(
            LockedWheel(
                canonicalize_name(name), version, str(entry.url), digest[7:], entry.size, best[2]
            )
        )
    return LockWheels(wheels=wheels, no_wheel=no_wheel, python=python)
