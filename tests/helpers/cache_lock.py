"""One builder at a time for a cache folder shared by pytest-xdist workers and other sessions.

The engine venvs and real-wheel envs under ~/.cache/stackgate are built once and reused. Two
workers that both find one missing would build it into the same folder; `cache_lock` makes the
second wait for the first (an flock on a file beside the folder), then see the finished build.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def cache_lock(folder: Path) -> Iterator[None]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f".{folder.name}.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
