"""The origin check's index listing, read while uv installs from its cache.

The listing (builder.lock.origin: every locked file must be one its index's page lists) reads
one page per package over the network: seconds per build, the disk-bound install waiting on
none of it. The build runs the registry check (no network) first, as before, then starts the
listing in a thread and installs with `uv sync --offline --no-build`: from uv's cache alone, so
no byte of a file the listing has not cleared yet is downloaded and no source distribution's
build code runs. When the cache lacks a file (or the offline install fails for any other
reason), the build waits for the listing before it lets uv download anything; and it always
waits for it before the next step that runs code or makes the env visible. A listing that
refuses the lock refuses the build as it did before the install (BadInput, exit 2; an index
that cannot be read, exit 3), and the build's `.partial` folder is removed: nothing published.
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
