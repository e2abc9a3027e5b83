"""No long silence: a step that has printed nothing for QUIET_S says what it is doing.

Piped output (CI logs, `| tee`) has no spinner, and the tools stackgate drives print nothing
while they work (uv downloading, wheels read by byte ranges), for minutes in a cold build or a
`static --lock` (benchmarks/first_hour/results/first_hour.md).
`Heartbeat` runs a thread that, after QUIET_S seconds without output, prints `status()` (a
callable, so the line says how far the work has got) and waits another QUIET_S. Whoever prints
something else calls `touched()`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

QUIET_S = 15.0


class Heartbeat:
    def __init__(
        self, say: Callable[[str], None], status: Callable[[float], str], quiet_s: float = QUIET_S
    ) -> None:
        """`status(seconds since start)` is the line to print."""
        self._say = say
        self._status = status
        self._quiet = quiet_s
        self.started = time.monotonic()
        self._last = self.started
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def touched(self) -> None:
        """Something was printed: the quiet interval starts again."""
        self._last = time.monotonic()

    def _run(self) -> None:
        while not self._stop.wait(min(1.0, self._quiet / 3)):
            now = time.monotonic()
            if now - self._last >= self._quiet:
                self._last = now
                self._say(self._status(now - self.started))

    def __enter__(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def took(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
