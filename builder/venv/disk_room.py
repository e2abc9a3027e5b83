"""Free disk before a build: how much the lock's env needs, checked before anything is created.

The env is installed with `--link-mode copy` (builder.venv.install_commands), so it takes the
unpacked size of every locked wheel; uv's cache holds the same unpacked again for the wheels
it does not have yet (README "What it costs"). A disk with less is refused up front (exit 3)
naming what is needed, what is free and where to build instead, not mid-install. A package
whose size cannot be known (builder.venv.lock_sizes) is named, never counted as 0 in silence.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from builder.venv.lock_sizes import lock_sizes
from stackgate.cli_hint import cli_command
from stackgate.errors import HostCannot
from stackgate.layout import EnvLayout
from stackgate.lock.state import LockState
from stackgate.paths import display_path
from stackgate.lock.uvlock import UvLock

UNPACKED_RATIO = 2.0  # unpacked bytes per wheel byte (cu128: ~10 GB from 4.8 GiB)
SLACK = 0.1  # of the env: logs, the build record, the tree listing, the filesystem's own
GIB = 1 << 30


@dataclass(frozen=True)
class Room:
    wheels_bytes: int
    env_bytes: int  # the env, on the venv root's filesystem
    cache_bytes: int  # uv's cache for wheels it lacks, when on the same filesystem
    free_bytes: int
    unknown: tuple[str, ...] = ()  # packages whose size is not known: not counted, named

    @property
    def needed(self) -> int:
        return int((self.env_bytes + self.cache_bytes) * (1 + SLACK))


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _cached(cache: Path, name: str, version: str) -> bool:
    """Whether uv's cache seems to hold the wheel unpacked (wheels-v*/<index>/<name>/<version>-*
    folders): a guess that only lowers the estimate, never a reason to skip the check."""
    for wheels in cache.glob("wheels-v*"):
        for folder in wheels.glob(f"*/{name}"):
            if any(p.is_dir() for p in folder.glob(f"{version}-*")):
                return True
    return False


def room_for(lock: UvLock, lockfile: Path, venv_root: Path, cache: Path | None) -> Room:
    """What building the lock's env under venv_root needs and has."""
    sizes = lock_sizes(lock, lockfile)
    wheels = sizes.wheels
    total = sizes.total
    where = _existing(venv_root.absolute())
    free = shutil.disk_usage(where).free
    cache_bytes = 0
    if cache is not None:
        cache_at = _existing(cache)
        if cache_at.stat().st_dev == where.stat().st_dev:
            missing = sum(w.size for w in wheels if not _cached(cache, w.name, w.version))
            cache_bytes = int(missing * UNPACKED_RATIO)
    return Room(total, int(total * UNPACKED_RATIO), cache_bytes, free, tuple(sizes.unknown))


def _size(n: float) -> str:
    """GiB for a real env, MiB below one GiB (a 12 MiB estimate is not "0.0 GiB")."""
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / (1 << 20):.1f} MiB"


def _unknown_line(unknown: tuple[str, ...], most: int = 5) -> str:
    shown = "; ".join(unknown[:most])
    more = f"; and {len(unknown) - most} more" if len(unknown) > most else ""
    return f"size unknown, not counted ({len(unknown)}): {shown}{more}"


def require_room(state: LockState, stack: str, venv_root: Path, cache: Path | None) -> list[str]:
    """HostCannot (exit 3, REFUSED) before anything is created when the disk is too small;
    else the notes to print (packages the estimate could not count)."""
    room = room_for(state.lock, state.files.lockfile, venv_root, cache)
    if room.free_bytes >= room.needed:
        return [f"free-disk check: {_unknown_line(room.unknown)}"] if room.unknown else []
    cache_part = (
        f" + {_size(room.cache_bytes)} in uv's cache ({display_path(cache)}) for wheels "
        "it does not hold yet"
        if cache is not None and room.cache_bytes
        else ""
    )
    raise HostCannot(
        f"not enough free disk to build {stack}: about {_size(room.needed)} needed, "
        f"{_size(room.free_bytes)} free under {display_path(_existing(venv_root))}",
        details=[
            f"the env: {_size(room.env_bytes)} (the lock's wheels, "
            f"{_size(room.wheels_bytes)}, unpacked){cache_part}",
            *([_unknown_line(room.unknown)] if room.unknown else []),
            f"build on a bigger disk: {cli_command(['build', stack, '--venv-root', 'DIR'])} "
            "(or set STACKGATE_VENV_ROOT)",
        ],
    )


def writable_root(layout: EnvLayout) -> None:
    """The venv root can take the stack's folder: a read-only or foreign one is exit 3 naming
    the flag, not a raw `[Errno 30]` from deep inside the build."""
    try:
        layout.stack_dir.mkdir(parents=True, exist_ok=True)
        probe = layout.stack_dir / f".write-probe-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise HostCannot(
            f"the venv root {display_path(layout.root)} (--venv-root, else "
            f"$STACKGATE_VENV_ROOT, else envs/ in the checkout) cannot be written: "
            f"{exc.strerror or exc}",
            details=[
                f"give a folder you can write: {cli_command(['build', layout.stack, '--venv-root', 'DIR'])}"
            ],
        ) from None


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (a cleanup is not cut half-way)."""
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
