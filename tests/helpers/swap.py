"""A real racer for check-then-use tests: swaps a path for a symlink to a victim and back,
as fast as it can, while the code under test works on the path."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

HOLD_S = 0.00005  # each state (real thing / symlink) lasts about this long


class Swapper(threading.Thread):
    """Moves `path` aside, puts a symlink to `victim` there, then puts the real thing back,
    as fast as it can until stopped; counts the symlinks it planted."""

    def __init__(self, path: Path, victim: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.victim = path, victim
        self.aside = path.with_name(path.name + ".aside")
        self.stop = threading.Event()
        self.swaps = 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                os.rename(self.path, self.aside)
            except OSError:
                continue
            try:
                os.symlink(self.victim, self.path)
                self.swaps += 1
                time.sleep(HOLD_S)
                os.unlink(self.path)
            except OSError:
                pass
            with contextlib.suppress(OSError):
                os.rename(self.aside, self.path)
            time.sleep(HOLD_S)


@contextlib.contextmanager
def racing(path: Path, victim: Path) -> Iterator[Swapper]:
    racer = Swapper(path, victim)
    racer.start()
    # The racer is live before the code under test starts: a thread not yet scheduled while a
    # fast loop ran to its end left "0 swaps", a run that proved nothing (up to 2 s).
    deadline = time.monotonic() + 2.0
    while racer.swaps == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    try:
        yield racer
    finally:
        racer.stop.set()
        racer.join()
