"""The origin check's index listing, read while uv installs from its cache.

The listing (builder.lock.origin) reads one page per package over the network, so it runs in
a thread while uv installs with `uv sync --offline --no-build`: from uv's cache alone, so no
byte of a file the listing has not cleared is downloaded and no source distribution's build
code runs. When the cache lacks a file, the build waits for the listing before uv downloads
anything, and always before the next step that runs code or makes the env visible. A refusal
is BadInput (exit 2; an unreadable index, exit 3) and removes the `.partial`: nothing published.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class OriginAhead:
    """Runs `check` (the listing, raising BadInput/EnvironmentProblem) in a daemon thread;
    `wait()` returns when it has passed and raises what it raised otherwise (every call)."""

    def __init__(self, check: Callable[[], None]) -> None:
        self._check = check
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="origin-listing", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._check()
        except BaseException as exc:  # handed to the build's thread by wait()
            self._error = exc

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error
