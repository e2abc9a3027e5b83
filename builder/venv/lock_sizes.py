"""The bytes of the wheels a uv.lock installs, for the free-disk check before a build.

Every installed package is either counted by the size of the wheel the installer picks or
named as unknown, never silently counted as 0:
- a remote wheel: the lock's `size`;
- a wheel of a local (file://) index, `path = ...`, or a path-sourced wheel: the file's real
  size on disk (uv writes no size for them; a relative path is relative to the lock's folder);
- a wheel with neither (no size, the file gone), a package with no wheel for the target
  (sdist, git, directory: built on install) or with wheels for other targets only: unknown,
  named, so a check that passes or refuses says what it could not count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from stackgate.lock.wheels import LockError, lock_python, target_tags
from stackgate.lock.uvlock import LockedFile, LockedPackage, UvLock


@dataclass(frozen=True)
class SizedWheel:
    name: str  # canonical
    version: str
    size: int


@dataclass
class LockSizes:
    wheels: list[SizedWheel] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # "name version: why"

    @property
    def total(self) -> int:
        return sum(w.size for w in self.wheels)


def _wheel_name(entry: LockedFile, pkg: LockedPackage) -> tuple[str, str | None]:
    """(file name, local path) of a locked wheel entry; the path is None for a remote one.
    A path-sourced wheel (`source = { path = "x.whl" }`) has entries without url or path."""
    if entry.url is not None:
        return entry.url.rsplit("/", 1)[-1].split("?", 1)[0].split("#", 1)[0], None
    if entry.path is not None:
        return entry.path.replace("\\", "/").rsplit("/", 1)[-1], entry.path
    source = pkg.source.path or pkg.source.url or ""
    local = pkg.source.path if pkg.source.path is not None else None
    return source.rsplit("/", 1)[-1], local


def _rank(filename: str, rank: dict[Tag, int] | None) -> int | None:
    """Lower is preferred; None: not installable on the target (or not a wheel name). Without
    a known target every wheel ranks equal and the largest is counted."""
    try:
        _n, _v, _b, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    if rank is None:
        return 0
    return min((rank[t] for t in tags if t in rank), default=None)


def _size(entry: LockedFile, local: str | None, lock_dir: Path) -> tuple[int | None, str]:
    """(bytes, why unknown): a local file's real size first (what will be read), else the
    lock's size."""
    if local is not None:
        path = Path(local).expanduser()
        path = path if path.is_absolute() else lock_dir / path
        try:
            return path.stat().st_size, ""
        except OSError as exc:
            if entry.size is not None:
                return entry.size, ""
            return None, f"{path}: {exc.strerror or exc}"
    if entry.size is not None:
        return entry.size, ""
    return None, "the lock gives no size"


def lock_sizes(lock: UvLock, lockfile: Path) -> LockSizes:
    """The wheel each package installs on the lock's CPython (Linux x86_64), sized."""
    try:
        rank: dict[Tag, int] | None = {
            t: i for i, t in enumerate(target_tags(lock_python(lock, lockfile)))
        }
    except LockError:
        rank = None  # no single target Python: count every package's largest wheel
    lock_dir = lockfile.parent
    out = LockSizes()
    for pkg in lock.package:
        if pkg.source.is_project:
            continue
        label = f"{canonicalize_name(pkg.name)} {pkg.version or '?'}"
        picked: list[tuple[int, int | None, str]] = []  # (rank, size, why unknown)
        for entry in pkg.wheels:
            filename, local = _wheel_name(entry, pkg)
            score = _rank(filename, rank)
            if score is None:
                continue
            size, why = _size(entry, local, lock_dir)
            picked.append((score, size, why))
        if not picked:
            origin = "an sdist" if pkg.sdist is not None else f"a {pkg.source.kind} source"
            out.unknown.append(
                f"{label}: built on install from {origin} (no wheel in the lock)"
                if not pkg.wheels
                else f"{label}: no wheel in the lock fits this target"
            )
            continue
        best = min(p[0] for p in picked)
        choices = [p for p in picked if p[0] == best]
        sizes = [s for _r, s, _w in choices if s is not None]
        if len(sizes) < len(choices) or not sizes:
            out.unknown.append(f"{label}: {next(w for _r, s, w in choices if s is None)}")
            continue
        out.wheels.append(SizedWheel(canonicalize_name(pkg.name), str(pkg.version), max(sizes)))
    return out
